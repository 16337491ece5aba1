"""The flush mechanism end to end: scenarios run clean, binlogs are real Parquet, crashes lose nothing, switches are caught.

The exhaustive test crashes the DataNode at every step boundary of a small workload in turn (every pack
its flowgraph takes and every effect its syncs and checkpoint updater perform), restarts it, lets the
client flush, and checks durability each time.
"""

from __future__ import annotations

import json
from functools import partial

import pandas as pd
import pyarrow.parquet as pq
import pytest

import milvus_edu
from milvus_edu.cluster.data import DataCoordNode
from milvus_edu.sim.kernel import Simulation

SMALL = {"inserts_per_s": 40.0, "deletes_per_s": 2.0, "workload_s": 6.0}


def _flush(summary: dict) -> dict:
    return summary["flush"]


@pytest.mark.slow
def test_flush_basics_is_clean_and_audited(tmp_path):
    run = milvus_edu.simulate("flush-basics", seed=1, out_dir=tmp_path / "run")
    assert run.summary["checks"]["ok"], run.violations[:2]
    f = _flush(run.summary)
    assert f["audited"] and f["audit_rows"] == f["acknowledged_rows"] > 1000
    assert f["syncs"] > f["audit_segments"]  # full buffers synced before the final flush
    assert f["audit_flushed_segments"] >= 2
    ev = run.events
    assert set(ev[ev.kind == "datanode.sync"].vchannel.dropna()) == set(ev[ev.kind == "datanode.watch"].vchannel)


def test_binlogs_are_plain_parquet_in_milvus_layout(tmp_path):
    run = milvus_edu.simulate("flush-basics", seed=3, out_dir=tmp_path / "run", options=SMALL)
    bucket = tmp_path / "run" / "objects" / "a-bucket"
    insert_logs = sorted((bucket / "files" / "insert_log").rglob("*"))
    files = [p for p in insert_logs if p.is_file()]
    assert files, "no insert binlog written"
    rel = files[0].relative_to(bucket).parts
    assert rel[:3] == ("files", "insert_log", "100") and rel[3] == "1001"  # collection / partition / segment / field / logID
    pk_files = [p for p in files if p.parent.name == "100"]
    total = sum(pq.read_table(p).num_rows for p in pk_files)
    assert total == _flush(run.summary)["audit_rows"]
    assert len(pd.read_parquet(pk_files[0])) == pq.read_table(pk_files[0]).num_rows
    # A delete that names no partition carries common.AllPartitionsID (deleteRunner, simpleDelete), so the DataNode
    # buffers it in an L0 segment of partition -1, and its deltalogs are filed under that partition.
    delta = sorted(p.relative_to(bucket).parts for p in (bucket / "files" / "delta_log").rglob("*") if p.is_file())
    assert delta and {parts[2:4] for parts in delta} == {("100", "-1")}


@pytest.mark.slow
def test_manual_flush_completes_and_new_rows_go_to_new_segments():
    run = milvus_edu.simulate("flush-manual", seed=1)
    assert run.summary["checks"]["ok"], run.violations[:2]
    ev = run.events
    flushes = ev[ev.kind == "client.flush"]
    done = [json.loads(d)["flushed"] for d in flushes.detail]
    assert done.count(True) == 2  # the manual flush and the final one both complete
    states = ev[ev.kind == "datacoord.segment_state"]
    assert (states.detail.str.contains('"Flushed"')).sum() >= 4  # both shards, both flushes


@pytest.mark.slow
def test_rpc_failures_are_retried_and_nothing_is_lost():
    run = milvus_edu.simulate("checkpoint-rpc-failures", seed=1)
    f = _flush(run.summary)
    assert run.summary["checks"]["ok"], run.violations[:2]
    assert f["checkpoint_rpc_errors"] > 0 and f["binlog_reports_refused"] > 0
    assert f["audited"] and f["audit_rows"] == f["acknowledged_rows"]


@pytest.mark.slow
def test_crash_recovery_filters_flushed_rows_and_loses_nothing():
    run = milvus_edu.simulate("datanode-crash-recovery", seed=1)
    f = _flush(run.summary)
    assert run.summary["checks"]["ok"], run.violations[:2]
    assert f["datanode_crashes"] == 1 and f["datanode_restarts"] == 1
    assert f["rows_filtered_on_replay"] > 0
    assert f["audit_rows"] == f["acknowledged_rows"]


@pytest.mark.slow
def test_a_restart_with_bloom_filters_on_reloads_them_and_keeps_every_delete():
    """With ``dataNode.skip.BFStats.Load`` off, a delete is buffered only if a segment's pk statistics may hold
    its key. A restarted DataNode reloads them from the segments' stats logs (``initMetaCache``); without
    that, deletes of rows flushed or synced before the crash were filtered out and lost."""
    run = milvus_edu.simulate("datanode-crash-recovery", seed=1, params={"datanode.skip_bf_stats_load": False})
    f = _flush(run.summary)
    assert f["datanode_restarts"] == 1
    assert run.summary["checks"]["ok"], run.violations[:2]


def _report_times(monkeypatch) -> list[float]:
    """The simulated times at which DataNodes send ``ReportDataNodeTtMsgs`` (filled as the run goes)."""
    times: list[float] = []
    call = Simulation.call

    def recording_call(self, src, dst, handler):
        if isinstance(handler, partial) and handler.func.__name__ == "handle_report_tt":
            times.append(self.env.now)
        return call(self, src, dst, handler)

    monkeypatch.setattr(Simulation, "call", recording_call)
    return times


def test_a_failed_time_tick_report_is_retried_with_retry_do_back_off(monkeypatch):
    """``TimeTickSender.sendReport`` wraps ``ReportDataNodeTtMsgs`` in ``retry.Do`` with ``retry.Attempts(20),
    retry.Sleep(100 ms)`` (``DataNode.Start``): with DataCoord gone, the attempts are 100, 200, 400, 800, 1,600 ms
    apart, then 3 s (the back-off's cap), not one per 500 ms interval."""
    attempts = _report_times(monkeypatch)
    milvus_edu.simulate("flush-basics", seed=1, duration_s=16,
                        options={"inserts_per_s": 5.0, "deletes_per_s": 0.0, "workload_s": 2.0},
                        interventions=[milvus_edu.Kill("datacoord-1", 3_000)])
    after = [t for t in attempts if t >= 3_000]
    gaps = [round(b - a, -2) for a, b in zip(after, after[1:])]
    assert gaps == [100, 200, 400, 800, 1600, 3000, 3000, 3000]


def test_time_tick_reports_keep_to_the_tickers_grid(monkeypatch):
    """``TimeTickSender.work`` reads a ``time.Ticker``: every report leaves on the grid of 500 ms from the sender's
    start, however long the previous report's round trip took (a sleep of 500 ms after each report drifted by
    that round trip, about 1 ms a report)."""
    sent = _report_times(monkeypatch)
    milvus_edu.simulate("flush-basics", seed=1, duration_s=12,
                        options={"inserts_per_s": 20.0, "deletes_per_s": 0.0, "workload_s": 10.0})
    assert len(sent) > 15
    steps = [(t - sent[0]) / 500.0 for t in sent]
    assert all(abs(k - round(k)) < 1e-9 for k in steps), steps[:5]
    assert round(steps[-1]) > len(sent) - 1 - 1e-9  # whole intervals apart, none closer


@pytest.mark.slow
def test_a_dropped_channel_reports_no_time_tick_past_its_dropping_pack(monkeypatch):
    """Go's writeNode reports a pack's end timestamp to the time-tick sender only for a pack it buffered; once
    the ddNode is in drop mode no pack reaches it, so DataCoord hears nothing of the channel past the pack
    that carried the DropCollection."""
    reported: dict[str, list[int]] = {}
    handle = DataCoordNode.handle_report_tt

    def recording(self, node_id, node_name, ticks):
        for ch, ts in ticks:
            reported.setdefault(ch, []).append(ts)
        return handle(self, node_id, node_name, ticks)

    monkeypatch.setattr(DataCoordNode, "handle_report_tt", recording)
    ev = milvus_edu.simulate("flush-drop-collection", seed=1).events
    drops = ev[ev.kind == "datanode.drop"]
    assert len(drops) >= 1
    for vchannel, drop_ts in zip(drops.vchannel, drops.ts):
        assert reported[vchannel] and max(reported[vchannel]) == drop_ts


@pytest.mark.slow
def test_skip_recovery_filter_duplicates_rows_named_by_key_and_segment():
    run = milvus_edu.simulate("datanode-crash-recovery", seed=1, switches=["skip_recovery_filter"])
    dup = [v for v in run.violations if v["invariant"] == "durable"]
    assert dup and "primary key" in dup[0]["explanation"] and "segment" in dup[0]["explanation"]
    assert "times" in dup[0]["explanation"]


SWITCH_SCENARIOS = [
    ("datanode-crash-recovery", "skip_recovery_filter", "durable"),
    ("checkpoint-during-sync", "checkpoint_ignores_syncing_segments", "checkpoint-safe"),
    ("checkpoint-rpc-lost", "drop_failed_checkpoint_tasks", "checkpoint-retried"),
    ("flush-ts-boundary", "reset_flush_ts_inclusive", None),
    ("flush-ts-slow-store", "reset_flush_ts_inclusive", "flush-durable"),
]


@pytest.mark.slow
@pytest.mark.parametrize("scenario,switch,invariant", SWITCH_SCENARIOS)
def test_each_switch_scenario_is_clean_without_its_switch(scenario, switch, invariant):
    """The caught-with-the-switch half is ``test_sim.test_checkers_catch_every_bug_switch``."""
    run = milvus_edu.simulate(scenario, seed=1)
    assert run.summary["checks"]["ok"], run.violations[:2]
    assert run.summary["flush"]["audited"]


def test_flush_ts_boundary_puts_a_checkpoint_exactly_on_flush_ts():
    """The scenario's point: a stored channel checkpoint equal to flushTs, which the strict rule does not accept."""
    ev = milvus_edu.simulate("flush-ts-boundary", seed=1).events
    flush_ts = int(ev[ev.kind == "datacoord.flush"].ts.iloc[0])
    stored = ev[(ev.kind == "datacoord.channel_cp") & ev.detail.str.contains('"saved":true', regex=False)]
    assert flush_ts in set(stored.ts.dropna().astype(int))
    resets = ev[(ev.kind == "datanode.flush_ts") & ev.detail.str.contains('"set":false', regex=False)]
    assert (resets[resets.ts == flush_ts].tick_ts > flush_ts).all()


def test_same_seed_same_binlogs(tmp_path):
    a = milvus_edu.simulate("flush-basics", seed=5, out_dir=tmp_path / "a", options=SMALL)
    b = milvus_edu.simulate("flush-basics", seed=5, out_dir=tmp_path / "b", options=SMALL)
    assert (tmp_path / "a" / "events.jsonl").read_bytes() == (tmp_path / "b" / "events.jsonl").read_bytes()
    files_a = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a" / "objects").rglob("*") if p.is_file())
    files_b = sorted(p.relative_to(tmp_path / "b") for p in (tmp_path / "b" / "objects").rglob("*") if p.is_file())
    assert files_a == files_b and files_a
    assert all((tmp_path / "a" / p).read_bytes() == (tmp_path / "b" / p).read_bytes() for p in files_a)
    assert a.summary["flush"] == b.summary["flush"]


def _crash_free_steps() -> int:
    run = milvus_edu.simulate("datanode-crash-recovery", seed=2,
                              options={**SMALL, "crash_at_s": 0.0, "crash_step": 10**9, "restart_after_s": 1.0},
                              duration_s=20.0)
    assert run.summary["checks"]["ok"], run.violations[:2]
    steps = run.summary["flush"].get("datanode_steps")
    assert steps and steps > 20
    return steps


@pytest.mark.slow
def test_crash_at_every_step_boundary_loses_nothing_and_repeats_nothing():
    """Crash the DataNode at step k for every k of a crash-free run, restart it 1 s later, flush, audit."""
    total = _crash_free_steps()
    bad = []
    for k in range(1, total + 1):
        run = milvus_edu.simulate("datanode-crash-recovery", seed=2,
                                  options={**SMALL, "crash_at_s": 0.0, "crash_step": k, "restart_after_s": 1.0},
                                  duration_s=20.0)
        f = run.summary["flush"]
        if not run.summary["checks"]["ok"] or not f["audited"] or f["audit_rows"] != f["acknowledged_rows"]:
            bad.append((k, run.violations[:1], f["audited"]))
    assert not bad, bad[:3]


def test_another_datanode_takes_the_channels_after_the_session_ttl_and_loses_nothing():
    """datanode-takeover: the crashed node never returns; DataCoord hands its channels on once its session expired."""
    options = {**SMALL, "workload_s": 8.0, "crash_at_s": 5.0}
    run = milvus_edu.simulate("datanode-takeover", seed=4, options=options, duration_s=40.0,
                              params={"tso.session_ttl_ns": 10 * 10**9})
    assert run.summary["checks"]["ok"], run.violations[:2]
    f = run.summary["flush"]
    assert f["channel_takeovers"] == 1 and f["datanode_restarts"] == 0
    assert f["audited"] and f["audit_rows"] == f["acknowledged_rows"]
    ev = run.events
    handed = ev[ev.kind == "datacoord.reassign"].iloc[0]
    assert handed.t_ms == pytest.approx(15_000.0)  # crash at 5 s + the 10 s session TTL
    watches = ev[ev.kind == "datanode.watch"]
    assert set(watches[watches.node == "datanode-2"].vchannel) == set(watches[watches.node == "datanode-1"].vchannel)
    assert (watches[watches.node == "datanode-2"].seq > handed.seq).all()
    # nothing of datanode-1 after its death, and datanode-2 did the final work
    death = ev[(ev.kind == "fault.kill") & (ev.node == "datanode-1")].seq.iloc[0]
    assert not ((ev.node == "datanode-1") & (ev.seq > death) & (ev.kind != "datanode.steps")).any()
    assert (ev[(ev.kind == "datanode.sync") & (ev.seq > handed.seq)].node == "datanode-2").all()


def _cleared(ev) -> pd.DataFrame:
    return ev[(ev.kind == "datanode.flush_ts") & ev.detail.str.contains('"set":false', regex=False)]


def test_inclusive_reset_alone_changes_no_answer_only_the_resent_checkpoints():
    """Quirk P23: with >= the DataNode clears flushTs on the equal checkpoint; every check still passes, the client's
    flushes and the audit are the same, and the ttNode stops re-sending the flush checkpoint on every pack."""
    strict = milvus_edu.simulate("flush-ts-boundary", seed=1)
    inclusive = milvus_edu.simulate("flush-ts-boundary", seed=1, switches=["reset_flush_ts_inclusive"])
    assert strict.summary["checks"]["ok"] and inclusive.summary["checks"]["ok"], inclusive.violations[:1]
    s, i = strict.summary["flush"], inclusive.summary["flush"]
    assert (s["flushes_completed"], s["audit_rows"]) == (i["flushes_completed"], i["audit_rows"])
    assert s["flush_ts_cleared_at_equal"] == 0 < i["flush_ts_cleared_at_equal"]
    assert i["channel_checkpoints_ignored"] * 20 < s["channel_checkpoints_ignored"]

    def answered(run):
        ev = run.events
        done = ev[(ev.kind == "client.flush") & ev.detail.str.contains('"flushed":true', regex=False)]
        return [int(ts) for ts in done.ts]

    assert answered(strict) == answered(inclusive)


@pytest.mark.slow
def test_the_strict_rule_sends_the_first_checkpoint_past_flush_ts_at_once():
    """What 2.5 gains from >: flushTs stays set while the checkpoint sits on it, so when a sync moves the checkpoint
    past it the flush path sends it at once; with >= it waits for the next periodic update (here: the next flush)."""
    options = {"inserts_per_s": 200.0}

    def stored_past_first_flush(switches):
        ev = milvus_edu.simulate("flush-ts-boundary", seed=1, options=options, switches=switches).events
        sets = ev[(ev.kind == "datanode.flush_ts") & ev.detail.str.contains('"set":true', regex=False)]
        first, second = int(sets.ts.iloc[0]), sets[sets.ts > sets.ts.iloc[0]].seq.iloc[0]
        cps = ev[(ev.kind == "datacoord.channel_cp") & ev.detail.str.contains('"saved":true', regex=False)]
        return int(((cps.ts > first) & (cps.seq < second)).sum())

    assert stored_past_first_flush([]) >= 1
    assert stored_past_first_flush(["reset_flush_ts_inclusive"]) == 0


def test_the_design_documents_story_needs_their_older_get_checkpoint_too():
    """flush-ts-slow-store: only with both switches is a flush declared done on a checkpoint equal to flushTs while
    its syncs run; the older GetCheckpoint alone declares the final flush done one step past flushTs, just as early."""
    both = milvus_edu.simulate("flush-ts-slow-store", seed=1,
                               switches=["reset_flush_ts_inclusive", "checkpoint_ignores_syncing_segments"])
    older = milvus_edu.simulate("flush-ts-slow-store", seed=1, switches=["checkpoint_ignores_syncing_segments"])
    inclusive = milvus_edu.simulate("flush-ts-slow-store", seed=1, switches=["reset_flush_ts_inclusive"])
    assert inclusive.summary["checks"]["ok"], inclusive.violations[:1]

    def early(run):
        return [v["explanation"] for v in run.violations if v["invariant"] == "flush-durable"]

    assert any("equal to flushTs" in text for text in early(both))
    assert early(older) and all("past flushTs" in text for text in early(older))
    first_flush_ts = int(_cleared(both.events).ts.min())
    assert int(_cleared(older.events).ts.min()) > first_flush_ts  # the first flush was not closed early with >


@pytest.mark.slow
def test_a_stuck_memory_sync_fails_only_the_flush_liveness_check():
    """Quirk P24: a DataNode with little memory force-syncs an L0 segment, later deletes sit in a buffer nothing
    syncs, the checkpoint sticks and the final flush never completes; without deletes it completes."""
    run = milvus_edu.simulate("flush-stuck-memory-sync", seed=1)
    counts = {k: v for k, v in run.summary["checks"]["violation_counts"].items() if v}
    assert counts == {"flush-completes": 1}
    text = run.violations[0]["explanation"]
    assert text.startswith("Let ") and "was stuck at" in text and "never synced" in text
    assert not run.summary["flush"]["audited"]
    clean = milvus_edu.simulate("flush-stuck-memory-sync", seed=1, options={"deletes_per_s": 0.0})
    assert clean.summary["checks"]["ok"] and clean.summary["flush"]["audited"]


@pytest.mark.slow
def test_the_cli_reports_the_stuck_flush_as_the_scenarios_lesson(tmp_path, capsys):
    from milvus_edu.cli import main

    assert main(["simulate", "--scenario", "flush-stuck-memory-sync", "--out", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    assert "checks FAILED: 1 flush-completes violation;" in out and "was stuck at" in out
    assert "(expected: this scenario shows a gap in Milvus itself: Milvus 2.5's EvictBuffer" in out
