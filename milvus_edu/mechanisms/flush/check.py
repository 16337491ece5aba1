"""Flush and checkpoint invariants, checked on the run log alone.

1. **Checkpoint safety** (``checkpoint-safe``) - a channel checkpoint DataCoord stores never reaches an
   inserted row that is not yet durable. A row at ``ts`` of segment ``S`` is durable once DataCoord
   stored a sync of ``S`` whose checkpoint (the segment's DmlPosition) is at or after ``ts``. A restarted
   DataNode seeks to the channel checkpoint ``c`` and skips every message with ``ts <= c``: a row with
   ``ts <= c`` that was not durable is lost.
2. **Checkpoints never go back** (``checkpoint-monotonic``) - the checkpoint DataCoord stores for a
   vchannel never moves backwards.
3. **A flush declared done holds its rows** (``flush-durable``) - when a flush is declared done, every
   insert at or before its ``flushTs`` is in a binlog DataCoord recorded. A flush is declared done twice: by
   the DataNode, which clears a channel's ``flushTs`` once DataCoord stored a checkpoint past it
   (``NotifyCheckpointUpdated``), and by DataCoord, whose ``GetFlushState`` tells the client "flushed". The
   client's answer is what a user sees; the DataNode's is what the design documents call "the flush is
   confirmed". (Deletes are judged by the final audit only: an L0 segment's id is not known when it is written.)
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

Two progress checks (liveness) say that a run which stopped failing keeps moving. Each counts from the
later of its start and the last fault (a DataNode killed, paused or stalled, a failed RPC, a channel handed to
another node, a DataNode watching its channels again): while a killed or paused node is not back, it waits.
A run that ends before a bound has elapsed is not judged on it.

6. **A flush completes** (``flush-completes``) - once called, a flush is answered "flushed" by
   ``GetFlushState`` within ``FLUSH_BOUND`` = 2 x ``proxy.timeTickInterval`` (0.2 s: the DataNode consumes
   past flushTs) + ``dataNode.timetick.interval`` (0.5 s: DataCoord's FlushSegments rides on the DataNode's
   next time tick) + ``dataNode.channel.channelCheckpointUpdateTickInSeconds`` (10 s: the updater sends the
   flush checkpoint at once, at the latest on its next tick) + ``updateChannelCheckpointRPCTimeout`` (20 s:
   one RPC that hangs) + the client's 0.5 s ``GetFlushState`` poll = 31.4 s with Milvus's defaults. DataCoord's
   own gates on a sealed segment's flush (``flushPolicyL1``: ``dataCoord.segment.assignmentExpiration`` 2 s and
   ``dataCoord.segmentFlushInterval`` 2 s) are not added: they run alongside the 10 s and 20 s terms. The clock
   also restarts whenever DataCoord stores a sync of one of the flush's segments: writing binlogs takes what
   the object store takes.
7. **The channel checkpoint advances** (``checkpoint-advances``) - DataCoord's checkpoint of a vchannel moves
   forward at least every ``CHECKPOINT_BOUND`` = 1.1 x ``dataNode.segment.syncPeriod`` (600 s plus its jitter:
   the stale-buffer policy syncs any buffer that old, so no buffer holds the checkpoint longer) +
   ``updateChannelCheckpointInterval`` (60 s: the ttNode's periodic hand-over) + the updater's 10 s tick + its
   20 s RPC timeout + 2 x ``proxy.timeTickInterval`` = 750.4 s. Every shipped scenario is shorter, so this one
   judges long runs only (``--duration``).

The terms are the run's parameters (:meth:`FlushChecker.configure`; Milvus's defaults for a checker made without
them, as for a bare log), except the updater's tick and RPC timeout, read from the run's update RPCs when it made
any (they are logged). The bounds leave out pursuit mode (``mq.enablePursuitMode``): with a time tick interval
long enough that a tick reaches the DataNode more than ``mq.pursuitLag`` (10 s) behind its clock (a 15 s
interval does), the DataNode's stream merges tick rounds into one pack for up to ``mq.pursuitBufferTime`` (60 s),
and a flush waits that long for its pack: this checker then reports ``flush-completes``.

A violation is explained as "Let ... Then ... because ...", naming its events by number (``seq + 1``,
as the stepper's slider counts them).
"""

from __future__ import annotations

import heapq
from collections import Counter

from ...check.violation import StreamingChecker
from ...config import DataNodeParams, TimeTickParams
from ...events.dispatch import on
from ...narrate import detail_dict, named, plural, times, ts_text

INVARIANTS = ("checkpoint-safe", "checkpoint-monotonic", "flush-durable", "checkpoint-retried", "durable",
              "flush-completes", "checkpoint-advances")

_DN = DataNodeParams()
_POLL_MS = 500.0  # the client's GetFlushState poll (pymilvus waits 0.5 s between calls)


def flush_bound_ms(updater_tick_ms: float, rpc_timeout_ms: float, timetick: TimeTickParams | None = None,
                   datanode: DataNodeParams | None = None) -> float:
    """``FLUSH_BOUND`` (see the module docstring): how long after its start (or its last fault or stored
    sync) a flush may stay unanswered, with the given parameters (None: Milvus's defaults)."""
    tick_ms = (timetick or TimeTickParams()).time_tick_interval_ns / 1e6
    dn_tick_ms = (datanode or _DN).timetick_interval_ns / 1e6
    return 2 * tick_ms + dn_tick_ms + updater_tick_ms + rpc_timeout_ms + _POLL_MS


def checkpoint_bound_ms(updater_tick_ms: float, rpc_timeout_ms: float, timetick: TimeTickParams | None = None,
                        datanode: DataNodeParams | None = None) -> float:
    """``CHECKPOINT_BOUND`` (see the module docstring): how long DataCoord's checkpoint of a vchannel may stand
    still while nothing fails, with the given parameters (None: Milvus's defaults)."""
    tick_ms = (timetick or TimeTickParams()).time_tick_interval_ns / 1e6
    dn = datanode or _DN
    return (1.1 * dn.sync_period_ns + dn.update_channel_checkpoint_interval_ns) / 1e6 \
        + updater_tick_ms + rpc_timeout_ms + 2 * tick_ms

def _n(seq: int) -> str:
    return f"{seq + 1:,}"


class FlushChecker(StreamingChecker):
    """Streaming check of the flush invariants; keeps at most ``limit`` violations per invariant."""

    invariants = INVARIANTS
    promises = {
        "checkpoint-safe": "no stored channel checkpoint passed a row that was not yet in a binlog",
        "checkpoint-monotonic": "checkpoints never went back",
        "flush-durable": "no flush was declared done before its rows were in binlogs",
        "checkpoint-retried": "failed checkpoint updates were sent again",
        "durable": "the final binlogs held every acknowledged row once",
        "flush-completes": "every flush completed within its bound unless the run ended first or a node was "
                           "still down",
        "checkpoint-advances": "every channel checkpoint advanced within its bound unless the run ended first or "
                               "a node was still down",
    }
    progress = frozenset({"flush-completes", "checkpoint-advances"})
    chances = {
        "checkpoint-safe": "DataCoord stored a channel checkpoint",
        "checkpoint-monotonic": "DataCoord stored a vchannel's checkpoint a second time",
        "flush-durable": "a flush declared done (flushTs cleared, or GetFlushState answering flushed)",
        "checkpoint-retried": "a checkpoint update RPC failed",
        "durable": "the final audit of the binlogs",
        "flush-completes": "a client called flush",
        "checkpoint-advances": "a run lasting past a checkpoint's bound after it last moved",
    }

    def __init__(self, limit: int = 20):
        super().__init__(limit)
        # segment -> heap of (row ts, produce seq, count) not yet durable; vchannel -> its segments
        self._pending: dict[int, list[tuple[int, int, int]]] = {}
        self._segments_of: dict[str, set[int]] = {}
        self._durable_ts: dict[int, tuple[int, int]] = {}  # segment -> (DmlPosition ts, save seq)
        # segment -> (position ts, seq, node, seq of the node's kill or None) of the last sync a DataNode began
        self._syncing: dict[int, tuple[int, int, str, int | None]] = {}
        self._cp: dict[str, tuple[int, int]] = {}  # vchannel -> (stored checkpoint ts, seq)
        self._acked: dict[object, int] = {}  # pk -> client ack seq
        self._deleted: dict[object, int] = {}
        self._audit: dict[object, list[tuple[int, int]]] = {}  # pk -> [(segment, audit seq)]
        self._audit_deleted: set = set()
        self._audited = False
        # (node, vchannel) -> (failed ts, failure seq, deadline ms): a failed update awaiting its retry
        self._retry_due: dict[tuple[str, str], tuple[int, int, float]] = {}
        self._rpc_timeout_ms = 0.0
        # progress: the updater's tick and RPC timeout (Milvus's defaults until the run's RPCs say otherwise)
        self._tick_ms = _DN.channel_checkpoint_update_tick_ns / 1e6
        self._timeout_ms = _DN.update_channel_checkpoint_rpc_timeout_ns / 1e6
        self._timetick: TimeTickParams | None = None  # the run's parameters (configure); None: Milvus's defaults
        self._datanode: DataNodeParams | None = None
        # nodes killed, paused or stopped and not back -> (fault kind, when, its seq)
        self._down: dict[str, tuple[str, float, int]] = {}
        self._fault_ms = 0.0  # when the last fault happened or healed
        # (client, flushTs) -> [call seq, call ms, segments, last stored sync ms of one of them]
        self._open_flushes: dict[tuple[str, int], list] = {}
        self._flushed_segments: set[int] = set()  # segments DataCoord marked Flushing by a flush sync
        self._cp_moved: dict[str, float] = {}  # vchannel -> when DataCoord's checkpoint last moved (ms)
        self._cp_stuck: set[str] = set()  # vchannels already reported by checkpoint-advances
        self._handed: dict[str, tuple[int, int]] = {}  # vchannel -> (checkpoint the ttNode handed over, seq)
        self._last_sync: dict[str, tuple[int, int]] = {}  # vchannel -> (segment, seq) of the last sync DataCoord stored

    def configure(self, config) -> None:
        """Take the terms of ``flush-completes``' and ``checkpoint-advances``' bounds from the run's ``config``
        (None: Milvus's defaults): the time tick interval, the DataNode's time tick interval, sync period and
        checkpoint hand-over interval, and the updater's tick and RPC timeout until the run's RPCs log theirs."""
        if config is None:
            return
        self._timetick, self._datanode = config.timetick, config.datanode
        self._tick_ms = config.datanode.channel_checkpoint_update_tick_ns / 1e6
        self._timeout_ms = config.datanode.update_channel_checkpoint_rpc_timeout_ns / 1e6

    # The frequent kinds are read by columns; progress is not judged on them. Every kind read as a row dict
    # first moves the progress clocks (:meth:`_clock`).

    @on("mq.produce", columns=("msg_type", "segment", "vchannel", "end_ts", "count"),
        ints=("segment", "end_ts", "count"))
    def _produced(self, seq: int, msg_type: str, seg, vch, end_ts, count) -> None:
        if msg_type == "Insert" and seg is not None:
            heapq.heappush(self._pending.setdefault(seg, []), (end_ts, seq, count))
            self._segments_of.setdefault(vch, set()).add(seg)

    @on("datanode.sync", columns=("node", "segment", "ts"), ints=("segment", "ts"))
    def _sync_started(self, seq: int, node, seg, ts) -> None:
        if seg is not None and ts is not None:
            self._syncing[seg] = (ts, seq, str(node), None)

    @on("client.insert", columns=("error", "detail"), objects=("detail",))
    def _insert_acked(self, seq: int, error, detail: dict) -> None:
        if error is None:
            for pk in detail.get("pks", []):
                self._acked[pk] = seq

    @on("client.delete", columns=("error", "detail"), objects=("detail",))
    def _delete_acked(self, seq: int, error, detail: dict) -> None:
        if error is None:
            for pk in detail.get("pks", []):
                self._deleted[pk] = seq

    @on("fault.pause", "fault.restart", "fault.resume", "fault.stall", "datanode.watch", "datacoord.reassign")
    def _clock(self, row: dict) -> None:
        """Move the progress clocks on a fault or a recovery, then report what ran past its bound by now."""
        self._fault_row(row["kind"], row)
        self._judge_progress(float(row["t_ms"]))

    @on("datacoord.save_binlog_paths")
    def _save(self, row: dict) -> None:
        self._clock(row)
        if row.get("error") is None and row.get("ts") is not None:
            self._saved(row)

    @on("datacoord.channel_cp")
    def _stored_cp(self, row: dict) -> None:
        self._clock(row)
        if row.get("error") is None and detail_dict(row["detail"]).get("saved"):
            self._channel_cp(row)

    @on("datanode.flush_ts")
    def _flush_ts(self, row: dict) -> None:
        self._clock(row)
        detail = detail_dict(row["detail"])
        if detail.get("set") is False:
            self._flush_reset(row, detail)

    @on("client.flush")
    def _flush_call(self, row: dict) -> None:
        self._clock(row)
        if row.get("error") is None:
            self._client_flush(row)

    @on("datanode.checkpoint")
    def _handed_over(self, row: dict) -> None:
        self._clock(row)
        self._handed[row["vchannel"]] = (int(row["ts"]), int(row["seq"]))

    @on("datanode.cp_rpc")
    def _cp_rpc_row(self, row: dict) -> None:
        self._clock(row)
        self._cp_rpc(row)

    @on("fault.kill", "datanode.stop")
    def _gone(self, row: dict) -> None:
        """A node gone (killed, or stopped gracefully: its updater closes unsent) retries nothing."""
        self._clock(row)
        for key in [k for k in self._retry_due if k[0] == row["node"]]:
            del self._retry_due[key]
        if row["kind"] == "fault.kill":  # its syncs not stored by now die with it
            for seg, (ts, seq, node, _) in list(self._syncing.items()):
                if node == row["node"] and self._durable_ts.get(seg, (-1,))[0] < ts:
                    self._syncing[seg] = (ts, seq, node, int(row["seq"]))

    @on("storage.audit")
    def _audited_segment(self, row: dict) -> None:
        self._clock(row)
        self._audited = True
        detail = detail_dict(row["detail"])
        found = (int(row["segment"]), int(row["seq"]))  # where each key of the segment's binlogs was found
        audit = self._audit
        for pk in detail.get("pks", []):
            audit.setdefault(pk, []).append(found)
        self._audit_deleted.update(detail.get("deleted", []))

    @on("run.end")
    def _end(self, row: dict) -> None:
        self._clock(row)
        cp_bound = checkpoint_bound_ms(self._tick_ms, self._timeout_ms, self._timetick, self._datanode)
        end = float(row["t_ms"])
        self.tried["checkpoint-advances"] += sum(end > max(moved, self._fault_ms) + cp_bound
                                                 for moved in self._cp_moved.values())
        if self._down:
            self._held_at_end(int(row["seq"]), end)
        # a retry sent just before the end may not have answered yet: allow it one RPC timeout
        self._expire_retries(end - self._rpc_timeout_ms)
        if self._audited:
            self._judge_audit(int(row["seq"]))
        # Judged: let the per-key maps go. They were 770 KB of a 60-s flush-basics run, pickled back from the sink
        # process on its critical path at every close (20 ms of a 700-ms run); what the run found is in the verdicts.
        self._acked, self._deleted, self._audit, self._audit_deleted = {}, {}, {}, set()

    def _saved(self, row: dict) -> None:
        seg, ts, seq = int(row["segment"]), int(row["ts"]), int(row["seq"])
        if row.get("vchannel") is not None:
            self._last_sync[row["vchannel"]] = (seg, seq)
        if detail_dict(row["detail"]).get("flushed"):
            self._flushed_segments.add(seg)
        for flush in self._open_flushes.values():
            if seg in flush[2]:
                flush[3] = float(row["t_ms"])
        prev = self._durable_ts.get(seg)
        if prev is None or ts > prev[0]:
            self._durable_ts[seg] = (ts, seq)
        heap = self._pending.get(seg)
        while heap and heap[0][0] <= ts:
            heapq.heappop(heap)

    def _channel_cp(self, row: dict) -> None:
        vch, ts, seq = row["vchannel"], int(row["ts"]), int(row["seq"])
        prev = self._cp.get(vch)
        self.tried["checkpoint-safe"] += 1
        self.tried["checkpoint-monotonic"] += prev is not None
        if prev is not None and ts < prev[0]:
            self._add("checkpoint-monotonic", (prev[1], seq),
                      f"Let event {_n(prev[1])} be DataCoord storing {vch}'s checkpoint at {ts_text(prev[0])}, and "
                      f"event {_n(seq)} storing it at {ts_text(ts)}. Then the checkpoint went back, because the "
                      f"second update was accepted although it was older than the one stored.")
        if prev is None or ts > prev[0]:
            self._cp[vch] = (ts, seq)
            self._cp_moved[vch] = float(row["t_ms"])
            self._cp_stuck.discard(vch)
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
            where, cited = self._in_flight(seg, row_ts)
            self._add("checkpoint-safe", (produce_seq, *cited, seq),
                      f"Let event {_n(produce_seq)} be the insert of {plural(count, 'row')} at {ts_text(row_ts)} into segment "
                      f"{seg} on {vch}, and event {_n(seq)} DataCoord storing {vch}'s checkpoint at {ts_text(ts)}. "
                      f"Then a DataNode restarting now would seek past that insert and lose it, because {since}"
                      f"{where}.")

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
            self.tried["checkpoint-retried"] += 1
            # the next tick comes at most one period after this RPC was sent (1 ms of slack for ordering)
            deadline = sent + float(detail.get("tick_ms", 10_000)) + 1.0
            for vch, ts in positions.items():
                self._retry_due.setdefault((node, vch), (int(ts), seq, deadline))

    def _oldest_pending(self, vchannels, flush_ts: int):
        """The earliest insert at or before ``flush_ts`` into a segment of ``vchannels`` not yet in a binlog
        DataCoord recorded, as ``(segment, (row ts, produce seq, count))``, or None."""
        worst = None
        for vch in sorted(vchannels):
            for seg in sorted(self._segments_of.get(vch, ())):
                heap = self._pending.get(seg)
                if heap and heap[0][0] <= flush_ts and (worst is None or heap[0] < worst[1]):
                    worst = (seg, heap[0])
        return worst

    def _in_flight(self, seg: int, row_ts: int) -> tuple[str, tuple[int, ...]]:
        """Where a row the checkpoint passed was, in words, and the events that show it: in a sync the DataNode had
        started (the checkpoint did not wait for it, or the node was killed first) or in no sync yet (only in the
        DataNode's memory)."""
        sync = self._syncing.get(seg)
        if sync is not None and sync[0] >= row_ts and sync[3] is not None:
            return (f": a sync of segment {seg} holding it had started (event {_n(sync[1])}) but {sync[2]} was killed "
                    f"(event {_n(sync[3])}) before DataCoord stored it", (sync[1], sync[3]))
        if sync is not None and sync[0] >= row_ts:
            return (f": a sync of segment {seg} holding it had started (event {_n(sync[1])}) but was not stored, and "
                    f"the checkpoint did not wait for it", (sync[1],))
        return ": no sync holding it had started, so it was only in the DataNode's memory", ()

    def _why_pending(self, seg: int) -> str:
        durable = self._durable_ts.get(seg)
        return (f"the last sync of segment {seg} DataCoord had stored covered rows up to {ts_text(durable[0])} (event "
                f"{_n(durable[1])})" if durable is not None else f"no sync of segment {seg} had been stored yet")

    def _flush_reset(self, row: dict, detail: dict) -> None:
        """The DataNode cleared a channel's flushTs: it considers the flush done; every insert up to flushTs must
        be in a binlog by now."""
        flush_ts, cp_ts, seq = int(row["ts"]), int(detail.get("checkpoint", row.get("tick_ts") or 0)), int(row["seq"])
        self.tried["flush-durable"] += 1
        worst = self._oldest_pending((row["vchannel"],), flush_ts)
        if worst is None:
            return
        seg, (row_ts, produce_seq, count) = worst
        where = "equal to flushTs" if cp_ts == flush_ts else "past flushTs"
        held, cited = self._in_flight(seg, row_ts)
        self._add("flush-durable", (produce_seq, *cited, seq),
                  f"Let event {_n(produce_seq)} be the insert of {plural(count, 'row')} at {ts_text(row_ts)} into segment "
                  f"{seg}, and event {_n(seq)} {row['node']} declaring the flush of {row['vchannel']} at flushTs "
                  f"{ts_text(flush_ts)} done (it cleared flushTs on a stored checkpoint at {ts_text(cp_ts)}, {where}). "
                  f"Then the flush was declared done while that insert, older than flushTs, was in no binlog, because "
                  f"{self._why_pending(seg)}{held}.")

    def _client_flush(self, row: dict) -> None:
        """The client's flush: opened when flushTs is known, closed when GetFlushState says flushed (then every
        insert up to flushTs must be in a binlog)."""
        detail = detail_dict(row["detail"])
        key = (str(row["node"]), int(row["ts"]))
        seq, now = int(row["seq"]), float(row["t_ms"])
        if not detail.get("flushed"):
            self.tried["flush-completes"] += 1
            self._open_flushes[key] = [seq, now, frozenset(int(s) for s in detail.get("segments", [])), now]
            return
        self.tried["flush-durable"] += 1
        self._open_flushes.pop(key, None)
        worst = self._oldest_pending(self._segments_of, key[1])
        if worst is None:
            return
        seg, (row_ts, produce_seq, count) = worst
        self._add("flush-durable", (produce_seq, seq),
                  f"Let event {_n(produce_seq)} be the insert of {plural(count, 'row')} at {ts_text(row_ts)} into segment "
                  f"{seg}, and event {_n(seq)} GetFlushState telling {key[0]} that its flush at flushTs "
                  f"{ts_text(key[1])} is done. Then the client was told its rows were flushed while that insert, older "
                  f"than flushTs, was in no binlog, because {self._why_pending(seg)}.")

    def _fault_row(self, kind: str, row: dict) -> None:
        """Restart the progress clocks on a fault or a recovery; hold them while a node is down."""
        now = float(row["t_ms"])
        if kind == "datanode.cp_rpc":
            detail = detail_dict(row["detail"])
            self._tick_ms = float(detail.get("tick_ms", self._tick_ms))
            self._timeout_ms = float(detail.get("timeout_ms", self._timeout_ms))
        if kind in ("fault.kill", "fault.pause", "datanode.stop"):
            self._down[str(row["node"])] = (kind, now, int(row["seq"]))
        elif kind in ("fault.restart", "fault.resume"):
            self._down.pop(str(row["node"]), None)
        elif kind == "datacoord.reassign":
            self._down.pop(str(detail_dict(row["detail"]).get("from")), None)
        elif kind == "fault.stall":
            now += float(detail_dict(row["detail"]).get("duration_ms", 0.0))
        elif kind != "datanode.watch" and row.get("error") is None:
            return  # not a fault, nor a DataNode (re)starting to consume after one
        self._fault_ms = max(self._fault_ms, now)

    def _judge_progress(self, now: float) -> None:
        """Report each open flush and each vchannel whose bound ran out by ``now`` (once each)."""
        if self._down:
            return
        bound = flush_bound_ms(self._tick_ms, self._timeout_ms, self._timetick, self._datanode)
        for key, (call_seq, call_ms, segments, last_save) in list(self._open_flushes.items()):
            start = max(call_ms, last_save, self._fault_ms)
            if now > start + bound:
                del self._open_flushes[key]
                self._flush_stuck(key, call_seq, call_ms, segments, start, bound)
        cp_bound = checkpoint_bound_ms(self._tick_ms, self._timeout_ms, self._timetick, self._datanode)
        for vch, moved in self._cp_moved.items():
            start = max(moved, self._fault_ms)
            if vch not in self._cp_stuck and now > start + cp_bound:
                self._cp_stuck.add(vch)
                cp_ts, cp_seq = self._cp[vch]
                self._add("checkpoint-advances", (cp_seq,),
                          f"Let event {_n(cp_seq)} be DataCoord storing {vch}'s checkpoint at {ts_text(cp_ts)}, at "
                          f"{moved / 1000:.1f} s. Then it had not moved {cp_bound / 1000:.1f} s later (1.1 x the "
                          f"stale-buffer syncPeriod + the 60 s periodic hand-over + the updater's tick and RPC "
                          f"timeout + 2 time ticks), with no fault since {start / 1000:.1f} s, because "
                          f"{self._handed_text(vch)}.")

    def _held_at_end(self, end_seq: int, end: float) -> None:
        """The run ended while a DataNode was down: each flush or checkpoint past its bound then is a stall the fault
        explains (the bounds are not counted while a node is down), not a pass."""
        node, (kind, down_ms, down_seq) = min(self._down.items(), key=lambda item: item[1][1])
        how = {"fault.kill": "was killed", "fault.pause": "was paused (a GC or VM pause)",
               "datanode.stop": "was stopped"}[kind]
        down = (f"{node} {how} at event {_n(down_seq)} ({down_ms / 1000:.3f} s) and was still down when the run ended "
                f"({end / 1000:.3f} s)")
        if node.startswith("datanode"):
            down += ", with no other DataNode given its channels"
        bound = flush_bound_ms(self._tick_ms, self._timeout_ms, self._timetick, self._datanode)
        for (client, flush_ts), (call_seq, call_ms, _, last_save) in self._open_flushes.items():
            start = max(call_ms, last_save, self._fault_ms)
            if end > start + bound and len(self.stalls) < self.limit:
                self.stalls.append({
                    "what": "flush", "from_ms": call_ms, "to_ms": None, "held_by": node, "cause_seq": down_seq,
                    "seqs": [call_seq, down_seq],
                    "explanation": f"Let event {_n(call_seq)} be {client}'s flush at {call_ms / 1000:.1f} s, flushTs "
                                   f"{ts_text(flush_ts)}, and event {_n(down_seq)} the fault on {node}. Then "
                                   f"GetFlushState had not said flushed when the run ended, {(end - start) / 1000:.1f} "
                                   f"s after {start / 1000:.1f} s (the later of the call, its last stored sync and the "
                                   f"last fault), longer than its bound of {bound / 1000:.1f} s, because {down}: the "
                                   f"flush waits for that node, so the bound is not counted while it is down."})
        cp_bound = checkpoint_bound_ms(self._tick_ms, self._timeout_ms, self._timetick, self._datanode)
        for vch, moved in self._cp_moved.items():
            start = max(moved, self._fault_ms)
            if vch not in self._cp_stuck and end > start + cp_bound and len(self.stalls) < self.limit:
                cp_ts, cp_seq = self._cp[vch]
                self.stalls.append({
                    "what": "channel checkpoint", "from_ms": moved, "to_ms": None, "held_by": node,
                    "cause_seq": down_seq, "seqs": [cp_seq, down_seq],
                    "explanation": f"Let event {_n(cp_seq)} be DataCoord storing {vch}'s checkpoint at "
                                   f"{ts_text(cp_ts)}, at {moved / 1000:.1f} s, and event {_n(down_seq)} the fault on "
                                   f"{node}. Then it had not moved when the run ended, longer than its bound of "
                                   f"{cp_bound / 1000:.1f} s after {start / 1000:.1f} s, because {down}."})

    def _handed_text(self, vch: str) -> str:
        handed = self._handed.get(vch)
        if handed is None:
            return "the DataNode handed no checkpoint of it to its updater"
        text = (f"the last checkpoint the DataNode handed to its updater (event {_n(handed[1])}) was still at "
                f"{ts_text(handed[0])}")
        synced = self._last_sync.get(vch)
        if synced is not None and synced[1] > handed[1]:
            # a sync stored since: the buffer may be gone, but the ttNode hands a checkpoint over only when a pack
            # reaches it (ttNode.Operate), so the checkpoint waits for the channel's next pack
            return (f"{text}, and none was handed over after DataCoord stored a sync of segment {synced[0]} on it "
                    f"(event {_n(synced[1])}): the ttNode hands a checkpoint over only as a pack reaches it")
        return f"{text}: a buffer that starts there was never synced"

    def _flush_stuck(self, key, call_seq: int, call_ms: float, segments, start: float, bound: float) -> None:
        client, flush_ts = key
        reasons = []
        for vch in sorted(self._cp):
            cp_ts, cp_seq = self._cp[vch]
            if cp_ts < flush_ts:
                reasons.append(f"DataCoord's checkpoint of {vch} was stuck at {ts_text(cp_ts)} (event {_n(cp_seq)}), "
                               f"below flushTs, and {self._handed_text(vch)}")
        waiting = sorted(set(segments) - self._flushed_segments)
        if waiting:
            reasons.append(f"{named('segment', waiting)} never reached Flushing")
        because = "; ".join(reasons) if reasons else "GetFlushState kept failing"
        self._add("flush-completes", (call_seq,),
                  f"Let event {_n(call_seq)} be {client}'s flush at {call_ms / 1000:.1f} s, flushTs "
                  f"{ts_text(flush_ts)}. Then GetFlushState had still not said flushed at "
                  f"{(start + bound) / 1000:.1f} s, the latest a flush may end: {start / 1000:.1f} s (the later of "
                  f"the call, its last stored sync and the last fault) + {bound / 1000:.1f} s (2 time ticks + the "
                  f"DataNode's time tick + the checkpoint updater's tick and RPC timeout + one poll), because "
                  f"{because}.")

    def _judge_audit(self, end_seq: int) -> None:
        self.tried["durable"] += 1
        # the keys the binlogs do not hold once, in the order the client's inserts were acknowledged
        audit = self._audit
        wrong = sorted(((pk, ack_seq) for pk, ack_seq in self._acked.items() if len(audit.get(pk, ())) != 1),
                       key=lambda kv: kv[1])
        for pk, ack_seq in wrong:
            found = audit.get(pk, [])
            if not found:
                self._add("durable", (ack_seq, end_seq),
                          f"Let event {_n(ack_seq)} be the client's acknowledged insert of primary key {pk}. Then the "
                          f"final binlogs do not hold it, because its row was never written to a binlog that DataCoord "
                          f"recorded: it was lost.")
            elif len(found) > 1:
                per = Counter(s for s, _ in found)
                where = ", ".join(f"{times(n)} in segment {s}" for s, n in per.items())
                self._add("durable", (ack_seq,) + tuple(dict.fromkeys(a for _, a in found)),
                          f"Let event {_n(ack_seq)} be the client's acknowledged insert of primary key {pk}. Then the "
                          f"final binlogs hold it {len(found)} times ({where}), because a replay after a restart "
                          f"buffered again rows that were already in a binlog.")
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
