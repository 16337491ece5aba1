"""Lab 7's self-checks accept the right answer, name the typical mistakes and wait for an answer; and what the lab's
prose says of each incident's runs holds on those runs (the notebook computes its numbers, these tests hold the
sentences around them)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import milvus_edu
from milvus_edu.events import SIM_EPOCH_MS
from milvus_edu.labs.incidents import (MAX_LOGICAL, blocking_session, bounded_future_ms, check_blocking_session,
                                       check_future_guarantee, check_largest_waited_guarantee,
                                       check_tick_behind_insert, clock_behind_steps, missed_insert, refused_read)
from milvus_edu.mechanisms.query.labs import read_table
from milvus_edu.mechanisms.query.scenarios import clock_skew_steps, insert_then_search_steps
from milvus_edu.tsoutil import compose_ts, physical_time


def _waits(events) -> pd.Series:
    shards = events[events.kind == "querynode.read"]
    return shards.groupby("request").detail.apply(lambda d: max(json.loads(x).get("waited_ms") or 0 for x in d))


def _tick_gap_s(events) -> float:
    ticks = events[(events.kind == "mq.produce") & (events.msg_type == "TimeTick")]
    return float(ticks.groupby("channel").t_ms.apply(lambda t: t.diff().max()).max()) / 1000


@pytest.fixture(scope="module")
def its():
    return milvus_edu.simulate("insert-then-search", seed=1).events


@pytest.fixture(scope="module")
def stall():
    return milvus_edu.simulate("tsafe-stall-proxy-restart", seed=1).events


@pytest.fixture(scope="module")
def lag():
    return milvus_edu.simulate("lag-too-large", seed=1).events


# ---- Incident 1 (#35090) ------------------------------------------------------------------------
def _missed(its) -> int:
    table = read_table(its)
    return int(table[table.label == "default"].request.iloc[1])


def test_every_default_read_misses_its_key_and_session_and_strong_find_it(its):
    table = read_table(its).assign(empty=lambda t: t.rows.map(len) == 0)
    counts = table.groupby("label").empty.agg(["size", "sum"])
    assert counts.loc["default", "sum"] == counts.loc["default", "size"] == 12
    assert counts.loc["session", "sum"] == counts.loc["strong", "sum"] == 0
    waited = _waits(its).reindex(table.request).to_numpy()
    assert (waited[table.label.to_numpy() == "default"] == 0).all()
    assert (waited[table.label.to_numpy() != "default"] > 0).all()  # "both wait for a tick, Bounded does not"


def test_a_strong_collection_finds_every_key(its):
    steps = [dict(s, consistency_level="Strong") if s["op"] == "create_collection" else s
             for s in insert_then_search_steps()]
    table = read_table(milvus_edu.simulate("workload", seed=1, duration_s=8, options={"steps": steps}).events)
    default = table[table.label == "default"]
    assert len(default) == 12 and set(default.level) == {"Strong"} and not (default.rows.map(len) == 0).any()


def test_why_declines_the_missed_read_and_explains_the_strong_one(its):
    missed = _missed(its)
    with pytest.raises(milvus_edu.explain.WhyError, match="neither waited nor read stale"):
        milvus_edu.why(its, read=missed)
    table = read_table(its)
    strong = int(table[(table.label == "strong") & (table.request > missed)].request.iloc[0])
    assert "Strong" in str(milvus_edu.why(its, read=strong))


def test_tick_behind_insert_check(its):
    request = _missed(its)
    found = missed_insert(its, request)
    insert_ts, read_ts = int(found["insert"]["ts"]), int(found["read"]["ts"])
    want = physical_time(insert_ts) - physical_time(read_ts)
    assert want > 0 and found["insert"]["node"] == found["read"]["node"]
    assert check_tick_behind_insert(want, its, request).ok
    assert "the sign is not" in check_tick_behind_insert(-want, its, request).message
    assert "hybrid timestamps" in check_tick_behind_insert(insert_ts - read_ts, its, request).message
    guarantee = int(found["read"]["guarantee_ts"])
    assert "guarantee" in check_tick_behind_insert(physical_time(insert_ts) - physical_time(guarantee), its,
                                                   request).message
    assert "is not it" in check_tick_behind_insert(want + 50, its, request).message
    assert "string" in check_tick_behind_insert(str(want), its, request).message
    assert not check_tick_behind_insert(None, its, request).answered
    with pytest.raises(ValueError, match="no answered or failed read"):
        missed_insert(its, 999)


# ---- Incident 2 (#16841) ------------------------------------------------------------------------
def test_clock_ahead_makes_proxy_2_wait_and_proxy_1_not():
    ev = milvus_edu.simulate("clock-skew-bounded", seed=1).events
    assert set(bounded_future_ms(ev, "proxy-2")) == {3000} and set(bounded_future_ms(ev, "proxy-1")) == {-5000}
    px = ev[ev.kind == "proxy.read"].set_index("request")
    waited = _waits(ev).reindex(px.index)
    assert (waited[px.node == "proxy-1"] == 0).all()
    assert (waited[px.node == "proxy-2"].dropna() >= 3000).all() and waited[px.node == "proxy-2"].isna().sum() == 1
    first = int(px[px.node == "proxy-2"].index.min())
    assert "clock runs 8,000 ms ahead" in str(milvus_edu.why(ev, read=first))


def test_clock_behind_reads_too_old_data_without_waiting():
    run = milvus_edu.simulate("workload", seed=1, duration_s=16,
                              interventions=[milvus_edu.Pause("proxy-3", 2500, duration_ms=11000)],
                              options={"steps": clock_behind_steps(), "proxies": 3, "proxy2_clock_offset_ms": -8000.0})
    ev = run.events
    px = ev[ev.kind == "proxy.read"].set_index("request")
    reads = ev[ev.kind == "client.read"].set_index("request")
    age_s = (reads.t_ms - ((reads.ts.astype("int64") // 2**18) - SIM_EPOCH_MS)) / 1000
    waited = _waits(ev).reindex(px.index)
    too_old = age_s[age_s > 5].index
    assert len(too_old) >= 3 and set(px.node[too_old]) == {"proxy-2"} and (waited[too_old] == 0).all()
    assert age_s[px.node == "proxy-1"].max() <= 5 and (waited[px.node == "proxy-1"] > 1000).sum() >= 1
    assert reads.error.isna().all()  # nothing failed
    chain = milvus_edu.why(ev, read=int(age_s.idxmax()))
    assert "stale" in chain.question and "proxy-3" in str(chain)


def test_strong_through_the_skewed_proxy_asks_the_tso_and_waits_a_tick():
    steps = [dict(s, consistency_level="Strong") if s["client"] == "Client2" else s for s in clock_skew_steps()]
    ev = milvus_edu.simulate("workload", seed=1, duration_s=14,
                             options={"steps": steps, "proxy2_clock_offset_ms": 8000.0}).events
    px = ev[(ev.kind == "proxy.read") & (ev.node == "proxy-2")].set_index("request")
    assert len(px) == 6 and px.detail.map(lambda d: json.loads(d)["from_tso"]).all()
    assert _waits(ev).reindex(px.index).between(1, 2 * 200 + 50).all()  # one or two time-tick intervals


def test_future_guarantee_check():
    assert check_future_guarantee(1500, ahead_ms=6500).ok
    assert "minus" in check_future_guarantee(6500, ahead_ms=6500).message
    assert "does not add" in check_future_guarantee(11500, ahead_ms=6500).message
    assert "the sign is not" in check_future_guarantee(-1500, ahead_ms=6500).message
    # the run above's answer (proxy-2 8 s ahead) copied for the 6.5-s question
    assert "what the run above shows, with proxy-2 8,000 ms ahead" in check_future_guarantee(3000, ahead_ms=6500).message
    assert "is not it" in check_future_guarantee(1000, ahead_ms=6500).message
    assert check_future_guarantee(4000, ahead_ms=9000).ok
    assert not check_future_guarantee(None, ahead_ms=6500).answered


# ---- Incident 3 (#34392) ------------------------------------------------------------------------
def test_the_stall_stops_ticks_for_almost_a_minute_and_fails_strong_reads(stall):
    table = read_table(stall)
    assert 50 < _tick_gap_s(stall) < 60
    inserts = stall[stall.kind == "client.insert"]
    assert len(inserts) and inserts.error.isna().all()
    strong = table[table.level == "Strong"]
    assert (strong.error == "context deadline exceeded").sum() >= 5
    px = stall[stall.kind == "proxy.read"]
    assert set(px[px.level == "Strong"].node) == {"proxy-1"}  # the Strong reads that failed never touched proxy-2
    eventually = table[(table.level == "Eventually") & table["t (s)"].between(5, 60)]
    assert eventually.error.isna().all() and eventually["read at"].nunique() == 1
    chain = str(milvus_edu.why(stall, read=int(strong[strong.error.notna()].request.iloc[0])))
    assert "lease expired" in chain and "proxy-2" in chain


def test_a_silent_session_stops_the_ticks_while_it_is_silent():
    silent = milvus_edu.simulate("timetick-proxy-stall", seed=1, duration_s=6.5)
    assert 3.0 <= silent.summary["timetick"]["longest_tick_gap_ms"] / 1000 < 3.5


def test_a_shorter_session_ttl_shortens_the_stall(stall):
    short = milvus_edu.simulate("tsafe-stall-proxy-restart", seed=1, params={"tso.session_ttl_ns": 10 * 10**9}).events
    failed = [int(((t.level == "Strong") & t.error.notna()).sum()) for t in (read_table(stall), read_table(short))]
    assert _tick_gap_s(short) < 15 < 50 < _tick_gap_s(stall) and failed[1] < failed[0]


def test_blocking_session_check(stall):
    s = blocking_session(stall)
    assert s == {"node": "proxy-2", "server_id": 12, "restarted_as": 112}
    assert check_blocking_session(12, stall).ok
    assert "new session" in check_blocking_session(112, stall).message
    assert "server id" in check_blocking_session("proxy-2", stall).message
    assert "not a session" in check_blocking_session(7, stall).message
    assert not check_blocking_session(None, stall).answered
    with pytest.raises(ValueError, match="no fault.kill"):
        blocking_session(milvus_edu.simulate("lag-too-large", seed=1).events)


# ---- Incident 4 (#36960) ------------------------------------------------------------------------
def test_the_far_guarantee_is_refused_and_without_the_limit_it_would_wait(lag):
    refused = refused_read(lag)
    request = int(refused["request"])
    chain = milvus_edu.why(lag, read=request)   # the lab shows it: the refusal, then who sent the guarantee
    assert chain.question == f"Why was read {request} refused?" and "maxTimestampLag" in chain.links[0].text
    assert "the client sent that guarantee itself" in chain.root.text
    patient = milvus_edu.simulate("lag-too-large", seed=1,
                                  params={"query.max_timestamp_lag_ns": 2 * 86_400 * 10**9}).events
    mine = patient[patient.request == request]
    assert not (mine.kind == "client.read").any() and (mine.kind == "querynode.wait").any()
    assert not patient.error.fillna("").str.contains("lag too large").any()


def test_largest_waited_guarantee_check(lag):
    tsafe = int(refused_read(lag)["tick_ts"])
    limit = physical_time(tsafe) + 86_400_000
    want = compose_ts(limit, MAX_LOGICAL)
    assert check_largest_waited_guarantee(want, lag).ok
    assert "not the largest" in check_largest_waited_guarantee(compose_ts(limit, 0), lag).message
    assert "(24:00:01.300+7)" in check_largest_waited_guarantee(compose_ts(limit, 7), lag).message   # the answer's own
    assert "One millisecond too far" in check_largest_waited_guarantee(want + 1, lag).message
    assert "milliseconds" in check_largest_waited_guarantee(compose_ts(physical_time(tsafe) + 86_400_000_000, 0),
                                                              lag).message
    assert "refused" in check_largest_waited_guarantee(compose_ts(limit + 5000, 0), lag).message
    assert "larger guarantee" in check_largest_waited_guarantee(compose_ts(limit - 5000, 0), lag).message
    assert "too small" in check_largest_waited_guarantee(limit, lag).message
    # milliseconds added to the hybrid timestamp itself: a fraction of a second, not a day
    assert "physical part (`tick_ts >> 18`)" in check_largest_waited_guarantee(tsafe + 86_400_000, lag).message
    assert "float" in check_largest_waited_guarantee(float(want), lag).message
    assert not check_largest_waited_guarantee(None, lag).answered
    # the rule is waitTSafe's: one past the answer is refused by the model, the answer itself is not
    from milvus_edu.querynode.delegator import ShardDelegator, TsLagTooLargeError

    delegator = ShardDelegator("v0", start_ts=tsafe)
    with pytest.raises(TsLagTooLargeError):
        next(delegator.wait_tsafe(want + 1))
    assert next(delegator.wait_tsafe(want)) is not None  # it waits (yields) instead of refusing
