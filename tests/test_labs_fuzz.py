"""No answer a student can type crashes a lab self-check: every public ``check_*`` of the labs, given any Python, numpy
or pandas value, returns a :class:`Feedback` that prints as one short paragraph, and a garbage answer is not judged
right. Each check is judged in a real context (a run the notebook makes, with the notebook's arguments), its
reference answer passes and ``None`` waits for an answer.

A new ``check_*`` function fails :func:`test_every_check_has_a_context` until it gets a row in :data:`CASES`. Lab 6's
checks of a live Milvus run are judged on the small real-run logs of ``tests/test_labs_real.py``.
"""

from __future__ import annotations

import datetime
import decimal
import fractions
import importlib
import importlib.util
import math
import numbers
import pkgutil
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import milvus_edu
import milvus_edu.labs
import milvus_edu.mechanisms
from milvus_edu.labs.feedback import Feedback
from lab_solutions import SOLUTIONS

MAX_MESSAGE = 1500  # characters: the longest right-answer explanation is about 800


def _check_modules():
    """Every module that may hold lab self-checks: each lesson's ``labs`` and the shared ``milvus_edu.labs`` package."""
    names = [f"milvus_edu.mechanisms.{m.name}.labs" for m in pkgutil.iter_modules(milvus_edu.mechanisms.__path__)
             if m.ispkg and importlib.util.find_spec(f"milvus_edu.mechanisms.{m.name}.labs") is not None]
    names += [f"milvus_edu.labs.{m.name}" for m in pkgutil.iter_modules(milvus_edu.labs.__path__)]
    return [importlib.import_module(n) for n in names]


def discovered_checks() -> dict[str, Callable]:
    """``module.check_name`` -> the function, for every public ``check_*`` function defined in a lab module."""
    found = {}
    for module in _check_modules():
        for name, obj in vars(module).items():
            if name.startswith("check_") and callable(obj) and getattr(obj, "__module__", None) == module.__name__:
                found[f"{module.__name__}.{name}"] = obj
    return found


# ---- the contexts: the runs the notebooks make ---------------------------------------------------------------------
class Runs:
    """The simulated runs the checks are judged on, each made once, on first use."""

    def __init__(self, tmp: Path):
        self.tmp, self._made = tmp, {}

    def __call__(self, key: str, scenario: str, **kwargs):
        if key not in self._made:
            self._made[key] = milvus_edu.simulate(scenario, **kwargs)
        return self._made[key]


def _literal(notebook: str, answer: str):
    """A reference answer of tests/lab_solutions.py that needs no notebook state (a literal, or arithmetic)."""
    return eval(SOLUTIONS[notebook][answer], {"__builtins__": {}})  # our own test data, arithmetic at most


@dataclass
class Case:
    """One check in its context: ``call(answer)`` judges an answer; ``reference`` is a right answer; ``may_be_right``
    says whether a drawn answer could be right by chance (then only "returns a Feedback" is asserted for it)."""

    call: Callable[[Any], Feedback]
    reference: Any
    may_be_right: Callable[[Any], bool] = field(default=lambda a: False)


def _is_int(a) -> bool:
    return isinstance(a, numbers.Integral) and not isinstance(a, (bool, np.bool_, np.timedelta64))


def int_answer(want: int, tolerance: float = 0) -> Callable[[Any], bool]:
    """An answer that is an int (or numpy int) within ``tolerance`` of ``want``: may be judged right."""
    return lambda a: _is_int(a) and abs(int(a) - want) <= tolerance


def near(want: float) -> Callable[[Any], bool]:
    """A number (int or float, not a bool or a duration) within 1 of ``want``: may be judged right."""
    def close(a) -> bool:
        if isinstance(a, (bool, np.bool_, np.timedelta64)) or not isinstance(a, numbers.Real):
            return False
        try:
            return abs(float(a) - want) <= 1
        except OverflowError:
            return False
    return close


def text_answer(a) -> bool:
    """A string answer to a name question may be a right name, however it is spelled."""
    return isinstance(a, str)


def _tso(runs):
    from milvus_edu.mechanisms.tso import labs

    ev = runs("failover", "tso-failover", seed=1).events
    allocs = ev[(ev.kind == "rootcoord.alloc_timestamp") & ev.error.isna()]
    first = int(allocs[(allocs.node == "rootcoord-2") & (allocs.peer == "client-1")].ts.iloc[0])
    compose = _literal("01_tso.ipynb", "answer_1")
    per_tick, per_second = _literal("01_tso.ipynb", "answer_3"), _literal("01_tso.ipynb", "answer_5")
    return {
        "check_compose": Case(lambda a: labs.check_compose(a, 1767225601000, 42), compose, int_answer(compose)),
        "check_first_after_failover": Case(lambda a: labs.check_first_after_failover(a, ev), first, int_answer(first)),
        "check_max_per_tick": Case(labs.check_max_per_tick, per_tick, int_answer(per_tick)),
        "check_broken_invariant": Case(labs.check_broken_invariant, _literal("01_tso.ipynb", "answer_4"), text_answer),
        "check_max_per_second": Case(labs.check_max_per_second, per_second, int_answer(per_second)),
    }


def _timetick(runs):
    from milvus_edu.mechanisms.timetick import labs

    ch = "by-dev-rootcoord-dml_0"
    ev = runs("timetick", "timetick-basics", seed=4, duration_s=1.5).events
    late, _ = labs.out_of_order_count(ev, ch)
    updates = ev[(ev.kind == "rootcoord.timetick_update") & ev.detail.str.contains('"sent":true')]
    round_seq = int(updates.iloc[2].seq)
    tick = labs.round_tick(ev, round_seq, ch)
    pack = ev[(ev.kind == "mq.pack") & (ev["count"] > 0)].iloc[2]
    count = int(pack["count"])
    return {
        "check_out_of_order": Case(lambda a: labs.check_out_of_order(a, ev, ch), late, int_answer(late)),
        "check_round_tick": Case(lambda a: labs.check_round_tick(a, ev, round_seq, ch), tick, int_answer(tick)),
        "check_pack_count": Case(lambda a: labs.check_pack_count(a, ev, int(pack.seq)), count, int_answer(count)),
        "check_root_invariant": Case(labs.check_root_invariant, _literal("02_timetick.ipynb", "answer_4"), text_answer),
    }


def _flush(runs):
    from milvus_edu.mechanisms.flush import labs

    folder = runs.tmp / "basics"
    basics = runs("basics", "flush-basics", seed=1, out_dir=folder)
    seg = int(basics.events[basics.events.kind == "storage.audit"].segment.iloc[0])
    rows = sum(len(pd.read_parquet(f)) for f in labs.segment_binlogs(folder, seg))
    v0 = "by-dev-rootcoord-dml_0_100v0"
    boundary = runs("boundary", "flush-ts-boundary", seed=1).events
    sent = labs.open_flush_updates(boundary, v0)[0]
    crash = runs("crash", "datanode-crash-recovery", seed=1).events
    filtered = labs.filtered_rows(crash)[0]
    return {
        "check_segment_rows": Case(lambda a: labs.check_segment_rows(a, folder, seg), rows, int_answer(rows)),
        "check_open_flush_updates": Case(lambda a: labs.check_open_flush_updates(a, boundary, v0), sent,
                                         int_answer(sent)),
        "check_filtered_rows": Case(lambda a: labs.check_filtered_rows(a, crash), filtered, int_answer(filtered)),
        "check_recovery_invariant": Case(labs.check_recovery_invariant, _literal("03_flush_checkpoint.ipynb",
                                                                                 "answer_4"), text_answer),
    }


def _query(runs):
    import json

    from milvus_edu.mechanisms.query import labs

    its = runs("its", "insert-then-search", seed=1).events
    empty = labs.empty_reads(its)
    seed_ex = runs("seed", "seed-example", seed=1).events
    reads = seed_ex[(seed_ex.kind == "client.read") & seed_ex.detail.str.contains('"label":"t6"')]
    request = int(reads.request.iloc[0])
    read_ts = int(labs.read_facts(seed_ex, request)["client"]["ts"])
    phase = json.loads(seed_ex[seed_ex.kind == "rootcoord.ticker_start"].detail.iloc[0])["sync_ts_phase_ms"]

    def empty_list(a) -> bool:
        try:
            with warnings.catch_warnings():  # int() of a one-element Series, which pandas will refuse one day
                warnings.simplefilter("ignore", FutureWarning)
                return sorted(int(x) for x in a) == empty
        except Exception:  # noqa: BLE001 - any answer that is not a list of ints is not this one
            return False

    return {
        "check_empty_reads": Case(lambda a: labs.check_empty_reads(a, its), empty,
                                  lambda a: not isinstance(a, (str, bytes, dict)) and empty_list(a)),
        "check_read_ts": Case(lambda a: labs.check_read_ts(a, seed_ex, request), read_ts, int_answer(read_ts)),
        "check_clock_level": Case(labs.check_clock_level, _literal("04_guarantee_ts.ipynb", "answer_3"), text_answer),
        "check_ddl_age": Case(lambda a: labs.check_ddl_age(a, seed_ex), round(phase), int_answer(round(phase), 1)),
        "check_session_workload": Case(labs.check_session_workload, _literal("04_guarantee_ts.ipynb", "answer_4")),
    }


def _breakit(runs):
    from milvus_edu.labs import breakit

    switch = "tso_skip_load_on_init"  # a short run; tests/test_labs_breakit.py judges the others
    return {
        "check_prediction": Case(lambda a: breakit.check_prediction(a, switch),
                                 _literal("08_break_it.ipynb", "answer_1"), text_answer),
        "check_go_rule": Case(lambda a: breakit.check_go_rule(a, switch), _literal("08_break_it.ipynb", "answer_2"),
                              text_answer),
    }


def _incidents(runs):
    from milvus_edu.labs import incidents
    from milvus_edu.mechanisms.query.labs import read_table
    from milvus_edu.tsoutil import compose_ts, physical_time

    its = runs("its", "insert-then-search", seed=1).events
    table = read_table(its)
    missed = int(table[table.label == "default"].request.iloc[1])
    found = incidents.missed_insert(its, missed)
    behind = physical_time(int(found["insert"]["ts"])) - physical_time(int(found["read"]["ts"]))
    stall = runs("stall", "tsafe-stall-proxy-restart", seed=1).events
    session = incidents.blocking_session(stall)["server_id"]
    lag = runs("lag", "lag-too-large", seed=1).events
    tsafe = int(incidents.refused_read(lag)["tick_ts"])
    largest = compose_ts(physical_time(tsafe) + 86_400_000, incidents.MAX_LOGICAL)
    future = _literal("07_incidents.ipynb", "answer_2")
    return {
        "check_tick_behind_insert": Case(lambda a: incidents.check_tick_behind_insert(a, its, missed), behind,
                                         int_answer(behind)),
        "check_future_guarantee": Case(lambda a: incidents.check_future_guarantee(a, ahead_ms=6500), future,
                                       int_answer(future)),
        "check_blocking_session": Case(lambda a: incidents.check_blocking_session(a, stall), session,
                                       int_answer(session)),
        "check_largest_waited_guarantee": Case(lambda a: incidents.check_largest_waited_guarantee(a, lag), largest,
                                               int_answer(largest)),
    }


def _real(runs):
    from milvus_edu.labs import real

    from test_labs_real import CLOCK, LAG, _session_events, _tick_events

    tick, guarantee = (CLOCK - LAG) << 18, 200 << 18
    ticks, session = _tick_events(), _session_events(guarantee)
    return {"check_zero_ts_call": Case(real.check_zero_ts_call, _literal("06_real_milvus.ipynb", "answer_2"),
                                       text_answer),
            "check_sampled_tick": Case(lambda a: real.check_sampled_tick(a, ticks, 1), tick, int_answer(tick)),
            "check_session_guarantee": Case(lambda a: real.check_session_guarantee(a, session, 7), guarantee,
                                            int_answer(guarantee))}


def _scale(runs):
    from milvus_edu.labs import scale
    from test_labs_scale import CATCH, LATENCY, WAITS  # the sweep tables' shape, as the notebook's pandas sweep gives

    growth = 4010.8 - 2507.8
    return {
        "check_wait_driver": Case(lambda a: scale.check_wait_driver(a, WAITS, value="p50_max_wait_ms"),
                                  _literal("05_at_scale.ipynb", "answer_1"), text_answer),
        "check_seeds_to_catch": Case(lambda a: scale.check_seeds_to_catch(a, CATCH, inserts_per_s=10), 3,
                                     int_answer(3)),
        "check_latency_growth": Case(lambda a: scale.check_latency_growth(a, LATENCY, low=0, high=0.6), growth,
                                     near(growth)),
    }


#: module -> the cases of its checks (by function name), built from the runs.
CASES: dict[str, Callable[[Runs], dict[str, Case]]] = {
    "milvus_edu.mechanisms.tso.labs": _tso,
    "milvus_edu.mechanisms.timetick.labs": _timetick,
    "milvus_edu.mechanisms.flush.labs": _flush,
    "milvus_edu.mechanisms.query.labs": _query,
    "milvus_edu.labs.breakit": _breakit,
    "milvus_edu.labs.incidents": _incidents,
    "milvus_edu.labs.real": _real,
    "milvus_edu.labs.scale": _scale,
}
#: Every check this file judges, ``module.function``: the table the discovered checks must equal.
TABLE = {
    "milvus_edu.mechanisms.tso.labs": ["check_compose", "check_first_after_failover", "check_max_per_tick",
                                       "check_broken_invariant", "check_max_per_second"],
    "milvus_edu.mechanisms.timetick.labs": ["check_out_of_order", "check_round_tick", "check_pack_count",
                                            "check_root_invariant"],
    "milvus_edu.mechanisms.flush.labs": ["check_segment_rows", "check_open_flush_updates", "check_filtered_rows",
                                         "check_recovery_invariant"],
    "milvus_edu.mechanisms.query.labs": ["check_empty_reads", "check_read_ts", "check_clock_level", "check_ddl_age",
                                         "check_session_workload"],
    "milvus_edu.labs.breakit": ["check_prediction", "check_go_rule"],
    "milvus_edu.labs.incidents": ["check_tick_behind_insert", "check_future_guarantee", "check_blocking_session",
                                  "check_largest_waited_guarantee"],
    "milvus_edu.labs.real": ["check_zero_ts_call", "check_sampled_tick", "check_session_guarantee"],
    "milvus_edu.labs.scale": ["check_wait_driver", "check_seeds_to_catch", "check_latency_growth"],
}
NAMES = [f"{module}.{name}" for module, names in TABLE.items() for name in names]


class Cases(dict):
    """``module.check`` -> its :class:`Case`; printed short, as hypothesis prints it with every failing example."""

    def __repr__(self) -> str:
        return f"<{len(self)} checks in their runs>"


@pytest.fixture(scope="module")
def cases(tmp_path_factory) -> Cases:
    runs = Runs(tmp_path_factory.mktemp("fuzz-runs"))
    out = Cases()
    for module, build in CASES.items():
        out.update({f"{module}.{name}": case for name, case in build(runs).items()})
    assert set(out) == set(NAMES), "CASES and TABLE must name the same checks"
    return out


# ---- what a student may type ---------------------------------------------------------------------------------------
def _raises(*_):
    raise RuntimeError("a student's function was called")


_ODD_VALUES = [
    pd.NA, pd.NaT, np.nan, math.inf, -math.inf, -0.0, 0.0, 1e300, -1e300, 5e-324, 1e17, 2.0**63, 2.0**64,
    2**63, 2**64, -1, 0, 1, "9" * 5000, " 12 ", "12.0", "1e3", "0x10", "١٢", "nan", "inf", "",
    "\n\n", "0\n\n", "watermark\n\nx", "None", "'b'", "[1, 4]", b"12", bytearray(b"x"), decimal.Decimal("NaN"),
    decimal.Decimal("sNaN"),
    decimal.Decimal("12"), decimal.Decimal("Infinity"), fractions.Fraction(7, 2), fractions.Fraction(24, 2),
    complex(1, 2), 3 + 0j, np.int64(-1), np.uint64(2**64 - 1), np.float64("nan"), np.float32(1.5), np.bool_(True),
    np.bool_(False), np.int8(7), np.datetime64("NaT"), np.timedelta64("NaT"), np.array(5), np.array([]),
    np.array([1, 2]), np.array([[1], [2]]), np.array(["a", None], dtype=object), pd.Series([], dtype="int64"),
    pd.Series([1, 4]), pd.Series([pd.NA], dtype="Int64"), pd.Series(["a"]), pd.DataFrame(), pd.DataFrame({"a": [1]}),
    pd.Timestamp("2026-01-01"), datetime.date(2026, 1, 1), datetime.timedelta(seconds=1), pd.Index([1]),
    pd.Categorical(["a"]), len, print, _raises, lambda x: x, object(), object, type, Ellipsis, NotImplemented,
    range(3), range(0), [], (), {}, set(), frozenset(), [None], [[1]], [1.0], [True], [np.int64(1)], [np.nan],
    [np.timedelta64(1)], {"a": 1}, {1: 2}, [{"at": 1.0}], [{}], [{"op": "insert"}], ["1", "4"], {1, 4}, (1, 4),
    [pd.NA], [b"x"], [len],
]

_hashable = st.one_of(st.integers(), st.text(max_size=5), st.floats(allow_nan=False), st.booleans(), st.none())
_scalars = st.one_of(
    st.integers(), st.integers(min_value=-(2**130), max_value=2**130), st.booleans(), st.floats(),
    st.floats(width=32).map(np.float32), st.floats().map(np.float64),
    st.integers(min_value=-(2**63), max_value=2**63 - 1).map(np.int64),
    st.integers(min_value=0, max_value=2**64 - 1).map(np.uint64), st.booleans().map(np.bool_),
    st.text(), st.from_regex(r"\s*[+-]?[0-9_,]{1,25}(\.[0-9]*)?\s*", fullmatch=True), st.binary(max_size=8),
    st.decimals(), st.fractions(), st.complex_numbers(), st.datetimes(), st.sampled_from(_ODD_VALUES),
    st.builds(lambda: 10**5000), st.builds(lambda: -(10**5000)), st.builds(lambda: [10**5000]),  # past str()'s limit
    st.builds(lambda: iter([1, 4])), st.builds(lambda: (x for x in [1, 4])),  # used up once read: made anew
)
ANSWERS = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.lists(inner, max_size=4).map(tuple), st.sets(_hashable, max_size=4),
        st.frozensets(_hashable, max_size=4), st.dictionaries(_hashable, inner, max_size=3),
        st.lists(st.integers(min_value=-5, max_value=40), max_size=5).map(pd.Series),
        st.lists(st.floats(), max_size=4).map(lambda xs: pd.Series(xs, dtype="float64")),
        st.lists(st.text(max_size=4), max_size=4).map(lambda xs: pd.DataFrame({"request": xs})),
        st.lists(st.integers(min_value=-5, max_value=40), max_size=5).map(np.array),
        st.dictionaries(st.sampled_from(["at", "client", "op", "collection", "data", "consistency_level"]),
                        inner, max_size=6).map(lambda d: [d]),
    ),
    max_leaves=8,
)


def one_paragraph(fb) -> str:
    """``fb`` is a Feedback whose text is one short paragraph, without a traceback; its text."""
    assert isinstance(fb, Feedback), f"got {type(fb).__name__}: {fb!r}"
    text = str(fb)
    assert isinstance(fb.message, str) and fb.message.strip(), text
    assert "\n\n" not in text and "Traceback" not in text, text
    assert len(text) <= MAX_MESSAGE, f"{len(text)} characters: {text[:300]}..."
    return text


# ---- the properties ----------------------------------------------------------------------------------------------
def test_every_check_has_a_context():
    """A new check must get a context here, so its answers get fuzzed too."""
    assert set(discovered_checks()) == set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_reference_answer_is_right_and_none_waits(cases, name):
    case = cases[name]
    right = case.call(case.reference)
    one_paragraph(right)
    assert right.ok and right.answered and str(right).startswith("✅ "), str(right)
    assert case.may_be_right(case.reference) or name.endswith("check_session_workload")
    waiting = case.call(None)
    one_paragraph(waiting)
    assert waiting.answered is False and not waiting, str(waiting)


@pytest.mark.parametrize("name", NAMES)
def test_every_odd_value_gets_one_paragraph_and_is_not_right(cases, name):
    """Each of the values that broke a check once (NaN, a 5,000-digit int or string, a numpy duration, text over
    several lines ...), in every check: drawn at random, they would come up too rarely."""
    case = cases[name]
    for answer in _ODD_VALUES + [10**5000, -(10**5000), [10**5000], iter([1, 4]), (x for x in [1, 4])]:
        fb = case.call(answer)
        text = one_paragraph(fb)
        assert fb.answered is True, text
        if not case.may_be_right(answer):
            assert not fb.ok and text.startswith("❌ "), text


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(answer=ANSWERS)
def test_any_answer_gets_one_paragraph_and_garbage_is_not_right(cases, name, answer):
    case = cases[name]
    fb = case.call(answer)
    text = one_paragraph(fb)
    assert fb.answered is True, text
    if not case.may_be_right(answer):
        assert not fb.ok and text.startswith("❌ "), text
