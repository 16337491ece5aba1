"""Random workloads x random crashes: whatever the DataNode lost, the binlogs end with every acknowledged row
exactly once and every acknowledged delete, and every flush checker passes.

Hypothesis draws the workload (insert and delete rates, how long the client writes), the faults (a crash at a
random simulated time or at a random step boundary, a restart delay, a DataCoord RPC failure rate, a slow object
store) and the seed; the checkers read the run log and the audit reads the Parquet binlogs back. The seed sweep
runs every flush scenario, shortened, on 10 seeds no other test uses.
"""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import milvus_edu
from milvus_edu.datanode.syncmgr.meta_writer import RetryConfig
from milvus_edu.narrate import detail_dict
from milvus_edu.registry import get_mechanism

SETTLE_S = 40.0  # after the last fault: the final flush (serial syncs, up to 1.5 s a write), its polls, the audit
S = 1_000_000_000
# A flush in flight when the DataNode dies completes only once the restarted node's stale-buffer policy syncs the
# replayed rows of its sealed segments (DataCoord flushes a sealed segment only when it has rows in binlogs): after
# dataNode.segment.syncPeriod, 600 s by default. And a flush retried across a crash may land after a newer one and
# put the older flushTs back (FlushChannel just stores it, book quirk P32); the newer flush then waits for the next
# periodic checkpoint, 60 s of message time (updateChannelCheckpointInterval). Both cut to 5 s so examples stay short.
PARAMS = {"datanode.sync_period_ns": 5 * S, "datanode.update_channel_checkpoint_interval_ns": 5 * S}


@st.composite
def workloads(draw):
    """A small random workload and one random crash (by time or by step), with random RPC and storage faults."""
    workload_s = draw(st.floats(2.0, 16.0))  # the scenarios flush at 10 s (crash) or 12 s (manual)
    options = {
        "inserts_per_s": draw(st.sampled_from([10.0, 40.0, 120.0])),
        "deletes_per_s": draw(st.sampled_from([0.0, 2.0, 6.0])),
        "workload_s": workload_s,
        "rpc_failure_rate": draw(st.sampled_from([0.0, 0.0, 0.2, 0.4])),
        "store_latency_ms": draw(st.sampled_from([1.0, 5.0, 200.0, 1500.0])),
        "restart_after_s": draw(st.floats(0.1, 4.0)),
    }
    if draw(st.booleans()):
        options.update(crash_at_s=draw(st.floats(0.3, workload_s + 3.0)), crash_step=0)
    else:
        options.update(crash_at_s=0.0, crash_step=draw(st.integers(1, 120)))
    flush_scenario = draw(st.sampled_from(["datanode-crash-recovery", "flush-manual"]))
    return flush_scenario, draw(st.integers(0, 2**31 - 1)), options


#: A workload in which DataCoord fails one sync's SaveBinlogPaths on every one of its 10 attempts (40% of calls fail,
#: so about one sync in 10,000): the sync gives up and the DataNode panics, for good (the scenario restarts it only
#: after its own crash). Hypothesis found it on a suite run of 2026-11-27; kept as an example so the branch always runs.
SYNC_GAVE_UP = ("datanode-crash-recovery", 448,
                {"inserts_per_s": 10.0, "deletes_per_s": 6.0, "workload_s": 2.0, "rpc_failure_rate": 0.4,
                 "store_latency_ms": 1.0, "restart_after_s": 1.0, "crash_at_s": 1.0, "crash_step": 0})


def _sync_that_gave_up(events, why: str) -> int:
    """The segment whose sync made the DataNode panic (``why``, the kill's reason), after checking that its
    SaveBinlogPaths failed on every attempt the retry allows since the sync was cut, and the sync then failed."""
    segment = int(why.split("sync of segment ")[1].split()[0])
    assert why.startswith(f"panic: sync of segment {segment} failed: SaveBinlogPaths failed"), why
    of_segment = events[events["segment"] == segment]
    cut = of_segment[of_segment["kind"] == "datanode.sync"].index[-1]
    saves = of_segment[(of_segment["kind"] == "datacoord.save_binlog_paths") & (of_segment.index > cut)]
    assert len(saves) == RetryConfig().attempts and saves["error"].notna().all()
    done = of_segment[(of_segment["kind"] == "datanode.sync_done") & (of_segment.index > cut)]
    assert len(done) == 1 and done["error"].notna().all()
    return segment


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@example(SYNC_GAVE_UP)
@given(workloads())
def test_random_workloads_and_crashes_lose_nothing_and_repeat_nothing(case):
    scenario, seed, options = case
    duration = options["workload_s"] + options["crash_at_s"] + options["restart_after_s"] + SETTLE_S
    run = milvus_edu.simulate(scenario, seed=seed, options=options, duration_s=duration, params=PARAMS)
    f, events = run.summary["flush"], run.events
    assert run.summary["checks"]["ok"], run.violations[:2]
    kills = [detail_dict(d).get("why", "") for d in events.loc[events["kind"] == "fault.kill", "detail"]]
    panics = [why for why in kills if why.startswith("panic: ")]
    scheduled = 1 if options["crash_at_s"] and options["crash_at_s"] < options["workload_s"] + 0.5 else None
    if panics:
        # A sync whose every SaveBinlogPaths attempt failed: Go's error handler panics, and nothing restarts the node
        # after it, so no final flush completes and nothing is audited; the checkers still pass (a flush waits for a
        # dead node, and the run ends within its bound of the panic)
        assert len(panics) == 1 and _sync_that_gave_up(events, panics[0])
        assert not f["audited"] and f["flushes_completed"] < f["flushes"]
        if scheduled:
            assert f["datanode_crashes"] == 2 and f["datanode_restarts"] == 1
        return
    assert f["audited"], "the final flush never completed, so nothing was audited"
    assert f["audit_rows"] == f["acknowledged_rows"]
    assert f["audit_deleted_keys"] >= f["acknowledged_deletes"]
    if scheduled:
        assert f["datanode_crashes"] == 1 and f["datanode_restarts"] == 1


SWEEP_SEEDS = range(2000, 2010)  # 10 seeds none of the other tests use (benchmarks/reliability.py sweeps more)
# A crash scenario whose crash lands while the flush's syncs are in flight needs the stale-buffer sync (above).
CRASH_PARAMS = {"params": PARAMS}
SHORT = {"inserts_per_s": 60.0, "deletes_per_s": 3.0}
SWEEP = {
    "flush-basics": dict(duration_s=20.0, options={**SHORT, "workload_s": 5.0}),
    "flush-manual": dict(duration_s=30.0, options={**SHORT, "workload_s": 14.0}),
    "checkpoint-rpc-failures": dict(duration_s=30.0, options={**SHORT, "workload_s": 12.0}),
    "datanode-crash-recovery": dict(duration_s=30.0, options={**SHORT, "workload_s": 8.0, "crash_at_s": 5.0,
                                                              "restart_after_s": 1.0}, **CRASH_PARAMS),
    "datanode-takeover": dict(duration_s=40.0, options={**SHORT, "workload_s": 8.0, "crash_at_s": 5.0},
                              params={**PARAMS, "tso.session_ttl_ns": 6 * S}),
    "checkpoint-during-sync": dict(duration_s=70.0,  # 3 s per object-store write
                                   options={**SHORT, "workload_s": 12.0}, **CRASH_PARAMS),
    "checkpoint-rpc-lost": dict(duration_s=30.0, options={**SHORT, "workload_s": 12.0}),
    "flush-ts-boundary": dict(duration_s=30.0, options={"inserts_per_s": 20.0, "workload_s": 12.0}),
    "flush-ts-slow-store": dict(duration_s=40.0, options={"workload_s": 12.0}),  # 1 s per object-store write
    "flush-sync-policies": dict(duration_s=25.0, options={"workload_s": 10.0}),
    "checkpoint-many-vchannels": dict(duration_s=25.0, options={"vchannels": 140, "workload_s": 8.0}),
    "flush-drop-collection": dict(duration_s=30.0, options={"drop_at_s": 10.0, "workload_s": 12.0}),
    "flush-stuck-memory-sync": dict(duration_s=70.0, options={"workload_s": 12.0}),
}
#: The scenarios whose gap (a hole in Milvus itself) breaks these invariants, at every seed.
GAP_BREAKS = {"flush-stuck-memory-sync": {"flush-completes"}}
#: The scenarios with no final audit: the dropped collection's segments are Dropped, the stuck flush never ends.
NO_AUDIT = {"flush-drop-collection", "flush-stuck-memory-sync"}


def _sweep_run(job):
    scenario, seed = job
    run = milvus_edu.simulate(scenario, seed=seed, keep_events=False, **SWEEP[scenario])
    f = run.summary["flush"]
    broken = {name for name, n in run.summary["checks"]["violation_counts"].items() if n}
    return (scenario, seed, broken, run.summary["checks"]["violations"][:1],
            f["audited"] and f["audit_rows"] == f["acknowledged_rows"] > 0)


def test_the_sweep_covers_every_flush_scenario():
    assert set(SWEEP) == {s.name for s in get_mechanism("flush").scenarios}


@pytest.mark.slow
def test_10_seeds_of_every_flush_scenario_pass_every_checker():
    jobs = [(scenario, seed) for scenario in SWEEP for seed in SWEEP_SEEDS]
    with ProcessPoolExecutor(max_workers=min(2, os.cpu_count() or 1)) as pool:
        results = list(pool.map(_sweep_run, jobs, chunksize=10))
    failed = [(s, seed, v) for s, seed, broken, v, _ in results if broken != GAP_BREAKS.get(s, set())]
    assert not failed, f"{len(failed)} run(s) broke a promise, or a gap did not show; the first: {failed[0]}"
    unaudited = [(s, seed) for s, seed, _, _, audited in results if not audited and s not in NO_AUDIT]
    assert not unaudited, f"runs whose audit did not match the acknowledged rows: {unaudited[:3]}"
    assert len(results) == len(SWEEP) * len(SWEEP_SEEDS)
