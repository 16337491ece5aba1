"""The session layer as Milvus 2.5 and etcd's client run it: keep-alive timing, liveness, panics, pauses."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from milvus_edu.mechanisms.tso.check import check_tso
from milvus_edu.config import MS, S, Config, TSOParams
from milvus_edu.events import MemorySink, Recorder, rows_to_frame
from milvus_edu.sessionutil import (
    FIRST_KEEP_ALIVE_TIMEOUT_NS,
    KeepAlive,
    Session,
    current_active,
    retry_do_sleeps,
)
from milvus_edu.sim import NodeClock, Simulation
from milvus_edu.cluster.rootcoord import RootCoordNode, TSOClient
from milvus_edu.mechanisms.tso.scenarios import PAUSE_AT_MS, PAUSE_FOR_MS, build_tso_pause
from milvus_edu.storage.kv import FaultyKV

T0 = 1_700_000_000_123_456_789
TTL = 60 * S
ACTIVE_KEY = "by-dev/meta/session/rootcoord"


# ---- etcd clientv3's keepAlive record ---------------------------------------------------------------
def test_fresh_keep_alive_is_due_at_once_then_ttl_over_3_after_each_answer():
    ka = KeepAlive(T0)
    assert ka.due(T0)  # the first keep-alive goes out as soon as KeepAlive is called
    assert ka.recv(TTL, T0 + 7 * MS)
    assert ka.next_keep_alive_ns == T0 + 7 * MS + TTL // 3
    assert ka.deadline_ns == T0 + 7 * MS + TTL
    assert not ka.due(T0 + 7 * MS + TTL // 3)  # nextKeepAlive.Before(now) is strict
    assert ka.due(T0 + 7 * MS + TTL // 3 + 1)


def test_unanswered_keep_alive_stays_due_on_every_send_loop_turn():
    ka = KeepAlive(T0)
    ka.recv(TTL, T0)
    for turn in range(1, 60):  # etcd unreachable: re-sent every 500 ms until answered
        assert ka.due(T0 + TTL // 3 + turn * 500 * MS)
    ka.recv(TTL, T0 + 50 * S)
    assert not ka.due(T0 + 50 * S + 500 * MS)


def test_answer_with_ttl_zero_closes_the_channel():
    """etcd answers TTL 0 for a lease it no longer knows (``LeaseServer.leaseKeepAlive``)."""
    ka = KeepAlive(T0)
    assert not ka.recv(0, T0)
    assert ka.closed and not ka.cancelled
    assert not ka.due(T0 + TTL)
    assert not ka.recv(TTL, T0 + 1)  # a closed record stays closed


def test_keep_alive_channel_closes_when_the_first_keep_alive_gets_no_answer():
    """Ports etcd's ``TestLeaseKeepAliveInitTimeout`` (tests/integration/clientv3/lease)."""
    ka = KeepAlive(T0)
    assert FIRST_KEEP_ALIVE_TIMEOUT_NS == 6 * S  # Milvus's etcd DialTimeout (5 s) + 1 s
    assert not ka.check_deadline(T0 + FIRST_KEEP_ALIVE_TIMEOUT_NS)
    assert ka.check_deadline(T0 + FIRST_KEEP_ALIVE_TIMEOUT_NS + 1)
    assert ka.closed
    assert not ka.check_deadline(T0 + FIRST_KEEP_ALIVE_TIMEOUT_NS + 2)  # closes once


def test_keep_alive_channel_closes_a_ttl_after_the_last_answer():
    """Ports etcd's ``TestLeaseKeepAliveTTLTimeout``: one answer, then silence for a whole TTL."""
    ka = KeepAlive(T0)
    ka.recv(TTL, T0 + S)
    assert not ka.check_deadline(T0 + S + TTL)
    assert ka.check_deadline(T0 + S + TTL + 1)


def test_retry_do_sleeps_double_up_to_the_max_and_follow_the_last_failure_too():
    assert list(retry_do_sleeps(3)) == [200 * MS, 400 * MS, 800 * MS]
    assert list(retry_do_sleeps(6)) == [200 * MS, 400 * MS, 800 * MS, 1600 * MS, 3 * S, 3 * S]
    with pytest.raises(ValueError, match="at least 1"):
        list(retry_do_sleeps(0))


# ---- Session over a KV ---------------------------------------------------------------------------
def session_on(kv, clock, name="rootcoord-1", server_id=1, sink=None):
    rec = Recorder("t", sinks=[sink]) if sink is not None else None
    extra = {"recorder": rec} if rec is not None else {}
    s = Session(kv, "rootcoord", server_id, name, now_ns=clock, **extra)
    s.register()
    return s


def drive(steps):
    """Run a step generator to the end; return (result, total ns slept)."""
    slept = 0
    try:
        wait = next(steps)
        while True:
            slept += wait.duration_ns
            wait = steps.send(None)
    except StopIteration as stop:
        return stop.value, slept


def test_send_keep_alive_renews_the_lease_a_ttl_from_the_answer(kv, clock):
    sink = MemorySink()
    s = session_on(kv, clock, sink=sink)
    clock.advance(20 * S)
    assert s.keep_alive.due(clock())
    assert s.send_keep_alive()
    assert kv.lease_expiry_ns(s.lease_id) == clock() + TTL
    assert s.keep_alive.next_keep_alive_ns == clock() + TTL // 3
    assert json.loads(sink.rows[-1]["detail"])["next_in_s"] == 20.0


def test_send_keep_alive_to_an_unreachable_etcd_changes_nothing_and_reports_once(kv, clock):
    sink = MemorySink()
    down = {"on": False}
    faulty = FaultyKV(kv, lambda op, key: down["on"])
    s = session_on(faulty, clock, sink=sink)
    s.send_keep_alive()
    expiry = kv.lease_expiry_ns(s.lease_id)
    down["on"] = True
    for _ in range(5):
        clock.advance(500 * MS)
        assert not s.send_keep_alive()
    assert kv.lease_expiry_ns(s.lease_id) == expiry
    assert not s.keep_alive.closed
    assert [r["kind"] for r in sink.rows].count("session.keepalive_failed") == 1
    down["on"] = False
    clock.advance(500 * MS)
    assert s.send_keep_alive()
    assert json.loads(sink.rows[-1]["detail"])["unanswered_before"] == 5


def test_send_keep_alive_for_an_expired_lease_closes_the_channel(kv, clock):
    s = session_on(kv, clock)
    clock.advance(TTL)
    assert not s.send_keep_alive()
    assert s.keep_alive.closed and s.live  # liveCh closes only after KeepAliveOnce fails


def test_channel_closed_by_etcd_retries_keep_alive_once_and_keeps_the_session(kv, clock):
    """Ports Milvus's ``TestKeepAliveRetryChannelClose``: a closed channel with a live lease recovers."""
    s = session_on(kv, clock)
    s.send_keep_alive()
    clock.advance(TTL // 2)
    s.keep_alive.recv(0, clock())  # the client closed the channel although etcd still has the lease
    old = s.keep_alive
    renewed, slept = drive(s.process_keep_alive_response_steps())
    assert renewed is True and slept == 0
    assert s.live
    assert s.keep_alive is not old and s.keep_alive.due(clock())  # a fresh KeepAlive, due at once
    assert kv.lease_expiry_ns(s.lease_id) == clock() + TTL


def test_cancelled_keep_alive_closes_live_ch_without_retrying(kv, clock):
    """Ports Milvus's ``TestKeepAliveRetryActiveCancel``: an active cancel does not reconnect."""
    s = session_on(kv, clock)
    s.cancel_keep_alive()
    renewed, slept = drive(s.process_keep_alive_response_steps())
    assert renewed is False and slept == 0
    assert not s.live


def test_keep_alive_once_on_a_gone_lease_fails_three_times_then_closes_live_ch(kv, clock):
    sink = MemorySink()
    s = session_on(kv, clock, sink=sink)
    clock.advance(TTL)
    s.send_keep_alive()
    renewed, slept = drive(s.process_keep_alive_response_steps())
    assert renewed is False
    assert slept == 1400 * MS  # retry.Do sleeps 200 + 400 + 800 ms, the last after the last failure
    assert not s.live and "KeepAliveOnce failed 3 times" in s.lost_reason
    attempts = [json.loads(r["detail"]).get("attempt") for r in sink.rows if r["kind"] == "session.keepalive_failed"]
    assert attempts == [None, 1, 2, 3]


def test_keep_alive_once_waits_out_its_10s_context_while_etcd_is_unreachable(kv, clock):
    down = {"on": False}
    s = session_on(FaultyKV(kv, lambda op, key: down["on"]), clock)
    down["on"] = True
    renewed, slept = drive(s.process_keep_alive_response_steps())
    assert renewed is False
    assert slept == 3 * 10 * S + 1400 * MS
    assert s.lost_reason.endswith("(context deadline exceeded)")


def test_keep_alive_once_recovers_when_etcd_comes_back_within_the_attempts(kv, clock):
    down = {"on": False}
    s = session_on(FaultyKV(kv, lambda op, key: down["on"]), clock)
    down["on"] = True
    steps = s.process_keep_alive_response_steps()
    slept = next(steps).duration_ns
    while slept < 12 * S:  # attempt 1 times out at 10 s, attempt 2 runs
        clock.advance(500 * MS)
        slept += steps.send(None).duration_ns
    down["on"] = False
    clock.advance(500 * MS)
    with pytest.raises(StopIteration) as stop:
        steps.send(None)
    assert stop.value.value is True
    assert s.live and kv.lease_expiry_ns(s.lease_id) == clock() + TTL


def test_safe_close_live_ch_twice_keeps_the_first_reason(kv, clock):
    """Ports Milvus's ``TestSafeCloseLiveCh``: closing twice does not panic."""
    s = session_on(kv, clock)
    s.close_live_ch("first")
    s.close_live_ch("second")
    assert not s.live and s.lost_reason == "first"


def test_liveness_watch_on_the_active_key_ends_the_old_active_and_frees_the_standby(kv, clock):
    """Ports Milvus's ``TestSessionProcessActiveStandBy`` and ``TestSessionLivenessCheck`` (DELETE case)."""
    s1 = session_on(kv, clock)
    s2 = session_on(kv, clock, "rootcoord-2", 2)
    assert s1.watched_key == ACTIVE_KEY == s1.active_key
    assert s1.try_activate() and not s2.try_activate()
    seen = []
    kv.watch(s1.watched_key, lambda ev, key: seen.append(ev) if key == s1.watched_key else None)
    kv.revoke(s1.lease_id)
    assert seen == ["delete"]
    s1.on_watched_key_deleted()
    assert not s1.live and s1.keep_alive.cancelled
    assert s1.lost_reason == f"its session key {ACTIVE_KEY} was deleted"
    assert s2.try_activate()
    assert current_active(kv, ACTIVE_KEY) == "rootcoord-2"


# ---- the simulated cluster ---------------------------------------------------------------------------
def cluster(ttl_s=60, seed=1, cut=None, clients=((1, 100.0), (10, 250.0))):
    """Two rootcoords (same clock) and clients. ``cut(sim)`` maps a rootcoord's number to the
    ``should_fail`` of its own connection to etcd (a :class:`FaultyKV`)."""
    sink = MemorySink()
    sim = Simulation(seed, Recorder("t", sinks=[sink]), Config(tso=TSOParams(session_ttl_ns=ttl_s * S)))
    faults = cut(sim) if cut else {}
    rcs = []
    for i in (1, 2):
        kv = FaultyKV(sim.kv, faults[i]) if i in faults else None
        node = RootCoordNode(sim, f"rootcoord-{i}", i, NodeClock(sim.env), kv=kv)
        sim.add(node)
        rcs.append(node)
    for i, (count, interval) in enumerate(clients):
        sim.add(TSOClient(sim, f"client-{i}", count=count, interval_ms=interval, jitter_ms=interval / 5))
    for node in sim.nodes.values():
        node.start()
    return sim, rcs, sink


def outage(sim, start_ms, end_ms):
    """A should_fail for FaultyKV: every etcd call fails during [start_ms, end_ms)."""
    return lambda op, key: start_ms <= sim.env.now < end_ms


def kinds(ev, kind, node=None):
    sel = ev[ev.kind == kind]
    return sel if node is None else sel[sel.node == node]


def test_keep_alive_period_is_ttl_over_3_after_each_answer_on_the_500ms_send_loop():
    for ttl_s, expected in ((60, [0.0, 20_500.0, 41_000.0, 61_500.0]), (3, [0.0, 1_500.0, 3_000.0, 4_500.0])):
        sim, _, sink = cluster(ttl_s=ttl_s, clients=())
        sim.run(expected[-1] + 1)
        ev = rows_to_frame(sink.rows)
        assert list(kinds(ev, "session.keepalive", "rootcoord-2").t_ms) == expected


def test_35s_etcd_outage_shorter_than_the_ttl_keeps_the_active_and_causes_no_failover():
    # every rootcoord loses etcd for 35 s
    sim, rcs, sink = cluster(cut=lambda sim: dict.fromkeys((1, 2), outage(sim, 15_000, 50_000)))
    sim.run(120_000)
    ev = rows_to_frame(sink.rows)
    assert list(kinds(ev, "session.active").node) == ["rootcoord-1"]
    assert kinds(ev, "session.exit").empty and kinds(ev, "session.lost").empty
    assert rcs[0].serving and rcs[0].alive and rcs[1].alive
    for name in ("rootcoord-1", "rootcoord-2"):
        back = kinds(ev, "session.keepalive", name)
        back = back[back.t_ms >= 15_000].iloc[0]
        assert back.t_ms == 50_000.0  # the first re-send after the outage, 500 ms grid
        assert json.loads(back.detail)["unanswered_before"] == 59  # 20.5 s .. 49.5 s, every 500 ms
    later = kinds(ev, "client.recv")
    assert (later[later.t_ms > 50_000].peer == "rootcoord-1").all() and len(later[later.t_ms > 50_000]) > 0
    assert check_tso(ev) == []


def test_65s_partition_of_the_active_expires_its_lease_and_the_standby_takes_over():
    sim, rcs, sink = cluster(cut=lambda sim: {1: outage(sim, 45_000, 110_000)})
    sim.run(130_000)
    ev = rows_to_frame(sink.rows)
    # last answer at 41.0 s: etcd deletes the ACTIVE key at 101.0 s and rootcoord-2 claims it at once
    assert list(kinds(ev, "session.lost").t_ms) == [101_000.0, 101_000.0]
    assert list(kinds(ev, "session.active")[["node", "t_ms"]].itertuples(index=False)) == [
        ("rootcoord-1", 0.0), ("rootcoord-2", 101_000.0)]
    # the partitioned old active hears of the deletion only when it reaches etcd again, and exits then
    exit_row = kinds(ev, "session.exit").iloc[0]
    assert (exit_row.node, exit_row.t_ms) == ("rootcoord-1", 110_000.0)
    assert "was deleted" in json.loads(exit_row.detail)["reason"]
    # meanwhile it kept answering from its stalled window: two actives for 9 s
    dual = kinds(ev, "rootcoord.alloc_timestamp", "rootcoord-1")
    assert dual.t_ms.between(101_000.0, 110_000.0).sum() > 0
    assert dual.t_ms.max() < 110_000.0
    assert rcs[1].serving and not rcs[0].alive


def test_active_exits_at_once_when_its_active_key_is_deleted():
    sim, rcs, sink = cluster()
    sim.at(5_000.0, lambda: sim.kv.remove(ACTIVE_KEY))
    sim.run(8_000)
    ev = rows_to_frame(sink.rows)
    exit_row = kinds(ev, "session.exit").iloc[0]
    assert (exit_row.node, exit_row.t_ms) == ("rootcoord-1", 5_000.0)
    assert json.loads(exit_row.detail)["how"] == "os.Exit(1)"
    assert kinds(ev, "tso.update", "rootcoord-1").t_ms.max() < 5_000.0
    assert kinds(ev, "rootcoord.alloc_timestamp", "rootcoord-1").t_ms.max() < 5_000.0
    assert list(kinds(ev, "session.active").t_ms) == [0.0, 5_000.0]
    assert not rcs[0].alive and rcs[1].serving


def test_failed_activation_panics_and_leaves_the_active_key_to_its_lease():
    timestamp_key = "by-dev/kv/gid/timestamp"
    sim, rcs, sink = cluster(cut=lambda sim: {1: lambda op, key: op == "save" and key == timestamp_key})
    held = []
    sim.at(59_900.0, lambda: held.append(current_active(sim.kv, ACTIVE_KEY)))
    sim.run(61_000)
    ev = rows_to_frame(sink.rows)
    exit_row = kinds(ev, "session.exit").iloc[0]
    assert (exit_row.node, exit_row.t_ms) == ("rootcoord-1", 0.0)
    assert json.loads(exit_row.detail)["how"] == "panic"
    assert len(kinds(ev, "tso.save_failed", "rootcoord-1")) == 1  # no retry loop while holding the key
    assert held == ["rootcoord-1"]  # the dead process's lease still holds the ACTIVE key
    assert list(kinds(ev, "session.active")[["node", "t_ms"]].itertuples(index=False)) == [
        ("rootcoord-1", 0.0), ("rootcoord-2", 60_000.0)]


def test_short_pause_freezes_everything_then_the_node_carries_on():
    sim, rcs, sink = cluster()
    sim.at(5_000.0, lambda: rcs[0].pause(2_000.0))
    sim.run(9_000)
    ev = rows_to_frame(sink.rows)
    assert list(kinds(ev, "fault.pause").t_ms) == [5_000.0]
    assert list(kinds(ev, "fault.resume").t_ms) == [7_000.0]
    assert ev[(ev.node == "rootcoord-1") & (ev.t_ms > 5_000.0) & (ev.t_ms < 7_000.0)].empty
    first = kinds(ev, "tso.update", "rootcoord-1")
    first = first[first.t_ms >= 7_000.0].iloc[0]
    assert first.t_ms == 7_000.0 and json.loads(first.detail)["jet_lag_ms"] == 2_050.0
    assert kinds(ev, "session.exit").empty and rcs[0].serving
    assert check_tso(ev) == []


def test_pause_rejects_a_non_positive_duration_a_second_pause_and_a_dead_node():
    sim, rcs, _ = cluster(clients=())
    with pytest.raises(ValueError, match="must be positive"):
        rcs[0].pause(0)
    rcs[0].pause(10.0)
    with pytest.raises(ValueError, match="already paused"):
        rcs[0].pause(10.0)
    rcs[1].kill()
    with pytest.raises(ValueError, match="not running"):
        rcs[1].pause(10.0)
    with pytest.raises(ValueError, match="deadline_ms must be positive"):
        TSOClient(sim, "client-x", deadline_ms=0)


def test_keep_alive_calls_before_register_say_to_register_first(kv, clock):
    s = Session(kv, "rootcoord", 1, "rootcoord-1", now_ns=clock)
    with pytest.raises(ValueError, match="call register"):
        s.send_keep_alive()
    with pytest.raises(ValueError, match="call register"):
        s.check_deadline()


def test_standby_whose_lease_expired_never_takes_over_and_never_exits():
    """2.5 quirk: only an active runs LivenessCheck, so a standby that lost its lease keeps retrying the
    ACTIVE-key transaction (which fails: its lease is gone) every 100 ms, forever."""
    sim, rcs, sink = cluster(cut=lambda sim: {2: outage(sim, 5_000, 70_000)})
    sim.at(80_000.0, rcs[0].kill)
    sim.run(130_000)
    ev = rows_to_frame(sink.rows)
    assert list(kinds(ev, "session.active").node) == ["rootcoord-1"]
    assert kinds(ev, "session.exit").empty and rcs[1].alive and not rcs[1].serving
    assert not rcs[1].session.live
    assert current_active(sim.kv, ACTIVE_KEY) is None
    errors = kinds(ev, "client.error")
    late = errors[errors.t_ms > 122_000]
    assert len(late) > 0 and (late.error == "no active rootcoord in the session registry").all()


def pause_run(seed):
    sink = MemorySink()
    sim = Simulation(seed, Recorder("t", sinks=[sink]))
    build_tso_pause(sim)
    sim.run(110_000)
    return rows_to_frame(sink.rows)


def test_tso_pause_resumed_old_active_saves_over_the_new_one_and_hands_out_before_exiting():
    ev = pause_run(1)
    resume = PAUSE_AT_MS + PAUSE_FOR_MS
    assert list(kinds(ev, "session.active")[["node", "t_ms"]].itertuples(index=False)) == [
        ("rootcoord-1", 0.0), ("rootcoord-2", 80_500.0)]  # last answer 20.5 s + 60 s TTL
    saves = kinds(ev, "tso.save")
    old_save = saves[(saves.node == "rootcoord-1") & (saves.t_ms == resume)]
    assert len(old_save) == 1  # a plain Save, accepted although rootcoord-1's lease is long gone
    assert saves[saves.t_ms < resume].iloc[-1].node == "rootcoord-2"  # ... written over rootcoord-2's window
    late = kinds(ev, "rootcoord.alloc_timestamp", "rootcoord-1")
    assert (late.t_ms == resume).sum() == 61  # the calls that queued up during the pause
    exit_row = kinds(ev, "session.exit").iloc[0]
    assert (exit_row.node, exit_row.t_ms) == ("rootcoord-1", resume)
    assert exit_row.seq > late.seq.max() and exit_row.seq > old_save.seq.max()
    # no client waited that long (1 s deadline), so none received the stale answers
    recv = kinds(ev, "client.recv")
    assert not ((recv.peer == "rootcoord-1") & (recv.t_ms >= PAUSE_AT_MS)).any()
    assert (kinds(ev, "client.error").error == "context deadline exceeded").any()


def test_tso_pause_can_hand_out_the_same_timestamps_from_both_actives():
    ev = pause_run(3)
    violations = check_tso(ev)
    assert [v.invariant for v in violations] == ["global-monotonic"]
    first, second = (ev[ev.seq == s].iloc[0] for s in violations[0].seqs)
    assert (first.node, second.node) == ("rootcoord-1", "rootcoord-2")
    assert second.ts <= first.ts + first["count"] - 1  # rootcoord-2 reuses rootcoord-1's physical ms


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(start_s=st.floats(1.0, 40.0), length_s=st.floats(0.5, 38.0))
def test_any_etcd_outage_shorter_than_ttl_minus_period_keeps_the_active(start_s, length_s):
    """Worst case: the outage starts just before a keep-alive falls due (20.5 s after the last answer),
    and the first re-send after it lands at most 500 ms later: survival needs length < 60 - 20.5 - 0.5 s."""
    end_s = start_s + length_s
    sim, rcs, sink = cluster(clients=((1, 400.0),),
                             cut=lambda sim: dict.fromkeys((1, 2), outage(sim, start_s * 1000, end_s * 1000)))
    sim.run(end_s * 1000 + 61_000)
    ev = rows_to_frame(sink.rows)
    assert list(kinds(ev, "session.active").node) == ["rootcoord-1"]
    assert kinds(ev, "session.exit").empty
    assert check_tso(ev) == []


@pytest.mark.slow
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(start_s=st.floats(1.0, 40.0), extra_s=st.floats(0.5, 30.0), seed=st.integers(0, 1000))
def test_any_partition_of_the_active_longer_than_the_ttl_fails_over(start_s, extra_s, seed):
    end_s = start_s + 60 + extra_s
    sim, rcs, sink = cluster(seed=seed, clients=((1, 400.0),),
                             cut=lambda sim: {1: outage(sim, start_s * 1000, end_s * 1000)})
    sim.run(end_s * 1000 + 5_000)
    ev = rows_to_frame(sink.rows)
    assert list(kinds(ev, "session.active").node) == ["rootcoord-1", "rootcoord-2"]
    assert list(kinds(ev, "session.exit").node) == ["rootcoord-1"]
    assert check_tso(ev) == []
