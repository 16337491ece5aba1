"""TimeTick invariants, checked on the run log alone.

1. **Tick monotonicity** (``tick-monotonic``) - the time ticks written to a pchannel never go back.
   They need not strictly increase: when no session's value moved, rootcoord's ``startWatch`` writes
   the same minimum again (Milvus does not compare with ``syncedTtHistogram`` before sending), and
   the stream ignores a tick that is not above its last pack (``currTs <= lastTimeStamp``).
2. **The watermark promise** (``watermark``) - once a time tick ``T`` is in a pchannel, no DML message
   with ``ts <= T`` is written to that pchannel after it: a tick promises that nothing older follows.
3. **Exact packs** (``pack-exact``) - every pack a consumer receives for a vchannel starts where the
   previous one ended and holds exactly the DML messages of its interval ``(begin_ts, end_ts]``:
   nothing lost, nothing twice, nothing from an earlier interval.

These are the model's contract. In Milvus 2.5 they hold while timestamps are allocated under the
enqueue lock, the TSO is monotonic, and every proxy that writes DML is a registered session for its
tasks' whole lifetime. Three windows in 2.5 break the last condition and are not modelled: a proxy
that takes writes before rootcoord's watch has added its session (rounds pass its in-flight tasks), a
proxy whose session expired but that has not exited yet, and an MQ send that times out after the
task's statistics were popped but lands later.

A violation is explained as "Let ... Then ... because ...", naming its events by ``seq``. For a broken
watermark the checker also looks for the cause the seed describes: the message's task entered its
proxy's queue statistics *after* that proxy had already reported a value at or above its timestamp.

:class:`TimeTickChecker` reads rows one at a time; its memory grows with the messages written but not
yet consumed, not with the length of the run.
"""

from __future__ import annotations

import heapq
from bisect import bisect_right
from itertools import compress, repeat
from operator import ge, itemgetter

from ..narrate import detail_dict, ts_text
from .violation import ROW, Read, StreamingChecker, Violation, batch_columns, column, detail_of

INVARIANTS = ("tick-monotonic", "watermark", "pack-exact")
_DML = ("Insert", "Delete")

# What the fast path (TimeTickChecker.write_batch) reads of each kind; the codes it dispatches on.
_ENQUEUE, _PRODUCE, _CONSUME, _PACK, _REPORT = range(5)
_READS = {
    "proxy.enqueue": Read(_ENQUEUE, ("node", "channel", "ts"), ints=("ts",)),
    "mq.produce": Read(_PRODUCE, ("node", "channel", "msg_type", "tick_ts", "end_ts", "vchannel", "msg_id"),
                       ints=("tick_ts", "end_ts", "msg_id")),
    "mq.consume": Read(_CONSUME, ("vchannel", "msg_id", "ts"), ints=("msg_id", "ts")),
    "mq.pack": Read(_PACK, ("node", "vchannel", "begin_ts", "end_ts"), ints=("begin_ts", "end_ts")),
    "proxy.report": Read(_REPORT, ("node", "ts", "detail"), ints=("ts",)),
}
_REPORTS = {"proxy.report": _READS["proxy.report"]}
_first = itemgetter(0)


class TimeTickChecker(StreamingChecker):
    """Streaming check of the three TimeTick invariants; keeps at most ``limit`` violations per invariant."""

    invariants = INVARIANTS
    #: The only kinds it reads (the recorder hands it no others).
    kinds = frozenset(_READS)
    #: What passing means, in one sentence (the CLI's report).
    promise = ("time ticks never went back on any pchannel, no message arrived below a tick already written, and every "
               "pack held exactly its interval's messages")

    def __init__(self, limit: int = 20):
        super().__init__(limit)
        self._tick: dict[str, tuple[int, int, str]] = {}  # pchannel -> (highest tick, its seq, writer)
        # proxy -> pchannel -> (reported value, seq); "" holds the report's default for unlisted pchannels.
        self._reported: dict[str, dict[str, tuple[int, int]]] = {}
        self._late: dict[tuple[str, int], tuple[int, int, int]] = {}  # (proxy, task ts) -> (enqueue seq, report seq, value)
        self._pending: dict[str, dict[int, tuple[int, int]]] = {}  # vchannel -> msg_id -> (end_ts, produce seq)
        self._due: dict[str, list[tuple[int, int]]] = {}  # vchannel -> heap of (end_ts, msg_id) not yet consumed
        self._pack_end: dict[str, tuple[int, int]] = {}  # vchannel -> (last pack's end_ts, its seq)
        self._pack_msgs: dict[str, list[tuple[int, int, int]]] = {}  # vchannel -> consumed (msg_id, ts, seq) awaiting their pack
        self._missed: set[tuple[str, int]] = set()  # (vchannel, msg_id) already reported missing from its pack

    def write(self, row: dict) -> None:
        """Check one run-log row."""
        kind = row["kind"]
        if kind == "mq.produce":
            self._produce(row)
        elif kind == "mq.consume":
            self._pack_msgs.setdefault(row["vchannel"], []).append((int(row["msg_id"]), int(row["ts"]), int(row["seq"])))
        elif kind == "mq.pack":
            self._pack(int(row["seq"]), row["node"], row["vchannel"], int(row["begin_ts"]), int(row["end_ts"]))
        elif kind == "proxy.report":
            self._report(int(row["seq"]), row["node"], int(row["ts"]), detail_dict(row["detail"]))
        elif kind == "proxy.enqueue":
            reported = self._reported.get(row["node"], {})
            last = reported.get(row["channel"]) or reported.get("")
            if last is not None and last[0] >= int(row["ts"]):
                # a DML task is known by its ts (Go gives a task its ts as its id), which its messages carry as end_ts
                self._late[(row["node"], int(row["ts"]))] = (int(row["seq"]), last[1], last[0])

    def write_batch(self, batch) -> None:
        """The recorder's fast path: what :meth:`write` does with each row of ``batch`` (a ``RowBatch``) of
        :attr:`kinds`, in ``seq`` order, reading the columns it needs straight from the batch's tuples, and
        skipping the enqueues ``write`` would ignore (:meth:`_enqueues_to_read`: four per insert, nearly all).

        It mirrors :meth:`write` branch by branch (the rare branches call the same methods);
        ``tests/test_checker_fast.py`` proves both give the same violations, counts and state, on real runs
        and on random event streams.
        """
        reported_by, late, ticks = self._reported, self._late, self._tick
        pending_of, due_of, pack_msgs = self._pending, self._due, self._pack_msgs
        heappush = heapq.heappush
        keep = self._enqueues_to_read(batch)
        for seq, code, columns in batch_columns(batch, _READS, keep and {"proxy.enqueue": keep}):
            if code == _ENQUEUE:
                node, ch, ts = columns
                reported = reported_by.get(node)
                if reported is not None:
                    last = reported.get(ch) or reported.get("")
                    if last is not None and last[0] >= ts:
                        late[(node, ts)] = (seq, last[1], last[0])
            elif code == _PRODUCE:
                node, ch, msg_type, tick_ts, end_ts, vch, msg_id = columns
                if msg_type == "TimeTick":
                    self._tick_written(seq, node, ch, tick_ts)
                elif msg_type in _DML:
                    if vch is not None:
                        pending = pending_of.get(vch)
                        if pending is None:
                            pending = pending_of[vch] = {}
                        pending[msg_id] = (end_ts, seq)
                        due = due_of.get(vch)
                        if due is None:
                            due = due_of[vch] = []
                        heappush(due, (end_ts, msg_id))
                    tick = ticks.get(ch)
                    if tick is not None and end_ts <= tick[0]:
                        self._below_tick(seq, node, ch, msg_type, end_ts, tick)
            elif code == _CONSUME:
                vch, msg_id, ts = columns
                consumed = pack_msgs.get(vch)
                if consumed is None:
                    pack_msgs[vch] = [(msg_id, ts, seq)]
                else:
                    consumed.append((msg_id, ts, seq))
            elif code == _PACK:
                self._pack(seq, *columns)
            elif code == _REPORT:
                node, ts, detail = columns
                self._report(seq, node, ts, detail_of(detail))
            else:  # ROW: a layout whose values are not all ints where write converts them
                self.write(columns)

    def _enqueues_to_read(self, batch):
        """A ``keep`` function for :func:`batch_columns` that drops the ``proxy.enqueue`` rows of ``batch``
        :meth:`write` would ignore (most of them), or None to read them all.

        ``write`` records an enqueue only when its proxy's latest report holds a value at or above its ts. Until
        the next report of any proxy (in ``seq`` order) the reports stand still, so an enqueue whose ts is above
        the highest value any proxy's latest report holds finds none: only the others are kept, found a
        stretch between two reports at a time, in C.
        """
        reports = batch_columns(batch, _REPORTS)
        if any(code == ROW for _, code, _ in reports):
            return None  # a report write must convert: read every enqueue
        tops = {node: max(value for value, _ in reported.values()) for node, reported in self._reported.items()}
        starts, highs = [-1], [max(tops.values(), default=None)]  # from seq starts[i] on, the highest is highs[i]
        for seq, _, (node, ts, detail) in reports:
            tops[node] = max([ts, *(int(value) for value in detail_of(detail).get("channels", {}).values())])
            starts.append(seq)
            highs.append(max(tops.values()))
        starts.append(batch.first_seq + batch.size)

        def keep(layout, values: list[tuple]) -> list[tuple]:
            tss = column(layout, values, "ts")
            if None in tss:
                return values  # write fails on it if a report is there: let it
            seqs = list(map(_first, values))
            kept = []
            for start, end, high in zip(starts, starts[1:], highs):
                lo, hi = bisect_right(seqs, start), bisect_right(seqs, end)
                if high is not None and lo < hi:
                    kept.extend(compress(values[lo:hi], map(ge, repeat(high), tss[lo:hi])))
            return kept

        return keep

    def _report(self, seq: int, node: str, ts: int, detail: dict) -> None:
        # rootcoord keeps only a proxy's latest report: unlisted pchannels fall back to its default
        reported = self._reported[node] = {"": (ts, seq)}
        for ch, value in detail.get("channels", {}).items():
            reported[ch] = (int(value), seq)

    def _produce(self, row: dict) -> None:
        ch, seq, node = row["channel"], int(row["seq"]), row["node"]
        if row["msg_type"] == "TimeTick":
            self._tick_written(seq, node, ch, int(row["tick_ts"]))
            return
        if row["msg_type"] not in _DML:
            return
        end_ts = int(row["end_ts"])
        vch = row["vchannel"]
        if vch is not None:
            self._pending.setdefault(vch, {})[int(row["msg_id"])] = (end_ts, seq)
            heapq.heappush(self._due.setdefault(vch, []), (end_ts, int(row["msg_id"])))
        tick = self._tick.get(ch)
        if tick is not None and end_ts <= tick[0]:
            self._below_tick(seq, node, ch, row["msg_type"], end_ts, tick)

    def _tick_written(self, seq: int, node: str, ch: str, tick: int) -> None:
        prev = self._tick.get(ch)
        if prev is not None and tick < prev[0]:
            self._add("tick-monotonic", (prev[1], seq),
                      f"Let event {prev[1] + 1:,} be {prev[2]} writing time tick {ts_text(prev[0])} to {ch}, and event "
                      f"{seq + 1:,} be {node} writing {ts_text(tick)} to it later. Then the watermark went back, "
                      f"because the later round's minimum over all sessions was below the earlier one.")
        if prev is None or tick > prev[0]:
            self._tick[ch] = (tick, seq, node)

    def _below_tick(self, seq: int, node: str, ch: str, msg_type: str, end_ts: int, tick: tuple[int, int, str]) -> None:
        """A DML message written at or below the tick already in its pchannel."""
        late = self._late.get((node, end_ts))
        if late is not None:
            why = (f"its task entered {node}'s queue statistics at event {late[0] + 1:,}, after {node} had reported "
                   f"{ts_text(late[2])} for {ch} at event {late[1] + 1:,}: the timestamp was allocated before the task "
                   f"was counted, so the report passed a task that was not finished")
        else:
            why = f"the minimum rootcoord took over the sessions' reports for {ch} passed {node}'s unfinished task"
        self._add("watermark", (tick[1], seq) if late is None else (late[1], late[0], tick[1], seq),
                  f"Let event {tick[1] + 1:,} be {tick[2]} writing time tick {ts_text(tick[0])} to {ch}, and event "
                  f"{seq + 1:,} be {node} writing an {msg_type} with ts {ts_text(end_ts)} to {ch} later. Then a "
                  f"consumer that trusted the tick has already delivered everything up to it without this "
                  f"message, because {why}.")

    def _pack(self, seq: int, node: str, vch: str, begin: int, end: int) -> None:
        prev = self._pack_end.get(vch)
        if prev is not None and begin != prev[0]:
            self._add("pack-exact", (prev[1], seq),
                      f"Let events {prev[1] + 1:,} and {seq + 1:,} be consecutive packs of {vch} at {node}. Then the second "
                      f"begins at {ts_text(begin)}, not where the first ended ({ts_text(prev[0])}), because the "
                      f"stream skipped or repeated an interval.")
        self._pack_end[vch] = (end, seq)
        pending = self._pending.setdefault(vch, {})
        missed = self._missed
        for msg_id, ts, cseq in self._pack_msgs.pop(vch, ()):
            produced = pending.pop(msg_id, None)
            if missed:
                missed.discard((vch, msg_id))
            if produced is None:
                self._add("pack-exact", (cseq,),
                          f"Let event {cseq + 1:,} be {node} receiving message {msg_id} of {vch}. Then it received a "
                          f"message that was not waiting to be delivered, because it was delivered before (or never "
                          f"written): a pack must hold each message once.")
            elif not begin < ts <= end:
                self._add("pack-exact", (produced[1], cseq),
                          f"Let event {produced[1] + 1:,} be the write of message {msg_id} (ts {ts_text(ts)}) to {vch}, and "
                          f"event {cseq + 1:,} its delivery in the pack ({ts_text(begin)}, {ts_text(end)}]. Then it came "
                          f"in a pack whose interval does not hold it, because it was written after a time tick had "
                          f"closed its interval.")
        due = self._due.get(vch, [])
        while due and due[0][0] <= end:
            end_ts, msg_id = heapq.heappop(due)
            if msg_id in pending and (vch, msg_id) not in self._missed:
                self._missed.add((vch, msg_id))  # still pending: its late delivery is reported when it comes
                produce_seq = pending[msg_id][1]
                self._add("pack-exact", (produce_seq, seq),
                          f"Let event {produce_seq + 1:,} be the write of message {msg_id} (ts {ts_text(end_ts)}) to {vch}, "
                          f"and event {seq + 1:,} the pack ({ts_text(begin)}, {ts_text(end)}] of {vch} at {node}. Then the "
                          f"pack that should hold the message does not, because the message was not in the pchannel "
                          f"when the tick that closed the pack was.")


def check_timetick(events, limit: int = 20) -> list[Violation]:
    """All TimeTick violations in a run log DataFrame (at most ``limit`` per invariant)."""
    return TimeTickChecker(limit).check_frame(events)
