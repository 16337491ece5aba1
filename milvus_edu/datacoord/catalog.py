"""DataCoord's catalog: segment records, binlog ids and channel checkpoints in the metadata KV.

Models ``internal/metastore/kv/datacoord/{kv_catalog.go, util.go, constant.go}`` and
``internal/metastore/kv/binlog/binlog.go`` (Milvus 2.5). Keys are Milvus's, under the meta root
``by-dev/meta`` (``etcd.rootPath`` + ``etcd.metaSubPath``):

* ``datacoord-meta/s/{collection}/{partition}/{segment}`` - the segment record, without its logs;
* ``datacoord-meta/binlog/{collection}/{partition}/{segment}/{field}`` - one field's insert binlogs,
  and likewise ``datacoord-meta/deltalog/...`` and ``datacoord-meta/statslog/...``;
* ``datacoord-meta/channel-cp/{vchannel}`` - a channel checkpoint.

Binlogs are stored *compressed*: a log id and its counts, never the object-storage path, which a reader
rebuilds from the ids (``binlog.CompressFieldBinlogs``).

A value that is damaged or was not written by this catalog is refused with a one-line
:class:`CatalogError` naming the key; the key is never deleted or rewritten on load.

Simplification: values are JSON of the dataclasses' fields instead of protobuf bytes.
Simplification: only the segment, binlog and channel-checkpoint keys; no index, import, compaction,
partition-stats or channel-removal keys, and no BM25 logs.
Simplification: ``AlterSegments`` is one KV transaction however many keys it writes; Go's
``SaveByBatch`` splits the keys into transactions of ``metastore.maxEtcdTxnNum`` (64), so a very wide
segment update is not atomic in Milvus.
Simplification: dropping a segment does not re-write its binlog keys for the garbage collector
(``handleDroppedSegment``); every binlog here is saved when it is added, so they are always present.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import replace

from ..merr import wrap_err_parameter_invalid_msg
from ..proto import Binlog, FieldBinlog, MsgPosition, SegmentInfo, SegmentLevel, SegmentState

#: ``etcd.rootPath`` + ``/`` + ``etcd.metaSubPath`` (``by-dev`` and ``meta``).
META_ROOT_PATH = "by-dev/meta"

META_PREFIX = "datacoord-meta"
SEGMENT_PREFIX = META_PREFIX + "/s"
SEGMENT_BINLOG_PATH_PREFIX = META_PREFIX + "/binlog"
SEGMENT_DELTALOG_PATH_PREFIX = META_PREFIX + "/deltalog"
SEGMENT_STATSLOG_PATH_PREFIX = META_PREFIX + "/statslog"
CHANNEL_CHECKPOINT_PREFIX = META_PREFIX + "/channel-cp"

_STATES = frozenset(
    (SegmentState.NOT_EXIST, SegmentState.GROWING, SegmentState.SEALED, SegmentState.FLUSHED,
     SegmentState.FLUSHING, SegmentState.DROPPED)
)
_LEVELS = frozenset((SegmentLevel.L0, SegmentLevel.L1))


class CatalogError(ValueError):
    """A stored value that cannot be read back, or a record that must not be stored (one line)."""


# ---- building keys (util.go) -------------------------------------------------------------------

def build_segment_path(collection_id: int, partition_id: int, segment_id: int) -> str:
    """``buildSegmentPath``: ``datacoord-meta/s/{collection}/{partition}/{segment}``."""
    return f"{SEGMENT_PREFIX}/{collection_id}/{partition_id}/{segment_id}"


def build_field_binlog_path(collection_id: int, partition_id: int, segment_id: int, field_id: int) -> str:
    """``buildFieldBinlogPath``: ``datacoord-meta/binlog/{collection}/{partition}/{segment}/{field}``."""
    return f"{SEGMENT_BINLOG_PATH_PREFIX}/{collection_id}/{partition_id}/{segment_id}/{field_id}"


def build_field_deltalog_path(collection_id: int, partition_id: int, segment_id: int, field_id: int) -> str:
    """``buildFieldDeltalogPath``: ``datacoord-meta/deltalog/{collection}/{partition}/{segment}/{field}``."""
    return f"{SEGMENT_DELTALOG_PATH_PREFIX}/{collection_id}/{partition_id}/{segment_id}/{field_id}"


def build_field_statslog_path(collection_id: int, partition_id: int, segment_id: int, field_id: int) -> str:
    """``buildFieldStatslogPath``: ``datacoord-meta/statslog/{collection}/{partition}/{segment}/{field}``."""
    return f"{SEGMENT_STATSLOG_PATH_PREFIX}/{collection_id}/{partition_id}/{segment_id}/{field_id}"


def build_channel_cp_key(vchannel: str) -> str:
    """``buildChannelCPKey``: ``datacoord-meta/channel-cp/{vchannel}``."""
    return f"{CHANNEL_CHECKPOINT_PREFIX}/{vchannel}"


# ---- binlog compression (binlog.go) and row counts (segmentutil) --------------------------------

def get_log_id_from_binlog_path(log_path: str) -> int:
    """``GetLogIDFromBingLogPath``: the number after the last ``/`` of an object-storage path."""
    idx = log_path.rfind("/")
    if idx == -1:
        raise wrap_err_parameter_invalid_msg(f"invalid binlog path: {log_path}")
    tail = log_path[idx + 1:]
    if not tail.isascii() or not tail.lstrip("-").isdigit():
        raise ValueError(f'strconv.ParseInt: parsing "{tail}": invalid syntax (binlog path {log_path})')
    return int(tail)


def compress_field_binlogs(field_binlogs: Iterable[FieldBinlog]) -> tuple[FieldBinlog, ...]:
    """``CompressFieldBinlogs``: replace every path by its log id (binlogs that carry only an id pass)."""
    out = []
    for fb in field_binlogs:
        logs = tuple(
            Binlog(b.entries_num, b.timestamp_from, b.timestamp_to, "", b.log_size,
                   get_log_id_from_binlog_path(b.log_path), b.memory_size) if b.log_path else b
            for b in fb.binlogs
        )
        out.append(FieldBinlog(fb.field_id, logs))
    return tuple(out)


def calc_row_count_from_binlog(segment: SegmentInfo) -> int:
    """``segmentutil.CalcRowCountFromBinLog``: the entries of the first field's binlogs.

    Returns -1 when one of them has ``entries_num <= 0`` (a stale log, as Go says).
    """
    if not segment.binlogs:
        return 0
    rows = 0
    for b in segment.binlogs[0].binlogs:
        rows += b.entries_num
        if b.entries_num <= 0:
            return -1
    return rows


# ---- JSON records --------------------------------------------------------------------------------

_POSITION_KEYS = {"channel_name": str, "msg_id": (int, type(None)), "timestamp": int, "msg_group": str}
_BINLOG_KEYS = {"entries_num": int, "timestamp_from": int, "timestamp_to": int, "log_size": int,
                "log_id": int, "memory_size": int}
_SEGMENT_KEYS = {"id": int, "collection_id": int, "partition_id": int, "insert_channel": str,
                 "num_of_rows": int, "state": str, "level": str, "start_position": (dict, type(None)),
                 "dml_position": (dict, type(None)), "dropped_at": int, "is_importing": bool}


def _position_to_json(pos: MsgPosition | None) -> dict | None:
    if pos is None:
        return None
    return {"channel_name": pos.channel_name, "msg_id": pos.msg_id, "timestamp": pos.timestamp,
            "msg_group": pos.msg_group}


def _check_record(obj: object, spec: Mapping[str, object], what: str) -> dict:
    if not isinstance(obj, dict):
        raise ValueError(f"not a {what} record")
    if set(obj) != set(spec):
        raise ValueError(f"not a {what} record (fields {sorted(obj)})")
    for name, kind in spec.items():
        value = obj[name]
        # bool is an int in Python; a stored true where a number belongs is damage, not a number
        if isinstance(value, bool) and kind is not bool:
            raise ValueError(f"{what}.{name} is {value!r}")
        if not isinstance(value, kind):
            raise ValueError(f"{what}.{name} is {value!r}")
    return obj


def _position_from_json(obj: object) -> MsgPosition | None:
    if obj is None:
        return None
    d = _check_record(obj, _POSITION_KEYS, "MsgPosition")
    return MsgPosition(d["channel_name"], d["msg_id"], d["timestamp"], d["msg_group"])


def encode_position(pos: MsgPosition) -> bytes:
    """A channel checkpoint's stored value (JSON of ``msgpb.MsgPosition``)."""
    return json.dumps(_position_to_json(pos), sort_keys=True).encode()


def encode_segment(segment: SegmentInfo) -> bytes:
    """A segment record's stored value: every field but the logs (``CloneSegmentWithExcludeBinlogs``)."""
    return json.dumps({
        "id": segment.id, "collection_id": segment.collection_id, "partition_id": segment.partition_id,
        "insert_channel": segment.insert_channel, "num_of_rows": segment.num_of_rows, "state": segment.state,
        "level": segment.level, "start_position": _position_to_json(segment.start_position),
        "dml_position": _position_to_json(segment.dml_position), "dropped_at": segment.dropped_at,
        "is_importing": segment.is_importing,
    }, sort_keys=True).encode()


def encode_field_binlog(fb: FieldBinlog) -> bytes:
    """A field's binlogs as stored: ids and counts only (``checkLogID`` refuses paths and id 0)."""
    for b in fb.binlogs:
        if b.log_id == 0:
            raise CatalogError(f"invalid log id, binlog:{b}")
        if b.log_path:
            raise CatalogError(f"fieldBinlog no need to store logpath, binlog:{b}")
    return json.dumps({
        "field_id": fb.field_id,
        "binlogs": [{"entries_num": b.entries_num, "timestamp_from": b.timestamp_from,
                     "timestamp_to": b.timestamp_to, "log_size": b.log_size, "log_id": b.log_id,
                     "memory_size": b.memory_size} for b in fb.binlogs],
    }, sort_keys=True).encode()


def _parse_json(key: str, value: bytes) -> object:
    try:
        return json.loads(value.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        reason = exc.__class__.__name__
        raise CatalogError(f"cannot load {key}: not JSON ({reason}); the key is left as it is") from None


def decode_segment(key: str, value: bytes) -> SegmentInfo:
    """The segment record stored at ``key``; :class:`CatalogError` if it is damaged or not ours."""
    try:
        d = _check_record(_parse_json(key, value), _SEGMENT_KEYS, "SegmentInfo")
        if d["state"] not in _STATES or d["level"] not in _LEVELS:
            raise ValueError(f"unknown state {d['state']!r} or level {d['level']!r}")
        return SegmentInfo(
            id=d["id"], collection_id=d["collection_id"], partition_id=d["partition_id"],
            insert_channel=d["insert_channel"], num_of_rows=d["num_of_rows"], state=d["state"],
            level=d["level"], start_position=_position_from_json(d["start_position"]),
            dml_position=_position_from_json(d["dml_position"]), dropped_at=d["dropped_at"],
            is_importing=d["is_importing"],
        )
    except CatalogError:
        raise
    except ValueError as exc:
        raise CatalogError(f"cannot load {key}: {exc}; the key is left as it is") from None


def decode_field_binlog(key: str, value: bytes) -> FieldBinlog:
    """The field binlogs stored at ``key``; :class:`CatalogError` if damaged or not ours."""
    try:
        d = _check_record(_parse_json(key, value), {"field_id": int, "binlogs": list}, "FieldBinlog")
        logs = tuple(
            Binlog(entries_num=b["entries_num"], timestamp_from=b["timestamp_from"], timestamp_to=b["timestamp_to"],
                   log_size=b["log_size"], log_id=b["log_id"], memory_size=b["memory_size"])
            for b in (_check_record(x, _BINLOG_KEYS, "Binlog") for x in d["binlogs"])
        )
        return FieldBinlog(d["field_id"], logs)
    except CatalogError:
        raise
    except ValueError as exc:
        raise CatalogError(f"cannot load {key}: {exc}; the key is left as it is") from None


def decode_position(key: str, value: bytes) -> MsgPosition:
    """The channel checkpoint stored at ``key``; :class:`CatalogError` if damaged or not ours."""
    try:
        pos = _position_from_json(_parse_json(key, value))
        if pos is None:
            raise ValueError("null position")
        return pos
    except CatalogError:
        raise
    except ValueError as exc:
        raise CatalogError(f"cannot load {key}: {exc}; the key is left as it is") from None


# ---- the catalog ---------------------------------------------------------------------------------

class Catalog:
    """``datacoord.Catalog``: DataCoord's records in a :class:`~milvus_edu.storage.kv.BaseKV`.

    ``kv`` is a ``BaseKV`` (``MemoryKV``, ``SQLiteKV``) or a ``FaultyKV`` around one; ``meta_root`` is
    prefixed to every key, as ``etcdKV`` prefixes its ``rootPath``.
    """

    def __init__(self, kv, meta_root: str = META_ROOT_PATH):
        self.kv = kv
        self.meta_root = meta_root.rstrip("/")

    def _k(self, key: str) -> str:
        return f"{self.meta_root}/{key}"

    def _segment_key(self, segment: SegmentInfo) -> str:
        return self._k(build_segment_path(segment.collection_id, segment.partition_id, segment.id))

    def _commit(self, saves: Mapping[str, bytes], removals: Iterable[str] = ()) -> None:
        """``MultiSaveAndRemove``: one etcd transaction, all puts and deletes or none.

        The KV has no public multi-key transaction, so this runs every put inside the engine's own
        transaction (SQLite rolls it back on an error) and, for engines without rollback, puts the
        earlier rows back itself with the raw row operations; a fault injected by ``FaultyKV`` models
        the RPC failing, and etcd applies none of a failed transaction.
        """
        kv = self.kv
        removals = sorted(set(removals))
        with kv._txn():
            before = {k: kv._get(k) for k in list(saves) + removals}
            done: list[str] = []
            try:
                for key in sorted(saves):
                    kv.save(key, saves[key])
                    done.append(key)
                for key in removals:
                    kv.remove(key)
                    done.append(key)
            except BaseException:
                for key in reversed(done):
                    row = before[key]
                    if row is None:
                        kv._delete(key)
                    else:
                        kv._put(key, row[0], row[1])
                raise

    def _binlog_kvs(self, segment: SegmentInfo) -> dict[str, bytes]:
        """``buildBinlogKvsWithLogID``: one key per field and kind of log."""
        c, p, s = segment.collection_id, segment.partition_id, segment.id
        kvs: dict[str, bytes] = {}
        for logs, build in ((segment.binlogs, build_field_binlog_path),
                            (segment.deltalogs, build_field_deltalog_path),
                            (segment.statslogs, build_field_statslog_path)):
            for fb in logs:
                kvs[self._k(build(c, p, s, fb.field_id))] = encode_field_binlog(fb)
        return kvs

    def add_segment(self, segment: SegmentInfo) -> None:
        """``AddSegment``: the record and its logs in one transaction.

        As ``buildSegmentAndBinlogsKvs``, the stored row count is corrected to the binlogs' count when
        that count is positive and differs (``ReCalcRowCount``).
        """
        kvs = self._binlog_kvs(segment)
        rows = calc_row_count_from_binlog(segment)
        stored = segment if rows <= 0 or rows == segment.num_of_rows else _with_rows(segment, rows)
        kvs[self._segment_key(segment)] = encode_segment(stored)
        self._commit(kvs)

    def alter_segments(self, segments: Iterable[SegmentInfo], binlog_increments: Iterable[SegmentInfo] = ()) -> None:
        """``AlterSegments``: rewrite the records of ``segments`` and the log keys of ``binlog_increments``.

        All in one transaction (all or nothing). Quirk kept from Go: the stored row count is *always*
        the binlogs' count (``CalcRowCountFromBinLog``), even 0 for a segment without binlogs or -1 for
        a stale log, whatever the in-memory record says.
        """
        kvs: dict[str, bytes] = {}
        for segment in segments:
            stored = _with_rows(segment, calc_row_count_from_binlog(segment))
            kvs[self._segment_key(segment)] = encode_segment(stored)
        for segment in binlog_increments:
            kvs.update(self._binlog_kvs(segment))
        if kvs:
            self._commit(kvs)

    def drop_segment(self, segment: SegmentInfo) -> None:
        """``DropSegment``: remove the record and every log key of the segment in one transaction."""
        c, p, s = segment.collection_id, segment.partition_id, segment.id
        keys = [self._k(build_segment_path(c, p, s))]
        for prefix in (SEGMENT_BINLOG_PATH_PREFIX, SEGMENT_DELTALOG_PATH_PREFIX, SEGMENT_STATSLOG_PATH_PREFIX):
            keys.extend(k for k, _ in self.kv.load_with_prefix(self._k(f"{prefix}/{c}/{p}/{s}/")))
        self._commit({}, keys)

    def list_segments(self, collection_id: int | None = None) -> list[SegmentInfo]:
        """``ListSegments``: the segments of one collection (or of all), with their logs, by id.

        Log keys whose segment has no record are ignored, as ``applyBinlogInfo`` only fills listed
        segments. A segment's fields come back in key order (``.../100`` before ``.../2``), as Go's
        sorted walk gives them, not in the order they were added.
        """
        tail = "" if collection_id is None else f"{collection_id}/"
        logs: dict[str, dict[int, list[FieldBinlog]]] = {}
        for prefix in (SEGMENT_BINLOG_PATH_PREFIX, SEGMENT_DELTALOG_PATH_PREFIX, SEGMENT_STATSLOG_PATH_PREFIX):
            by_segment: dict[int, list[FieldBinlog]] = {}
            for key, value in self.kv.load_with_prefix(self._k(f"{prefix}/{tail}")):
                by_segment.setdefault(_parse_segment_id(key), []).append(decode_field_binlog(key, value))
            logs[prefix] = by_segment
        segments = []
        for key, value in self.kv.load_with_prefix(self._k(f"{SEGMENT_PREFIX}/{tail}")):
            seg = decode_segment(key, value)
            segments.append(replace(
                seg,
                binlogs=tuple(logs[SEGMENT_BINLOG_PATH_PREFIX].get(seg.id, ())),
                deltalogs=tuple(logs[SEGMENT_DELTALOG_PATH_PREFIX].get(seg.id, ())),
                statslogs=tuple(logs[SEGMENT_STATSLOG_PATH_PREFIX].get(seg.id, ())),
            ))
        return sorted(segments, key=lambda s: s.id)

    def save_channel_checkpoint(self, vchannel: str, pos: MsgPosition) -> None:
        """``SaveChannelCheckpoint``: one key."""
        self.kv.save(self._k(build_channel_cp_key(vchannel)), encode_position(pos))

    def save_channel_checkpoints(self, positions: Iterable[MsgPosition]) -> None:
        """``SaveChannelCheckpoints``: every position under its own channel name, in one transaction."""
        kvs = {self._k(build_channel_cp_key(p.channel_name)): encode_position(p) for p in positions}
        if kvs:
            self._commit(kvs)

    def drop_channel_checkpoint(self, vchannel: str) -> None:
        """``DropChannelCheckpoint``: remove the key (absent is fine)."""
        self.kv.remove(self._k(build_channel_cp_key(vchannel)))

    def list_channel_checkpoint(self) -> dict[str, MsgPosition]:
        """``ListChannelCheckpoint``: vchannel (the key's last part) -> stored position, in key order."""
        out = {}
        for key, value in self.kv.load_with_prefix(self._k(CHANNEL_CHECKPOINT_PREFIX + "/")):
            out[key.rsplit("/", 1)[-1]] = decode_position(key, value)
        return out


def _with_rows(segment: SegmentInfo, rows: int) -> SegmentInfo:
    return replace(segment, num_of_rows=rows)


def _parse_segment_id(key: str) -> int:
    """``parseBinlogKey``: the segment id is the second-to-last part of a log key."""
    parts = key.split("/")
    try:
        return int(parts[-2])
    except (IndexError, ValueError):
        raise CatalogError(f"cannot load {key}: not a binlog key (no segment id); the key is left as it is") from None
