"""Flush and checkpoint invariants, checked on the run log alone.

1. **Checkpoint safety** (``checkpoint-safe``) - a channel checkpoint DataCoord stores never reaches an
   inserted row that is not yet durable. A row at ``ts`` of segment ``S`` is durable once DataCoord
   stored a sync of ``S`` whose checkpoint (the segment's DmlPosition) is at or after ``ts``. A restarted
   DataNode seeks to the channel checkpoint ``c`` and skips every message with ``ts <= c``: a row with
   ``ts <= c`` that was not durable is lost.
2. **Checkpoints never go back** (``checkpoint-monotonic``) - the checkpoint DataCoord stores for a
   vchannel never moves backwards.
3. **A flush completes only past its ts** (``flush-complete``) - a DataNode clears a channel's ``flushTs``
   only when the stored checkpoint is strictly after it (``NotifyCheckpointUpdated``'s ``>``).
4. **A failed checkpoint update is retried** (``checkpoint-retried``) - when an update RPC carrying a
   vchannel's checkpoint fails, an RPC sent by the updater's next tick (at most one tick period after the
   failed one was sent) carries that channel again with a checkpoint at least as new - whether or not
   that retry succeeds (the task stays in the updater until DataCoord stored it: Go has no other retry),
   unless the DataNode died meanwhile.
5. **Durability** (``durable``) - at the final audit (every segment flushed and its binlogs read back
   from the object store), the binlogs of the segments DataCoord knows hold every acknowledged insert
   exactly once, and every acknowledged delete at least once (replaying a delete is harmless, so Milvus
   may write one twice after a restart). A run that ends before its audit is not judged on this one.

Deletes are checked by the audit only: checkpoint safety follows inserts, whose segment is known when
they are written.

A violation is explained as "Let ... Then ... because ...", naming its events by number (``seq + 1``,
as the stepper's slider counts them).
"""

from __future__ import annotations

import heapq
from itertools import compress, repeat
from operator import eq

from ..narrate import detail_dict, ts_text
from .violation import ROW, Read, StreamingChecker, batch_columns, column, detail_of

INVARIANTS = ("checkpoint-safe", "checkpoint-monotonic", "flush-complete", "checkpoint-retried", "durable")

# What the fast path (FlushChecker.write_batch) reads by columns: inserts and acknowledged writes; the rare
# kinds come as row dicts, for write.
_INSERT, _ACKED, _DELETED = range(3)
_READS = {
    "mq.produce": Read(_INSERT, ("msg_type", "segment", "vchannel", "end_ts", "count"),
                       ints=("segment", "end_ts", "count")),
    "client.insert": Read(_ACKED, ("error", "detail")),
    "client.delete": Read(_DELETED, ("error", "detail")),
}


def _inserts(layout, values: list[tuple]) -> list[tuple]:
    """The ``mq.produce`` tuples that are inserts, found in C (:meth:`FlushChecker.write` ignores the other
    messages, and every row of a layout without a ``segment`` column)."""
    if "segment" not in layout.positions:
        return []
    return list(compress(values, map(eq, column(layout, values, "msg_type"), repeat("Insert"))))


def _n(seq: int) -> str:
    return f"{seq + 1:,}"


class FlushChecker(StreamingChecker):
    """Streaming check of the four flush invariants; keeps at most ``limit`` violations per invariant."""

    invariants = INVARIANTS
    promise = ("no stored channel checkpoint passed a row that was not yet in a binlog, checkpoints never went back, "
               "every flush closed only past its timestamp, failed checkpoint updates were sent again, and the final "
               "binlogs held every acknowledged row once")
    kinds = frozenset({"mq.produce", "datacoord.save_binlog_paths", "datacoord.channel_cp", "datanode.flush_ts",
                       "datanode.cp_rpc", "fault.kill", "client.insert", "client.delete", "storage.audit", "run.end"})
    #: How write_batch reads each kind (the ones not in _READS as row dicts).
    _reads = {kind: _READS.get(kind, Read(ROW)) for kind in kinds}

    def __init__(self, limit: int = 20):
        super().__init__(limit)
        # segment -> heap of (row ts, produce seq, count) not yet durable; vchannel -> its segments
        self._pending: dict[int, list[tuple[int, int, int]]] = {}
        self._segments_of: dict[str, set[int]] = {}
        self._durable_ts: dict[int, tuple[int, int]] = {}  # segment -> (DmlPosition ts, save seq)
        self._cp: dict[str, tuple[int, int]] = {}  # vchannel -> (stored checkpoint ts, seq)
        self._acked: dict[object, int] = {}  # pk -> client ack seq
        self._deleted: dict[object, int] = {}
        self._audit: dict[object, list[tuple[int, int]]] = {}  # pk -> [(segment, audit seq)]
        self._audit_deleted: set = set()
        self._audited = False
        # (node, vchannel) -> (failed ts, failure seq, deadline ms): a failed update awaiting its retry
        self._retry_due: dict[tuple[str, str], tuple[int, int, float]] = {}
        self._rpc_timeout_ms = 0.0

    def write(self, row: dict) -> None:
        """Check one run-log row."""
        kind = row["kind"]
        if kind == "mq.produce":
            if row["msg_type"] == "Insert" and row.get("segment") is not None:
                seg, vch = int(row["segment"]), row["vchannel"]
                heapq.heappush(self._pending.setdefault(seg, []), (int(row["end_ts"]), int(row["seq"]), int(row["count"])))
                self._segments_of.setdefault(vch, set()).add(seg)
        elif kind == "datacoord.save_binlog_paths":
            if row.get("error") is None and row.get("ts") is not None:
                self._saved(row)
        elif kind == "datacoord.channel_cp":
            if row.get("error") is None and detail_dict(row["detail"]).get("saved"):
                self._channel_cp(row)
        elif kind == "datanode.flush_ts":
            detail = detail_dict(row["detail"])
            if detail.get("set") is False:
                self._flush_reset(row, detail)
        elif kind == "datanode.cp_rpc":
            self._cp_rpc(row)
        elif kind == "fault.kill":
            for key in [k for k in self._retry_due if k[0] == row["node"]]:
                del self._retry_due[key]
        elif kind == "client.insert" and row.get("error") is None:
            for pk in detail_dict(row["detail"]).get("pks", []):
                self._acked[pk] = int(row["seq"])
        elif kind == "client.delete" and row.get("error") is None:
            for pk in detail_dict(row["detail"]).get("pks", []):
                self._deleted[pk] = int(row["seq"])
        elif kind == "storage.audit":
            self._audited = True
            detail = detail_dict(row["detail"])
            for pk in detail.get("pks", []):
                self._audit.setdefault(pk, []).append((int(row["segment"]), int(row["seq"])))
            self._audit_deleted.update(detail.get("deleted", []))
        elif kind == "run.end":
            # a retry sent just before the end may not have answered yet: allow it one RPC timeout
            self._expire_retries(float(row["t_ms"]) - self._rpc_timeout_ms)
            if self._audited:
                self._judge_audit(int(row["seq"]))

    def write_batch(self, batch) -> None:
        """The recorder's fast path: what :meth:`write` does with each row of ``batch`` (a ``RowBatch``) of
        :attr:`kinds`, in ``seq`` order. Inserts and acknowledged writes are read straight from the batch's
        tuples (only the inserts of ``mq.produce``); the rare kinds are handed to :meth:`write` as rows.

        It mirrors the branches of :meth:`write` it replaces; ``tests/test_checker_fast.py`` proves both give
        the same violations and counts on real runs.
        """
        pending_of, segments_of, acked, deleted = self._pending, self._segments_of, self._acked, self._deleted
        for seq, code, columns in batch_columns(batch, self._reads, {"mq.produce": _inserts}):
            if code == _INSERT:
                msg_type, seg, vch, end_ts, count = columns
                if msg_type == "Insert" and seg is not None:
                    heapq.heappush(pending_of.setdefault(seg, []), (end_ts, seq, count))
                    segments_of.setdefault(vch, set()).add(seg)
            elif code == _ACKED:
                if columns[0] is None:
                    for pk in detail_of(columns[1]).get("pks", []):
                        acked[pk] = seq
            elif code == _DELETED:
                if columns[0] is None:
                    for pk in detail_of(columns[1]).get("pks", []):
                        deleted[pk] = seq
            else:  # ROW
                self.write(columns)

    def _saved(self, row: dict) -> None:
        seg, ts, seq = int(row["segment"]), int(row["ts"]), int(row["seq"])
        prev = self._durable_ts.get(seg)
        if prev is None or ts > prev[0]:
            self._durable_ts[seg] = (ts, seq)
        heap = self._pending.get(seg)
        while heap and heap[0][0] <= ts:
            heapq.heappop(heap)

    def _channel_cp(self, row: dict) -> None:
        vch, ts, seq = row["vchannel"], int(row["ts"]), int(row["seq"])
        prev = self._cp.get(vch)
        if prev is not None and ts < prev[0]:
            self._add("checkpoint-monotonic", (prev[1], seq),
                      f"Let event {_n(prev[1])} be DataCoord storing {vch}'s checkpoint at {ts_text(prev[0])}, and "
                      f"event {_n(seq)} storing it at {ts_text(ts)}. Then the checkpoint went back, because the "
                      f"second update was accepted although it was older than the one stored.")
        if prev is None or ts > prev[0]:
            self._cp[vch] = (ts, seq)
        worst = None
        for seg in sorted(self._segments_of.get(vch, ())):
            heap = self._pending.get(seg)
            if heap and heap[0][0] <= ts and (worst is None or heap[0][0] < worst[1][0]):
                worst = (seg, heap[0])
        if worst is not None:
            seg, (row_ts, produce_seq, count) = worst
            durable = self._durable_ts.get(seg)
            since = (f"the last sync DataCoord stored for segment {seg} covered rows up to "
                     f"{ts_text(durable[0])} (event {_n(durable[1])})" if durable is not None
                     else f"no sync of segment {seg} had been stored yet")
            self._add("checkpoint-safe", (produce_seq, seq),
                      f"Let event {_n(produce_seq)} be the insert of {count} row(s) at {ts_text(row_ts)} into segment "
                      f"{seg} on {vch}, and event {_n(seq)} DataCoord storing {vch}'s checkpoint at {ts_text(ts)}. "
                      f"Then a DataNode restarting now would seek past that insert and lose it, because {since}: the "
                      f"checkpoint passed data that was still only in memory.")

    def _expire_retries(self, now: float, node: str | None = None) -> None:
        """Report failed updates not sent again by their deadline, as of an RPC sent at ``now`` (``node``: its own)."""
        for key, (ts, fail_seq, deadline) in list(self._retry_due.items()):
            if (node is None or key[0] == node) and now > deadline:
                del self._retry_due[key]
                self._add("checkpoint-retried", (fail_seq,),
                          f"Let event {_n(fail_seq)} be {key[0]}'s failed update of {key[1]}'s checkpoint to "
                          f"{ts_text(ts)}. Then the updater's next tick did not send {key[1]} again, because the "
                          f"failed task was dropped instead of staying in the updater until DataCoord stored it.")

    def _cp_rpc(self, row: dict) -> None:
        """An update RPC (recorded when it ended): it retries what it carries; a failure is due again next tick."""
        node, seq = row["node"], int(row["seq"])
        detail = detail_dict(row["detail"])
        sent = float(detail.get("sent_ms", row["t_ms"]))
        self._rpc_timeout_ms = max(self._rpc_timeout_ms, float(detail.get("timeout_ms", 0.0)))
        self._expire_retries(sent, node)
        positions = detail.get("positions", {})
        for vch, ts in positions.items():
            due = self._retry_due.get((node, vch))
            if due is not None and int(ts) >= due[0]:
                del self._retry_due[(node, vch)]
        if row.get("error") is not None:
            # the next tick comes at most one period after this RPC was sent (1 ms of slack for ordering)
            deadline = sent + float(detail.get("tick_ms", 10_000)) + 1.0
            for vch, ts in positions.items():
                self._retry_due.setdefault((node, vch), (int(ts), seq, deadline))

    def _flush_reset(self, row: dict, detail: dict) -> None:
        flush_ts, cp_ts, seq = int(row["ts"]), int(detail.get("checkpoint", row.get("tick_ts") or 0)), int(row["seq"])
        if cp_ts <= flush_ts:
            self._add("flush-complete", (seq,),
                      f"Let event {_n(seq)} be {row['node']} closing the flush of {row['vchannel']} at flushTs "
                      f"{ts_text(flush_ts)}. Then the flush was declared complete on a checkpoint at "
                      f"{ts_text(cp_ts)}, not past flushTs, because the reset compared with >= where Milvus "
                      f"requires the stored checkpoint to be strictly greater.")

    def _judge_audit(self, end_seq: int) -> None:
        for pk, ack_seq in sorted(self._acked.items(), key=lambda kv: kv[1]):
            found = self._audit.get(pk, [])
            if not found:
                self._add("durable", (ack_seq, end_seq),
                          f"Let event {_n(ack_seq)} be the client's acknowledged insert of primary key {pk}. Then the "
                          f"final binlogs do not hold it, because its row was never written to a binlog that DataCoord "
                          f"recorded: it was lost.")
            elif len(found) > 1:
                where = ", ".join(f"segment {s}" for s, _ in found)
                self._add("durable", (ack_seq,) + tuple(a for _, a in found),
                          f"Let event {_n(ack_seq)} be the client's acknowledged insert of primary key {pk}. Then the "
                          f"final binlogs hold it {len(found)} times ({where}), because a replay after a restart "
                          f"buffered rows that were already flushed.")
        for pk, ack_seq in sorted(self._deleted.items(), key=lambda kv: kv[1]):
            if pk not in self._audit_deleted:
                self._add("durable", (ack_seq, end_seq),
                          f"Let event {_n(ack_seq)} be the client's acknowledged delete of primary key {pk}. Then no "
                          f"delta log holds it, because the delete was never written to a binlog that DataCoord "
                          f"recorded: it was lost.")

    @property
    def audited(self) -> bool:
        """Whether the run reached its final audit (durability was judged)."""
        return self._audited
