"""A real Milvus server's log as run-log events: the lines of the mechanisms the model has, as the model's kinds.

Milvus 2.3.5 (the PyPI ``milvus`` package's embedded standalone server) writes one line per record, in zap's JSON
form (``log.format: json``: ``{"level":..,"time":..,"caller":"pkg/file.go:123","message":..,<fields>}``) or its
text form (``[time] [LEVEL] [pkg/file.go:123] ["message"] [key=value]...``; the lines printed before the
configuration is read are always text). :func:`parse_log` reads either, line by line, and turns the lines listed in
:data:`LINE_KINDS` into events of the same kinds the model emits, with the Go ``file:line`` and the raw message in
``detail``. A line of neither shape is counted in :attr:`ParsedLog.unparsed`; a log line of a shape we do not map
is counted in :attr:`ParsedLog.skipped`. Nothing in a log is fatal.

The run must use ``log.level: debug``: at ``info`` the reads (``Query PreExecute done.``, ``start do query with
channel``, ``query segments...``), the DataNode's checkpoint RPCs (``UpdateChannelCheckpoint success``), the
QueryNode's delete packs (``start to process delete``) and the proxy's DML tasks are not written.

What 2.3.5 never logs, at any level (``debug`` is zap's lowest), so its log gives no such events: a time tick
(rootcoord's ``timetickSync`` and ``sendMinDdlTsAsTt``, the proxy's ``channelsTimeTicker`` and its
``UpdateChannelTimeTick`` reports: ``proxy.tick``, ``proxy.report``, ``rootcoord.timetick_update``), a TSO allocation,
update or window save after start (``tso.alloc``, ``tso.update``, ``tso.save``), a message produced or a pack consumed
(``mq.produce``, ``mq.pack``, ``querynode.pack``; ``datanode.buffer`` is derived from the buffer's logged size,
without the pack's bounds), the ttNode handing a checkpoint over (``datanode.checkpoint``), and tsafe: only a pack
that holds a delete shows it (the deleteNode passes the pack's end to ``ProcessDelete``, then sets it as tsafe), so
``querynode.tsafe`` is sparse. (A real run takes time ticks, proxy reports and tsafe from the server's sampled
metrics instead: :mod:`milvus_edu.real.metrics`.) A read's tsafe on arrival is not logged
either: ``querynode.wait`` is inferred (the read was served :data:`WAIT_MIN_MS` or more after it arrived) and its
``tick_ts`` is null; a search logs no MVCC timestamp, so its ``querynode.read`` has no ``ts``.

:func:`merge_events` puts the client's events and the server's in one order, and :func:`write_real_run` writes the
run folder the stepper opens.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Callable, Iterable

from ..events.recorder import JsonlSink, ParquetSink
from ..events.schema import EVENT_KINDS, FIELD_NAMES, SCHEMA_VERSION, validate_kind

#: The log level the server must run at for :func:`parse_log` to find the reads and checkpoints (milvus.yaml
#: ``log.level``).
REQUIRED_LOG_LEVEL = "debug"
#: Milvus's ``common.gracefulTime`` default (ms): a Bounded read's guarantee is its begin timestamp minus this.
GRACEFUL_TIME_MS = 5000
#: A read whose serving line (``query segments...``) came at least this long after it reached the delegator
#: waited for tsafe: without a wait the two lines are under a millisecond apart, and tsafe moves only once per
#: time tick (200 ms).
WAIT_MIN_MS = 5.0
#: Request ids of the server's reads start here, above any client's, until :func:`merge_events` links a read to
#: the client call it served.
SERVER_REQUEST_BASE = 1_000_000
#: Examples of unparsed lines kept in :attr:`ParsedLog.unparsed_examples`.
EXAMPLES_KEPT = 5
#: The model's node names, by the Go package directory a line's ``caller`` is in (``tso/tso.go:42`` -> ``tso/``).
NODE_OF_PACKAGE = {
    "rootcoord/": "rootcoord-1", "tso/": "rootcoord-1", "proxy/": "proxy-1", "datacoord/": "datacoord-1",
    "datanode/": "datanode-1", "querynodev2/": "querynode-1", "delegator/": "querynode-1", "pipeline/": "querynode-1",
    "tsafe/": "querynode-1", "segments/": "querynode-1",
}
_LOGICAL_BITS = 18
_LOGICAL_MASK = (1 << _LOGICAL_BITS) - 1


@dataclass
class LogLine:
    """One parsed log line: the wall clock (Unix ms), zap's level, ``caller`` (``pkg/file.go:line``), the message
    and the other fields (values as the JSON form gives them; the text form's are read the same way)."""

    clock_ms: int
    level: str
    caller: str
    message: str
    fields: dict
    lineno: int


@dataclass
class ParsedLog:
    """What :func:`parse_log` made of a log: the events (run-log rows, in time order), the count of lines of no
    known shape with the first few of them, the log lines left unmapped, and the events per kind."""

    events: list[dict]
    unparsed: int = 0
    unparsed_examples: list[str] = field(default_factory=list)
    skipped: int = 0
    lines: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)


# ---- line shapes

_TIME_FORMAT = "%Y/%m/%d %H:%M:%S.%f %z"
#: What a server line's time can be off by (ms): zap writes the time to the millisecond, cut, not rounded, so a line
#: written at 7133.9 ms reads 7133 ms, before a client call stamped at 7133.2 ms that it answered.
LOG_RESOLUTION_MS = 1.0


def parse_time_ms(text: str) -> int | None:
    """A zap time (``2026/11/25 20:19:36.933 +00:00``) as Unix milliseconds; ``None`` when it is not one."""
    try:
        return int(round(datetime.strptime(text.strip(), _TIME_FORMAT).timestamp() * 1000))
    except (ValueError, AttributeError):
        return None


_TEXT_WORDS = {"true": True, "false": False, "null": None}


def _text_value(raw: str):
    """A text-form field value as the JSON form would have given it. zap's text encoder writes numbers, booleans and
    arrays bare (``[n=3]``, ``[isFlush=false]``, ``[ids=[1,2]]``) and quotes a value that needs it, so an array of
    names (``"[a_v0,b_v1]"``) or a JSON array of objects can come quoted: both read as lists here. Anything else
    stays the string it is."""
    if raw in _TEXT_WORDS:
        return _TEXT_WORDS[raw]
    if raw[:1] in "-0123456789[{":
        try:
            return json.loads(raw)
        except ValueError:
            pass
        if raw.startswith("[") and raw.endswith("]") and "[" not in raw[1:-1] and '"' not in raw:
            inner = raw[1:-1]
            return [_text_value(x) for x in inner.split(",")] if inner else []
    return raw


def _scan_text_fields(s: str, i: int) -> list[tuple[str, str]] | None:
    """The ``[key=value]`` groups of a text line from ``i``: a value is a quoted string (JSON escapes) or runs to
    the ``]`` that closes its group (brackets and braces inside it nest)."""
    out = []
    n = len(s)
    while i < n:
        while i < n and s[i] == " ":
            i += 1
        if i >= n:
            break
        if s.startswith("[]", i):  # zap prints an empty group for a logger's fields when it has none
            i += 2
            continue
        if s[i] != "[":
            return None
        eq = s.find("=", i)
        if eq < 0:
            return None
        if s.startswith('"', i + 1):  # a key with a space in it is quoted: ["consistency level"=Strong]
            try:
                key, eq = json.JSONDecoder().raw_decode(s, i + 1)
            except ValueError:
                return None
            if not s.startswith("=", eq):
                return None
        else:
            key = s[i + 1:eq]
        j = eq + 1
        if j < n and s[j] == '"':
            try:
                value, end = json.JSONDecoder().raw_decode(s, j)
            except ValueError:
                return None
            if end >= n or s[end] != "]":
                return None
            out.append((key, _text_value(value)))
            i = end + 1
            continue
        depth = 0
        k = j
        while k < n:
            c = s[k]
            if c in "[{":
                depth += 1
            elif c in "]}":
                if depth == 0:
                    break
                depth -= 1
            k += 1
        if k >= n:
            return None
        out.append((key, _text_value(s[j:k])))
        i = k + 1
    return out


_TEXT_HEAD = re.compile(r"\[([^\]]+)\] \[([A-Z]+)\] \[([^\]]*)\] ")


def _first_wins(pairs: list) -> dict:
    """A JSON object whose repeated keys are kept apart: zap writes a field named like a header (``time``) after the
    header, and the header must win; the later one is kept as ``time~2``."""
    out: dict = {}
    for key, value in pairs:
        name, k = key, 2
        while name in out:
            name, k = f"{key}~{k}", k + 1
        out[name] = value
    return out


def parse_line(text: str, lineno: int = 0) -> LogLine | None:
    """One line of a Milvus log in zap's JSON or text form; ``None`` for anything else (a banner, a C++ glog line,
    a truncated record)."""
    s = text.strip()
    if s.startswith("{"):
        try:
            rec = json.loads(s, object_pairs_hook=_first_wins)
        except ValueError:
            return None
        if not isinstance(rec, dict):
            return None
        clock = parse_time_ms(str(rec.get("time", "")))
        if clock is None or not isinstance(rec.get("caller"), str) or "message" not in rec:
            return None
        rest = {k: v for k, v in rec.items() if k not in ("level", "time", "caller", "message")}
        return LogLine(clock, str(rec.get("level", "")), rec["caller"], str(rec["message"]), rest, lineno)
    m = _TEXT_HEAD.match(s)
    if not m:
        return None
    clock = parse_time_ms(m.group(1))
    if clock is None:
        return None
    i = m.end()
    if i < len(s) and s[i:i + 2] == '["':
        try:
            message, end = json.JSONDecoder().raw_decode(s, i + 1)
        except ValueError:
            return None
        if end >= len(s) or s[end] != "]":
            return None
        i = end + 1
    else:
        close = s.find("]", i)
        if not s.startswith("[", i) or close < 0:
            return None
        message, i = s[i + 1:close], close + 1
    pairs = _scan_text_fields(s, i)
    if pairs is None:
        return None
    return LogLine(clock, m.group(2), m.group(3), str(message), dict(pairs), lineno)


# ---- values in fields

def hybrid_ts(value) -> int | None:
    """A hybrid timestamp from a field (an integer, or its decimal text); ``None`` otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


def ts_of_time(value) -> int | None:
    """The hybrid timestamp of a zap time string (physical part only: 2.3 logs some timestamps this way, to the
    millisecond, and the logical part is lost)."""
    ms = parse_time_ms(value) if isinstance(value, str) else None
    return None if ms is None else ms << _LOGICAL_BITS


_POSITION_TS = re.compile(r"timestamp:(\d+)")


def position_ts(value) -> int | None:
    """The ``timestamp`` of a ``MsgPosition`` printed as protobuf text (``channel_name:"…" … timestamp:N``)."""
    m = _POSITION_TS.search(value) if isinstance(value, str) else None
    return int(m.group(1)) if m else None


def pchannel_of(vchannel: str) -> str:
    """The physical channel of a vchannel: ``by-dev-rootcoord-dml_0_470715721404645395v0`` ->
    ``by-dev-rootcoord-dml_0``."""
    return vchannel.rsplit("_", 1)[0] if "_" in vchannel else vchannel


def _ids(value) -> list:
    return list(value) if isinstance(value, list) else []


# ---- the mapping

class _State:
    """What a line needs from earlier ones: seek positions by vchannel, DML tasks' vchannels, reads by trace id, the
    TSO's last sync line, and the rows each segment's insert buffer holds."""

    def __init__(self, graceful_time_ms: int):
        self.graceful_time_ms = graceful_time_ms
        self.seek: dict[str, int] = {}
        self.task_vchannels: dict[int, list[str]] = {}
        self.reads: dict[str, dict] = {}
        self.next_request = SERVER_REQUEST_BASE
        self.last_tso_sync: LogLine | None = None
        self.buffered: dict[int, int] = {}
        self.insert_rows: dict[str, int] = {}

    def read(self, trace: str) -> dict:
        r = self.reads.get(trace)
        if r is None:
            r = self.reads[trace] = {"request": self.next_request}
            self.next_request += 1
        return r

    def level_of(self, guarantee: int | None, mvcc: int | None) -> str | None:
        """The consistency level a read's guarantee shows (the proxy does not log the level in 2.3): Strong's is
        its begin timestamp, Eventually's is 1, Bounded's is ``gracefulTime`` before it; Session and Customized
        cannot be told apart from that, so they stay null."""
        if guarantee is None or mvcc is None:
            return None
        if guarantee == mvcc:
            return "Strong"
        if guarantee <= 1:
            return "Eventually"
        if mvcc - guarantee == self.graceful_time_ms << _LOGICAL_BITS:
            return "Bounded"
        return None


#: A handler turns one line into events: (kind, columns, detail) tuples, with a fourth item (the wall clock, ms)
#: when the event happened before the line (a read's wait starts when it arrived).
Handler = Callable[[LogLine, _State], list]


def _tso_synced(line, st):
    st.last_tso_sync = line
    return []


def _tso_init(line, st):
    """``tso allocator initialized``: the ``sync and save timestamp`` just before it was the TSO's own
    ``InitTimestamp`` (the other such lines are ID allocators built on the same oracle: rootcoord's, querycoord's)."""
    sync, st.last_tso_sync = st.last_tso_sync, None
    if sync is None:
        return []
    nxt, save = parse_time_ms(str(sync.fields.get("next", ""))), parse_time_ms(str(sync.fields.get("save", "")))
    if nxt is None or save is None:
        return []
    return [("tso.init", {"physical_ms": nxt, "logical": 0, "window_end_ms": save, "clock_ms": sync.clock_ms},
             {"go": sync.caller, "message": sync.message, "then": f"{line.caller} {line.message}"}, sync.clock_ms)]


def _ddl(state: str):
    def handle(line, st):
        task = "CreateCollection" if "create" in line.message else "DropCollection"
        return [("rootcoord.ddl", {"ts": hybrid_ts(line.fields.get("ts"))},
                 {"task": task, "collection": line.fields.get("name") or line.fields.get("collectionName"),
                  "state": state})]
    return handle


def _insert_rows(line, st):
    """``Detail of insert request in Proxy``: the rows of the insert the trace carries."""
    if isinstance(line.fields.get("NumRows"), int):
        st.insert_rows[str(line.fields.get("traceID", ""))] = line.fields["NumRows"]
    return []


def _dml_execute(op: str, id_key: str):
    def handle(line, st):
        ts = hybrid_ts(line.fields.get(id_key))
        vchannels = [str(v) for v in _ids(line.fields.get("virtual_channels"))]
        if ts is None or not vchannels:
            return []
        st.task_vchannels[ts] = vchannels
        pchannels = sorted({pchannel_of(v) for v in vchannels})
        rows = st.insert_rows.pop(str(line.fields.get("traceID", "")), None) if op == "insert" else None
        return [("proxy.enqueue", {"ts": ts, "channel": p, "count": rows},
                 {"op": op, "vchannels": vchannels, "collection_id": line.fields.get("collectionID")})
                for p in pchannels]
    return handle


def _dml_finish(line, st):
    ts = hybrid_ts(line.fields.get("taskID"))
    if ts is None:
        return []
    vchannels = st.task_vchannels.pop(ts, [])
    pchannels = sorted({pchannel_of(v) for v in vchannels}) or [None]
    return [("proxy.finish", {"ts": ts, "channel": p}, {}) for p in pchannels]


def _proxy_read(line, st):
    """A read settled by the proxy; its op (``search`` or ``query``) is its task file's name (``proxy/task_<op>.go``)."""
    op = _file_of(line.caller).rsplit("task_", 1)[-1].removesuffix(".go")
    trace = str(line.fields.get("traceID", ""))
    guarantee, mvcc = hybrid_ts(line.fields.get("guarantee_ts")), hybrid_ts(line.fields.get("mvcc_ts"))
    r = st.read(trace)
    logged = line.fields.get("consistency level")
    level = logged if isinstance(logged, str) else st.level_of(guarantee, mvcc)
    r.update(op=op, guarantee=guarantee, mvcc=mvcc, level=level)
    detail = {"op": op, "collection": line.fields.get("collectionName") or line.fields.get("collName"),
              "level_from": "logged" if isinstance(logged, str) else "guarantee_ts vs mvcc_ts"}
    if mvcc is not None:
        # the TSO never hands out logical 0 (GenerateTSO adds the count first); a proxy's own clock always does
        detail["from_tso"] = mvcc & _LOGICAL_MASK != 0
    return [("proxy.read", {"ts": mvcc, "clock_ms": line.clock_ms, "request": r["request"], "level": level,
                            "guarantee_ts": guarantee}, detail)]


def _qn_arrive(line, st):
    """A read reached a shard's delegator: one line per shard, all with the read's trace id."""
    r = st.read(str(line.fields.get("traceID", "")))
    r.setdefault("arrivals", {})[line.fields.get("channel")] = (line.clock_ms, line.caller)
    return []


def _qn_serve(line, st):
    r = st.read(str(line.fields.get("traceID", "")))
    vchannel = line.fields.get("channel")
    arrived, arrived_go = r.get("arrivals", {}).get(vchannel, (line.clock_ms, None))
    waited = float(line.clock_ms - arrived)
    common = {"vchannel": vchannel, "request": r["request"], "level": r.get("level"),
              "guarantee_ts": r.get("guarantee")}
    out = []
    if waited >= WAIT_MIN_MS:
        # the wait row has no detail column: the read's detail names the arrival line and how long it took
        out.append(("querynode.wait", dict(common), {}, arrived))
    out.append(("querynode.read", {**common, "ts": r.get("mvcc")},
                {"waited_ms": waited, "arrived_go": arrived_go, "sealed": line.fields.get("sealedNum"),
                 "growing": line.fields.get("growingNum"), "op": r.get("op")}))
    return out


def _qn_read_failed(line, st):
    r = st.read(str(line.fields.get("traceID", "")))
    return [("querynode.read", {"vchannel": line.fields.get("channel"), "request": r["request"],
                                "level": r.get("level"), "guarantee_ts": r.get("guarantee"),
                                "error": str(line.fields.get("error", line.message))}, {})]


def _qn_watch(line, st):
    v = line.fields.get("channel")
    ts = hybrid_ts(line.fields.get("startTs"))
    if not v or ts is None:
        return []
    return [("querynode.watch", {"ts": ts, "channel": pchannel_of(v), "vchannel": v},
             {"collection_id": line.fields.get("collectionID")})]


def _qn_delete_tsafe(line, st):
    v, ts = line.fields.get("channel"), hybrid_ts(line.fields.get("ts"))
    if not v or ts is None:
        return []
    return [("querynode.tsafe", {"ts": ts, "vchannel": v},
             {"from": "the pack's end timestamp the deleteNode passes to ProcessDelete and then sets as tsafe"})]


def _seek(line, st):
    v, ts = line.fields.get("channel"), hybrid_ts(line.fields.get("posTs"))
    if v and ts is not None:
        st.seek[str(v)] = ts
    return []


def _dn_watch(line, st):
    v = line.fields.get("vChanName")
    if not v:
        return []
    return [("datanode.watch", {"ts": st.seek.get(v), "channel": pchannel_of(v), "vchannel": v},
             {"collection_id": line.fields.get("collectionID")})]


def _dn_buffer(line, st):
    """``segment buffer status``: after a pack with inserts, the rows a segment's insert buffer holds (``size``);
    the pack's rows are the growth since the last status (a sync empties the buffer)."""
    v, seg, size = line.fields.get("channel"), hybrid_ts(line.fields.get("segmentID")), line.fields.get("size")
    if not v or seg is None or not isinstance(size, int):
        return []
    added = size - st.buffered.get(seg, 0)
    st.buffered[seg] = size
    if added <= 0:
        return []
    return [("datanode.buffer", {"vchannel": v, "count": added},
             {"segments": {str(seg): added}, "buffer_rows": size, "from": "growth of the logged buffer size"})]


def _dn_sync(line, st):
    v = line.fields.get("channel")
    seg = hybrid_ts(line.fields.get("segmentID"))
    return [("datanode.sync", {"ts": position_ts(line.fields.get("position")), "vchannel": v, "segment": seg,
                               "count": st.buffered.pop(seg, 0)},
             dict(flush=line.fields.get("flushed"), drop=line.fields.get("dropped"), auto=line.fields.get("auto")))]


def _dn_sync_done(line, st):
    return [("datanode.sync_done", {"vchannel": line.fields.get("vchannel"),
                                    "segment": hybrid_ts(line.fields.get("segmentID"))}, {})]


def _dn_cp_rpc(line, st):
    """The callback of 2.3.5's channelCheckpointUpdater after DataCoord took the checkpoint: one position per RPC
    (the ttNode's hand-over before it is not logged)."""
    v, ts = line.fields.get("channel"), hybrid_ts(line.fields.get("cpTs"))
    if not v or ts is None:
        return []
    return [("datanode.cp_rpc", {"count": 1}, {"positions": {v: ts}})]


def _dn_flush_ts(line, st):
    ts = ts_of_time(line.fields.get("flushTs"))
    return [("datanode.flush_ts", {"ts": ts, "vchannel": str(v)}, {"set": True, "ts_from": "flushTs, to the ms"})
            for v in _ids(line.fields.get("channels"))]


def _dn_seal(line, st):
    segs = _ids(line.fields.get("sealedSegments"))
    return [("datanode.seal", {"count": len(segs)}, {"segments": segs})]


def _dc_channel_cp(line, st):
    return [("datacoord.channel_cp", {"ts": hybrid_ts(line.fields.get("ts")), "vchannel": line.fields.get("vChannel"),
                                      "peer": "datanode-1", "count": 1}, {"saved": True})]


def _dc_save_binlog_paths(line, st):
    seg = hybrid_ts(line.fields.get("segmentID"))
    pos, rows = {}, None
    for cp in _ids(line.fields.get("checkpoints")):
        if isinstance(cp, dict) and cp.get("segmentID") == seg:
            pos, rows = cp.get("position") or {}, cp.get("num_of_rows")
    node = line.fields.get("nodeID")
    return [("datacoord.save_binlog_paths", {"ts": hybrid_ts(pos.get("timestamp")), "segment": seg,
                                             "vchannel": pos.get("channel_name"), "count": rows,
                                             "peer": f"datanode-{node}" if node is not None else None},
             {"flushed": line.fields.get("isFlush"), "dropped": line.fields.get("isDropped")})]


def _dc_flush(line, st):
    segs = _ids(line.fields.get("sealSegments"))
    return [("datacoord.flush", {"ts": ts_of_time(line.fields.get("flushTs")), "count": len(segs)},
             {"segments": segs, "flush_segments": _ids(line.fields.get("flushSegments")),
              "collection_id": line.fields.get("collectionID"), "ts_from": "flushTs, to the ms"})]


def _dc_flush_segments(line, st):
    segs = _ids(line.fields.get("segment IDs"))
    return [("datacoord.flush_segments", {"count": len(segs)}, {"segments": segs})]


def _dc_segment_state(line, st):
    return [("datacoord.segment_state", {"segment": hybrid_ts(line.fields.get("segmentID"))},
             {"state": line.fields.get("target state")})]


#: The 2.3.5 log lines that become events: (Go file, message) -> handler. A file is named without its line, so a
#: build whose lines moved still matches; the line a record came from is kept in ``detail.go``.
LINE_KINDS: dict[tuple[str, str], Handler] = {
    ("tso/tso.go", "sync and save timestamp"): _tso_synced,
    ("rootcoord/root_coord.go", "tso allocator initialized"): _tso_init,
    ("rootcoord/root_coord.go", "received request to create collection"): _ddl("started"),
    ("rootcoord/root_coord.go", "done to create collection"): _ddl("done"),
    ("rootcoord/root_coord.go", "received request to drop collection"): _ddl("started"),
    ("rootcoord/root_coord.go", "done to drop collection"): _ddl("done"),
    ("proxy/impl.go", "Detail of insert request in Proxy"): _insert_rows,
    ("proxy/task_insert.go", "send insert request to virtual channels"): _dml_execute("insert", "task_id"),
    ("proxy/task_delete.go", "send delete request to virtual channels"): _dml_execute("delete", "taskID"),
    ("proxy/task_scheduler.go", "Proxy dmTaskQueue popPChanStats"): _dml_finish,
    ("proxy/task_query.go", "Query PreExecute done."): _proxy_read,
    ("proxy/task_search.go", "search PreExecute done."): _proxy_read,
    ("querynodev2/handlers.go", "start do query with channel"): _qn_arrive,
    ("querynodev2/handlers.go", "start to search channel"): _qn_arrive,
    ("delegator/delegator.go", "query segments..."): _qn_serve,
    ("delegator/delegator.go", "search segments..."): _qn_serve,
    ("delegator/delegator.go", "delegator query failed to wait tsafe"): _qn_read_failed,
    ("delegator/delegator.go", "delegator search failed to wait tsafe"): _qn_read_failed,
    ("delegator/delegator.go", "finish build new shardDelegator"): _qn_watch,
    ("delegator/delegator_data.go", "start to process delete"): _qn_delete_tsafe,
    ("datacoord/handler.go", "channel seek position set from channel checkpoint meta"): _seek,
    ("datacoord/handler.go", "channel seek position set from collection start position"): _seek,
    ("datacoord/handler.go", "channel seek position set from earliest segment dml position"): _seek,
    ("datanode/data_sync_service.go", "dataSyncService starting flow graph"): _dn_watch,
    ("datanode/flow_graph_insert_buffer_node.go", "segment buffer status"): _dn_buffer,
    ("datanode/flow_graph_insert_buffer_node.go", "insertBufferNode start syncing bufferData"): _dn_sync,
    ("datanode/flush_manager.go", "successfully save binlog"): _dn_sync_done,
    ("datanode/flow_graph_time_tick_node.go", "UpdateChannelCheckpoint success"): _dn_cp_rpc,
    ("datanode/services.go", "DataNode receives FlushChannels request"): _dn_flush_ts,
    ("datanode/services.go", "receiving FlushSegments request"): _dn_seal,
    ("datacoord/meta.go", "UpdateChannelCheckpoint done"): _dc_channel_cp,
    ("datacoord/services.go", "receive SaveBinlogPaths request"): _dc_save_binlog_paths,
    ("datacoord/services.go", "flush response with segments"): _dc_flush,
    ("datacoord/services.go", "start flushing segments"): _dc_flush_segments,
    ("datacoord/meta.go", "meta update: setting segment state - complete"): _dc_segment_state,
}

#: Node of the events a handler emits, by kind prefix (a line's package does not always say: the TSO's lines are
#: rootcoord's, the delegator's are the QueryNode's).
_NODE_OF_KIND = {"tso.": "rootcoord-1", "rootcoord.": "rootcoord-1", "proxy.": "proxy-1", "datanode.": "datanode-1",
                 "datacoord.": "datacoord-1", "querynode.": "querynode-1"}


def node_of(caller: str) -> str:
    """The model's node name for a ``caller`` (``pkg/file.go:line``), by its package; ``milvus`` when unknown."""
    return NODE_OF_PACKAGE.get(caller.split("/", 1)[0] + "/", "milvus")


def _file_of(caller: str) -> str:
    return caller.rsplit(":", 1)[0]


# ---- reading

def _read_lines(path_or_lines) -> tuple[Iterable[str], bool]:
    """The lines to parse, and whether they come from more than one file (so that a record may appear twice)."""
    if isinstance(path_or_lines, (str, os.PathLike)):
        p = Path(path_or_lines)
        if p.is_dir():
            files = sorted(p.glob("standalone*.log")) + sorted(p.glob("milvus-stdout.log"))
            if not files:
                raise FileNotFoundError(f"{p} holds no Milvus log (standalone*.log or milvus-stdout.log); pass the "
                                        "server's log folder or one log file")
            lines = [line for f in files for line in f.read_text(encoding="utf-8", errors="replace").splitlines()]
            return lines, len(files) > 1
        if not p.is_file():
            raise FileNotFoundError(f"{p} does not exist; pass a Milvus log file or the server's log folder")
        return p.read_text(encoding="utf-8", errors="replace").splitlines(), False
    return path_or_lines, False


def _row(run_id: str, kind: str, node: str, t_ms: float, values: dict, detail: dict) -> dict:
    """A full run-log row; ``detail`` is left out for a kind that has no such column (``querynode.wait``,
    ``querynode.tsafe``: the model's events of these kinds carry none, and the schema is the model's)."""
    row = dict.fromkeys(FIELD_NAMES)
    row.update(run_id=run_id, seq=0, t_ms=float(t_ms), node=node, kind=kind)
    row.update({k: v for k, v in values.items() if v is not None})
    if "detail" in EVENT_KINDS[kind].fields:
        row["detail"] = json.dumps(detail, sort_keys=True, separators=(",", ":"), default=str)
    return row


def parse_log(path_or_lines, *, run_id: str, t0: int | None = None,
              graceful_time_ms: int = GRACEFUL_TIME_MS) -> ParsedLog:
    """A Milvus 2.3 server log as run-log events.

    ``path_or_lines``: a log file, the server's log folder (its ``standalone*.log`` and ``milvus-stdout.log``; a
    record found in both, as with ``log.stdout: true``, counts once) or an iterable of lines. ``run_id`` names the
    run. ``t0``: the wall clock (Unix ms) of ``t_ms`` 0, e.g. when the workload started, so that the client's
    events and the server's share one time line; by default the first log line's. ``graceful_time_ms``: the
    server's ``common.gracefulTime``, to tell a Bounded read by its guarantee.

    Each event has ``clock_ms`` in ``detail`` (the line's wall clock) where its kind has no ``clock_ms`` column,
    ``detail.go`` (the Go ``file:line``) and ``detail.message`` (the log message). Events are ordered by the line's
    wall clock, then by line; ``seq`` counts from 0 in that order.
    """
    parsed: list[LogLine] = []
    unparsed, examples, total = 0, [], 0
    seen = set()
    lines, several_files = _read_lines(path_or_lines)
    for lineno, text in enumerate(lines, 1):
        if not text.strip():
            continue
        total += 1
        line = parse_line(text, lineno)
        if line is None:
            unparsed += 1
            if len(examples) < EXAMPLES_KEPT:
                examples.append(text[:200])
            continue
        if several_files:  # the file log and stdout both hold every record when log.stdout is on
            key = (line.clock_ms, line.caller, line.message, json.dumps(line.fields, sort_keys=True, default=str))
            if key in seen:
                continue
            seen.add(key)
        parsed.append(line)
    parsed.sort(key=lambda ln: ln.clock_ms)  # stable: lines of one ms keep their order
    origin = t0 if t0 is not None else (parsed[0].clock_ms if parsed else 0)
    state = _State(graceful_time_ms)
    staged: list[tuple[int, int, int, dict]] = []
    skipped = 0
    for order, line in enumerate(parsed):
        handler = LINE_KINDS.get((_file_of(line.caller), line.message))
        if handler is None:
            skipped += 1
            continue
        for k, item in enumerate(handler(line, state)):
            kind, values, extra = item[:3]
            clock = item[3] if len(item) > 3 else line.clock_ms
            detail = {"go": line.caller, "message": line.message, **extra}
            if "clock_ms" not in values:
                detail["clock_ms"] = clock
            validate_kind(kind, values)
            node = _NODE_OF_KIND.get(kind.split(".", 1)[0] + ".", node_of(line.caller))
            staged.append((clock, order, k, _row(run_id, kind, node, clock - origin, values, detail)))
    staged.sort(key=lambda s: s[:3])
    events = [row for *_, row in staged]
    for seq, row in enumerate(events):
        row["seq"] = seq
    by_kind = dict(sorted(Counter(r["kind"] for r in events).items()))
    return ParsedLog(events, unparsed, examples, skipped, total, by_kind)


# ---- merging and writing

def _as_rows(events) -> list[dict]:
    """Rows as plain dicts with every column (a DataFrame's missing values as ``None``, numpy scalars as Python's)."""
    if hasattr(events, "to_dict"):
        records = events.astype(object).where(events.notna(), None).to_dict("records")
    else:
        records = [dict(r) for r in events]
    rows = []
    for r in records:
        row = dict.fromkeys(FIELD_NAMES)
        for name in FIELD_NAMES:
            v = r.get(name)
            row[name] = v.item() if hasattr(v, "item") else v
        rows.append(row)
    return rows


def _detail(row: dict) -> dict:
    try:
        d = json.loads(row.get("detail") or "{}")
    except ValueError:
        return {}
    return d if isinstance(d, dict) else {}


def _link_requests(client: list[dict], server: list[dict]) -> None:
    """Give a server read the client's request id when exactly one client read of its op (query or search) was in
    flight when the proxy settled it; others keep their own ids (at or above :data:`SERVER_REQUEST_BASE`). The proxy's
    line counts as in flight from :data:`LOG_RESOLUTION_MS` before the client's call: its time is cut to the ms. Such a
    line, stamped before the call it answers, is moved to the call's time, the earliest its uncut time can be (so the
    merged log never shows the proxy settling a read before the client sent it)."""
    spans: dict[int, list] = {}
    for r in client:
        if r["kind"] == "client.read_start" and r.get("request") is not None:
            spans[r["request"]] = [r["t_ms"], None, _detail(r).get("op")]
    for r in client:
        if r["kind"] == "client.read" and r.get("request") in spans:
            spans[r["request"]][1] = r["t_ms"]
    remap = {}
    for r in server:
        if r["kind"] != "proxy.read" or r.get("request") is None:
            continue
        op = _detail(r).get("op")
        hits = [req for req, (t0, t1, cop) in spans.items()
                if t0 < r["t_ms"] + LOG_RESOLUTION_MS and r["t_ms"] <= (t1 if t1 is not None else float("inf"))
                and (cop is None or cop == op)]
        if len(hits) == 1 and hits[0] not in remap.values():
            remap[r["request"]] = hits[0]
            r["t_ms"] = max(r["t_ms"], spans[hits[0]][0])
    for r in server:
        if r.get("request") in remap:
            r["request"] = remap[r["request"]]
    _fill_client_reads(client, server, set(remap.values()))


def _fill_client_reads(client: list[dict], server: list[dict], linked: set) -> None:
    """A linked ``client.read`` that pymilvus left without them takes its guarantee from the proxy's log and its read
    timestamp from the delegators' (the smallest, as the model's ``client.read`` has it); ``detail.from_server``
    names what was filled."""
    guarantee, read_ts = {}, {}
    for r in server:
        req = r.get("request")
        if req not in linked:
            continue
        if r["kind"] == "proxy.read" and r.get("guarantee_ts") is not None:
            guarantee[req] = r["guarantee_ts"]
        elif r["kind"] == "querynode.read" and r.get("ts") is not None:
            read_ts[req] = min(read_ts.get(req, r["ts"]), r["ts"])
    for r in client:
        req = r.get("request")
        if r["kind"] != "client.read" or req not in linked:
            continue
        filled = []
        for column, source in (("guarantee_ts", guarantee), ("ts", read_ts)):
            if r.get(column) is None and req in source:
                r[column] = source[req]
                filled.append(column)
        if filled:
            d = _detail(r)
            d["from_server"] = filled
            r["detail"] = json.dumps(d, sort_keys=True, separators=(",", ":"), default=str)


def merge_events(client_events, server_events, *, run_id: str | None = None) -> list[dict]:
    """The client's events and the server's as one run log, in time order, ``seq`` renumbered from 0.

    Both must count ``t_ms`` from the same instant (give :func:`parse_log` the client's start as ``t0``). Ties
    are broken by source (the client's first: its call was made before the server logged it) and then by each
    side's own ``seq``, so the result is the same for the same inputs. A server read is given the client's request
    id when exactly one client read of its kind (query or search) was in flight when the proxy settled it; that
    ``client.read`` then takes the guarantee and read timestamp the server logged where it has none (pymilvus does not
    return them). ``run_id``: the run's name on every row (default: the first client event's, else the first server
    event's). Accepts lists of rows or DataFrames; the rows given are not changed.
    """
    client, server = _as_rows(client_events), _as_rows(server_events)
    _link_requests(client, server)
    tagged = [(r["t_ms"], 0, r["seq"] if r["seq"] is not None else i, r) for i, r in enumerate(client)]
    tagged += [(r["t_ms"], 1, r["seq"] if r["seq"] is not None else i, r) for i, r in enumerate(server)]
    tagged.sort(key=lambda t: t[:3])
    rows = [r for *_, r in tagged]
    name = run_id or next((r["run_id"] for r in client + server if r.get("run_id")), "real")
    for seq, r in enumerate(rows):
        r["seq"] = seq
        r["run_id"] = name
    return rows


def write_real_run(out_dir, events, summary_extra: dict | None = None, *, scenario: str = "workload") -> Path:
    """Write a real run's events as a run folder (``events.parquet``, ``events.jsonl``, ``summary.json``) that
    :func:`milvus_edu.load_run` and the stepper open; returns the folder.

    A ``run.start`` naming ``scenario`` (default ``workload``, so the stepper draws the query lanes) and marked
    ``real`` is put first and a ``run.end`` last when the events have none; ``seq`` is renumbered. ``summary.json``
    holds the run id, the scenario, ``"source": "real"``, the schema version, the event counts and
    ``summary_extra`` (the server's version, its log level, the parser's unparsed count, ...).
    """
    from ..version import __version__

    rows = _as_rows(events)
    if not rows:
        raise ValueError("no events to write; parse a log or record a workload first")
    run_id = next((r["run_id"] for r in rows if r.get("run_id")), "real")
    extra = dict(summary_extra or {})
    if not any(r["kind"] == "run.start" for r in rows):
        start = _row(run_id, "run.start", "real", min(0.0, rows[0]["t_ms"]), {},
                     {"scenario": scenario, "real": True, "version": __version__})
        rows.insert(0, start)
    if not any(r["kind"] == "run.end" for r in rows):
        rows.append(_row(run_id, "run.end", "real", max(r["t_ms"] for r in rows), {}, {"events": len(rows) + 1}))
    for seq, r in enumerate(rows):
        r["seq"] = seq
        r["run_id"] = run_id
        validate_kind(r["kind"], {k: v for k, v in r.items() if v is not None})
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    meta = {"scenario": scenario, "source": "real"}
    for sink in (ParquetSink(out / "events.parquet", metadata=meta), JsonlSink(out / "events.jsonl")):
        for r in rows:
            sink.write(r)
        sink.close()
    summary = {"run_id": run_id, "scenario": scenario, "source": "real", "schema_version": SCHEMA_VERSION,
               "milvus_edu_version": __version__, "events": len(rows),
               "events_by_kind": dict(sorted(Counter(r["kind"] for r in rows).items())), **extra}
    with open(out / "summary.json", "w", encoding="utf-8") as fh:
        json.dump(summary, fh, indent=2, sort_keys=True, default=str)
        fh.write("\n")
    return out
