"""Events in words: one sentence per event, for timelines, the stepper's state panel and the CLI.

A pure function of one run-log row (a dict or a pandas row); it never re-runs model logic. The kinds
every run may hold (run start and end, faults, the network) are narrated here; every other kind by
the mechanism that registered it (:attr:`milvus_edu.registry.Mechanism.describe`).
"""

from __future__ import annotations

import math

from .events.schema import SIM_EPOCH_MS, detail_object
from .registry import describer
from .tsoutil import parse_hybrid_ts, physical_datetime


def value(row, name):
    """Column ``name`` of a row (a dict, a pandas Series or an ``itertuples`` row), ``None`` for missing and null
    values. A Series is read by key: as an attribute, ``count`` would be its method, not the column."""
    v = row.get(name) if hasattr(row, "get") else getattr(row, name, None)
    if v is None:
        return None
    try:
        if v is getattr(__import__("pandas"), "NA") or (isinstance(v, float) and math.isnan(v)):
            return None
    except TypeError:
        return v
    return v


def plural(n, word: str, many: str | None = None) -> str:
    """``n`` and ``word`` as English counts them: ``1 row``, ``0 rows``, ``4,482 rows`` (``many`` for a word that
    does not just take an ``s``: ``plural(2, "entry", "entries")``). One helper, so no sentence says ``1 rows``
    or ``row(s)``."""
    n = int(n)
    return f"{n:,} {word if n == 1 else (many or word + 's')}"


def named(word: str, ids) -> str:
    """A list of ids after its noun, as :func:`plural` counts it: ``segment 10000``, ``segments 10000, 10001``, or
    ``no segment`` for none."""
    ids = list(ids or [])
    if not ids:
        return f"no {word}"
    return f"{word if len(ids) == 1 else word + 's'} {', '.join(str(i) for i in ids)}"


def times(n) -> str:
    """How often, in words: ``once``, ``twice``, ``3 times`` (the count :func:`plural` gives a thing)."""
    n = int(n)
    return {1: "once", 2: "twice"}.get(n, f"{n:,} times")


#: How far from the model's time zero a clock may read and still be written as time since it: 1,000 hours (about
#: six weeks), longer than any run of the model. A real server's clock is today's, months or years away.
RELATIVE_SPAN_MS = 1_000 * 3_600_000


def wall_text(unix_ms) -> str:
    """A wall-clock value (Unix ms) as signed ``HH:MM:SS.mmm`` since the run's time zero.

    Time zero is :data:`~milvus_edu.events.SIM_EPOCH_MS`; a clock that is behind it reads negative
    (``-00:00:14.950``), so "earlier" always looks smaller. A value :data:`RELATIVE_SPAN_MS` or more away
    from it (a real Milvus server's clock, in a real run's log) is written as its date and time in UTC,
    ``2026-11-26 14:23:13.123``, rather than as thousands of hours.
    """
    rel = int(unix_ms) - SIM_EPOCH_MS
    if abs(rel) >= RELATIVE_SPAN_MS:
        when = physical_datetime(int(unix_ms))
        return f"{when:%Y-%m-%d %H:%M:%S}.{when.microsecond // 1000:03d}"
    sign, rel = ("-", -rel) if rel < 0 else ("", rel)
    return f"{sign}{rel // 3_600_000:02d}:{rel // 60_000 % 60:02d}:{rel // 1000 % 60:02d}.{rel % 1000:03d}"


def ts_text(ts) -> str:
    """A hybrid timestamp as ``<physical as wall_text>+<logical>``, e.g. ``00:00:12.001+3``.

    Timestamp 0 means "nothing yet" in Milvus (a stream's first pack begins there): it reads ``0 (start)``; a
    value with no physical part (Eventually's guarantee 1) reads ``1 (no time)``.
    """
    if int(ts) == 0:
        return "0 (start)"
    if int(ts) < 1 << 18:  # no physical part: a marker such as Eventually's guarantee 1, not a time
        return f"{int(ts)} (no time)"
    physical, logical = parse_hybrid_ts(int(ts))
    return f"{wall_text(physical)}+{logical}"


def detail_dict(raw) -> dict:
    """The ``detail`` column as a dict; ``{}`` when it is missing (None, a DataFrame's ``NA``), empty, not JSON, or
    not a JSON object (:func:`~milvus_edu.events.schema.detail_object`)."""
    return detail_object(raw)


def detail_of(row) -> dict:
    """The ``detail`` column of a row as a dict (see :func:`detail_dict`)."""
    return detail_dict(value(row, "detail"))


def describe(row) -> str:
    """One sentence saying what the event means (a plain ``node: kind`` when fields are missing)."""
    try:
        return _describe(row)
    except (TypeError, ValueError, KeyError):
        return f"{value(row, 'node')}: {value(row, 'kind')}"


def _describe(row) -> str:
    kind, node = value(row, "kind"), value(row, "node")
    detail = detail_of(row)
    if kind == "run.start":
        if detail.get("real"):
            return f"Run starts on a real {detail.get('server')}: scenario {detail.get('scenario')}."
        return f"Run starts: scenario {detail.get('scenario')}, seed {detail.get('seed')}."
    if kind == "run.end":
        return "Run ends."
    if kind == "run.clock":
        return f"The clients start; the wall clock reads {value(row, 'clock_ms')} (Unix ms)."
    if kind == "fault.kill":
        why = detail.get("why")
        if why and why.startswith("crash"):  # "crash at step 12 (...)" reads "crashes at step 12", not "dies: crash"
            return f"{node} crashes{why[len('crash'):]}; everything in its memory is lost."
        if why and why != "killed":
            return f"{node} dies: {why}; everything in its memory is lost."
        return f"{node} is killed{' while active' if detail.get('was_active') else ''}; it revokes nothing."
    if kind == "fault.pause":
        return f"{node} freezes for {detail.get('duration_ms', 0) / 1000:g} s (a long GC or VM pause)."
    if kind == "fault.resume":
        return f"{node} runs again after its pause, unaware that time passed."
    if kind == "fault.stall":
        return (f"{node}'s {detail.get('loop', 'loop')} hangs for {detail.get('duration_ms', 0) / 1000:g} s; "
                "the node itself stays up.")
    if kind == "fault.restart":
        return f"{node} starts again as server {detail.get('server_id')}, with fresh state."
    if kind == "fault.clock_jump":
        return f"{node}'s clock jumps by {detail.get('delta_ms'):+,.0f} ms."
    if kind == "fault.switch":
        return (f"Bug switch {detail.get('switch')} is turned {'on' if detail.get('on') else 'off'} "
                "for every component from now on.")
    if kind == "rpc.drop":
        return f"The network loses a message from {node} to {value(row, 'peer')}."
    narrate = describer(kind)
    if narrate is not None:
        return narrate(row)
    return f"{node}: {kind}"
