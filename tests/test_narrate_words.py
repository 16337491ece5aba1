"""The run summaries and the timeline's sentences count in English and say what the run did.

Each test here failed before its fix: "1 DML messages", "row(s)", "dies: crash", "rootcoord-1 died" of a node that
only froze, 2^18 - 1 called maxLogical, rounds counted from the reports (missing the one delSession sends), and a
first out-of-order message shown without saying why.
"""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

import milvus_edu
from milvus_edu.events.recorder import FIELD_NAMES
from milvus_edu.mechanisms.flush import summary as flush_summary
from milvus_edu.mechanisms.query import summary as query_summary
from milvus_edu.mechanisms.timetick import summary as timetick_summary
from milvus_edu.mechanisms.tso import summary as tso_summary
from milvus_edu.narrate import describe, named, plural, times

T0 = 463267587948544000  # a hybrid timestamp near the model's time zero


def row(seq: int, kind: str, t_ms: float = 0.0, node: str = "n", **fields) -> dict:
    """One run-log row with every column (None where not given); a dict ``detail`` is stored as its JSON text."""
    r = dict.fromkeys(FIELD_NAMES)
    if isinstance(fields.get("detail"), dict):
        fields["detail"] = json.dumps(fields["detail"])
    r.update(seq=seq, kind=kind, t_ms=t_ms, node=node, **fields)
    return r


@given(st.integers(min_value=0, max_value=10**9))
def test_plural_says_one_for_one_and_adds_an_s_otherwise(n):
    text = plural(n, "row")
    assert text == (f"{n:,} row" if n == 1 else f"{n:,} rows")
    assert plural(n, "entry", "entries").endswith("entry" if n == 1 else "entries")


def test_named_lists_ids_after_their_noun_counted_as_plural_counts():
    assert named("segment", [7]) == "segment 7"
    assert named("segment", [7, 8]) == "segments 7, 8"
    assert named("channel", None) == "no channel"


@given(st.integers(min_value=1, max_value=10**9))
def test_times_says_once_twice_then_a_count(n):
    """One helper for how often (the flush checker's duplicates and why --read's tsafe moves once said '2 times')."""
    assert times(n) == {1: "once", 2: "twice"}.get(n, f"{n:,} times")


def test_the_timetick_line_of_a_run_with_one_message_says_one_message():
    line, = timetick_summary.report({"timetick": {
        "pchannels": ["dml_0", "dml_1"], "dml_messages": 1, "out_of_order_messages": 0, "time_ticks": 2,
        "tick_rounds": 1, "packs": 0, "longest_tick_gap_ms": 200.0}})
    assert line.startswith("1 DML message on 2 pchannels (0 written out of timestamp order), 2 time ticks in 1 round;")
    assert line.endswith("longest gap between two ticks on one pchannel 0.20 s")


def test_the_query_line_counts_one_sealed_segment_as_one():
    lines = query_summary.report({"query": {
        "reads_by_level": {"Strong": 5}, "failed_reads": 0, "shard_waits_by_level": {}, "longest_wait_ms_by_level": {},
        "packs_applied": 1, "sealed_segments_loaded": 1}})
    assert lines[1].endswith("1 pack applied by the QueryNode (one per shard for every time tick it read, empty ones "
                             "included), 1 sealed segment loaded from binlogs")


def _flush(**changes) -> dict:
    f = {"acknowledged_rows": 1, "acknowledged_deletes": 1, "syncs": 1, "synced_rows": 1, "failed_syncs": 0,
         "channel_checkpoints_stored": 1, "channel_checkpoints_ignored": 0, "datanode_crashes": 1,
         "datanode_restarts": 1, "channel_takeovers": 0, "rows_filtered_on_replay": 1, "audited": True,
         "audit_segments": 1, "audit_flushed_segments": 1, "audit_rows": 1, "audit_deleted_keys": 1,
         "flush_ts_cleared": 1, "flush_ts_cleared_at_equal": 1, "flushes": 1, "flushes_completed": 1}
    f.update(changes)
    return {"flush": f}


def test_the_flush_lines_count_ones_as_one_and_never_write_s_in_brackets():
    lines = flush_summary.report(_flush())
    assert lines[0] == ("1 row and 1 delete acknowledged; 1 sync cut (1 row, 0 failed); 1 channel checkpoint stored "
                        "(0 ignored as not newer)")
    assert lines[1].startswith("the DataNode cleared flushTs 1 time, 1 of them on a stored checkpoint equal to")
    assert lines[2] == ("the DataNode crashed once and restarted once; 1 replayed row was filtered as already "
                        "flushed")
    assert lines[3] == "final audit: 1 segment (1 Flushed) holds 1 row and 1 delete in its binlogs"
    many = flush_summary.report(_flush(datanode_crashes=2, channel_takeovers=2, audit_segments=8, syncs=16,
                                       synced_rows=27284, rows_filtered_on_replay=10918))
    assert "16 syncs cut (27,284 rows, 0 failed)" in many[0]
    assert many[2] == ("the DataNode crashed twice and another DataNode took over its channels twice; 10,918 "
                       "replayed rows were filtered as already flushed")
    assert many[3].startswith("final audit: 8 segments (1 Flushed) hold ")
    assert not any("(s)" in line for line in lines + many)


def test_sentences_count_rows_timestamps_and_segments_in_english():
    sync = describe(row(1, "datanode.sync", node="datanode-1", segment=10001, count=4482, ts=T0, detail={}))
    assert "starts a sync of segment 10001: 4,482 rows, reporting position" in sync
    recv = describe(row(1, "client.recv", node="client-1", peer="rootcoord-1", count=1, ts=T0))
    assert "client-1 receives 1 timestamp starting at" in recv
    seal = describe(row(1, "datanode.seal", node="datanode-1", vchannel="v0", detail={"segments": [10000]}))
    assert seal == "datanode-1 seals segment 10000 of v0 at DataCoord's request."
    asks = describe(row(1, "datacoord.flush_segments", node="datacoord-1", peer="datanode-1", vchannel="v0",
                        detail={"segments": [10000, 10001]}))
    assert asks == "datacoord-1 asks datanode-1 to flush sealed segments 10000, 10001 of v0."


def test_a_crash_reads_as_a_crash():
    assert describe(row(1, "fault.kill", node="datanode-1", detail={"why": "crash"})) == (
        "datanode-1 crashes; everything in its memory is lost.")
    assert describe(row(1, "fault.kill", node="datanode-1", detail={"why": "crash at step 12 (sync)"})) == (
        "datanode-1 crashes at step 12 (sync); everything in its memory is lost.")


def test_a_logical_overflow_names_maxlogical_as_two_to_the_18():
    text = describe(row(1, "tso.alloc_retry", node="rootcoord-1", count=100000, logical=300000, physical_ms=0,
                        error="logical part outside of max logical interval"))
    assert "the logical counter went to 300,000, at or past maxLogical (2^18 = 262,144 by default)" in text
    assert "2^18 - 1 (maxLogical)" not in text


def _failover_summary(*faults: dict) -> dict:
    s = tso_summary.TSOSummary()
    for r in faults:
        s.write(r)
    s.write(row(10, "session.active", t_ms=80500.0, node="rootcoord-2"))
    sections = s.sections({})
    return {**sections, "config": {"tso": {"session_ttl_ns": 60_000_000_000}}}


def test_the_failover_line_says_a_paused_node_froze_and_whose_lease_ran_out():
    paused = _failover_summary(row(1, "session.keepalive", t_ms=20500.0, node="rootcoord-1"),
                               row(2, "fault.pause", t_ms=30000.0, node="rootcoord-1", detail={"duration_ms": 70000}))
    assert paused["failover"]["fault"] == "pause"
    line, = tso_summary.failover_line(paused)
    assert line.startswith("failover: rootcoord-1 froze at 30 s; rootcoord-2 became active at 80.5 s "
                           "(rootcoord-1's lease, last renewed at 20.5 s, ran out 60 s later;")
    killed = _failover_summary(row(2, "fault.kill", t_ms=10000.0, node="rootcoord-1"))
    assert tso_summary.failover_line(killed)[0].startswith("failover: rootcoord-1 died at 10 s;")


def _tick(seq: int, ch: str, t_ms: float) -> dict:
    return row(seq, "mq.produce", t_ms=t_ms, node="rootcoord-1", channel=ch, msg_type="TimeTick", tick_ts=T0 + seq,
               end_ts=T0 + seq, detail={"min_from": "ddl"})


def test_rounds_are_counted_from_the_ticks_written_so_the_round_a_session_deletion_sends_counts():
    s = timetick_summary.TimeTickSummary()
    seq = iter(range(1, 100))
    s.write(row(next(seq), "rootcoord.timetick_update", peer="proxy-1", detail={"sent": True}))
    for ch in ("dml_0", "dml_1"):
        s.write(_tick(next(seq), ch, 100.0))
    # the dead proxy's session expires: delSession's sendToChannel writes a round no report completed
    s.write(row(next(seq), "rootcoord.session_del", peer="proxy-2"))
    s.write(row(next(seq), "rootcoord.timetick_update", peer="ddl", detail={"sent": False}))
    for ch in ("dml_1", "dml_0"):
        s.write(_tick(next(seq), ch, 60000.0))
    t = s.sections({})["timetick"]
    assert (t["time_ticks"], t["tick_rounds"]) == (4, 2)


def test_the_first_out_of_order_message_is_explained_after_the_timeline():
    keys = timetick_summary.KeyEvents()
    insert = dict(kind="mq.produce", node="proxy-1", channel="dml_2", vchannel="dml_2_100v2", msg_type="Insert",
                  count=2)
    shown = [keys.show(row(seq, msg_id=msg_id, end_ts=T0 + ts, ts=T0 + ts, **insert))
             for seq, msg_id, ts in ((48, 1, 1), (60, 2, 4), (81, 3, 2))]
    assert shown == [True, False, True]
    note, = keys.notes()
    assert note.startswith("(event 82 is the first message written out of timestamp order: its ts ")
    assert "is below that of message 2 (" in note and note.endswith("already in dml_2)")


def test_every_event_of_a_run_is_told_in_a_sentence_without_s_in_brackets():
    # the tickers' start events were told as the bare "rootcoord-1: rootcoord.ticker_start"
    result = milvus_edu.simulate("insert-delete-reorder", seed=1, duration_s=2)
    rows = result.events.to_dict("records")
    texts = [describe(r) for r in rows]
    assert not [t for t, r in zip(texts, rows) if t == f"{r['node']}: {r['kind']}"]
    assert not [t for t in texts if "(s)" in t]


def test_the_datanodes_step_count_is_told_in_a_sentence():
    text = describe(row(1, "datanode.steps", node="datanode-1", count=461))
    assert text.startswith("At the audit, datanode-1 has passed 461 step boundaries (packs its flowgraph took")


def test_an_invalidation_of_an_empty_meta_cache_says_there_was_nothing_to_remove():
    text = describe(row(1, "proxy.meta_cache", node="proxy-1", ts=T0, detail={
        "collection": "C0", "collection_id": 100, "result": "invalidate", "removed": [], "task": "CreateCollection"}))
    assert text.endswith("invalidates proxy-1's meta cache: nothing to remove.")


def test_a_run_without_a_flush_is_not_said_to_have_ended_before_its_flush_completed():
    # flush-drop-collection drops the collection instead of flushing: there was no flush to complete
    dropped = flush_summary.report(_flush(audited=False, flushes=0, flushes_completed=0, datanode_crashes=0))
    assert dropped[-1] == "no final audit: no client flushed in this run (durability not judged)"
    stuck = flush_summary.report(_flush(audited=False, flushes=1, flushes_completed=0, datanode_crashes=0))
    assert stuck[-1] == "no final audit: the run ended before the last flush completed (durability not judged)"
