"""Lab 4's self-checks accept the right answer and name the typical mistakes; the numbers the lab's prose states
are Milvus's defaults as the model has them."""

from __future__ import annotations

import pytest

import milvus_edu
from milvus_edu.mechanisms.query.labs import (check_clock_level, check_ddl_age, check_empty_reads, check_read_ts, check_session_workload,
                                   empty_reads, read_facts, read_table, run_steps, session_miss)
from milvus_edu.narrate import ts_text
from milvus_edu.querynode import go_duration

SESSION_MISS = [
    {"at": 0.5, "client": "Client1", "op": "create_collection", "collection": "C0"},
    {"at": 1.0, "client": "Client1", "op": "insert", "collection": "C0", "data": [{"id": "A1"}]},
    {"at": 1.02, "client": "Client2", "op": "query", "collection": "C0", "consistency_level": "Session"},
    {"at": 1.02, "client": "Client1", "op": "query", "collection": "C0", "consistency_level": "Session"},
]


@pytest.fixture(scope="module")
def insert_then_search():
    return milvus_edu.simulate("insert-then-search", seed=1).events


@pytest.fixture(scope="module")
def seed_example():
    return milvus_edu.simulate("seed-example", seed=1).events


def _t6(events) -> int:
    reads = events[(events.kind == "client.read") & events.detail.str.contains('"label":"t6"')]
    return int(reads.request.iloc[0])


def test_empty_reads_are_the_bounded_ones(insert_then_search):
    ev = insert_then_search
    want = empty_reads(ev)
    reads = ev[ev.kind == "client.read"]
    assert len(want) == 12 and set(reads[reads.request.isin(want)].level) == {"Bounded"}
    assert check_empty_reads(want, ev).ok
    assert check_empty_reads(tuple(reversed(want)), ev).ok
    assert check_empty_reads(reads[reads["count"] == 0].request, ev).ok  # a pandas column of ints is a list too
    assert "left out" in check_empty_reads(want[:-1], ev).message
    assert "not empty" in check_empty_reads(want + [2], ev).message
    events_numbers = [int(s) + 1 for s in reads[reads.request.isin(want)].seq]
    assert "event numbers" in check_empty_reads(events_numbers, ev).message
    assert "no read #999" in check_empty_reads([999], ev).message
    assert "float" in check_empty_reads([1.0], ev).message
    assert "DataFrame" in check_empty_reads(reads, ev).message
    assert not check_empty_reads(None, ev).answered
    assert not check_empty_reads("1, 4", ev).ok


def test_read_ts_is_the_tsafe_the_wait_returned_not_the_guarantee(seed_example):
    ev = seed_example
    request = _t6(ev)
    facts = read_facts(ev, request)
    want, guarantee = int(facts["client"]["ts"]), int(facts["client"]["guarantee_ts"])
    assert want > guarantee
    assert check_read_ts(want, ev, request).ok
    assert "guarantee" in check_read_ts(guarantee, ev, request).message
    arrival = int(facts["shards"][0]["tick_ts"])
    assert "when it arrived" in check_read_ts(arrival, ev, request).message
    assert "float" in check_read_ts(float(want), ev, request).message
    assert "is a string" in check_read_ts(str(want), ev, request).message
    assert not check_read_ts(None, ev, request).answered
    with pytest.raises(ValueError):
        read_facts(ev, 999)


def test_read_ts_names_the_tick_the_read_waited_past_and_a_physical_part(seed_example):
    # lab 4's section 1 shows t6's shards reaching 00:00:01.100+1 while it waits: a student's likely answer; and
    # `ts >> 18` (milliseconds) printed as a 1970 hybrid timestamp in the generic hint
    ev = seed_example
    request = _t6(ev)
    facts = read_facts(ev, request)
    want, guarantee = int(facts["client"]["ts"]), int(facts["client"]["guarantee_ts"])
    waits = ev[(ev.kind == "querynode.wait") & (ev.request == request)].seq.min()
    passed = ev[(ev.kind == "querynode.tsafe") & (ev.seq > waits) & (ev.seq < int(facts["client"]["seq"]))]
    below = sorted({int(t) for t in passed.ts if int(t) < guarantee})
    assert below, "t6 waits past a tick below its guarantee (section 1 of lab 4)"
    assert "went on waiting" in check_read_ts(below[0], ev, request).message
    assert "physical part alone" in check_read_ts(want >> 18, ev, request).message
    assert "far below any hybrid timestamp" in check_read_ts(1300, ev, request).message


def test_ddl_age_is_the_sync_ts_phase_and_other_phases_are_named(seed_example):
    import json

    ev = seed_example  # drawn phases
    phase = json.loads(ev[ev.kind == "rootcoord.ticker_start"].detail.iloc[0])["sync_ts_phase_ms"]
    assert check_ddl_age(round(phase), ev)
    assert not check_ddl_age(None, ev) and not check_ddl_age(None, ev).answered
    # set phases, far apart, so each wrong answer has one reading
    params = {"timetick.sync_ts_phase_ms": 17, "timetick.proxy_report_phase_ms": 71}
    other = milvus_edu.simulate("seed-example", seed=1, params=params).events
    assert check_ddl_age(17, other) and not check_ddl_age(17, ev)  # the check reads the run it is given
    assert "after* a send" in check_ddl_age(183, other).message
    assert "a proxy's loop" in check_ddl_age(71, other).message
    assert "rootcoord.ticker_start" in check_ddl_age(54, other).message


def test_clock_level_is_bounded():
    assert check_clock_level("Bounded").ok
    assert check_clock_level(" bounded ").ok
    assert "TSO" in check_clock_level("Strong").message
    assert "constant 1" in check_clock_level("Eventually").message
    assert "last write" in check_clock_level("Session").message
    assert "not a consistency level" in check_clock_level("proxy").message
    assert not check_clock_level(None).answered
    assert not check_clock_level(2).ok


def test_session_workload_is_run_and_judged():
    verdict = check_session_workload(SESSION_MISS)
    assert verdict.ok, verdict.message
    assert session_miss(run_steps(SESSION_MISS).events) is not None
    strong = [dict(s, consistency_level="Strong") if s["client"] == "Client2" and s["op"] == "query" else s
              for s in SESSION_MISS]
    assert "no answered Session read" in check_session_workload(strong).message
    later = SESSION_MISS[:2] + [dict(s, at=1.5) for s in SESSION_MISS[2:]]
    assert "saw Client1's write" in check_session_workload(later).message
    early = [SESSION_MISS[0], dict(SESSION_MISS[2], at=0.6), SESSION_MISS[1], SESSION_MISS[3]]
    assert "began before" in check_session_workload(early).message
    assert "Client1 made no answered Session read" in check_session_workload(SESSION_MISS[:3]).message
    assert "collection not found" in check_session_workload(SESSION_MISS[1:]).message
    assert "does not parse" in check_session_workload([{"at": 1.0}]).message
    assert "does not parse" in check_session_workload([dict(SESSION_MISS[0], op="upsert")]).message
    assert not check_session_workload("steps").ok
    assert not check_session_workload(None).answered


def test_the_defaults_the_lab_states(seed_example):
    from milvus_edu.proxy.guarantee_ts import GRACEFUL_TIME_MS
    from milvus_edu.config import MS, S, Config

    assert GRACEFUL_TIME_MS == 5000  # "the proxy's own clock minus 5 s"
    config = Config()
    assert config.timetick.time_tick_interval_ns == 200 * MS  # "time ticks come every 200 ms"
    assert config.query.max_timestamp_lag_ns == 24 * 3600 * S  # "more than maxTimestampLag (24 h) past tsafe"
    assert config.tso.session_ttl_ns == 60 * S  # "until its lease expires (60 s)"


def test_read_table_gives_failed_reads_their_level_and_guarantee():
    """Section 4c/4d: a failed read's own row has no level or guarantee; the table takes the proxy's, and a read
    refused before any proxy saw it keeps the level the SDK sent and no guarantee."""
    ev = milvus_edu.simulate("tsafe-stall-proxy-restart", seed=1, duration_s=20.0).events
    table = read_table(ev)
    failed = table[table["error"].notna()]
    assert len(failed) >= 3 and failed["level"].notna().all()
    timed_out = failed[failed["error"] == "context deadline exceeded"]
    assert len(timed_out) and (timed_out["level"] == "Strong").all() and timed_out["guarantee"].notna().all()
    for r in timed_out.itertuples():
        proxy = ev[(ev.kind == "proxy.read") & (ev.request == r.request)].iloc[0]
        assert r.guarantee == ts_text(int(proxy.guarantee_ts))
    refused = failed[failed["error"].str.startswith("connection refused")]
    assert len(refused) == 1 and refused["level"].iloc[0] == "Bounded" and refused["guarantee"].iloc[0] is None
    answered = table[table["error"].isna()]
    assert (answered["read at"].notna()).all() and len(table) == (ev.kind == "client.read").sum()


def test_lag_too_large_says_what_the_lab_says():
    """Section 4d: the refused read's lag, as Go prints it, is the one in its error, more than 24h0m0s."""
    ev = milvus_edu.simulate("lag-too-large", seed=1).events
    refused = ev[(ev.kind == "querynode.read") & ev.error.notna()].iloc[0]
    lag_ms = (int(refused.guarantee_ts) >> 18) - (int(refused.tick_ts) >> 18)
    assert lag_ms > 86_400_000
    assert refused.error == f"Timestamp lag too large lag({go_duration(lag_ms * 10**6)}) max(24h0m0s)"
    assert go_duration(lag_ms * 10**6) == "24h59m58.7s"
    table = read_table(ev)
    row = table[table["label"] == "a day ahead"].iloc[0]
    assert row["level"] == "Customized" and row["guarantee"] == "25:00:00.000+0" and row["error"] == refused.error
