"""Turning a sync pack into the bytes of its binlogs: Parquet files anyone can read.

Models ``internal/flushcommon/syncmgr/storage_serializer.go`` (``storageV1Serializer.EncodeBuffer``,
``serializeBinlog``, ``serializeStatslog``, ``serializeMergedPkStats``, ``serializeDeltalog``) of
Milvus 2.5, with the codecs of ``internal/storage`` (``InsertCodec.Serialize``, ``SerializePkStats``,
``SerializePkStatsList``, ``CreateDeltalogWriter``) replaced by plain Parquet.

What ``encode_buffer`` produces, per pack:

* one insert binlog per field (Timestamp, field 1, and the primary key, field 100, and, when any row carries
  keys besides its key, the dynamic field ``$meta``, field 102, one JSON document per row), each a one-column
  Parquet file with all the pack's rows;
* a per-batch primary-key stats log (the batch's pks, min and max) and, when the pack flushes an L1
  segment, the merged stats log of the whole segment (written under log id 1, ``CompoundStatsType``);
* a delta log (columns ``pk``, ``ts``) when the pack carries deletes.

Every file carries schema metadata (collection, partition, segment, field, the rows' timestamp range,
``kind``, and the ``milvus_edu.binlog`` version marker), so a reader can tell our files from any other
Parquet file. The readers (``read_insert_binlog``, ``read_delta_log``, ``read_stats_log``) raise
:class:`BinlogError` naming the file when it is damaged or not ours; pandas, pyarrow and Spark can read
the same files directly, as plain Parquet.

As in Go, encoding a pack with rows also rolls the batch's primary keys into the segment's statistics
in the metacache (``RollStats``), and this happens when the pack is encoded (in the write buffer's
``getSyncTask``), not when the sync later runs.

Simplification: Milvus's binlog format (a descriptor event and insert events wrapping a Parquet
payload) and its JSON/bloom-filter stats become plain Parquet with the exact pk set; there is no RowID
field (field 0) nor any vector field, since ``InsertData`` carries only pks, timestamps and the dynamic field; the
``$meta`` binlog is written only when some row of the pack carries keys (Go writes it for every row of a
collection with the dynamic field on), so runs of bare keys write the files they always wrote.
Simplification: a delete pack with no rows gives a zero-row Parquet delta log, where Go writes an
empty object.
Simplification: a delta log's memory size is computed from the rows (8 bytes per int64, string length
+ 16) rather than taken from the uncompressed bytes the Go writer counted.
Simplification: no BM25 stats, no storage v2 (2.4's ``storageV2Serializer``, gone from 2.5), no metrics.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

import pyarrow as pa
import pyarrow.parquet as pq

from ...merr import wrap_err_parameter_invalid_msg, wrap_err_segment_not_found
from ...proto import SegmentInfo as SegmentInfoPB, SegmentLevel
from ...storage.binlog import COMPOUND_STATS_TYPE, DEFAULT_ROOT_PATH, STATS_BINLOG, decompress_bin_log
from ..metacache import MetaCache, roll_stats, with_segment_ids
from .pack import META_FIELD_ID, PK_FIELD_ID, TIMESTAMP_FIELD_ID, SyncPack

#: The version marker every file we write carries in its Parquet schema metadata.
BINLOG_MARKER_KEY = "milvus_edu.binlog"
BINLOG_VERSION = "1"

KIND_INSERT = "insert"
KIND_DELTA = "delta"
KIND_STATS = "stats"

#: Column name of the Timestamp system field (``common.TimeStampFieldName``) and of the primary key.
TIMESTAMP_COLUMN = "Timestamp"
PK_COLUMN = "pk"
META_COLUMN = "$meta"
TS_COLUMN = "ts"

#: ``binary.Size(Nullable)``: every Go field chunk adds one byte for its ``Nullable`` flag.
_NULLABLE_FLAG_BYTES = 1


class BinlogError(ValueError):
    """A file that is damaged or was not written by milvus-edu's serializer."""


@dataclass(frozen=True)
class Blob:
    """``storage.Blob``: the bytes of one file, its row count and the in-memory size of its data."""

    value: bytes
    row_num: int = 0
    memory_size: int = 0


@dataclass(frozen=True)
class EncodedBuffer:
    """What ``EncodeBuffer`` puts into a ``SyncTask``: the blobs, before log ids and paths exist.

    ``binlog_blobs`` maps field id to its insert binlog (ascending field id); ``delta_row_count`` is
    ``deltaRowCount``.
    """

    binlog_blobs: Mapping[int, Blob] = field(default_factory=lambda: MappingProxyType({}))
    batch_stats_blob: Blob | None = None
    merged_stats_blob: Blob | None = None
    delta_blob: Blob | None = None
    delta_row_count: int = 0


@dataclass(frozen=True)
class ParquetBinlog:
    """One file read back: its metadata (as written) and its columns, in file order."""

    kind: str
    metadata: Mapping[str, str]
    columns: Mapping[str, tuple]

    @property
    def num_rows(self) -> int:
        """Rows in the file (all columns have the same length)."""
        return len(next(iter(self.columns.values()), ()))


def _pk_type(pks: Iterable) -> pa.DataType:
    """The Arrow type of a pk column: int64 (Milvus ``Int64`` pk) or string (``VarChar`` pk)."""
    kinds = set(map(type, pks))  # judged per Python type, not per row: a sync carries thousands of keys
    if all(issubclass(k, int) and not issubclass(k, bool) for k in kinds):
        return pa.int64()
    if all(issubclass(k, str) for k in kinds):
        return pa.string()
    raise ValueError("primary keys must be all int or all str (Milvus pk fields are Int64 or VarChar)")


def _pk_memory_size(pks: Sequence, pk_type: pa.DataType) -> int:
    """``FieldData.GetMemorySize`` of a pk chunk of ``pk_type`` (:func:`_pk_type`) without the Nullable byte:
    ``Int64FieldData`` 8 per row, ``StringFieldData`` len + 16 per row."""
    if pk_type == pa.int64():
        return 8 * len(pks)
    return sum(len(pk.encode()) + 16 for pk in pks)


def _to_parquet(columns: dict[str, pa.Array], metadata: dict[str, str]) -> bytes:
    """Plain Parquet with page checksums, so damage is detected on read."""
    meta = {BINLOG_MARKER_KEY: BINLOG_VERSION, **metadata}
    table = pa.table(columns).replace_schema_metadata({k.encode(): str(v).encode() for k, v in meta.items()})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="snappy", write_page_checksum=True)
    return sink.getvalue().to_pybytes()


class StorageSerializer:
    """``storageV1Serializer``: encodes sync packs of one channel, rolling pk stats into its metacache."""

    def __init__(self, metacache: MetaCache, pk_field_id: int = PK_FIELD_ID):
        self.metacache = metacache
        self.pk_field_id = pk_field_id

    def encode_buffer(self, pack: SyncPack) -> EncodedBuffer:
        """``EncodeBuffer``: the blobs of one sync, in Go's order (insert + batch stats, merged stats, delta).

        Raises ``ParameterInvalidError`` for insert data with no rows (``NewPrimaryKeyStats``) and
        ``SegmentNotFoundError`` when a flushing pack's segment is not in the metacache.
        """
        binlog_blobs: dict[int, Blob] = {}
        batch_stats = merged_stats = delta = None
        delta_rows = 0
        if pack.insert_data:
            binlog_blobs = self.serialize_binlog(pack)
            pks = [pk for chunk in pack.insert_data for pk in chunk.pks]
            batch_stats = self.serialize_statslog(pack, pks)
            self.metacache.update_segments(roll_stats(pks), with_segment_ids(pack.segment_id))
        if pack.is_flush and pack.level != SegmentLevel.L0:
            merged_stats = self.serialize_merged_pk_stats(pack)
        if pack.delete_data is not None:
            delta = self.serialize_deltalog(pack)
            delta_rows = pack.delete_data.row_count
        return EncodedBuffer(MappingProxyType(binlog_blobs), batch_stats, merged_stats, delta, delta_rows)

    def _metadata(self, pack: SyncPack, kind: str, field_id: int | None, timestamps: Iterable[int]) -> dict:
        ts = list(timestamps)
        meta = {
            "kind": kind,
            "collection_id": pack.collection_id,
            "partition_id": pack.partition_id,
            "segment_id": pack.segment_id,
            "timestamp_from": min(ts) if ts else 0,
            "timestamp_to": max(ts) if ts else 0,
        }
        if field_id is not None:
            meta["field_id"] = field_id
        return meta

    def serialize_binlog(self, pack: SyncPack) -> dict[int, Blob]:
        """``serializeBinlog`` (``InsertCodec.Serialize``): one blob per field, all chunks concatenated.

        The file's timestamp range is the rows' own min and max, as Go's binlog event header.
        """
        timestamps = [ts for chunk in pack.insert_data for ts in chunk.timestamps]
        pks = [pk for chunk in pack.insert_data for pk in chunk.pks]
        if len(timestamps) != len(pks):
            raise ValueError(
                f"insert data has {len(pks)} pks but {len(timestamps)} timestamps; give one of each per row")
        if not pks:
            raise wrap_err_parameter_invalid_msg("zero or negative row num")
        chunks = len(pack.insert_data)
        ts_memory = 8 * len(timestamps) + _NULLABLE_FLAG_BYTES * chunks
        pk_type = _pk_type(pks)
        pk_memory = _pk_memory_size(pks, pk_type) + _NULLABLE_FLAG_BYTES * chunks
        columns = {
            TIMESTAMP_FIELD_ID: (TIMESTAMP_COLUMN, pa.array(timestamps, pa.int64()), ts_memory),
            self.pk_field_id: (PK_COLUMN, pa.array(pks, pk_type), pk_memory),
        }
        if any(chunk.fields is not None for chunk in pack.insert_data):
            docs = [json.dumps(f, sort_keys=True, separators=(",", ":")) for chunk in pack.insert_data
                    for f in (chunk.fields if chunk.fields is not None else ({},) * chunk.num_rows)]
            memory = sum(len(d.encode()) for d in docs) + _NULLABLE_FLAG_BYTES * chunks
            columns[META_FIELD_ID] = (META_COLUMN, pa.array(docs, pa.string()), memory)
        blobs = {}
        for field_id in sorted(columns):
            name, array, memory = columns[field_id]
            meta = self._metadata(pack, KIND_INSERT, field_id, timestamps)
            blobs[field_id] = Blob(_to_parquet({name: array}, meta), row_num=len(pks), memory_size=memory)
        return blobs

    def _stats_blob(self, pack: SyncPack, pks: Iterable, row_num: int, merged: bool) -> Blob:
        unique = sorted(set(pks))
        meta = self._metadata(pack, KIND_STATS, self.pk_field_id, ())
        del meta["timestamp_from"], meta["timestamp_to"]
        pk_type = _pk_type(unique)
        meta.update(
            pk_type=str(pk_type),
            min_pk=unique[0] if unique else "",
            max_pk=unique[-1] if unique else "",
            row_num=row_num,
            merged="true" if merged else "false",
        )
        return Blob(_to_parquet({PK_COLUMN: pa.array(unique, pk_type)}, meta), row_num=row_num)

    def serialize_statslog(self, pack: SyncPack, pks: list) -> Blob:
        """``serializeStatslog`` (``SerializePkStats``): the batch's pk statistics, ``RowNum = batchRows``."""
        return self._stats_blob(pack, pks, pack.batch_rows, merged=False)

    def serialize_merged_pk_stats(self, pack: SyncPack) -> Blob | None:
        """``serializeMergedPkStats``: the whole segment's pks (after this batch was rolled in).

        ``None`` when the segment has no pk statistics (Go allows flushing an empty segment).
        """
        segment = self.metacache.get_segment_by_id(pack.segment_id)
        if segment is None:
            raise wrap_err_segment_not_found(pack.segment_id)
        if not segment.pk_stats:
            return None
        return self._stats_blob(pack, segment.pk_stats, segment.num_of_rows, merged=True)

    def serialize_deltalog(self, pack: SyncPack) -> Blob:
        """``serializeDeltalog``: the deletes as (pk, ts) rows, in arrival order."""
        data = pack.delete_data
        if len(data.pks) != len(data.timestamps):
            raise ValueError(
                f"pk and ts should have same length in delta log, but get {len(data.pks)} and {len(data.timestamps)}")
        meta = self._metadata(pack, KIND_DELTA, None, data.timestamps)
        pk_type = _pk_type(data.pks)
        columns = {PK_COLUMN: pa.array(data.pks, pk_type), TS_COLUMN: pa.array(data.timestamps, pa.int64())}
        memory = _pk_memory_size(data.pks, pk_type) + 8 * len(data.timestamps)
        return Blob(_to_parquet(columns, meta), row_num=data.row_count, memory_size=memory)


def _read(source: bytes | str | os.PathLike, kind: str, name: str | None) -> ParquetBinlog:
    """Read one of our files, checking marker and kind; any failure is one :class:`BinlogError` line."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        label = name or "<bytes>"
        reader = pa.BufferReader(bytes(source))
    else:
        label = name or os.fspath(source)
        reader = os.fspath(source)
    try:
        table = pq.read_table(reader, page_checksum_verification=True)
    except (pa.ArrowException, OSError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise BinlogError(f"{label}: damaged or not a Parquet file ({reason})") from None
    raw = table.schema.metadata or {}
    meta = {k.decode(): v.decode() for k, v in raw.items()}
    if meta.get(BINLOG_MARKER_KEY) != BINLOG_VERSION:
        raise BinlogError(f"{label}: not a milvus-edu binlog (no '{BINLOG_MARKER_KEY}: {BINLOG_VERSION}' marker)")
    if meta.get("kind") != kind:
        raise BinlogError(f"{label}: a {meta.get('kind')!r} log, expected a {kind!r} log")
    columns = {name_: tuple(table.column(name_).to_pylist()) for name_ in table.column_names}
    return ParquetBinlog(kind, MappingProxyType(meta), MappingProxyType(columns))


def read_insert_binlog(source: bytes | str | os.PathLike, name: str | None = None) -> ParquetBinlog:
    """An insert binlog's one column (``Timestamp`` or ``pk``) and metadata; ``name`` labels errors for bytes."""
    return _read(source, KIND_INSERT, name)


def read_delta_log(source: bytes | str | os.PathLike, name: str | None = None) -> ParquetBinlog:
    """A delta log's ``pk`` and ``ts`` columns and metadata; ``name`` labels errors for bytes."""
    return _read(source, KIND_DELTA, name)


def read_stats_log(source: bytes | str | os.PathLike, name: str | None = None) -> ParquetBinlog:
    """A pk stats log: the ``pk`` column (sorted, distinct) and ``min_pk``/``max_pk``/``row_num`` metadata."""
    return _read(source, KIND_STATS, name)


def load_stats(read: Callable[[str], bytes], segment: SegmentInfoPB, pk_field_id: int = PK_FIELD_ID,
               root_path: str = DEFAULT_ROOT_PATH) -> frozenset:
    """``compaction.LoadStats``: the primary keys a segment's pk stats logs hold, read with ``read(key)``.

    Only the pk field's stats logs count. When the merged log (log id 1, ``CompoundStatsType``) is among them
    it alone is read; otherwise every per-batch log is. No stats log gives no keys (Go: a new, empty filter).
    DataCoord's records hold log ids only, so the paths are rebuilt under ``root_path`` first.
    """
    ids = (segment.collection_id, segment.partition_id, segment.id)
    paths: list[str] = []
    for field_binlog in decompress_bin_log(STATS_BINLOG, *ids, segment.statslogs, root_path=root_path):
        if field_binlog.field_id != pk_field_id:
            continue
        for binlog in field_binlog.binlogs:
            if binlog.log_path.rsplit("/", 1)[-1] == str(COMPOUND_STATS_TYPE):
                paths = [binlog.log_path]
                break
            paths.append(binlog.log_path)
    pks: set = set()
    for path in paths:
        pks.update(read_stats_log(read(path), name=path).columns[PK_COLUMN])
    return frozenset(pks)


__all__ = [
    "BINLOG_MARKER_KEY", "BINLOG_VERSION", "KIND_INSERT", "KIND_DELTA", "KIND_STATS", "TIMESTAMP_COLUMN",
    "PK_COLUMN", "TS_COLUMN", "META_COLUMN", "BinlogError", "Blob", "EncodedBuffer", "ParquetBinlog", "StorageSerializer",
    "read_insert_binlog", "read_delta_log", "read_stats_log", "load_stats",
]
