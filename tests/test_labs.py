"""The lab self-checks (milvus_edu.mechanisms.tso.labs): right answers pass, ``None`` waits, wrong answers are told
what is wrong."""

import numpy as np
import pandas as pd
import pytest

import milvus_edu
from milvus_edu.mechanisms.tso.check import INVARIANTS
from milvus_edu.mechanisms.tso.labs import (INVARIANT_NAMES, Feedback, check_broken_invariant, check_compose,
                                 check_first_after_failover, check_max_per_second, check_max_per_tick)
from milvus_edu.narrate import ts_text
from milvus_edu.tsoutil import compose_ts

P, L = 1767225601000, 42
TS = (P << 18) + L
MAX = 2**18 - 1


def wrong(fb, *phrases):
    """``fb`` is an answered, falsy ❌ whose message contains every phrase."""
    assert isinstance(fb, Feedback)
    assert not fb and fb.answered, str(fb)
    assert str(fb).startswith("❌ "), str(fb)
    for phrase in phrases:
        assert phrase in fb.message, f"{phrase!r} not in {fb.message!r}"
    return fb


def right(fb, *phrases):
    assert fb and fb.ok and fb.answered, str(fb)
    assert str(fb).startswith("✅ ")
    for phrase in phrases:
        assert phrase in fb.message
    return fb


def pending(fb, *phrases):
    assert not fb and not fb.answered, str(fb)
    assert str(fb).startswith("⏳ Not answered yet: "), str(fb)
    assert "None" in fb.message
    for phrase in phrases:
        assert phrase in fb.message
    return fb


@pytest.fixture(scope="module")
def failover():
    return milvus_edu.simulate("tso-failover", seed=1).events


@pytest.fixture(scope="module")
def facts(failover):
    ev = failover
    allocs = ev[(ev.kind == "rootcoord.alloc_timestamp") & ev.error.isna()]
    new, old = allocs[allocs.node == "rootcoord-2"], allocs[allocs.node == "rootcoord-1"]
    tso = ev[(ev.kind == "tso.alloc") & (ev.node == "rootcoord-2")]
    batch = tso[tso["count"] > 1].iloc[0]
    init = ev[(ev.kind == "tso.init") & (ev.node == "rootcoord-2")].iloc[0]
    c1 = new[new.peer == "client-1"]
    return {
        "first": int(c1.ts.iloc[0]), "second": int(c1.ts.iloc[1]),
        "first_batch_last": int(c1.ts.iloc[0] + c1["count"].iloc[0] - 1),
        "first_any_client": int(new.ts.iloc[0]), "first_any_client_peer": str(new.peer.iloc[0]),
        "old_first": int(old.ts.iloc[0]), "old_last_batch": int(old.ts.iloc[-1]),
        "old_last": int(old.ts.iloc[-1] + old["count"].iloc[-1] - 1),
        "new_batch_last": int(batch.ts), "init_physical": int(init.physical_ms),
    }


# ---- Feedback -----------------------------------------------------------------------------------
def test_feedback_prints_its_verdict():
    assert str(Feedback(True, "x")) == "✅ Right: x" == repr(Feedback(True, "x")) == Feedback(True, "x")._repr_markdown_()
    assert str(Feedback(True, "Right: 3 of them.")) == "✅ Right: 3 of them."  # said once
    assert str(Feedback(False, "x")) == "❌ Not right yet: x"  # words beside each mark: not every font has them
    assert str(Feedback(False, "x", answered=False)) == "⏳ Not answered yet: x"
    assert not Feedback(False, "x", answered=False)


# ---- exercise 1: compose ------------------------------------------------------------------------
@pytest.mark.parametrize("answer", [TS, np.int64(TS), np.uint64(TS), (P << 18) | L, P * 2**18 + L])
def test_compose_right(answer):
    right(check_compose(answer, P, L), str(TS), "<< 18")


def test_compose_none_waits():
    pending(check_compose(None, P, L), "an int", str(P), str(L))


def test_compose_precedence_mistake():
    answer = P << 18 + L  # Python: P << (18 + 42)
    assert answer == P << 60
    wrong(check_compose(answer, P, L), "precedence", "`physical << (18 + logical)`", "parentheses",
          "`(physical << 18) + logical`", "60 bits")


def test_compose_numeric_string_is_not_accepted_but_said_right():
    wrong(check_compose(str(TS), P, L), "string", "value is right", "without quotes", f"`{TS}`")
    wrong(check_compose(f" {TS:_} ", P, L), "value is right")
    wrong(check_compose(str(P * 1000 + L), P, L), "string", "not right either", "not multiplied by 1000")


def test_compose_float_loses_the_logical_bits():
    wrong(check_compose(float(TS), P, L), "float", "53 bits", "logical part")
    wrong(check_compose(P * 2.0**18 + L, P, L), "float")
    wrong(check_compose(1.5, P, L), "not a whole number")


@pytest.mark.parametrize("answer, phrases", [
    ((P << 16) + L, ["16 bits", "18 bits"]),
    ((P << 20) + L, ["20 bits"]),
    (P * 1000 + L, ["not multiplied by 1000"]),
    (P << 18, ["logical part (42) is missing"]),
    ((L << 18) + P, ["swapped"]),
    (P * 18 + L, ["not by 18"]),
    (-TS, ["negative"]),
    (TS + 1, [f"logical {L + 1}", f"physical {P} ms and logical {L}"]),
    (compose_ts(P + 5, L), [f"physical {P + 5} ms"]),
])
def test_compose_typical_mistakes(answer, phrases):
    wrong(check_compose(answer, P, L), *phrases)


@pytest.mark.parametrize("answer, phrase", [
    (True, "bool"), ("abc", "string, not a number"), ([TS], "type list"), (pd.Series([TS]), ".iloc[0]"),
    (pd.NA, "missing"), (float("nan"), "not a whole number"),
])
def test_compose_wrong_types(answer, phrase):
    wrong(check_compose(answer, P, L), phrase)


# ---- exercise 2: first timestamp after the failover ---------------------------------------------
def test_first_after_failover_right(failover, facts):
    fb = right(check_first_after_failover(facts["first"], failover), "rootcoord-2", ts_text(facts["first"]),
               ts_text(facts["old_last"]))
    allocs = failover[(failover.kind == "rootcoord.alloc_timestamp") & (failover.node == "rootcoord-2")
                      & (failover.peer == "client-1")]
    assert bool(check_first_after_failover(allocs.ts.iloc[0], failover))  # numpy int64 straight from pandas
    assert fb


def test_first_after_failover_batch_has_a_first_and_a_last(failover, facts):
    """The question is about client-1, whose batches hold 10 timestamps: first and last differ."""
    assert facts["first_batch_last"] == facts["first"] + 9
    tso = failover[(failover.kind == "tso.alloc") & (failover.node == "rootcoord-2")]
    assert facts["first_batch_last"] in set(tso.ts.astype(int))
    wrong(check_first_after_failover(facts["first_batch_last"], failover), "LAST", "first batch", "tso.alloc",
          "FIRST", "rootcoord.alloc_timestamp")


def test_first_after_failover_another_clients_timestamp(failover, facts):
    assert facts["first_any_client"] != facts["first"]
    wrong(check_first_after_failover(facts["first_any_client"], failover), facts["first_any_client_peer"],
          "peer is client-1")


def test_first_after_failover_none_waits(failover):
    pending(check_first_after_failover(None, failover), "rootcoord-2", "an int")


@pytest.mark.parametrize("key", ["old_last", "old_first", "old_last_batch"])
def test_first_after_failover_old_actives_timestamp(failover, facts, key):
    wrong(check_first_after_failover(facts[key], failover), "old active", "rootcoord-2",
          "rootcoord.alloc_timestamp", ts_text(facts[key]))


def test_first_after_failover_tso_alloc_is_the_last_of_a_batch(failover, facts):
    wrong(check_first_after_failover(facts["new_batch_last"], failover), "tso.alloc", "LAST", "FIRST",
          "rootcoord.alloc_timestamp")


def test_first_after_failover_not_the_first(failover, facts):
    wrong(check_first_after_failover(facts["second"], failover), "not in its first batch", ".iloc[0]")


def test_first_after_failover_window_start_has_logical_zero(failover, facts):
    wrong(check_first_after_failover(compose_ts(facts["init_physical"], 0), failover), "logical 0", "tso.init")


def test_first_after_failover_physical_is_not_a_timestamp(failover, facts):
    wrong(check_first_after_failover(facts["init_physical"], failover), "physical part in milliseconds",
          "ts column")


def test_first_after_failover_wrong_forms(failover, facts):
    wrong(check_first_after_failover(str(facts["first"]), failover), "string", "value is right")
    wrong(check_first_after_failover(float(facts["first"]), failover), "float", "int(...)")
    wrong(check_first_after_failover(pd.Series([facts["first"]]), failover), "Series", ".iloc[0]")
    wrong(check_first_after_failover(12345, failover), "not a timestamp rootcoord-2 handed out to client-1")


def test_first_after_failover_needs_a_failover():
    events = milvus_edu.simulate("tso-basics", seed=1).events
    wrong(check_first_after_failover(1, events), "no failover", "tso-failover")


# ---- exercise 3: timestamps per physical value --------------------------------------------------
@pytest.mark.parametrize("answer", [MAX, np.int32(MAX), 2**18 - 1, (1 << 18) - 1])
def test_max_per_tick_right(answer):
    right(check_max_per_tick(answer), "logical 0 is never handed out")


def test_max_per_tick_none_waits():
    pending(check_max_per_tick(None), "an int")


@pytest.mark.parametrize("answer, phrases", [
    (2**18, ["one too many", "logical 0"]),
    (50 * 2**18, ["50 physical milliseconds", "ONE physical value"]),
    (50 * MAX, ["50 physical milliseconds", "only tsLoop moves it"]),
    (2**17, ["half-space rule", "only runs when tsLoop runs"]),
    (18, ["number of logical bits"]),
    (1, ["Many timestamps share one physical value"]),
    (1000, ["1000 is not it", "18 logical bits"]),
])
def test_max_per_tick_typical_mistakes(answer, phrases):
    wrong(check_max_per_tick(answer), *phrases)


def test_max_per_tick_string_and_float():
    wrong(check_max_per_tick("262143"), "string", "value is right", "without quotes", "`262143`")
    wrong(check_max_per_tick("262144"), "string", "not right either", "one too many")
    wrong(check_max_per_tick(262143.0), "float", "value is right", "`262143`")
    wrong(check_max_per_tick(262144.0), "float", "one too many")
    wrong(check_max_per_tick(262143.5), "not a whole number")
    wrong(check_max_per_tick("2**18-1"), "string, not a number")
    wrong(check_max_per_tick(True), "bool")


# ---- exercise 5: timestamps per second -------------------------------------------------------------
PER_SECOND = MAX * 20


def test_max_per_second_right():
    right(check_max_per_second(PER_SECOND), "20 times a second", "5,242,860")


def test_max_per_second_none_waits():
    pending(check_max_per_second(None), "an int")


@pytest.mark.parametrize("answer, phrases", [
    (2**18 * 20, ["Off by one", "logical 0"]),
    (MAX * 1000, ["every millisecond", "design documents", "Only tsLoop"]),
    (2**18 * 1000, ["every millisecond"]),
    (3 * 1000 * 2**18, ["whole 3 s window", "per second", "only tsLoop"]),
    (MAX, ["one physical value's worth"]),
    (2**17 * 20, ["maxLogical/2 rule", "does not stop"]),
    (4_000_000, ["batches of 100,000", "whatever the batch size"]),
    (7, ["7 is not it"]),
])
def test_max_per_second_typical_mistakes(answer, phrases):
    wrong(check_max_per_second(answer), *phrases)


def test_max_per_second_is_what_the_overflow_run_shows():
    """The answer's two factors, read from tso-logical-overflow: tsLoop gives 20 physical values a second,
    no allocation goes past 2^18 - 1, and GenerateTSO refuses the requests that would."""
    ev = milvus_edu.simulate("tso-logical-overflow", seed=1).events
    updates = ev[ev.kind == "tso.update"]
    per_second = updates.groupby(updates.t_ms // 1000).size()
    assert (per_second.loc[1:3] == 20).all()
    assert ev[ev.kind == "tso.alloc"].logical.max() <= MAX
    refused = ev[ev.kind == "tso.alloc_retry"]
    assert len(refused) and (refused.logical > MAX).all()


# ---- exercise 4: the broken invariant -----------------------------------------------------------
def test_invariant_names_are_the_checkers():
    assert INVARIANT_NAMES == INVARIANTS


def test_the_reference_answer_is_what_the_checker_reports():
    broken = milvus_edu.simulate("tso-failover", seed=1, switches=["tso_skip_load_on_init"])
    assert broken.violations[0]["invariant"] == "global-monotonic"


@pytest.mark.parametrize("answer", ["global-monotonic", " Global-Monotonic ", "global_monotonic",
                                    "global monotonic", "'global-monotonic'"])
def test_broken_invariant_right(answer):
    right(check_broken_invariant(answer), "75 s behind")


def test_broken_invariant_none_waits():
    pending(check_broken_invariant(None), "a string", *INVARIANT_NAMES)


@pytest.mark.parametrize("answer, phrases", [
    ("window", ["'window' holds", "order across the two leaders"]),
    ("client-monotonic", ["breaks too", "root one"]),
    ("client_monotonic", ["breaks too"]),
    ("tso_skip_load_on_init", ["bug switch", "name the invariant"]),
    ("monotonic", ["not an invariant name", "global-monotonic"]),
    ("", ["not an invariant name"]),
    (1, ["type int", "string"]),
])
def test_broken_invariant_wrong(answer, phrases):
    wrong(check_broken_invariant(answer), *phrases)


# ---- every check: odd input never raises --------------------------------------------------------
@pytest.mark.parametrize("answer", [object(), [], {}, "", " ", float("inf"), -1, 0, 2**70, pd.NA, np.nan])
def test_no_check_raises(failover, answer):
    for fb in (check_compose(answer, P, L), check_first_after_failover(answer, failover),
               check_max_per_tick(answer), check_broken_invariant(answer)):
        assert isinstance(fb, Feedback) and not fb and fb.answered and fb.message
