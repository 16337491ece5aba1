"""Scenarios end to end: what the run log must show, and that checkers catch every bug switch."""

import json

import pandas as pd
import pytest

import milvus_edu
from milvus_edu.mechanisms.tso.check import check_tso
from milvus_edu.config import BugSwitches
from milvus_edu.narrate import describe


@pytest.fixture(scope="module")
def failover():
    return milvus_edu.simulate("tso-failover", seed=1)


def test_failover_client_timestamps_strictly_increase_across_the_failover(failover):
    ev = failover.events
    recv = ev[ev.kind == "client.recv"]
    kill_t = float(ev[ev.kind == "fault.kill"].t_ms.iloc[0])
    before, after = recv[recv.t_ms < kill_t], recv[recv.t_ms > kill_t]
    assert len(before) > 50 and len(after) > 50
    assert set(after.peer) == {"rootcoord-2"} and set(before.peer) == {"rootcoord-1"}
    # every answer after the failover is above every answer before it
    last_before = max(int(t) + int(c) - 1 for t, c in zip(before.ts, before["count"]))
    assert min(int(t) for t in after.ts) > last_before
    for _, rows in recv.groupby("node"):
        ts = [int(t) for t in rows.ts]
        assert all(b > a for a, b in zip(ts, ts[1:]))
    assert failover.summary["checks"]["ok"]


def test_failover_log_shows_window_saves_and_the_takeover(failover):
    ev = failover.events
    saves = ev[ev.kind == "tso.save"]
    assert set(saves.node) == {"rootcoord-1", "rootcoord-2"}
    assert list(ev[ev.kind == "session.active"].node) == ["rootcoord-1", "rootcoord-2"]
    lost = ev[ev.kind == "session.lost"]
    assert any("by-dev/meta/session/rootcoord\"" in d for d in lost.detail)
    # the standby's clock is 75 s behind, so it must start one guard past the saved window
    init2 = ev[(ev.kind == "tso.init") & (ev.node == "rootcoord-2")].iloc[0]
    detail = json.loads(init2.detail)
    assert detail["started_after_window"] is True
    assert int(init2.physical_ms) == detail["loaded_window_end_ms"] + 1
    assert int(init2.clock_ms) < int(init2.physical_ms) - 20_000  # its clock reads 15 s before the epoch
    f = failover.summary["failover"]
    # the 60 s lease granted at t=0 was never renewed (first keep-alive due at 20 s)
    assert f["killed_at_ms"] == 10_000 and f["new_active_at_ms"] == pytest.approx(60_000, abs=500)


def test_basics_window_is_resaved_three_seconds_ahead():
    ev = milvus_edu.simulate("tso-basics", seed=3).events
    saves = ev[ev.kind == "tso.save"]
    assert len(saves) == 4  # at 0, 3, 6, 9 s of a 10 s run
    ends = [int(x) for x in saves.window_end_ms]
    assert all(b - a == pytest.approx(3000, abs=60) for a, b in zip(ends, ends[1:]))
    allocs = ev[ev.kind == "tso.alloc"]
    assert (allocs.physical_ms < allocs.window_end_ms).all()


def test_clock_skew_freezes_physical_and_steps_by_logical_half():
    ev = milvus_edu.simulate("tso-clock-skew", seed=1).events
    updates = ev[ev.kind == "tso.update"]
    reasons = [json.loads(d)["reason"] for d in updates.detail]
    assert "logical_half" in reasons  # the clock stepped back: only the logical rule moves physical
    phys = [int(p) for p in ev[ev.kind == "tso.alloc"].physical_ms]
    assert all(b >= a for a, b in zip(phys, phys[1:]))
    assert check_tso(ev) == []


SWITCH_CASES = [
    ("tso-failover", "tso_skip_load_on_init", "global-monotonic"),
    ("tso-failover", "tso_no_window_save", "global-monotonic"),
    ("tso-basics", "tso_no_window_save", "window"),
    ("timetick-unlocked-enqueue", "allocate_outside_enqueue_lock", "watermark"),
    # alone, >= changes no answer in 2.5 (quirk P23): it shows with the design documents' older GetCheckpoint
    ("flush-ts-slow-store", ("reset_flush_ts_inclusive", "checkpoint_ignores_syncing_segments"), "flush-durable"),
    ("checkpoint-during-sync", "checkpoint_ignores_syncing_segments", "checkpoint-safe"),
    ("datanode-crash-recovery", "skip_recovery_filter", "durable"),
    ("checkpoint-rpc-lost", "drop_failed_checkpoint_tasks", "checkpoint-retried"),
    ("seed-example", "skip_wait_tsafe", "read-after-guarantee"),
    ("delete-then-read", "update_tsafe_before_delete", "mvcc-exact"),
    ("insert-delete-reorder", "delete_ignores_timestamps", "mvcc-exact"),
    ("insert-then-search", "session_uses_zero_ts", "session-sees-own"),
]


@pytest.mark.parametrize("scenario,switch,invariant", SWITCH_CASES)
def test_checkers_catch_every_bug_switch(scenario, switch, invariant):
    switches = list(switch) if isinstance(switch, tuple) else [switch]
    run = milvus_edu.simulate(scenario, seed=1, switches=switches)
    assert not run.summary["checks"]["ok"]
    assert invariant in {v["invariant"] for v in run.violations}
    assert run.summary["switches"] == switches
    first = run.violations[0]["explanation"]
    assert first.startswith("Let ") and " Then " in first and "because" in first


def test_every_switch_is_exercised_by_some_test():
    named = {s for _, switch, _ in SWITCH_CASES for s in (switch if isinstance(switch, tuple) else (switch,))}
    assert set(BugSwitches.names()) == named


def test_lossy_network_still_gives_increasing_timestamps():
    from milvus_edu.sim import NetworkParams

    run = milvus_edu.simulate("tso-failover", seed=4, network=NetworkParams(drop_prob=0.1, timeout_ms=300))
    assert run.summary["events_by_kind"]["rpc.drop"] > 10
    assert run.summary["checks"]["ok"]


def test_api_validates_arguments_with_clear_value_errors():
    with pytest.raises(ValueError, match="unknown scenario 'nope'"):
        milvus_edu.simulate("nope")
    with pytest.raises(ValueError, match="seed"):
        milvus_edu.simulate("tso-basics", seed=1.5)
    with pytest.raises(ValueError, match="duration"):
        milvus_edu.simulate("tso-basics", duration_s=0)
    run = milvus_edu.simulate("tso-failover", seed=1, duration_s=15, switches="tso_skip_load_on_init")
    assert run.summary["switches"] == ["tso_skip_load_on_init"]
    assert "RunResult(run_id='tso-failover-s1+tso_skip_load_on_init'" in repr(run)


def test_unkept_events_are_read_back_from_the_run_folder(tmp_path):
    kept = milvus_edu.simulate("tso-basics", seed=2, duration_s=3)
    streamed = milvus_edu.simulate("tso-basics", seed=2, duration_s=3, out_dir=tmp_path / "r", keep_events=False)
    assert streamed.rows == [] and streamed.events.equals(kept.events)
    assert streamed.summary["tso"] == kept.summary["tso"]
    with pytest.raises(ValueError, match="kept no events"):
        milvus_edu.simulate("tso-basics", seed=2, duration_s=3, keep_events=False).events


def test_progress_is_reported_up_to_the_full_duration():
    seen = []
    milvus_edu.simulate("tso-basics", seed=1, duration_s=4, progress=lambda done, total: seen.append((done, total)))
    assert seen[-1] == (4, 4) and len(seen) >= 10
    assert all(b[0] >= a[0] for a, b in zip(seen, seen[1:]))


def test_streaming_summary_equals_a_recount_from_the_log():
    run = milvus_edu.simulate("tso-failover", seed=3)
    ev = run.events
    allocs = ev[(ev.kind == "rootcoord.alloc_timestamp") & ev.error.isna()]
    assert run.summary["tso"]["allocations"] == len(allocs)
    assert run.summary["tso"]["timestamps_handed_out"] == int(allocs["count"].sum())
    assert run.summary["tso"]["last_ts"] == int(allocs.ts.iloc[-1]) + int(allocs["count"].iloc[-1]) - 1
    assert run.summary["checks"]["violation_counts"] == {"global-monotonic": 0, "client-monotonic": 0, "window": 0}


def test_narration_says_when_a_bug_switch_ignored_the_saved_window():
    from milvus_edu.narrate import describe

    ev = milvus_edu.simulate("tso-failover", seed=1, switches=["tso_skip_load_on_init"]).events
    init2 = ev[(ev.kind == "tso.init") & (ev.node == "rootcoord-2")].iloc[0].to_dict()
    text = describe(init2)
    assert "ignoring the saved window end 00:00:12.000" in text and "tso_skip_load_on_init" in text
    assert "-00:00:15.000" in text  # its clock is before the run's time zero, printed signed


def test_one_way_draws_the_fixed_latency_plus_expovariate_from_the_sources_own_stream():
    """``Simulation.one_way``: each source draws from its own named stream, so adding RPCs from one node never
    moves another node's latencies."""
    import random as _random

    from milvus_edu.events import NULL_RECORDER
    from milvus_edu.sim.kernel import NetworkParams, Simulation

    for jitter in (0.3, 1.0, 7.25):
        sim = Simulation(4, NULL_RECORDER, network=NetworkParams(latency_ms=0.5, jitter_ms=jitter))
        twin = _random.Random("4/net/proxy-1")
        for _ in range(500):
            assert sim.one_way("proxy-1") == 0.5 + twin.expovariate(1.0 / jitter)


def test_alloc_timestamp_that_must_wait_for_the_next_window_still_answers_in_order():
    """``handle_alloc_timestamp`` answers an allocation that needs no sleep at once, and returns the steps of
    one that does (the logical space of the window is used up), which the RPC drives on the node: both answer,
    the second after ``UpdateTimestamp`` moved the window on, and never below the first."""
    from milvus_edu.config import MS
    from milvus_edu.events import MemorySink, Recorder
    from milvus_edu.sim import NetworkParams, NodeClock, Simulation
    from milvus_edu.cluster.rootcoord import RootCoordNode

    sink = MemorySink()
    sim = Simulation(3, Recorder("alloc-wait", sinks=[sink]), network=NetworkParams(latency_ms=0.0, jitter_ms=0.0))
    rc = RootCoordNode(sim, "rootcoord-1", 1, NodeClock(sim.env))
    sim.add(rc)
    rc.start()
    answers = []

    def client():
        while not rc.serving:
            yield sim.env.timeout(10)
        for _ in range(2):  # 2 x 200,000 > 2**18 logical values of one window
            asked = sim.env.now
            first, count = yield from sim.call("client", rc.name, lambda: rc.handle_alloc_timestamp(200_000, "client"))
            answers.append((asked, sim.env.now, first, count))

    sim.env.process(client())
    sim.run(2_000)
    (asked1, done1, first1, n1), (asked2, done2, first2, n2) = answers
    assert done1 == asked1  # no sleep: answered at once
    assert done2 - asked2 >= sim.config.tso.update_timestamp_step_ns / MS  # waited a tsLoop step at least
    assert first2 > first1 + n1 - 1
    retries = [r for r in sink.rows if r["kind"] == "tso.alloc_retry"]
    assert retries and all("logical" in r["error"] for r in retries)


@pytest.fixture(scope="module")
def overflow():
    return milvus_edu.simulate("tso-logical-overflow", seed=1)


def test_overflow_refuses_past_max_logical_and_the_retry_answers_above_everything_before(overflow):
    """GenerateTSO refuses a batch that takes logical past 2^18 - 1, sleeps one tsLoop period, and the retry is
    answered from a later physical value, above every timestamp handed out before it."""
    ev = overflow.events
    refused = ev[ev.kind == "tso.alloc_retry"]
    assert len(refused) > 10 and (refused.logical >= 2**18).all()
    assert set(refused.error) == {"logical part outside of max logical interval"}
    allocs = ev[ev.kind == "tso.alloc"]
    assert allocs.logical.max() < 2**18
    for _, r in refused.head(5).iterrows():
        after = allocs[(allocs.seq > r.seq) & (allocs["count"] == r["count"])].iloc[0]
        assert after.t_ms - r.t_ms >= 50.0 - 1e-9  # waited UpdateTimestampStep
        assert after.physical_ms > r.physical_ms
    assert overflow.summary["checks"]["ok"]


def test_overflow_clients_are_refused_while_rootcoord_activates_then_served(overflow):
    ev = overflow.events
    active_t = float(ev[ev.kind == "session.active"].t_ms.iloc[0])
    errors = ev[ev.kind == "client.error"]
    assert set(errors.error) == {"service not ready[rootcoord=1]: Initializing"}
    assert (errors.t_ms > active_t).all() and (errors.t_ms < active_t + 300.0).all()
    first_answer = float(ev[ev.kind == "rootcoord.alloc_timestamp"].t_ms.min())
    assert first_answer >= active_t + 300.0
    for client in errors.node:  # each refused client asked again and was served
        assert len(ev[(ev.kind == "client.recv") & (ev.node == client)])


def test_overflow_scenario_options_are_checked():
    with pytest.raises(ValueError, match="option batch"):
        milvus_edu.simulate("tso-logical-overflow", seed=1, duration_s=1, options={"batch": 1 << 18})
    with pytest.raises(ValueError, match="activate_ms"):
        milvus_edu.simulate("tso-logical-overflow", seed=1, duration_s=1, options={"activate_ms": -1})


def test_small_batches_never_overflow():
    run = milvus_edu.simulate("tso-logical-overflow", seed=1, duration_s=2, options={"batch": 1000})
    assert not (run.events.kind == "tso.alloc_retry").any()


def test_a_standby_refuses_alloc_timestamp_as_not_ready():
    """AllocTimestamp's CheckHealthy: a rootcoord that is not Healthy answers ServiceNotReady with its state."""
    from milvus_edu.events import Recorder
    from milvus_edu.sim import NodeClock, Simulation
    from milvus_edu.sim.kernel import RPCError
    from milvus_edu.cluster.rootcoord import RootCoordNode

    sim = Simulation(1, Recorder("standby"))
    rcs = [RootCoordNode(sim, f"rootcoord-{i}", i, NodeClock(sim.env)) for i in (1, 2)]
    for rc in rcs:
        sim.add(rc)
        rc.start()
    answers = []

    def client():
        yield sim.env.timeout(100)
        for rc in rcs:
            try:
                answers.append((yield from sim.call("c", rc.name, lambda rc=rc: rc.handle_alloc_timestamp(1, "c"))))
            except RPCError as exc:
                answers.append(str(exc))

    sim.env.process(client())
    sim.run(500)
    assert isinstance(answers[0], tuple)
    assert answers[1] == "service not ready[rootcoord=2]: StandBy"
    with pytest.raises(ValueError, match="activate_ms"):
        RootCoordNode(sim, "rootcoord-3", 3, NodeClock(sim.env), activate_ms=-5)


def test_timeline_shows_the_first_overflow_and_counts_the_rest(overflow):
    from milvus_edu.mechanisms.tso.summary import KeyEvents

    keys = KeyEvents()
    shown = [row for row in overflow.rows if keys.show(row)]
    retries = [row for row in shown if row["kind"] == "tso.alloc_retry"]
    assert len(retries) == 1
    refused = int((overflow.events.kind == "tso.alloc_retry").sum())
    assert f"({refused} GenerateTSO retries in all: logical part outside of max logical interval)" in keys.notes()


@pytest.mark.parametrize("scenario", ["flush-manual", "tsafe-stall-proxy-restart", "tso-failover"])
def test_an_event_reads_the_same_in_words_from_a_dict_a_series_or_a_tuple(scenario):
    """``describe`` is called on dicts (the CLI's timeline), pandas Series (``iterrows``: the why chains) and
    ``itertuples`` rows (the stepper): the words must not depend on the form. A Series' ``count`` attribute is
    its method, so a describer that read it as an attribute printed the method for a client flush."""
    events = milvus_edu.simulate(scenario, seed=1, duration_s=14).events
    for kind, rows in events.groupby(events["kind"].astype(str)):
        for (_, series), row in zip(rows.head(3).iterrows(), rows.head(3).itertuples(index=False)):
            as_dict = {k: (None if pd.isna(v) else v) for k, v in series.items()}
            assert describe(series) == describe(as_dict) == describe(row), kind
            assert "bound method" not in describe(series), kind
