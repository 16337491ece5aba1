"""The checkers' violation messages say what the run log shows: each clause is recomputed from the log here."""

import json

import pytest

import milvus_edu
from milvus_edu.mechanisms.flush.check import FlushChecker
from milvus_edu.narrate import ts_text, wall_text


def _violations(run, invariant):
    return [v for v in run.summary["checks"]["violations"] if v["invariant"] == invariant]


def _row(ev, seq):
    return ev[ev.seq == seq].iloc[0]


def test_global_monotonic_blames_the_deposed_active_in_tso_pause():
    """tso-pause seed 3 (its documented gap): the resumed old active hands out the earlier batch, so the message
    must name it, not the new active whose window started past everything it could know of."""
    run = milvus_edu.simulate("tso-pause", seed=3)
    ev = run.events
    (v,) = _violations(run, "global-monotonic")
    early, late = (_row(ev, s) for s in v["seqs"])
    assert early.node == "rootcoord-1" and late.node == "rootcoord-2"
    took_over = ev[(ev.kind == "session.active") & (ev.node == "rootcoord-2")].iloc[0]
    assert took_over.seq < early.seq  # rootcoord-1 served after rootcoord-2 became active
    text = v["explanation"]
    assert (f"because rootcoord-1 was no longer the active rootcoord (rootcoord-2 had become active at event "
            f"{took_over.seq + 1:,})") in text
    assert "rootcoord-2's window did not start" not in text


def test_global_monotonic_says_the_earlier_active_passed_its_unsaved_window():
    """With tso_no_window_save the new active loads the stale saved end and starts past it, as Milvus does: the
    message must say the old active handed out past that end, with the numbers of the log."""
    run = milvus_edu.simulate("tso-failover", seed=2, switches=["tso_no_window_save"])
    ev = run.events
    v = _violations(run, "global-monotonic")[0]
    early = _row(ev, v["seqs"][0])
    init = ev[(ev.kind == "tso.init") & (ev.node == "rootcoord-2")].iloc[0]
    saved = json.loads(init.detail)["loaded_window_end_ms"]
    high = int(early.ts) + int(early["count"]) - 1
    assert f"handing out up to {ts_text(high)}" in v["explanation"]
    assert (f"past the last window end saved in the KV ({wall_text(saved)}): it had not re-saved its window; "
            f"rootcoord-2 loaded that end and started past it, at {wall_text(int(init.physical_ms))} "
            f"(event {init.seq + 1:,})") in v["explanation"]
    assert saved < high >> 18  # the earlier batch's physical part is past the saved end, as claimed


def test_global_monotonic_says_the_new_active_ignored_the_saved_window():
    run = milvus_edu.simulate("tso-failover", seed=1, switches=["tso_skip_load_on_init"])
    ev = run.events
    v = _violations(run, "global-monotonic")[0]
    init = ev[(ev.kind == "tso.init") & (ev.node == "rootcoord-2")].iloc[0]
    ignored = json.loads(init.detail)["ignored_window_end_ms"]
    assert int(init.physical_ms) < ignored
    assert (f"rootcoord-2 started its window at physical {wall_text(int(init.physical_ms))} (event {init.seq + 1:,}) "
            f"without loading the saved window end {wall_text(ignored)}") in v["explanation"]


def test_mvcc_exact_names_the_older_delete_that_must_not_hide_a_missing_row():
    """insert-delete-reorder: A is inserted, deleted, inserted again; a delete applied regardless of timestamps
    hides the re-insert. The message names that delete and says it is older than the row it hid."""
    run = milvus_edu.simulate("insert-delete-reorder", seed=1, switches=["delete_ignores_timestamps"])
    ev = run.events
    v = _violations(run, "mvcc-exact")[0]
    produced = ev[(ev.kind == "mq.produce") & ev.seq.isin(v["seqs"])]
    delete = produced[produced.msg_type == "Delete"].iloc[-1]
    insert = produced[produced.msg_type == "Insert"].iloc[-1]
    assert int(delete.ts) < int(insert.ts)
    assert (f"A was inserted at {ts_text(int(insert.ts))} (event {insert.seq + 1:,}) and no delete at or below the "
            f"read timestamp hides that row (the delete of A at {ts_text(int(delete.ts))}, event {delete.seq + 1:,}, "
            f"is older than that insert") in v["explanation"]


def test_mvcc_exact_extra_row_names_the_delete_that_hides_it():
    """A inserted, deleted, inserted again and deleted again; a read after all four returns A. The delete that
    hides the row read is the second: the first is older than the re-insert and hides nothing the read saw."""
    import pandas as pd

    from milvus_edu.mechanisms.query.check import QueryChecker

    vch = "by-dev-rootcoord-dml_0_100v0"

    def write(seq, kind, ts):
        return {"seq": seq, "kind": "mq.produce", "t_ms": float(seq), "node": "proxy-1", "msg_type": kind,
                "channel": "by-dev-rootcoord-dml_0", "vchannel": vch, "ts": ts << 18, "end_ts": ts << 18,
                "msg_id": seq, "detail": json.dumps({"pks": ["A"]})}

    rows = [write(0, "Insert", 1), write(1, "Delete", 2), write(2, "Insert", 3), write(3, "Delete", 4),
            {"seq": 4, "kind": "querynode.read", "t_ms": 4.0, "node": "querynode-1", "request": 1, "vchannel": vch,
             "ts": 5 << 18, "guarantee_ts": 5 << 18, "level": "Strong", "detail": json.dumps({"pks": ["A"]})}]
    frame = pd.DataFrame(rows)
    (v,) = QueryChecker().check_frame(frame)
    assert v.invariant == "mvcc-exact"
    assert f"A was deleted at {ts_text(4 << 18)} (event 4)" in v.explanation


def test_durable_counts_a_duplicate_per_segment_and_cites_each_event_once():
    """skip_recovery_filter: a replayed row lands twice in the same segment's binlogs, found by one audit event."""
    run = milvus_edu.simulate("datanode-crash-recovery", seed=1, switches=["skip_recovery_filter"])
    ev = run.events
    v = next(v for v in _violations(run, "durable") if "times" in v["explanation"] or "twice" in v["explanation"])
    assert len(v["seqs"]) == len(set(v["seqs"]))
    audits = [_row(ev, s) for s in v["seqs"][1:]]
    pk = v["explanation"].split("primary key ")[1].split(".")[0]
    per_segment = {}
    for audit in audits:
        assert audit.kind == "storage.audit"
        per_segment[int(audit.segment)] = json.loads(audit.detail)["pks"].count(int(pk))
    where = ", ".join(f"{'twice' if n == 2 else f'{n} times'} in segment {s}" for s, n in per_segment.items())
    assert f"final binlogs hold it {sum(per_segment.values())} times ({where})" in v["explanation"]
    assert "already in a binlog" in v["explanation"]


def test_tsafe_progress_names_the_fault_that_stopped_the_querynode():
    """A fork pauses (then kills) seed-example's QueryNode at 2 s: tsafe falls behind the ticks because of that fault,
    which the message must name with its event and times, not blame a slow pipeline."""
    run = milvus_edu.simulate("seed-example", seed=1)
    paused, _ = milvus_edu.fork(run, 2000.0, milvus_edu.Pause("querynode-1", duration_ms=3000.0))
    ev = paused.events
    pause = ev[ev.kind == "fault.pause"].iloc[0]
    v = _violations(paused, "tsafe-progress")[0]
    tick, tsafe = (_row(ev, s) for s in v["seqs"])
    assert tick.t_ms < pause.t_ms + 3000.0 and tsafe.t_ms >= pause.t_ms  # the pause overlapped the wait
    until = (pause.t_ms + 3000.0) / 1000
    assert (f"because querynode-1, which serves {tsafe.vchannel}, was paused (a GC or VM pause) from event "
            f"{pause.seq + 1:,} ({pause.t_ms / 1000:.3f} s) until {until:.3f} s") in v["explanation"]
    assert "did not apply the pack" not in v["explanation"]
    killed, _ = milvus_edu.fork(run, 2000.0, milvus_edu.Kill("querynode-1"))
    kill = killed.events[killed.events.kind == "fault.kill"].iloc[0]
    v = _violations(killed, "tsafe-progress")[0]
    assert f"was killed at event {kill.seq + 1:,} ({kill.t_ms / 1000:.3f} s) and was not restarted" in v["explanation"]


@pytest.mark.slow
def test_a_flush_held_past_its_bound_by_a_node_still_down_is_a_stall_not_a_pass():
    """flush-manual (80 s) forked to kill datanode-1 right after the 30.5 s flush, never restarted: the flush is never
    answered, 49 s pass, and the checker does not count the bound while the node is down. The run must not vouch
    that every flush completed within its bound; it reports the flush as a stall the kill explains."""
    run = milvus_edu.simulate("flush-manual", seed=1, duration_s=80)
    forked, _ = milvus_edu.fork(run, 30600.0, milvus_edu.Kill("datanode-1"))
    ev, checks = forked.events, forked.summary["checks"]
    call = ev[(ev.kind == "client.flush") & (ev.t_ms > 30000)].iloc[0]
    kill = ev[ev.kind == "fault.kill"].iloc[0]
    assert json.loads(call.detail)["flushed"] is False and kill.t_ms > call.t_ms
    assert not ((ev.kind == "client.flush") & (ev.t_ms > call.t_ms)).any()  # never answered flushed
    (stall,) = [s for s in checks["stalls"] if s["what"] == "flush"]
    assert stall["seqs"] == [int(call.seq), int(kill.seq)] and stall["held_by"] == "datanode-1"
    end = float(ev.t_ms.max())
    assert (f"Let event {call.seq + 1:,} be client-0's flush at {call.t_ms / 1000:.1f} s, flushTs "
            f"{ts_text(int(call.ts))}") in stall["explanation"]
    assert (f"{(end - kill.t_ms) / 1000:.1f} s after {kill.t_ms / 1000:.1f} s" in stall["explanation"]
            and f"datanode-1 was killed at event {kill.seq + 1:,}" in stall["explanation"])
    promise = FlushChecker.promises["flush-completes"]
    assert promise.endswith("unless the run ended first or a node was still down")


def test_session_sees_own_says_the_read_timestamp_is_below_the_writes():
    """The read's answer carries a timestamp, not a time: the message must say the read was served at that timestamp,
    below the write's (it said "answered at 00:00:00.500+2 ..., before the write", a time where a timestamp is)."""
    run = milvus_edu.simulate("insert-then-search", seed=1, switches=["session_uses_zero_ts"])
    ev = run.events
    v = _violations(run, "session-sees-own")[0]
    write, start, read = (_row(ev, s) for s in v["seqs"])
    assert write.kind == "client.insert" and start.kind == "client.read_start" and read.kind == "client.read"
    assert int(read.ts) < int(write.ts) and start.seq > write.seq
    assert (f"Then the read was served at timestamp {ts_text(int(read.ts))} (event {read.seq + 1:,}), below the "
            f"write's, so it cannot reflect it") in v["explanation"]
    assert f"insert of K0 at {ts_text(int(write.ts))}" in v["explanation"]


def test_flush_completes_does_not_call_a_synced_buffer_never_synced():
    """flush-manual with 15 s time ticks (pursuit mode, which the bound leaves out): the DataNode handed over its
    checkpoint at 34 s, then synced the channel's segments at 49 s and handed nothing over after. "A buffer that
    starts there was never synced" was false; the message names the later sync instead."""
    run = milvus_edu.simulate("flush-manual", seed=1, duration_s=120,
                              params={"timetick.time_tick_interval_ns": 15_000_000_000})
    ev = run.events
    v = _violations(run, "flush-completes")[0]
    vch = "by-dev-rootcoord-dml_0_100v0"
    handed = ev[(ev.kind == "datanode.checkpoint") & (ev.vchannel == vch)].iloc[-1]
    saves = ev[(ev.kind == "datacoord.save_binlog_paths") & (ev.vchannel == vch) & (ev.seq > handed.seq)]
    deadline = float(v["explanation"].split("had still not said flushed at ")[1].split(" s")[0]) * 1000
    saves = saves[saves.t_ms <= deadline]
    assert len(saves) > 0  # the channel's segments were synced after the last hand-over
    last = saves.iloc[-1]
    part = v["explanation"].split(f"DataCoord's checkpoint of {vch}")[1].split(";")[0]
    assert f"(event {handed.seq + 1:,}) was still at {ts_text(int(handed.ts))}" in part
    assert (f"none was handed over after DataCoord stored a sync of segment {int(last.segment)} on it "
            f"(event {last.seq + 1:,})") in part
    assert "never synced" not in part


def test_read_answered_names_the_paused_querynode():
    """A fork pauses seed-example's QueryNode for 60 s at 1.5 s: reads the proxy settled then are never answered
    because the node that serves their shards is frozen, which the message must say (it said only "no shard answered
    it and none waits for tsafe")."""
    run = milvus_edu.simulate("seed-example", seed=1)
    forked, _ = milvus_edu.fork(run, 1500.0, milvus_edu.Pause("querynode-1", duration_ms=60000.0))
    ev = forked.events
    pause = ev[ev.kind == "fault.pause"].iloc[0]
    v = _violations(forked, "read-answered")[0]
    start, settled = _row(ev, v["seqs"][0]), _row(ev, v["seqs"][1])
    assert start.kind == "client.read_start" and settled.kind == "proxy.read" and settled.t_ms >= pause.t_ms
    assert not ((ev.kind == "client.read") & (ev.request == start.request)).any()
    served = sorted(ev[(ev.kind == "querynode.watch") & (ev.node == "querynode-1")].vchannel.unique())
    assert (f"querynode-1, which serves {', '.join(served)}, was paused (a GC or VM pause) from event "
            f"{pause.seq + 1:,} ({pause.t_ms / 1000:.3f} s)") in v["explanation"]


def test_global_monotonic_reads_the_active_rootcoord_from_rootcoords_election_only():
    """Another role's active session (a DataCoord's key) must not make the rootcoord handing out look deposed."""
    import pandas as pd

    from milvus_edu.mechanisms.tso.check import TSOChecker

    def active(seq, node, key):
        return {"seq": seq, "kind": "session.active", "t_ms": 0.0, "node": node,
                "detail": json.dumps({"key": f"by-dev/meta/session/{key}"})}

    def alloc(seq, ts):
        return {"seq": seq, "kind": "rootcoord.alloc_timestamp", "t_ms": float(seq), "node": "rootcoord-1",
                "ts": ts, "count": 1}

    rows = [active(0, "rootcoord-1", "rootcoord"), active(1, "datacoord-1", "datacoord"), alloc(2, 100 << 18),
            alloc(3, 50 << 18)]
    (v,) = TSOChecker().check_frame(pd.DataFrame(rows))
    assert "no longer the active rootcoord" not in v.explanation
    assert "rootcoord-1's window did not start past everything already handed out" in v.explanation


def test_bounded_staleness_says_nothing_of_a_clock_that_is_not_off():
    """A read begun 1,005.6 ms into the run has begin timestamp 1,005 ms (a clock reads whole ms, rounded down);
    rounding the true time up made it 'proxy-1's clock was 1 ms behind' (8 of insert-then-search's 24 Bounded and
    Session reads begin at such times)."""
    from milvus_edu.events import SIM_EPOCH_MS
    from milvus_edu.mechanisms.query.check import _stale_text
    from milvus_edu.tsoutil import compose_ts

    read = {"seq": 40, "request": 3, "ts": compose_ts(SIM_EPOCH_MS + 1005 - 6_000, 0)}
    for t_ms in (1005.0, 1005.6, 1005.999):
        proxy = {"seq": 9, "node": "proxy-1", "t_ms": t_ms, "begin": compose_ts(SIM_EPOCH_MS + 1005, 1)}
        text = _stale_text(proxy, read, 5_000)
        assert "6,000 ms below that timestamp" in text and "clock was" not in text, (t_ms, text)
    skewed = {"seq": 9, "node": "proxy-1", "t_ms": 1005.6, "begin": compose_ts(SIM_EPOCH_MS + 3005, 1)}
    text = _stale_text(skewed, read, 5_000)
    assert "8,000 ms below that timestamp" in text
    assert "proxy-1's clock was 2,000 ms ahead: by the true time, the data it read was 6,000 ms old" in text
