"""The flush checker on hand-written run-log rows: each invariant passes on a good story and fails on a bad one."""

from __future__ import annotations

import json

import pytest

from milvus_edu.mechanisms.flush.check import FlushChecker

V = "by-dev-rootcoord-dml_0_100v0"


class Log:
    """Rows with increasing seq and time, fed to a fresh checker."""

    def __init__(self):
        self.checker = FlushChecker()
        self.seq = 0

    def row(self, kind, node="datanode-1", t_ms=None, **fields):
        detail = fields.pop("detail", None)
        row = {"kind": kind, "seq": self.seq, "t_ms": float(self.seq if t_ms is None else t_ms), "node": node,
               "error": None, "segment": None, "vchannel": None, "ts": None, "msg_type": None, "detail": None,
               "count": None, "end_ts": None, "tick_ts": None}
        row.update(fields)
        if detail is not None:
            row["detail"] = json.dumps(detail, sort_keys=True)
        self.seq += 1
        self.checker.write(row)
        return row

    def insert(self, segment, ts, count=1):
        return self.row("mq.produce", node="proxy-1", msg_type="Insert", segment=segment, vchannel=V, end_ts=ts,
                        count=count)

    def saved(self, segment, ts):
        return self.row("datacoord.save_binlog_paths", node="datacoord-1", segment=segment, vchannel=V, ts=ts)

    def cp(self, ts, saved=True):
        return self.row("datacoord.channel_cp", node="datacoord-1", vchannel=V, ts=ts, detail={"saved": saved})

    def invariants(self):
        return [v.invariant for v in self.checker.result()]


def test_checkpoint_below_unflushed_rows_is_safe():
    log = Log()
    log.insert(7, 100)
    log.cp(99)
    log.saved(7, 150)
    log.cp(150)
    assert log.invariants() == []


def test_checkpoint_reaching_an_unflushed_row_is_a_violation():
    log = Log()
    produced = log.insert(7, 100, count=3)
    stored = log.cp(100)
    violations = log.checker.result()
    assert [v.invariant for v in violations] == ["checkpoint-safe"]
    assert violations[0].seqs == (produced["seq"], stored["seq"])
    text = violations[0].explanation
    assert text.startswith("Let event 1 be the insert of 3 rows") and "Then" in text and "because" in text
    assert "no sync of segment 7 had been stored yet" in text


def test_a_sync_makes_rows_up_to_its_position_durable_only():
    log = Log()
    log.insert(7, 100)
    log.insert(7, 200)
    log.saved(7, 150)
    log.cp(150)
    assert log.invariants() == []
    log.cp(200)
    assert log.invariants() == ["checkpoint-safe"]


def test_ignored_checkpoint_does_not_count():
    log = Log()
    log.insert(7, 100)
    log.cp(120, saved=False)
    assert log.invariants() == []


def test_checkpoint_going_back_is_a_violation():
    log = Log()
    log.cp(200)
    log.cp(100)
    assert log.invariants() == ["checkpoint-monotonic"]


def _reset(log, flush_ts, checkpoint):
    return log.row("datanode.flush_ts", vchannel=V, ts=flush_ts, tick_ts=checkpoint,
                   detail={"set": False, "checkpoint": checkpoint})


def test_a_flush_declared_done_by_the_datanode_must_hold_its_rows():
    log = Log()
    log.insert(7, 400, count=2)
    log.insert(7, 600)  # after flushTs: the flush does not owe it
    log.saved(7, 450)
    _reset(log, 500, 500)  # an equal checkpoint, with every row up to flushTs durable: nothing a user sees
    assert log.invariants() == []
    late = Log()
    produced = late.insert(7, 400, count=2)
    cleared = _reset(late, 500, 500)
    violations = late.checker.result()
    assert [v.invariant for v in violations] == ["flush-durable"]
    assert violations[0].seqs == (produced["seq"], cleared["seq"])
    text = violations[0].explanation
    assert text.startswith("Let event 1 be the insert of 2 rows") and " Then " in text and "because" in text
    assert "equal to flushTs" in text and "no sync of segment 7 had been stored yet" in text


def test_a_flush_the_client_is_told_is_done_must_hold_its_rows():
    for saved, want in ((True, []), (False, ["flush-durable"])):
        log = Log()
        log.insert(7, 400)
        log.row("client.flush", node="client-0", ts=500, detail={"segments": [7], "flushed": False})
        if saved:
            log.saved(7, 500)
        log.row("client.flush", node="client-0", ts=500, detail={"segments": [7], "flushed": True})
        assert log.invariants() == want
        if not saved:
            assert "GetFlushState telling client-0" in log.checker.result()[0].explanation


def _open_flush(log, t_ms=0.0):
    return log.row("client.flush", node="client-0", t_ms=t_ms, ts=500, detail={"segments": [7], "flushed": False})


def test_flush_bound_is_the_sum_of_milvus_periods():
    from milvus_edu.mechanisms.flush.check import checkpoint_bound_ms, flush_bound_ms

    assert flush_bound_ms(10_000, 20_000) == 2 * 200 + 500 + 10_000 + 20_000 + 500
    assert checkpoint_bound_ms(10_000, 20_000) == 660_000 + 60_000 + 10_000 + 20_000 + 400


def test_a_flush_must_complete_within_its_bound():
    done, stuck, short = Log(), Log(), Log()
    for log in (done, stuck, short):
        log.cp(100)  # DataCoord's checkpoint stays below flushTs
        _open_flush(log)
    done.row("client.flush", node="client-0", t_ms=5_000, ts=500, detail={"segments": [7], "flushed": True})
    done.row("run.end", node="sim", t_ms=60_000)
    stuck.row("datanode.checkpoint", t_ms=20_000, vchannel=V, ts=100, detail={"flush": False, "periodic": True})
    stuck.row("run.end", node="sim", t_ms=31_500)
    short.row("run.end", node="sim", t_ms=31_300)  # the bound (31.4 s) has not elapsed: not judged
    assert done.invariants() == [] and short.invariants() == []
    assert stuck.invariants() == ["flush-completes"]
    text = stuck.checker.result()[0].explanation
    assert "stuck at" in text and "segment 7 never reached Flushing" in text and "never synced" in text
    # the deadline first, then what it adds up from: the flush began at 0.0 s here, and the bound is 31.4 s
    assert "had still not said flushed at 31.4 s, the latest a flush may end: 0.0 s (the later of" in text
    assert "+ 31.4 s (2 time ticks" in text


def test_the_bounds_are_the_runs_parameters_when_the_checker_is_configured():
    """A run with a 5 s time tick and a 2 s DataNode time tick gives a flush 2 x 5 + 2 + 10 + 20 + 0.5 = 42.5 s: a
    flush still open at 40 s broke the default bound (31.4 s) but not the run's; one open at 43 s broke both."""
    from milvus_edu.config import Config
    from milvus_edu.mechanisms.flush.check import flush_bound_ms

    config = Config().with_params({"timetick.time_tick_interval_ns": 5_000_000_000,
                                   "datanode.timetick_interval_ns": 2_000_000_000})
    assert flush_bound_ms(10_000, 20_000, config.timetick, config.datanode) == 42_500
    verdicts = {}
    for end_ms in (40_000, 43_000):
        for configured in (False, True):
            log = Log()
            if configured:
                log.checker.configure(config)
            log.cp(100)
            _open_flush(log)
            log.row("run.end", node="sim", t_ms=end_ms)
            verdicts[end_ms, configured] = log.invariants()
    assert verdicts == {(40_000, False): ["flush-completes"], (40_000, True): [],
                        (43_000, False): ["flush-completes"], (43_000, True): ["flush-completes"]}


def test_a_stored_sync_of_the_flush_or_a_fault_restarts_its_clock():
    saved, failed = Log(), Log()
    for log in (saved, failed):
        _open_flush(log)
    saved.row("datacoord.save_binlog_paths", node="datacoord-1", t_ms=20_000, segment=7, vchannel=V, ts=500,
              detail={"flushed": True})
    failed.row("datacoord.channel_cp", node="datacoord-1", t_ms=20_000, vchannel=V, ts=500, error="etcd down")
    for log in (saved, failed):
        log.row("run.end", node="sim", t_ms=50_000)
        assert log.invariants() == []
    saved.row("run.end", node="sim", t_ms=51_500)
    assert saved.invariants() == ["flush-completes"]
    assert "never reached Flushing" not in saved.checker.result()[0].explanation


def test_a_node_down_holds_the_flush_clock_until_it_is_back():
    log = Log()
    _open_flush(log)
    log.row("fault.kill", t_ms=1_000)
    log.row("run.end", node="sim", t_ms=80_000)
    assert log.invariants() == []
    back = Log()
    _open_flush(back)
    back.row("fault.kill", t_ms=1_000)
    back.row("datacoord.reassign", node="datacoord-1", t_ms=60_000, detail={"from": "datanode-1"})
    back.row("run.end", node="sim", t_ms=91_500)
    assert back.invariants() == ["flush-completes"]


def test_the_channel_checkpoint_must_advance_within_its_bound():
    moving, stuck = Log(), Log()
    for log in (moving, stuck):
        log.cp(100)
        log.row("datanode.checkpoint", t_ms=400_000, vchannel=V, ts=100, detail={"flush": False, "periodic": True})
    moving.row("datacoord.channel_cp", node="datacoord-1", t_ms=700_000, vchannel=V, ts=200, detail={"saved": True})
    for log in (moving, stuck):
        log.row("run.end", node="sim", t_ms=800_000)
    assert moving.invariants() == []
    assert stuck.invariants() == ["checkpoint-advances"]
    assert "was still at" in stuck.checker.result()[0].explanation


def _rpc(log, sent, positions, error=None):
    return log.row("datanode.cp_rpc", t_ms=sent + 1, error=error,
                   detail={"positions": positions, "tick_ms": 10, "timeout_ms": 5, "sent_ms": sent})


def test_failed_checkpoint_update_must_be_sent_again_by_the_next_tick():
    good, bad, late = Log(), Log(), Log()
    for log in (good, bad, late):
        _rpc(log, 0, {V: 300}, error="boom")
    _rpc(good, 10, {V: 300}, error="boom again")  # retried (and failed again): still a retry
    _rpc(good, 20, {V: 300})
    good.row("run.end", node="sim", t_ms=100)
    _rpc(bad, 10, {})
    bad.row("run.end", node="sim", t_ms=100)
    _rpc(late, 30, {V: 300})  # sent two ticks later: the first tick skipped it
    assert good.invariants() == []
    assert bad.invariants() == ["checkpoint-retried"]
    assert late.invariants() == ["checkpoint-retried"]


def test_a_retry_still_in_flight_at_the_end_is_not_judged():
    log = Log()
    _rpc(log, 0, {V: 300}, error="boom")
    log.row("run.end", node="sim", t_ms=14)  # deadline 11 ms, but a retry may take one timeout (5 ms) to answer
    assert log.invariants() == []


def test_a_crash_excuses_a_pending_retry():
    log = Log()
    _rpc(log, 0, {V: 300}, error="boom")
    log.row("fault.kill", t_ms=1)
    log.row("run.end", node="sim", t_ms=100)
    assert log.invariants() == []


def _audit_story(audit_pks_by_segment, deleted=()):
    log = Log()
    log.row("client.insert", node="client-0", ts=1, count=3, detail={"pks": [1, 2, 3]})
    log.row("client.delete", node="client-0", ts=2, count=1, detail={"pks": [2]})
    for seg, pks in audit_pks_by_segment.items():
        log.row("storage.audit", node="audit", segment=seg, vchannel=V, count=len(pks),
                detail={"pks": pks, "deleted": list(deleted) if seg == 9 else []})
    log.row("run.end", node="sim")
    return log


def test_audit_holding_every_row_once_passes():
    assert _audit_story({7: [1, 3], 8: [2], 9: []}, deleted=[2]).invariants() == []


def test_audit_missing_a_row_or_a_delete_fails():
    log = _audit_story({7: [1], 9: []})
    texts = [v.explanation for v in log.checker.result()]
    assert log.invariants() == ["durable"] * 3
    assert any("primary key 2" in t and "lost" in t for t in texts)
    assert any("delete of primary key 2" in t for t in texts)


def test_audit_with_a_duplicate_names_key_and_segments():
    log = _audit_story({7: [1, 2, 3], 8: [3], 9: []}, deleted=[2])
    (violation,) = log.checker.result()
    assert violation.invariant == "durable"
    assert "primary key 3" in violation.explanation
    assert "hold it 2 times (once in segment 7, once in segment 8)" in violation.explanation


def test_no_audit_no_durability_verdict():
    log = Log()
    log.row("client.insert", node="client-0", ts=1, count=1, detail={"pks": [1]})
    log.row("run.end", node="sim")
    assert log.invariants() == [] and not log.checker.audited


def _rpc_row(seq: int, t_ms: float, error: str | None) -> dict:
    detail = {"sent_ms": t_ms, "tick_ms": 10_000, "timeout_ms": 20_000, "positions": {"v0": 100}}
    return {"kind": "datanode.cp_rpc", "seq": seq, "t_ms": t_ms, "node": "datanode-1", "error": error,
            "detail": json.dumps(detail)}


@pytest.mark.parametrize("gone", ["fault.kill", "datanode.stop"])
def test_a_node_that_is_gone_owes_no_retry_of_a_failed_update(gone):
    """A failed update is due again next tick, unless its DataNode was killed or stopped gracefully meanwhile
    (a graceful stop closes the updater with its tasks unsent)."""
    def run(rows):
        checker = FlushChecker()
        for row in rows:
            checker.write({"error": None, "detail": "{}", **row})
        return checker.counts["checkpoint-retried"]

    failed = _rpc_row(0, 1_000.0, "timeout")
    end = {"kind": "run.end", "seq": 2, "t_ms": 40_000.0, "node": None}
    assert run([failed, end]) == 1
    assert run([failed, {"kind": gone, "seq": 1, "t_ms": 1_500.0, "node": "datanode-1"}, end]) == 0


def test_checkpoint_safe_says_where_the_passed_row_was():
    """The row the checkpoint passed was in no sync yet (only in memory), in a sync the checkpoint did not wait for,
    or in a sync whose node was killed before DataCoord stored it: each is said, with the event that shows it."""
    log = Log()
    log.insert(7, 100)
    log.cp(100)
    (v,) = log.checker.result()
    assert "no sync holding it had started, so it was only in the DataNode's memory" in v.explanation
    log = Log()
    log.insert(7, 100)
    sync = log.row("datanode.sync", segment=7, vchannel=V, ts=120)
    log.cp(120)
    (v,) = log.checker.result()
    assert (f"a sync of segment 7 holding it had started (event {sync['seq'] + 1}) but was not stored, and the "
            f"checkpoint did not wait for it") in v.explanation
    log = Log()
    log.insert(7, 100)
    sync = log.row("datanode.sync", segment=7, vchannel=V, ts=120)
    kill = log.row("fault.kill")
    log.cp(120)
    (v,) = log.checker.result()
    assert (f"a sync of segment 7 holding it had started (event {sync['seq'] + 1}) but datanode-1 was killed "
            f"(event {kill['seq'] + 1}) before DataCoord stored it") in v.explanation
    assert v.seqs[1:3] == (sync["seq"], kill["seq"])  # the events cited are evidence
    # a sync below the row does not hold it
    log = Log()
    log.insert(7, 100)
    log.row("datanode.sync", segment=7, vchannel=V, ts=90)
    log.cp(100)
    (v,) = log.checker.result()
    assert "no sync holding it had started" in v.explanation
