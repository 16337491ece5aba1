"""Time ticks of a real run, from the server's Prometheus gauges: what Milvus 2.3.5's log never says.

Milvus 2.3.5 writes no log line per time tick, at any level (:mod:`milvus_edu.real.logs`), but it keeps a few
gauges of how far behind the wall clock the time ticks are, and serves them over HTTP with its other metrics
(``/metrics`` on its metrics port, :attr:`~milvus_edu.real.server.RealMilvus.metrics_url`). Each is set with
``tsoutil.SubByNow(ts)`` (the wall clock in ms minus the physical part of ``ts``) at the moment a tick passes:

* ``milvus_rootcoord_produce_tt_lag_ms{channel_name=<pchannel>}``: rootcoord's ``timetickSync.sendTimeTickToChannel``,
  just before it writes a TimeTick message with timestamp ``ts`` into the pchannel. Its companion
  ``milvus_rootcoord_sync_timetick_latency_count`` (a histogram's count) goes up once per round of ticks sent.
* ``milvus_proxy_tt_lag_ms{channel_name=...}``: the proxy's ``sendChannelsTimeTickLoop``, before each
  ``UpdateChannelTimeTick`` report; ``ts`` is the smallest value the report carries, and the label names the pchannel
  it belongs to, or ``default`` when every pchannel's value is the report's ``DefaultTimestamp``.
* ``milvus_querynode_consume_tt_lag_ms{collection_id=...}``: the QueryNode's ``filterNode.Operate``, the head of the
  pipeline, for each pack it takes from a vchannel of the collection (every vchannel of it sets the one gauge);
  ``ts`` is the pack's end, which its deleteNode then sets as the vchannel's tsafe, a few ms later, and the shard
  delegator serves the reads waiting for it at once.
* ``milvus_datanode_consume_tt_lag_ms{collection_id=...}`` (the DataNode's flow-graph input node, the same for its
  packs), ``milvus_datacoord_consume_datanode_tt_lag_ms{channel_name=<vchannel>}`` (DataCoord receiving a DataNode's
  time tick) and ``milvus_datacoord_channel_checkpoint_unix_seconds`` (a channel checkpoint, to the second) are
  sampled and kept too, but made into no event: the model has no kind for them.

:class:`MetricsSampler` reads ``/metrics`` every :data:`PERIOD_MS` on a thread of its own (loopback only) and keeps
every change of these series. :func:`metric_events` turns them into the model's kinds: a rootcoord tick into
``mq.produce`` (``msg_type`` ``TimeTick``, ``tick_ts``) on its pchannel, a proxy's report into ``proxy.report``, a
QueryNode pack into ``querynode.pack`` and ``querynode.tsafe`` on each vchannel of its collection.

How exact this is. A gauge is read, not pushed: a tick is seen at the first sample after it was set, so its event's
``t_ms`` is that sample's wall clock (up to one sampling period late), and its timestamp is that wall clock minus
the lag: ``ts = (sample_clock_ms - lag_ms) << 18``, late by the same amount, with the logical part 0. The lag itself
is exact to the ms, so an event sits on the same diagonal (time minus timestamp) as the tick it stands for, moved
along it by less than a period. Two ticks between samples show as one (``detail.rounds`` or ``detail.packs`` says how
many times the gauge was set since the last sample). A tick whose lag equals the previous one's to the ms leaves
the gauge as it was: rootcoord's round count and the QueryNode's pack count (``milvus_querynode_consume_msg_count``,
one per pack, the same labels) still show it, and it becomes an event with ``detail.repeat``; a proxy report with
the same lag as the one before is not seen (no counter goes with it).

A read the delegator answered proves more than the sample. The delegator logs ``query segments...`` only after
``waitTSafe`` returned, so by then its vchannel's tsafe had reached the read's guarantee; a waiting read is served
as soon as the pack comes in, before the next sample. Drawn at the sample, every such read would be answered while
the stepper still shows the tsafe before it, one tick below its guarantee. So a QueryNode pack that an answered read
needed (its guarantee above the tsafe drawn for the vchannel) is placed at that read, on that vchannel, with
``ts`` that moment minus the lag, and ``detail.placed_at_read`` (:func:`_placed_at_read` says when not). Every
event's ``detail`` (or, for ``querynode.tsafe``, which has none, the ``querynode.pack`` beside it) names the metric,
its labels, the lag, the sample's wall clock and the sampling period.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field

from ..events.schema import EVENT_KINDS, FIELD_NAMES

#: How often the sampler reads ``/metrics`` (ms): well under the 200 ms tick interval, so each tick is seen.
PERIOD_MS = 30.0
_LOGICAL_BITS = 18

ROOTCOORD_TT = "milvus_rootcoord_produce_tt_lag_ms"
ROOTCOORD_ROUNDS = "milvus_rootcoord_sync_timetick_latency_count"
PROXY_TT = "milvus_proxy_tt_lag_ms"
QUERYNODE_TT = "milvus_querynode_consume_tt_lag_ms"
QUERYNODE_PACKS = "milvus_querynode_consume_msg_count"
DATANODE_TT = "milvus_datanode_consume_tt_lag_ms"
DATANODE_PACKS = "milvus_datanode_consume_msg_count"
DATACOORD_TT = "milvus_datacoord_consume_datanode_tt_lag_ms"
DATACOORD_CP = "milvus_datacoord_channel_checkpoint_unix_seconds"
#: The gauges the sampler keeps: every time-tick gauge Milvus 2.3.5 exports.
GAUGES = (ROOTCOORD_TT, PROXY_TT, QUERYNODE_TT, DATANODE_TT, DATACOORD_TT, DATACOORD_CP)
#: A node's counter that goes up each time its gauge (with the same labels) is set: one per pack taken.
PACK_COUNTERS = {QUERYNODE_TT: QUERYNODE_PACKS, DATANODE_TT: DATANODE_PACKS}
#: Every series the sampler reads: the gauges, the pack counters and rootcoord's count of tick rounds.
SAMPLED = (*GAUGES, *PACK_COUNTERS.values(), ROOTCOORD_ROUNDS)
#: A rootcoord gauge that changed this recently (ms) is a pchannel still in use: a round of ticks that leaves its
#: value as it was set it again to the same lag. One that has not changed for longer is left alone (a pchannel no
#: collection uses any more keeps its last value and gets no ticks).
LIVE_MS = 1000.0
#: Where in the Go code each gauge is set (Milvus 2.3.5).
SET_BY = {
    ROOTCOORD_TT: "rootcoord/timeticksync.go timetickSync.sendTimeTickToChannel",
    PROXY_TT: "proxy/proxy.go Proxy.sendChannelsTimeTickLoop",
    QUERYNODE_TT: "querynodev2 pipeline, per pack taken from a vchannel",
}


@dataclass
class Change:
    """A gauge set, as a sample saw it: the metric, its labels, the value, the sample's wall clock (Unix ms, when
    the answer came back), and when the previous sample's read began (the value was set after it: it was not in
    that answer, gathered no earlier); ``count``: how many times it was set
    since the previous sample, where a counter says (rootcoord's rounds of ticks, a node's packs), else ``None``;
    ``repeat``: the value is the one it had, and the counter says it was set again."""

    metric: str
    labels: dict
    value: float
    clock_ms: float
    after_ms: float | None
    count: int | None = None
    repeat: bool = False


def parse_metrics(text: str, names=SAMPLED) -> dict[tuple[str, tuple], float]:
    """The series of ``names`` in a Prometheus text exposition: ``{(metric, ((label, value), ...)): value}``."""
    wanted = tuple(names)
    out = {}
    for line in text.splitlines():
        if not line.startswith(wanted):
            continue
        head, _, value = line.rpartition(" ")
        name, _, rest = head.partition("{")
        if name not in wanted:
            continue
        labels = []
        for part in rest.rstrip("}").split('",'):
            key, eq, val = part.partition('="')
            if eq:
                labels.append((key.strip(), val.rstrip('"')))
        try:
            out[(name, tuple(sorted(labels)))] = float(value)
        except ValueError:
            continue
    return out


@dataclass
class MetricsSampler:
    """Reads a server's ``/metrics`` every ``period_ms`` on a daemon thread between :meth:`start` and :meth:`stop`,
    and keeps every change of the :data:`SAMPLED` series (:attr:`changes`); the first sample is the baseline (a
    value set before the run), not a change. :attr:`periods_ms` holds the gaps between samples actually achieved,
    :attr:`errors` the reads that failed (a sampler never raises)."""

    url: str
    period_ms: float = PERIOD_MS
    changes: list[Change] = field(default_factory=list)
    periods_ms: list[float] = field(default_factory=list)
    errors: int = 0

    def __post_init__(self):
        if not self.url.startswith("http://127.0.0.1:"):
            raise ValueError(f"the sampler reads a local server only (http://127.0.0.1:...), got {self.url}")
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last: dict | None = None
        self._last_clock: float | None = None
        self._last_started: float | None = None
        self._changed_at: dict = {}

    def sample(self) -> None:
        """Read ``/metrics`` once and record what changed since the last read."""
        started = time.time() * 1000.0
        try:
            with urllib.request.urlopen(self.url, timeout=2) as resp:
                text = resp.read().decode("utf-8", "replace")
        except (urllib.error.URLError, OSError):
            self.errors += 1
            return
        clock = time.time() * 1000.0
        values = parse_metrics(text)
        # a value not in the last answer was set after that answer was gathered, so after the last read began
        last, after = self._last, self._last_started
        if last is not None:
            self.periods_ms.append(clock - self._last_clock)
            rounds = _delta(values, last, ROOTCOORD_ROUNDS, ())
            for key, value in values.items():
                name, labels = key
                if name not in GAUGES:
                    continue
                changed = last.get(key) != value
                if name in PACK_COUNTERS:
                    count = _delta(values, last, PACK_COUNTERS[name], labels)
                elif name == ROOTCOORD_TT:
                    live = changed or clock - self._changed_at.get(key, float("-inf")) <= LIVE_MS
                    count = rounds if live else 0
                else:
                    count = None
                if changed or count:
                    self.changes.append(Change(name, dict(labels), value, clock, after, count, not changed))
                if changed:
                    self._changed_at[key] = clock
        self._last, self._last_clock, self._last_started = values, clock, started

    def _loop(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            self.sample()
            next_at += self.period_ms / 1000.0
            self._stop.wait(max(0.0, next_at - time.monotonic()))
            next_at = max(next_at, time.monotonic() - self.period_ms / 1000.0)  # no burst after a stall

    def start(self) -> "MetricsSampler":
        """Take the baseline sample, then sample on a thread until :meth:`stop`."""
        self.sample()
        self._thread = threading.Thread(target=self._loop, name="milvus-metrics", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop sampling (after one last sample); safe to call twice."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
            self.sample()

    def summary(self) -> dict:
        """The sampling achieved: samples, the median and largest gap between two (ms), failed reads, changes."""
        gaps = sorted(self.periods_ms)
        return {"period_ms": self.period_ms, "samples": len(gaps) + 1, "errors": self.errors,
                "gap_median_ms": round(gaps[len(gaps) // 2], 1) if gaps else None,
                "gap_max_ms": round(gaps[-1], 1) if gaps else None, "changes": len(self.changes)}


def _delta(values: dict, last: dict, name: str, labels: tuple) -> int | None:
    """How much counter ``name`` with ``labels`` (all of them when empty) went up since the last sample."""
    keys = [k for k in values if k[0] == name and (not labels or k[1] == labels) and k in last]
    if not keys:  # no such counter yet, or a new one: the sample before it says nothing
        return None
    return max(int(sum(values[k] - last[k] for k in keys)), 0)


def _row(run_id: str, kind: str, node: str, t_ms: float, values: dict, detail: dict | None) -> dict:
    row = dict.fromkeys(FIELD_NAMES)
    row.update(run_id=run_id, seq=0, t_ms=float(t_ms), node=node, kind=kind)
    row.update({k: v for k, v in values.items() if v is not None})
    if detail is not None and "detail" in EVENT_KINDS[kind].fields:
        row["detail"] = json.dumps(detail, sort_keys=True, separators=(",", ":"), default=str)
    return row


def _collection_vchannels(server_rows: list[dict]) -> dict[str, list[str]]:
    """The vchannels the QueryNode watches, by collection id (from the log's ``querynode.watch`` events)."""
    out: dict[str, list[str]] = {}
    for r in server_rows:
        if r.get("kind") != "querynode.watch" or not r.get("vchannel"):
            continue
        try:
            cid = str(json.loads(r.get("detail") or "{}").get("collection_id"))
        except ValueError:
            continue
        if r["vchannel"] not in out.setdefault(cid, []):
            out[cid].append(r["vchannel"])
    return out


def _answered_reads(server_rows: list[dict]) -> dict[str, list[tuple]]:
    """The log's answered reads with a guarantee, by vchannel: ``(clock_ms, guarantee_ts, request)`` in time order
    (``clock_ms``: the wall clock of the delegator's ``query segments...`` line, written after ``waitTSafe``
    returned, so the vchannel's tsafe had reached the guarantee by then)."""
    out: dict[str, list[tuple]] = {}
    for r in server_rows:
        if (r.get("kind") != "querynode.read" or r.get("error") is not None or r.get("guarantee_ts") is None
                or not r.get("vchannel")):
            continue
        try:
            clock = json.loads(r.get("detail") or "{}").get("clock_ms")
        except ValueError:
            clock = None
        if clock is not None:
            out.setdefault(r["vchannel"], []).append((int(clock), int(r["guarantee_ts"]), r.get("request")))
    for reads in out.values():
        reads.sort(key=lambda x: x[0])
    return out


def _log_tsafes(server_rows: list[dict], origin_ms: int) -> dict[str, list[tuple[int, int]]]:
    """The log's own tsafe events (a pack that held a delete) by vchannel: ``(clock_ms, ts)``."""
    out: dict[str, list[tuple[int, int]]] = {}
    for r in server_rows:
        if r.get("kind") == "querynode.tsafe" and r.get("ts") is not None and r.get("vchannel"):
            out.setdefault(r["vchannel"], []).append((int(round(r["t_ms"])) + origin_ms, int(r["ts"])))
    return out


def _placed_at_read(c: Change, lag: int, shown: int, reads: list[tuple], log_tsafe: list,
                    n_vchannels: int) -> tuple | None:
    """Where a sampled QueryNode pack was really in already on one vchannel, when the log shows it:
    ``(clock_ms, ts, reads)``, or ``None``. ``shown``: the vchannel's last sampled end; ``reads`` and ``log_tsafe``:
    the vchannel's answered reads and the tsafe the log showed for it.

    The gauge is set at the head of the pipeline (filterNode); the deleteNode then sets the pack's end as tsafe, the
    delegator serves the reads waiting for it and logs ``query segments...``; the sample sees the gauge up to one
    period later. A read served on the vchannel since the sample before this one began, whose guarantee is above
    the tsafe drawn for it (the last sampled end, or a tsafe the log showed), proves the pack was in by the time it
    was served: the pack is placed there, at the first such read, and its timestamp is that moment minus the lag
    (the end is the moment the gauge was set minus the lag, and it was set no later). Only when the counter says
    no more than one pack per vchannel came in since the sample before (else the pack that served the read may be
    an earlier one) and the latest end the sample allows (its clock minus the lag) is not below the reads'
    guarantees; the timestamp is then at least the highest guarantee the reads prove."""
    if c.after_ms is None or (c.count is not None and c.count > n_vchannels):
        return None
    proving = []
    for clock, guarantee, request in reads:
        if not c.after_ms < clock <= c.clock_ms:
            continue
        drawn = max([shown] + [ts for at, ts in log_tsafe if at <= clock])
        if guarantee > drawn:
            proving.append((clock, guarantee, request))
    if not proving:
        return None
    at = proving[0][0]
    physical = at - lag
    # The pack's end is the moment the gauge was set minus the lag, and the sample saw it set by c.clock_ms: an end
    # below a proving read's guarantee even then means another pack served the read. (Not at - lag: the gauge is per
    # collection, and the other vchannel's pack of the same round may set it again a few ms after the read, with a
    # lag larger by those ms.)
    if any(g >> _LOGICAL_BITS > c.clock_ms - lag for _, g, _ in proving):
        return None  # the sampled pack is not the one that served these reads
    # the gauge keeps no logical part: where the read proves more than the ms does, its guarantee is the bound
    ts = max([physical << _LOGICAL_BITS] + [g for _, g, _ in proving])
    return at, ts, proving


def metric_events(changes: list[Change], *, run_id: str, t0_wall_ms: float, period_ms: float = PERIOD_MS,
                  server_rows: list[dict] = ()) -> list[dict]:
    """Run-log events (rows, in time order, ``t_ms`` from ``t0_wall_ms``) for the sampled changes; see the module's
    notes for what each gauge becomes and how exact it is. ``server_rows``: the server log's events (parsed with
    ``t0`` = ``round(t0_wall_ms)``), which say which vchannels each collection has (a QueryNode gauge names only
    the collection) and which reads the delegators answered: a sampled pack that an answered read proves was in
    before the sample is placed at that read (:func:`_placed_at_read`)."""
    server_rows = list(server_rows)
    vchannels = _collection_vchannels(server_rows)
    origin = int(round(t0_wall_ms))
    reads = _answered_reads(server_rows)
    log_tsafe = _log_tsafes(server_rows, origin)
    prev_end: dict[str, int] = {}
    rows = []
    for c in changes:
        lag, clock = int(round(c.value)), int(round(c.clock_ms))
        tick_ms = clock - lag
        ts = tick_ms << _LOGICAL_BITS
        t_ms = c.clock_ms - t0_wall_ms
        detail = {"metric": c.metric, "labels": c.labels, "lag_ms": lag, "sampled_clock_ms": clock,
                  "set_after_clock_ms": None if c.after_ms is None else round(c.after_ms, 1),
                  "period_ms": period_ms, "go": SET_BY.get(c.metric),
                  "from": "a sampled gauge: ts is the sample's wall clock minus the lag, both up to one sampling "
                          "period after the tick"}
        if c.metric == ROOTCOORD_TT:
            rows.append(_row(run_id, "mq.produce", "rootcoord-1", t_ms,
                             {"ts": ts, "tick_ts": ts, "channel": c.labels.get("channel_name"),
                              "msg_type": "TimeTick"}, {**detail, "rounds": c.count, "repeat": c.repeat}))
        elif c.metric == PROXY_TT:
            label = c.labels.get("channel_name")
            if label == "default":  # every pchannel's value is the report's DefaultTimestamp
                values, channels = {"ts": ts}, {}
            else:  # the smallest value is this pchannel's; the DefaultTimestamp is above it and unknown
                values, channels = {}, {label: ts}
            rows.append(_row(run_id, "proxy.report", "proxy-1", t_ms, {**values, "peer": "rootcoord-1"},
                             {**detail, "channels": channels}))
        elif c.metric == QUERYNODE_TT:
            cid = str(c.labels.get("collection_id"))
            mine = vchannels.get(cid, [])
            for v in mine:
                at_ms, end, extra = t_ms, ts, {}
                placed = _placed_at_read(c, lag, prev_end.get(v, 0), reads.get(v, []), log_tsafe.get(v, []),
                                         len(mine))
                if placed is not None:
                    at, end, proving = placed
                    at_ms = float(at - origin)  # the log's time line: the pack comes just before the read
                    extra = {"placed_at_read": {"clock_ms": at, "requests": [p[2] for p in proving],
                                                "guarantee_ts": max(p[1] for p in proving),
                                                "sampled_t_ms": round(t_ms, 1)},
                             "from": "a sampled gauge, placed at the first read the delegator answered on this "
                                     "vchannel since the sample before began, with a guarantee above the tsafe "
                                     "drawn: the read proves the pack was in by then; ts is that moment minus "
                                     "the lag"}
                prev_end[v] = end
                rows.append(_row(run_id, "querynode.pack", "querynode-1", at_ms, {"vchannel": v, "end_ts": end,
                                                                                   "tick_ts": end},
                                 {**detail, **extra, "collection_id": c.labels.get("collection_id"),
                                  "packs": c.count, "repeat": c.repeat,
                                  "vchannel_from": "the gauge is per collection: every vchannel of it is given the "
                                                   "value (a round of ticks ends each pchannel's pack at about the "
                                                   "same timestamp); the deleteNode sets the pack's end as tsafe"}))
                rows.append(_row(run_id, "querynode.tsafe", "querynode-1", at_ms, {"ts": end, "vchannel": v}, None))
    rows.sort(key=lambda r: r["t_ms"])  # stable: a pack's tsafe stays after it
    for seq, r in enumerate(rows):
        r["seq"] = seq
    return rows


def tsafe_at_answers(events) -> "pd.DataFrame":
    """For each read a shard delegator answered in a real run (``events``: its run log, a DataFrame), the tsafe the
    run log shows for that vchannel when the answer comes (the last ``querynode.tsafe`` before it), beside the read's
    guarantee: ``request``, ``vchannel``, ``t_ms``, ``guarantee_ts``, ``tsafe``, ``reached`` (tsafe at or past the
    guarantee), ``placed`` (that tsafe is a sampled pack placed at a read, :func:`_placed_at_read`) and
    ``moved_ms`` (how much earlier than its sample it was placed; ``None`` when not placed)."""
    import pandas as pd

    ev = events.sort_values("seq")
    last: dict[str, tuple] = {}
    pack: dict[str, dict] = {}
    out = []
    for r in ev.itertuples(index=False):
        kind = str(r.kind)
        if kind == "querynode.pack" and isinstance(r.vchannel, str):
            try:
                pack[r.vchannel] = json.loads(r.detail or "{}")
            except ValueError:
                pack[r.vchannel] = {}
        elif kind == "querynode.tsafe" and isinstance(r.vchannel, str) and not pd.isna(r.ts):
            d = pack.pop(r.vchannel, {})
            placed = d.get("placed_at_read")
            last[r.vchannel] = (int(r.ts), placed is not None,
                                None if placed is None else round(placed["sampled_t_ms"] - float(r.t_ms), 1))
        elif kind == "querynode.read" and pd.isna(r.error) and not pd.isna(r.guarantee_ts):
            ts, placed, moved = last.get(r.vchannel, (None, False, None))
            out.append({"request": int(r.request), "vchannel": r.vchannel, "t_ms": float(r.t_ms),
                        "guarantee_ts": int(r.guarantee_ts), "tsafe": ts,
                        "reached": ts is not None and ts >= int(r.guarantee_ts), "placed": placed,
                        "moved_ms": moved})
    return pd.DataFrame(out, columns=["request", "vchannel", "t_ms", "guarantee_ts", "tsafe", "reached", "placed",
                                      "moved_ms"])
