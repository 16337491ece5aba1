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

4. **Tick progress** (``tick-progress``) - a time tick is written to every pchannel at least once every
   ``5 x proxy.timeTickInterval`` (1 s by default): every session reports once per interval and rootcoord
   writes a round as soon as all have, so five intervals leave room for slow RPCs without hiding a
   stall. A pchannel is watched from its first message or tick on. A gap caused by a fault the scenario
   injected on the session rootcoord waited for (a stalled report loop, a paused proxy, a crashed proxy
   whose session lease is still alive) is not a violation when the ticks resume within the bound after the fault
   heals (the loop's stall or the pause ends; the lease expires, at most ``common.session.ttl`` after the
   crash or into the pause): it
   is reported in :attr:`~milvus_edu.check.violation.StreamingChecker.stalls` with its cause. So is a
   tick that is written on time but whose value stands still longer than the bound: a session's
   reported minimum held it, which is how Milvus waits for that proxy's oldest unfinished task (the
   checker does not judge why that task is slow).

These are the model's contract. In Milvus 2.5 they hold while timestamps are allocated under the
enqueue lock, the TSO is monotonic, and every proxy that writes DML is a registered session for its
tasks' whole lifetime. Three windows in 2.5 break the last condition and are not modelled: a proxy
that takes writes before rootcoord's watch has added its session (rounds pass its in-flight tasks), a
proxy whose session expired but that has not exited yet, and an MQ send that times out after the
task's statistics were popped but lands later.

A violation or a stall is explained as "Let ... Then ... because ...", naming its events by ``seq``. For a broken
watermark the checker also looks for the cause the design documents describe (book/seeds.md): the message's task entered its
proxy's queue statistics *after* that proxy had already reported a value at or above its timestamp.

:class:`TimeTickChecker` reads rows one at a time; its memory grows with the messages written but not
yet consumed, not with the length of the run. A vchannel that gets no ``mq.pack`` within :data:`UNCONSUMED_TICKS`
time ticks of its first message has no consumer that logs packs (a flush or query run logs none): its messages are
not kept, and ``pack-exact`` says nothing about it.
"""

from __future__ import annotations

import heapq

from ...check.violation import StreamingChecker, Violation
from ...config import MS, TimeTickParams, TSOParams
from ...events.dispatch import on
from ...narrate import ts_text
from .kinds import DML_TYPES

INVARIANTS = ("tick-monotonic", "watermark", "pack-exact", "tick-progress")
#: How many ``proxy.timeTickInterval`` a pchannel may go without a time tick (or its tick without moving).
PROGRESS_INTERVALS = 5
#: Time ticks written to a pchannel after which a vchannel of it that has had no ``mq.pack`` yet is taken to have no
#: consumer that logs packs (a dispatcher hands every target a pack, empty or not, on the first tick it reads): its
#: messages stop being kept for ``pack-exact``. A flush or query run logs no pack at all; without this its writes
#: would be kept to the end of the run (3.7 MB of checker state at 300 s).
UNCONSUMED_TICKS = 10


class TimeTickChecker(StreamingChecker):
    """Streaming check of the three TimeTick invariants; keeps at most ``limit`` violations per invariant."""

    invariants = INVARIANTS
    promises = {
        "tick-monotonic": "time ticks never went back on any pchannel",
        "watermark": "no message arrived below a tick already written",
        "pack-exact": "every pack held exactly its interval's messages",
        "tick-progress": "ticks kept coming unless an injected fault held them",
    }
    progress = frozenset({"tick-progress"})
    chances = {
        "tick-monotonic": "a time tick written to a pchannel that already had one",
        "watermark": "a DML message written to a pchannel that already had a time tick",
        "pack-exact": "a pack received",
        "tick-progress": "a pchannel carrying a message or a time tick",
    }

    def __init__(self, limit: int = 20):
        super().__init__(limit)
        self.configure(None)
        self._tick: dict[str, tuple[int, int, str]] = {}  # pchannel -> (highest tick, its seq, writer)
        # proxy -> pchannel -> (reported value, seq); "" holds the report's default for unlisted pchannels.
        self._reported: dict[str, dict[str, tuple[int, int]]] = {}
        # (proxy, task ts, pchannel) -> (enqueue seq, report seq, value): a task enqueues once per pchannel it writes
        self._late: dict[tuple[str, int, str], tuple[int, int, int]] = {}
        self._pending: dict[str, dict[int, tuple[int, int]]] = {}  # vchannel -> msg_id -> (end_ts, produce seq)
        self._due: dict[str, list[tuple[int, int]]] = {}  # vchannel -> heap of (end_ts, msg_id) not yet consumed
        self._pack_end: dict[str, tuple[int, int]] = {}  # vchannel -> (last pack's end_ts, its seq)
        # pchannel -> {vchannel with messages kept but no pack yet: the pchannel's tick count at its first one}
        self._unpacked: dict[str, dict[str, int]] = {}
        self._ticks_written: dict[str, int] = {}  # pchannel -> time ticks written to it
        self._pchannel_of: dict[str, str] = {}  # vchannel -> its pchannel
        self._let_go: dict[str, int] = {}  # vchannel judged unconsumed -> the highest message id let go so far
        self._let_go_upto: dict[str, int] = {}  # the same, frozen when a pack of it came after all
        self._pack_msgs: dict[str, list[tuple[int, int, int]]] = {}  # vchannel -> consumed (msg_id, ts, seq) awaiting their pack
        self._missed: set[tuple[str, int]] = set()  # (vchannel, msg_id) already reported missing from its pack
        # ---- progress: pchannel -> (t_ms, seq, tick value or None) of its last advance (or of its first message)
        self._since: dict[str, tuple[float, int, int | None]] = {}
        self._last_write: dict[str, float] = {}  # pchannel -> t_ms of its last tick
        self._write_gap: dict[str, float] = {}  # pchannel -> longest wait for a tick since its last advance
        # pchannel -> who held it since its last advance: name -> [first seq, times]; rounds rootcoord did not send
        # for want of the name's report, and rounds whose (unmoved) minimum came from the name's report
        self._held_round: dict[str, dict[str, list[int]]] = {}
        self._held_value: dict[str, dict[str, list[int]]] = {}
        # injected faults on proxies: [node, t_ms, seq, kind, healed t_ms or None, heal seq or None]
        self._faults: list[list] = []

    def configure(self, config) -> None:
        """Take the bound of ``tick-progress`` (``PROGRESS_INTERVALS x proxy.timeTickInterval``) and how long a
        crashed proxy's session may outlive it (``common.session.ttl`` plus etcd's lease check) from ``config``
        (None: Milvus's defaults)."""
        timetick = TimeTickParams() if config is None else config.timetick
        tso = TSOParams() if config is None else config.tso
        self.interval_ms = timetick.time_tick_interval_ns / MS
        self.bound_ms = PROGRESS_INTERVALS * self.interval_ms
        self.lease_ms = (tso.session_ttl_ns + tso.lease_check_ns) / MS

    @on("proxy.enqueue", columns=("node", "channel", "ts"), ints=("ts",))
    def _enqueue(self, seq: int, node: str, ch: str, ts: int) -> None:
        reported = self._reported.get(node)
        if reported is not None:
            last = reported.get(ch) or reported.get("")
            if last is not None and last[0] >= ts:
                # a DML task is known by its ts (Go gives a task its ts as its id), which its messages carry as end_ts
                self._late[(node, ts, ch)] = (seq, last[1], last[0])

    @on("mq.produce", columns=("node", "channel", "msg_type", "tick_ts", "end_ts", "vchannel", "msg_id", "t_ms",
                               "detail"), ints=("tick_ts", "end_ts", "msg_id"), objects=("detail",))
    def _produce(self, seq: int, node: str, ch: str, msg_type: str, tick_ts, end_ts, vch, msg_id, t_ms: float,
                 detail) -> None:
        if msg_type == "TimeTick":
            self._tick_written(seq, node, ch, tick_ts, t_ms, detail.get("min_from"))
            return
        if msg_type not in DML_TYPES:
            return
        if vch is not None and vch in self._let_go:
            self._let_go[vch] = msg_id  # a broker numbers a pchannel's messages in order
        elif vch is not None:
            self._pending.setdefault(vch, {})[msg_id] = (end_ts, seq)
            heapq.heappush(self._due.setdefault(vch, []), (end_ts, msg_id))
            if vch not in self._pack_end:
                self._pchannel_of[vch] = ch
                self._unpacked.setdefault(ch, {}).setdefault(vch, self._ticks_written.get(ch, 0))
        tick = self._tick.get(ch)
        if tick is None:
            if ch not in self._since:  # the pchannel is watched from its first message
                self._since[ch] = (t_ms, seq, None)
                self.tried["tick-progress"] += 1
            return
        self.tried["watermark"] += 1
        if end_ts <= tick[0]:
            self._below_tick(seq, node, ch, msg_type, end_ts, tick)

    @on("mq.consume", columns=("vchannel", "msg_id", "ts"), ints=("msg_id", "ts"))
    def _consume(self, seq: int, vch: str, msg_id: int, ts: int) -> None:
        self._pack_msgs.setdefault(vch, []).append((msg_id, ts, seq))

    @on("proxy.report", columns=("node", "ts", "detail"), ints=("ts",), objects=("detail",))
    def _report(self, seq: int, node: str, ts: int, detail) -> None:
        # rootcoord keeps only a proxy's latest report: unlisted pchannels fall back to its default
        reported = self._reported[node] = {"": (ts, seq)}
        for ch, value in detail.get("channels", {}).items():
            reported[ch] = (int(value), seq)

    def _tick_written(self, seq: int, node: str, ch: str, tick: int, t_ms: float, min_from) -> None:
        written = self._ticks_written[ch] = self._ticks_written.get(ch, 0) + 1
        unpacked = self._unpacked.get(ch)
        if unpacked:
            for vch in [v for v, since in unpacked.items() if written - since >= UNCONSUMED_TICKS]:
                self._stop_keeping(ch, vch)
        prev = self._tick.get(ch)
        self.tried["tick-progress"] += 1
        if prev is not None:
            self.tried["tick-monotonic"] += 1
        self._progress(seq, ch, tick, t_ms, min_from)
        if prev is not None and tick < prev[0]:
            self._add("tick-monotonic", (prev[1], seq),
                      f"Let event {prev[1] + 1:,} be {prev[2]} writing time tick {ts_text(prev[0])} to {ch}, and event "
                      f"{seq + 1:,} be {node} writing {ts_text(tick)} to it later. Then the watermark went back, "
                      f"because the later round's minimum over all sessions was below the earlier one.")
        if prev is None or tick > prev[0]:
            self._tick[ch] = (tick, seq, node)

    def _stop_keeping(self, ch: str, vch: str) -> None:
        """No pack of ``vch`` in :data:`UNCONSUMED_TICKS` ticks: stop keeping its messages (a pack of it that still
        comes is checked from then on; the messages let go are not judged)."""
        del self._unpacked[ch][vch]
        pending = self._pending.pop(vch, {})
        self._due.pop(vch, None)
        self._let_go[vch] = max(pending, default=-1)

    def _below_tick(self, seq: int, node: str, ch: str, msg_type: str, end_ts: int, tick: tuple[int, int, str]) -> None:
        """A DML message written at or below the tick already in its pchannel."""
        late = self._late.get((node, end_ts, ch))
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

    # ---- tick progress

    def _progress(self, seq: int, ch: str, tick: int, t_ms: float, min_from) -> None:
        """A time tick written: an advance closes the pchannel's wait (judged if it was longer than the bound)."""
        since = self._since.get(ch)
        last = self._last_write.get(ch, since[0] if since is not None else t_ms)
        gap = max(self._write_gap.get(ch, 0.0), t_ms - last)
        self._last_write[ch] = t_ms
        if since is not None and since[2] is not None and tick <= since[2]:
            self._write_gap[ch] = gap
            if min_from is not None:
                held = self._held_value.setdefault(ch, {}).setdefault(str(min_from), [seq, 0])
                held[1] += 1
            return
        if since is not None and t_ms - since[0] > self.bound_ms:
            self._judge_wait(ch, since, t_ms, seq, gap)
        self._since[ch] = (t_ms, seq, tick)
        self._write_gap[ch] = 0.0
        self._held_round.pop(ch, None)
        self._held_value.pop(ch, None)

    @on("rootcoord.timetick_update", columns=("error", "detail"), objects=("detail",))
    def _update(self, seq: int, error, detail) -> None:
        """Rootcoord took a report: while it did not send a round, every pchannel waits for the sessions it names."""
        if error is not None:
            return
        if detail.get("sent") is not False:
            return
        for name in detail.get("waiting_for") or ():
            for ch in self._since:
                held = self._held_round.setdefault(ch, {}).setdefault(str(name), [seq, 0])
                held[1] += 1

    @on("fault.stall", columns=("t_ms", "node", "detail"), objects=("detail",))
    def _stalled(self, seq: int, t_ms: float, node, detail: dict) -> None:
        self._fault(seq, t_ms, node, "fault.stall", detail)

    @on("fault.kill", columns=("t_ms", "node", "detail"), objects=("detail",))
    def _killed(self, seq: int, t_ms: float, node, detail: dict) -> None:
        self._fault(seq, t_ms, node, "fault.kill", detail)

    @on("fault.pause", columns=("t_ms", "node", "detail"), objects=("detail",))
    def _paused(self, seq: int, t_ms: float, node, detail: dict) -> None:
        self._fault(seq, t_ms, node, "fault.pause", detail)

    def _fault(self, seq: int, t_ms: float, node, kind: str, detail: dict) -> None:
        """An injected fault on a proxy: a report loop stalled, or a whole proxy paused (a GC or VM pause), for
        ``duration_ms`` heals when it ends; a crashed proxy's session heals when rootcoord drops it
        (:meth:`_session_del`), and so does a paused one's whose lease ran out first."""
        if kind in ("fault.stall", "fault.pause"):
            healed = t_ms + float(detail.get("duration_ms") or 0.0)
            self._faults.append([node, t_ms, seq, kind, healed, None])
        else:
            self._faults.append([node, t_ms, seq, kind, None, None])

    @on("rootcoord.session_del", columns=("t_ms", "peer"))
    def _session_del(self, seq: int, t_ms: float, peer) -> None:
        for fault in self._faults:
            if fault[0] != peer or fault[5] is not None:
                continue
            if fault[3] == "fault.kill" and fault[4] is None:
                fault[4], fault[5] = t_ms, seq
            elif fault[3] == "fault.pause" and fault[1] <= t_ms < fault[4]:
                fault[4], fault[5] = t_ms, seq

    @on("run.end", columns=("t_ms",))
    def _end(self, seq: int, t_ms: float) -> None:
        """The run ended: judge every pchannel still waiting longer than the bound."""
        for ch, since in list(self._since.items()):
            if t_ms - since[0] > self.bound_ms:
                gap = max(self._write_gap.get(ch, 0.0), t_ms - self._last_write.get(ch, since[0]))
                self._judge_wait(ch, since, t_ms, None, gap)

    def _judge_wait(self, ch: str, since: tuple[float, int, int | None], t_ms: float, seq: int | None,
                    gap: float) -> None:
        """A pchannel waited ``t_ms - since`` for its tick to move (``seq``: the tick that moved it; None: the run
        ended first) and at most ``gap`` for a tick to be written: a violation, or a stall with its cause."""
        start, start_seq, value = since
        waited = t_ms - start
        first = (f"event {start_seq + 1:,} be the last time tick that moved {ch} ({ts_text(value)}, at "
                 f"{start / 1000:.3f} s)" if value is not None else
                 f"event {start_seq + 1:,} be the first message written to {ch} (at {start / 1000:.3f} s)")
        until = (f"until event {seq + 1:,} ({t_ms / 1000:.3f} s)" if seq is not None
                 else f"until the run ended ({t_ms / 1000:.3f} s)")
        bound = (f"the bound of {self.bound_ms:,.0f} ms ({PROGRESS_INTERVALS} x proxy.timeTickInterval "
                 f"{self.interval_ms:,.0f} ms)")
        ends = (start_seq,) + ((seq,) if seq is not None else ())
        if gap <= self.bound_ms:  # rounds went out on time; a session's minimum held the value
            counts = self._held_value.get(ch, {})
            held = _ranked(counts)
            who = held[0] if held else None
            rounds = ("every round's minimum" if len(held) == 1 else
                      f"{counts[who][1]} of the {sum(c[1] for c in counts.values())} rounds' minimum" if who else "")
            because = (f"{rounds} on {ch} came from {who}'s report (the first such round is the tick of event "
                       f"{counts[who][0] + 1:,}): Milvus waits for the oldest DML task that session has not finished"
                       if who else "the sessions' minimum on it did not move")
            self._stall(ch, start, t_ms if seq is not None else None, who, None, ends,
                        f"Let {first}. Then its time tick stood still for {waited:,.0f} ms {until}, longer than "
                        f"{bound}, although rootcoord wrote a tick at least once every {gap:,.0f} ms, because "
                        f"{because}.")
            return
        held = _ranked(self._held_round.get(ch, {}))
        for name in held:
            for node, f_ms, f_seq, kind, healed, heal_seq in self._faults:
                if node != name or f_ms > t_ms or (healed is not None and healed < start - self.bound_ms):
                    continue
                deadline = (healed if healed is not None else f_ms + self.lease_ms) + self.bound_ms
                if t_ms > deadline:
                    continue
                if kind == "fault.stall":
                    cause = (f"{name}'s report loop was stalled from event {f_seq + 1:,} ({f_ms / 1000:.3f} s) until "
                             f"{healed / 1000:.3f} s")
                elif kind == "fault.pause":
                    cause = (f"{name} was paused (a GC or VM pause) from event {f_seq + 1:,} ({f_ms / 1000:.3f} s) "
                             + (f"until rootcoord dropped its expired session at event {heal_seq + 1:,} "
                                f"({healed / 1000:.3f} s)" if heal_seq is not None else
                                f"until {healed / 1000:.3f} s") + ", and sent no report while it lasted")
                elif heal_seq is not None:
                    cause = (f"{name} crashed at event {f_seq + 1:,} ({f_ms / 1000:.3f} s) and its session stayed "
                             f"registered until its lease expired and rootcoord dropped it at event {heal_seq + 1:,} "
                             f"({healed / 1000:.3f} s)")
                else:
                    cause = (f"{name} crashed at event {f_seq + 1:,} ({f_ms / 1000:.3f} s) and its session stays "
                             f"registered until its lease expires, at most common.session.ttl after the crash "
                             f"({(f_ms + self.lease_ms) / 1000:.3f} s), after the run's end")
                self._stall(ch, start, t_ms if seq is not None else None, name, f_seq, ends + (f_seq,),
                            f"Let {first}, and event {f_seq + 1:,} the fault injected on {name}. Then no time tick "
                            f"moved {ch} for {waited:,.0f} ms {until}, because rootcoord writes a round only once "
                            f"every proxy session has reported, and {cause}; the ticks came back within {bound} "
                            f"of the fault's end." if seq is not None else
                            f"Let {first}, and event {f_seq + 1:,} the fault injected on {name}. Then no time tick "
                            f"moved {ch} for {waited:,.0f} ms {until}, because rootcoord writes a round only once "
                            f"every proxy session has reported, and {cause}.")
                return
        if held:
            first_wait = self._held_round[ch][held[0]][0]
            because = (f"rootcoord sent no round while waiting for {held[0]}'s report (from event {first_wait + 1:,} "
                       f"on), and no fault injected on {held[0]} explains it")
            seqs = ends + (first_wait,)
        else:
            because = ("rootcoord recorded no report it was waiting for: no round was started at all (are the proxies' "
                       "report loops and rootcoord's DDL tick running? common.ttMsgEnabled turns both off)")
            seqs = ends
        self._add("tick-progress", seqs,
                  f"Let {first}. Then no time tick moved {ch} for {waited:,.0f} ms {until}, longer than {bound}, "
                  f"because {because}.")

    def _stall(self, ch: str, start: float, end, held_by, cause_seq, seqs: tuple[int, ...], text: str) -> None:
        """Keep an explained stall; one whose holder and cause match an overlapping stall joins it (a round stops on
        every pchannel at once)."""
        for stall in self.stalls:
            if (stall["held_by"] == held_by and stall["cause_seq"] == cause_seq and start <= (stall["to_ms"] or start)
                    and ch not in stall["channels"]):
                stall["channels"].append(ch)
                return
        if len(self.stalls) < self.limit:
            self.stalls.append({"what": "time tick", "channels": [ch], "from_ms": start, "to_ms": end,
                                "held_by": held_by, "cause_seq": cause_seq, "seqs": list(seqs),
                                "explanation": text})

    @on("mq.pack", columns=("node", "vchannel", "begin_ts", "end_ts"), ints=("begin_ts", "end_ts"))
    def _pack(self, seq: int, node: str, vch: str, begin: int, end: int) -> None:
        self.tried["pack-exact"] += 1
        prev = self._pack_end.get(vch)
        if prev is not None and begin != prev[0]:
            self._add("pack-exact", (prev[1], seq),
                      f"Let events {prev[1] + 1:,} and {seq + 1:,} be consecutive packs of {vch} at {node}. Then the second "
                      f"begins at {ts_text(begin)}, not where the first ended ({ts_text(prev[0])}), because the "
                      f"stream skipped or repeated an interval.")
        self._pack_end[vch] = (end, seq)
        if prev is None:  # its first pack: the vchannel has a consumer that logs packs
            ch = self._pchannel_of.pop(vch, None)
            if ch is not None:
                self._unpacked[ch].pop(vch, None)
            if vch in self._let_go:
                self._let_go_upto[vch] = self._let_go.pop(vch)
        let_go_upto = self._let_go_upto.get(vch)
        pending = self._pending.setdefault(vch, {})
        missed = self._missed
        for msg_id, ts, cseq in self._pack_msgs.pop(vch, ()):
            produced = pending.pop(msg_id, None)
            if missed:
                missed.discard((vch, msg_id))
            if produced is None:
                if let_go_upto is not None and msg_id <= let_go_upto:
                    continue  # written while the vchannel had no pack consumer: let go, not judged
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


def _ranked(held: dict[str, list[int]]) -> list[str]:
    """The names that held a pchannel, the one that held it most often first (then by first event)."""
    return sorted(held, key=lambda name: (-held[name][1], held[name][0]))


def check_timetick(events, limit: int = 20) -> list[Violation]:
    """All TimeTick violations in a run log DataFrame (at most ``limit`` per invariant)."""
    return TimeTickChecker(limit).check_frame(events)
