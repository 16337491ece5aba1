"""Read-consistency invariants, checked on the run log alone.

What a read must return is worked out from the messages the proxies wrote into the pchannels (``mq.produce`` with
``detail.pks``), never from the QueryNode's own state:

1. **Exact MVCC** (``mvcc-exact``) - every shard read returns exactly the keys visible at its read timestamp ``T``
   on its vchannel: the key of every row inserted at ``ts <= T`` that no delete of its key hides (a delete at
   ``dts`` hides rows of its key with ``ts < dts`` when ``dts <= T``), each key once however many times it was
   inserted (``MergeSegcoreRetrieveResults`` keeps one row per primary key). This is "Eventually returns some
   consistent prefix", and more: every level reads one consistent snapshot.
2. **Read at or after the guarantee** (``read-after-guarantee``) - a shard read's timestamp is at least its
   guarantee timestamp (``waitTSafe`` returns only once tsafe reached it).
3. **Strong sees every acknowledged write** (``strong-sees-acked``) - a Strong read reads at or after every write
   to its collection whose acknowledgement came before the read began (any client).
4. **Session sees its own writes** (``session-sees-own``) - a Session read reads at or after every write of the same
   client to that collection acknowledged before the read began.
5. **Bounded is at most gracefulTime stale** (``bounded-staleness``) - a Bounded read reads at or after its begin
   timestamp minus ``common.gracefulTime`` (by the proxy's clock: that is Milvus's promise; the value the proxy used
   travels in ``proxy.read``'s ``detail.graceful_time_ms``).
6. **tsafe never goes back** (``tsafe-monotonic``) - per vchannel.
7. **tsafe never passes the time tick** (``tsafe-below-tick``) - a vchannel's tsafe is never past the last time
   tick written into its pchannel: the QueryNode serves nothing it has not been promised.

8. **tsafe follows the ticks** (``tsafe-progress``) - once a time tick ``T`` is written to a pchannel, the tsafe of
   every vchannel the QueryNode serves on it reaches ``T`` within ``5 x proxy.timeTickInterval`` (1 s by default;
   the pipeline needs one pack per tick). When ticks stop, tsafe may stand still: that stall is TimeTick's to
   explain (``tick-progress``), not this one's. The tick that ends the seek of a vchannel's new dispatcher (the first
   one at or past its watch position) closes no pack: Go's ``MqTtMsgStream.Seek`` reads it and drops it, so tsafe
   reaches it with the next tick, and the next tick carries its obligation.
9. **Every read is answered** (``read-answered``) - a read the client sent is answered (rows or an error, such as
   its timeout) by the end of the run, unless it was sent less than that bound before the end, or one of its
   shards is still waiting for a tsafe below its guarantee (a wait Milvus ends only by the read's timeout, which
   the run log does not carry).

Reads and their expected rows are judged at the end of the run (a write acknowledged after a read began may still
be visible to it: what matters is its timestamp). A violation is explained as "Let ... Then ... because ...",
naming its events by number (``seq + 1``, as the stepper's slider counts them).
"""

from __future__ import annotations

from collections import Counter, deque

from ...check.violation import StreamingChecker
from ...config import MS, TimeTickParams
from ...events import SIM_EPOCH_MS
from ...events.dispatch import on
from ...mq.names import to_physical_channel
from ...narrate import ts_text
from ...querynode.expr import read_predicate
from ...tsoutil import physical_time

INVARIANTS = ("mvcc-exact", "read-after-guarantee", "strong-sees-acked", "session-sees-own", "bounded-staleness",
              "tsafe-monotonic", "tsafe-below-tick", "tsafe-progress", "read-answered")
GRACEFUL_TIME_MS = 5000
#: How many ``proxy.timeTickInterval`` tsafe may take to reach a tick written to its pchannel (and a read to arrive).
PROGRESS_INTERVALS = 5


def _n(seq: int) -> str:
    return f"{seq + 1:,}"


def _keys(pks) -> str:
    shown = ", ".join(str(p) for p in list(pks)[:6])
    return shown + (f" and {len(pks) - 6} more" if len(pks) > 6 else "")


def visible(writes, ts: int) -> Counter:
    """The multiset of keys visible at ``ts`` given ``writes``: ``(ts, kind, pk)`` of one vchannel, in any order."""
    inserts: dict[object, list[int]] = {}
    deletes: dict[object, list[int]] = {}
    for w_ts, kind, pk in writes:
        if w_ts <= ts:
            (inserts if kind == "Insert" else deletes).setdefault(pk, []).append(w_ts)
    out: Counter = Counter()
    for pk, tss in inserts.items():
        dels = sorted(deletes.get(pk, ()))
        for t in tss:
            # hidden iff some delete of pk has t < dts (<= ts, already filtered)
            if not dels or dels[-1] <= t:
                out[pk] += 1
    return out


def visible_rows(writes, ts: int) -> list[tuple[object, int]]:
    """The rows visible at ``ts`` as ``(pk, insert ts)``, by the rule :func:`visible` counts (for a filter that
    reads a row's dynamic field, which a key alone does not give)."""
    inserts: dict[object, list[int]] = {}
    last_delete: dict[object, int] = {}
    for w_ts, kind, pk in writes:
        if w_ts <= ts:
            if kind == "Insert":
                inserts.setdefault(pk, []).append(w_ts)
            else:
                last_delete[pk] = max(w_ts, last_delete.get(pk, w_ts))
    return [(pk, t) for pk, tss in inserts.items() for t in tss if last_delete.get(pk, t) <= t]


def _stale_text(proxy: dict, read: dict, graceful_ms: int) -> str:
    """A ``bounded-staleness`` violation in words. The begin timestamp of a Bounded read comes from the proxy's own
    clock (``CanSkipAllocTimestamp``), so "how far below it" is staleness by that clock; when the clock was off (the
    begin timestamp's physical part is not the true time the proxy began the read), how old the data read was by the
    true time is given too, so a skewed clock's seconds are not read as the read's staleness."""
    begin, at = physical_time(proxy["begin"]), physical_time(read["ts"])
    text = (f"Let event {_n(proxy['seq'])} be {proxy['node']} starting Bounded read #{read['request']} with begin "
            f"timestamp {ts_text(proxy['begin'])}, from its own clock. Then event {_n(read['seq'])} read at "
            f"{ts_text(read['ts'])}, {begin - at:,} ms below that timestamp, more than gracefulTime ({graceful_ms:,} ms)")
    text += f", because the read did not wait for data at most {graceful_ms:,} ms old by that clock."
    # the true time as a clock without skew reads it (NodeClock.now_ms: whole nanoseconds, then whole ms, rounded
    # down): a read begun at 1,005.6 ms has begin timestamp 1,005 ms, which is no clock 1 ms behind
    true_ms = round(proxy["t_ms"] * MS) // MS + SIM_EPOCH_MS
    if begin != true_ms:
        off = begin - true_ms
        text += (f" ({proxy['node']}'s clock was {abs(off):,} ms {'ahead' if off > 0 else 'behind'}: by the true time, "
                 f"the data it read was {true_ms - at:,} ms old.)")
    return text


class QueryChecker(StreamingChecker):
    """Streaming check of the read-consistency invariants; keeps at most ``limit`` violations per invariant."""

    invariants = INVARIANTS
    promises = {
        "mvcc-exact": "every read returned exactly the rows visible at its read timestamp",
        "read-after-guarantee": "every read was served at or after its guarantee",
        "strong-sees-acked": "Strong reads saw every acknowledged write",
        "session-sees-own": "Session reads saw their client's own writes",
        "bounded-staleness": "Bounded reads were at most gracefulTime stale",
        "tsafe-monotonic": "tsafe never went back",
        "tsafe-below-tick": "tsafe never passed the time tick",
        "tsafe-progress": "tsafe followed the ticks",
        "read-answered": "every read was answered or still waited for its guarantee",
    }
    progress = frozenset({"tsafe-progress", "read-answered"})
    chances = {
        "mvcc-exact": "a shard read answered",
        "read-after-guarantee": "a shard read answered",
        "strong-sees-acked": "a Strong read answered after an acknowledged write to its collection",
        "session-sees-own": "a Session read answered after its client's own acknowledged write",
        "bounded-staleness": "a Bounded read answered",
        "tsafe-monotonic": "a vchannel's tsafe published a second time",
        "tsafe-below-tick": "a tsafe published",
        "tsafe-progress": "a time tick written above the tsafe of a served vchannel",
        "read-answered": "a read sent",
    }

    def __init__(self, limit: int = 20):
        super().__init__(limit)
        self._writes: dict[str, list[tuple[int, str, object, int]]] = {}  # vchannel -> (ts, kind, pk, seq)
        self._fields: dict[tuple[str, object, int], dict] = {}  # (vchannel, pk, insert ts) -> its dynamic field
        self._acks: list[dict] = []  # acknowledged client writes
        self._starts: dict[int, dict] = {}  # request -> client.read_start row facts
        self._proxy: dict[int, dict] = {}  # request -> proxy.read facts
        self._shard_reads: list[dict] = []
        self._client_reads: list[dict] = []
        self._tsafe: dict[str, tuple[int, int]] = {}  # vchannel -> (ts, seq)
        self._tick: dict[str, tuple[int, int, int | None]] = {}  # pchannel -> (last tick ts, seq, msg id)
        self._seek_stop: dict[str, int] = {}  # vchannel -> its watch position's ts, until its seek's stop tick
        self.configure(None)
        self._served: dict[str, list[tuple[str, int]]] = {}  # pchannel -> (vchannel, its start tsafe) served
        self._behind: dict[str, deque] = {}  # vchannel -> (t_ms, tick ts, seq) written above its tsafe, oldest first
        self._answered: set[int] = set()  # requests the client got an answer (or error) for
        self._waits: dict[tuple[int, str], tuple[int, int]] = {}  # (request, vchannel) -> (wait seq, guarantee)
        self._node_of: dict[str, str] = {}  # vchannel -> the QueryNode that watched it last
        # faults injected on QueryNodes: [node, kind, t_ms, seq, end t_ms or None (not over by the run's end)]
        self._faults: list[list] = []

    def configure(self, config) -> None:
        """Take the bound of ``tsafe-progress`` and ``read-answered`` (``PROGRESS_INTERVALS x
        proxy.timeTickInterval``) from ``config`` (None: Milvus's defaults)."""
        timetick = TimeTickParams() if config is None else config.timetick
        self.interval_ms = timetick.time_tick_interval_ns / MS
        self.bound_ms = PROGRESS_INTERVALS * self.interval_ms

    @on("mq.produce", columns=("msg_type", "channel", "ts", "detail", "vchannel", "t_ms", "msg_id"),
        objects=("detail",))
    def _produced(self, seq: int, msg_type: str, ch: str, ts, detail, vch, t_ms: float, msg_id) -> None:
        if msg_type == "TimeTick":
            self._tick_written(seq, ch, ts, t_ms, msg_id)
        elif msg_type in ("Insert", "Delete"):
            self._written(seq, msg_type, ts, detail, vch)

    @on("client.insert", columns=("node", "error", "ts", "detail"), objects=("detail",))
    def _insert_acked(self, seq: int, client, error, ts, detail) -> None:
        self._acked(seq, "insert", client, error, ts, detail)

    @on("client.delete", columns=("node", "error", "ts", "detail"), objects=("detail",))
    def _delete_acked(self, seq: int, client, error, ts, detail) -> None:
        self._acked(seq, "delete", client, error, ts, detail)

    def _acked(self, seq: int, what: str, client, error, ts, detail: dict) -> None:
        if error is None and ts is not None:
            self._acks.append({"seq": seq, "client": client, "ts": ts, "pks": detail.get("pks", []),
                               "collection": detail.get("collection"), "what": what})

    @on("client.read_start", columns=("request", "node", "t_ms", "level"))
    def _read_start(self, seq: int, request, client, t_ms: float, level) -> None:
        self.tried["read-answered"] += 1
        self._starts[request] = {"seq": seq, "client": client, "t_ms": t_ms, "level": level}

    @on("proxy.read", columns=("request", "node", "t_ms", "ts", "guarantee_ts", "level", "detail"), objects=("detail",))
    def _proxy_read(self, seq: int, request, node, t_ms: float, ts, guarantee, level, d: dict) -> None:
        self._proxy[request] = {"seq": seq, "node": node, "t_ms": t_ms, "begin": ts, "guarantee": guarantee, "level": level,
                                "collection": d.get("collection"), "filter": d.get("filter", ""), "ids": d.get("ids"),
                                "graceful_ms": d.get("graceful_time_ms", GRACEFUL_TIME_MS)}

    @on("querynode.wait", columns=("request", "vchannel", "guarantee_ts"))
    def _wait(self, seq: int, request, vch, guarantee) -> None:
        self._waits[(request, vch)] = (seq, guarantee)

    @on("fault.pause", columns=("node", "t_ms", "detail"), objects=("detail",))
    def _paused(self, seq: int, node, t_ms: float, detail) -> None:
        self._fault(seq, "fault.pause", node, t_ms, detail)

    @on("fault.stall", columns=("node", "t_ms", "detail"), objects=("detail",))
    def _stalled(self, seq: int, node, t_ms: float, detail) -> None:
        self._fault(seq, "fault.stall", node, t_ms, detail)

    @on("fault.kill", columns=("node", "t_ms"))
    def _killed(self, seq: int, node, t_ms: float) -> None:
        self._fault(seq, "fault.kill", node, t_ms, None)

    def _fault(self, seq: int, kind: str, node, t_ms: float, detail) -> None:
        """A fault injected on a node: a QueryNode's stops its pipeline, which explains tsafe falling behind."""
        if kind == "fault.kill":
            end = None  # over when the node restarts
        else:
            end = t_ms + float((detail or {}).get("duration_ms") or 0.0)
        self._faults.append([node, kind, t_ms, seq, end])

    @on("fault.restart", columns=("node", "t_ms"))
    def _restart(self, seq: int, node, t_ms: float) -> None:
        for fault in self._faults:
            if fault[0] == node and fault[1] == "fault.kill" and fault[4] is None:
                fault[4] = t_ms

    def _fault_text(self, vch: str | None, from_ms: float, to_ms: float) -> str | None:
        """The fault injected on the QueryNode serving ``vch`` (None: on any QueryNode serving a vchannel) that
        overlapped ``[from_ms, to_ms]``, in words."""
        nodes = set(self._node_of.values()) if vch is None else {self._node_of.get(vch)}
        for node, kind, t_ms, seq, end in self._faults:
            if node not in nodes or t_ms > to_ms or (end is not None and end < from_ms):
                continue
            served = sorted(v for v, n in self._node_of.items() if n == node)
            serves = f"which serves {vch}" if vch is not None else f"which serves {', '.join(served)}"
            if kind == "fault.kill":
                return (f"{node}, {serves}, was killed at event {_n(seq)} ({t_ms / 1000:.3f} s)"
                        + (f" and not restarted until {end / 1000:.3f} s" if end is not None else
                           " and was not restarted")
                        + " (a fault the scenario or a fork injected)")
            what = "paused (a GC or VM pause)" if kind == "fault.pause" else "stalled"
            return (f"{node}, {serves}, was {what} from event {_n(seq)} ({t_ms / 1000:.3f} s) until "
                    f"{end / 1000:.3f} s (a fault the scenario or a fork injected)")
        return None

    @on("querynode.watch", columns=("node", "channel", "vchannel", "ts", "detail"), objects=("detail",))
    def _watch(self, seq: int, node, ch, vch, ts, detail) -> None:
        if ts is None or vch is None:
            return
        self._node_of[vch] = node
        start_id = detail.get("start_msg_id") if isinstance(detail, dict) else None
        if start_id is not None and not self._served.get(ch):
            # the pchannel's first vchannel: a new dispatcher seeks to the position, and its seek ends at the first
            # tick at or past it (msgdispatcher's NewDispatcher, MqTtMsgStream.Seek), unless one is already written
            last = self._tick.get(ch)
            if last is None or last[2] is None or last[2] < start_id or last[0] < ts:
                self._seek_stop[vch] = ts
        self._served.setdefault(ch, []).append((vch, ts))

    @on("querynode.release", columns=("vchannel",))
    def _release(self, seq: int, vch: str) -> None:
        # a released vchannel (its collection dropped) has no tsafe left to follow the ticks
        served = self._served.get(to_physical_channel(vch), [])
        served[:] = [s for s in served if s[0] != vch]
        self._behind.pop(vch, None)
        self._seek_stop.pop(vch, None)

    @on("run.end", columns=("t_ms",))
    def _end(self, seq: int, t_ms: float) -> None:
        self._unanswered(seq, t_ms)

    @on("querynode.read", columns=("request", "vchannel", "error", "ts", "guarantee_ts", "level", "detail"),
        objects=("detail",))
    def _shard_read(self, seq: int, request, vch, error, ts, guarantee, level, detail) -> None:
        self._waits.pop((request, vch), None)
        if error is None:
            self._shard_reads.append({"seq": seq, "request": request, "vchannel": vch, "ts": ts,
                                      "guarantee": guarantee, "level": level,
                                      "pks": detail.get("pks", [])})

    @on("client.read", columns=("request", "error", "ts", "level", "node", "guarantee_ts"))
    def _client_read(self, seq: int, request, error, ts, level, client, guarantee) -> None:
        self._answered.add(request)
        if error is None:
            self._client_reads.append({"seq": seq, "request": request, "ts": ts, "level": level, "client": client,
                                       "guarantee": guarantee})

    def _tick_written(self, seq: int, ch: str, ts: int, t_ms: float, msg_id=None) -> None:
        prev = self._tick.get(ch)
        if prev is None or ts >= prev[0]:
            self._tick[ch] = (ts, seq, msg_id)
        for vch, start in self._served.get(ch, ()):
            stop = self._seek_stop.get(vch)
            if stop is not None and ts >= stop:  # the seek reads this tick and drops it: no pack ends here
                del self._seek_stop[vch]
                continue
            tsafe = self._tsafe.get(vch)
            if ts > (start if tsafe is None else tsafe[0]):
                self.tried["tsafe-progress"] += 1
                self._behind.setdefault(vch, deque()).append((t_ms, ts, seq))

    def _written(self, seq: int, msg_type: str, ts: int, detail: dict, vch: str) -> None:
        """A DML message: the keys it wrote (``detail.pks``) at ``ts`` on ``vch``."""
        pks = detail.get("pks")
        if pks is not None:
            lst = self._writes.setdefault(vch, [])
            lst.extend((ts, msg_type, pk, seq) for pk in pks)
            fields = detail.get("fields")
            if fields is not None:
                self._fields.update(((vch, pk, ts), f) for pk, f in zip(pks, fields))

    @on("querynode.tsafe", columns=("vchannel", "ts", "t_ms"))
    def _check_tsafe(self, seq: int, vch: str, ts: int, t_ms: float) -> None:
        prev = self._tsafe.get(vch)
        self.tried["tsafe-below-tick"] += 1
        behind = self._behind.get(vch)
        if behind:
            late = None
            while behind and behind[0][1] <= ts:
                tick = behind.popleft()
                if late is None and t_ms - tick[0] > self.bound_ms:
                    late = tick
            if late is not None:
                self._add("tsafe-progress", (late[2], seq),
                          f"Let event {_n(late[2])} be the time tick {ts_text(late[1])} written to "
                          f"{to_physical_channel(vch)} at {late[0] / 1000:.3f} s. Then {vch}'s tsafe reached it only at "
                          f"event {_n(seq)}, {t_ms - late[0]:,.0f} ms later, longer than {self._bound()}, because "
                          + (self._fault_text(vch, late[0], t_ms)
                             or "the QueryNode's pipeline did not apply the pack that tick closed in time") + ".")
        if prev is not None:
            self.tried["tsafe-monotonic"] += 1
        if prev is not None and ts < prev[0]:
            self._add("tsafe-monotonic", (prev[1], seq),
                      f"Let event {_n(prev[1])} be {vch}'s tsafe at {ts_text(prev[0])}. Then event {_n(seq)} set it to "
                      f"{ts_text(ts)}, because it went back: reads already served at the higher tsafe may now be "
                      f"answered from less data.")
        self._tsafe[vch] = (ts, seq)
        tick = self._tick.get(to_physical_channel(vch))
        if tick is None or ts > tick[0]:
            last = "no time tick yet" if tick is None else f"the last time tick {ts_text(tick[0])} (event {_n(tick[1])})"
            self._add("tsafe-below-tick", (seq,) + ((tick[1],) if tick else ()),
                      f"Let event {_n(seq)} be {vch}'s tsafe moving to {ts_text(ts)}. Then it is past {last} on its "
                      f"pchannel, because the QueryNode claims to have everything up to a point nobody promised.")

    def _bound(self) -> str:
        return (f"the bound of {self.bound_ms:,.0f} ms ({PROGRESS_INTERVALS} x proxy.timeTickInterval "
                f"{self.interval_ms:,.0f} ms)")

    def _unanswered(self, end_seq: int, end_ms: float) -> None:
        """At the run's end: tsafe that never reached a tick written long enough ago, and reads left hanging."""
        for vch, behind in self._behind.items():
            if behind and end_ms - behind[0][0] > self.bound_ms:
                t_ms, ts, seq = behind[0]
                tsafe = self._tsafe.get(vch)
                now = f"still at {ts_text(tsafe[0])} (event {_n(tsafe[1])})" if tsafe else "never published"
                self._add("tsafe-progress", (seq, end_seq),
                          f"Let event {_n(seq)} be the time tick {ts_text(ts)} written to {to_physical_channel(vch)} "
                          f"at {t_ms / 1000:.3f} s. Then {vch}'s tsafe had not reached it when the run ended "
                          f"{end_ms - t_ms:,.0f} ms later ({now}), longer than {self._bound()}, because "
                          + (self._fault_text(vch, t_ms, end_ms)
                             or "the QueryNode's pipeline did not apply the pack that tick closed") + ".")
        waiting = {}
        for (request, vch), (wait_seq, guarantee) in self._waits.items():
            tsafe = self._tsafe.get(vch)
            if tsafe is None or guarantee is None or tsafe[0] < guarantee:
                waiting[request] = True
            else:
                waiting.setdefault(request, (wait_seq, vch, guarantee, tsafe))
        for request, start in self._starts.items():
            if request in self._answered or end_ms - start["t_ms"] <= self.bound_ms or waiting.get(request) is True:
                continue
            woken = waiting.get(request)
            proxy = self._proxy.get(request)
            if woken is not None:
                wait_seq, vch, guarantee, tsafe = woken
                because = (f"its shard on {vch} waited (event {_n(wait_seq)}) for its guarantee {ts_text(guarantee)}, "
                           f"which tsafe reached at event {_n(tsafe[1])}, and the waiting read was never woken")
                seqs = (start["seq"], wait_seq, tsafe[1], end_seq)
            elif proxy is None:
                because = "no proxy settled it: it never reached a proxy that could answer"
                seqs = (start["seq"], end_seq)
            else:
                fault = self._fault_text(None, proxy["t_ms"], end_ms)
                because = (f"the proxy settled it at event {_n(proxy['seq'])}, but no shard answered it and none "
                           f"waits for tsafe" + (f": {fault}" if fault else ""))
                seqs = (start["seq"], proxy["seq"], end_seq)
            self._add("read-answered", seqs,
                      f"Let event {_n(start['seq'])} be {start['client']}'s {start['level'] or 'default-level'} read "
                      f"#{request}, sent at {start['t_ms'] / 1000:.3f} s. Then it was still unanswered when the run "
                      f"ended {end_ms - start['t_ms']:,.0f} ms later, because {because}.")

    def close(self) -> None:
        for lst in self._writes.values():
            lst.sort()
        self._judge_shard_reads()
        self._judge_levels()

    # ---- invariants 1-2

    def _judge_shard_reads(self) -> None:
        cache: dict[tuple[str, int], Counter] = {}
        for r in self._shard_reads:
            self.tried["mvcc-exact"] += 1
            self.tried["read-after-guarantee"] += 1
            proxy = self._proxy.get(r["request"], {})
            if r["ts"] < r["guarantee"]:
                self._add("read-after-guarantee", (r["seq"],),
                          f"Let event {_n(r['seq'])} be read #{r['request']} ({r['level']}) on {r['vchannel']} with "
                          f"guarantee {ts_text(r['guarantee'])}. Then it read at {ts_text(r['ts'])}, below its "
                          f"guarantee, because the delegator served it without waiting for tsafe to reach it.")
            key = (r["vchannel"], r["ts"])
            if key not in cache:
                writes = [(t, k, pk) for t, k, pk, _ in self._writes.get(r["vchannel"], ())]
                cache[key] = visible(writes, r["ts"])
            pred = read_predicate(proxy.get("filter", ""), proxy.get("ids"))
            if pred.reads_fields:
                writes = [(t, k, pk) for t, k, pk, _ in self._writes.get(r["vchannel"], ())]
                want = Counter({pk: 1 for pk, t in visible_rows(writes, r["ts"])
                                if pred(pk, self._fields.get((r["vchannel"], pk, t)))})
            else:
                want = Counter({pk: 1 for pk in cache[key] if pred(pk)})
            got = Counter(r["pks"])
            if got != want:
                self._explain_mvcc(r, want, got)

    def _explain_mvcc(self, r: dict, want: Counter, got: Counter) -> None:
        missing = sorted((want - got).elements(), key=str)
        extra = sorted((got - want).elements(), key=str)
        writes = self._writes.get(r["vchannel"], [])
        because = []
        for pk in missing[:1]:
            ins = [w for w in writes if w[2] == pk and w[1] == "Insert" and w[0] <= r["ts"]]
            if ins:
                older = [w for w in writes if w[2] == pk and w[1] == "Delete" and w[0] <= ins[-1][0]]
                because.append(f"{pk} was inserted at {ts_text(ins[-1][0])} (event {_n(ins[-1][3])}) and no delete "
                               f"at or below the read timestamp hides that row"
                               + (f" (the delete of {pk} at {ts_text(older[-1][0])}, event {_n(older[-1][3])}, is "
                                  f"older than that insert and hides only rows inserted before it)" if older else ""))
        for pk in extra[:1]:
            dels = [w for w in writes if w[2] == pk and w[1] == "Delete" and w[0] <= r["ts"]]
            if dels:  # the latest such delete is the one that hides every row of pk inserted before the read
                because.append(f"{pk} was deleted at {ts_text(dels[-1][0])} (event {_n(dels[-1][3])}), at or below "
                               f"the read timestamp and after every insert of it the read could see, yet the read "
                               f"still returned it")
            else:
                because.append(f"{pk} is returned more than once, where the merge keeps one row per key")
        seqs = (r["seq"],) + tuple(w[3] for w in writes if w[2] in set(missing[:1] + extra[:1]))[:4]
        self._add("mvcc-exact", seqs,
                  f"Let event {_n(r['seq'])} be read #{r['request']} on {r['vchannel']} at {ts_text(r['ts'])}. Then it "
                  f"returned {_keys(sorted(got.elements(), key=str)) or 'nothing'} where the rows visible at that "
                  f"timestamp are {_keys(sorted(want.elements(), key=str)) or 'none'}"
                  f"{' (missing ' + _keys(missing) + ')' if missing else ''}{' (extra ' + _keys(extra) + ')' if extra else ''}"
                  f", because {'; and '.join(because) or 'the segments held other rows than the channel'}.")

    # ---- invariants 3-5

    def _judge_levels(self) -> None:
        for r in self._client_reads:
            start = self._starts.get(r["request"])
            proxy = self._proxy.get(r["request"])
            if start is None or proxy is None:
                continue
            level = r["level"]
            if level == "Bounded":
                self.tried["bounded-staleness"] += 1
                graceful = proxy["graceful_ms"]
                floor = proxy["begin"] - (graceful << 18)
                if r["ts"] < floor:
                    self._add("bounded-staleness", (proxy["seq"], r["seq"]), _stale_text(proxy, r, graceful))
            if level not in ("Strong", "Session"):
                continue
            inv = "strong-sees-acked" if level == "Strong" else "session-sees-own"
            tried = False
            for w in self._acks:
                if w["seq"] > start["seq"]:
                    break
                if w["collection"] != proxy["collection"]:
                    continue
                if level == "Session" and w["client"] != r["client"]:
                    continue
                if not tried:  # a write the read must see: the read could have missed it
                    tried = True
                    self.tried[inv] += 1
                if w["ts"] <= r["ts"]:
                    continue
                why = (f"its guarantee {ts_text(r['guarantee'])} was below the write" if r["guarantee"] < w["ts"]
                       else f"the delegator read below its guarantee {ts_text(r['guarantee'])}")
                who = f"{w['client']}'s own" if level == "Session" else f"{w['client']}'s"
                self._add(inv, (w["seq"], start["seq"], r["seq"]),
                          f"Let event {_n(w['seq'])} be {who} acknowledged {w['what']} of {_keys(w['pks'])} at "
                          f"{ts_text(w['ts'])}, and event {_n(start['seq'])} {r['client']}'s {level} read "
                          f"#{r['request']}, sent after it. Then the read was served at timestamp {ts_text(r['ts'])} "
                          f"(event {_n(r['seq'])}), below the write's, so it cannot reflect it, because {why}.")
                break
