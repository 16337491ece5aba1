"""Where Milvus puts a segment's files in the bucket, and how DataCoord keeps only their log ids.

Models ``pkg/util/metautil/binlog.go`` (``BuildInsertLogPath``, ``BuildDeltaLogPath``,
``BuildStatsLogPath``, ``ParseInsertLogPath``, ``GetSegmentIDFrom*LogPath``, ``JoinIDPath``),
``internal/storage/binlog_util.go`` (``ParseSegmentIDByBinlog``), the path constants of
``pkg/common/common.go`` and ``internal/storage/types.go`` (``CompoundStatsType``), and
``internal/metastore/kv/binlog/binlog.go`` (``CompressSaveBinlogPaths``, ``CompressFieldBinlogs``,
``DecompressBinLog``, ``BuildLogPathWithRootPath``, ``GetLogIDFromBingLogPath``) of Milvus 2.5.

The layout, under the chunk manager's root path (MinIO's ``minio.rootPath``, default ``files``, in the
bucket ``a-bucket``)::

    {root}/insert_log/{collection}/{partition}/{segment}/{field}/{logID}
    {root}/delta_log/{collection}/{partition}/{segment}/{logID}
    {root}/stats_log/{collection}/{partition}/{segment}/{pkField}/{logID}     (merged stats: logID 1)

A sync writes files under these paths; DataCoord stores only the log ids (``compress``) and rebuilds
the paths when it hands segments out (``decompress``), so the layout itself is part of the contract.

Simplification: Go's records are mutable protobufs changed in place; here ``compress``/``decompress``
return new frozen records.
Simplification: no BM25 stats logs (``bm25_stats``) and no text-index paths.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, replace

from ..merr import wrap_err_parameter_invalid_msg
from ..proto import FieldBinlog, SaveBinlogPathsRequest, SegmentInfo

#: ``minio.rootPath`` default: every object key starts with it.
DEFAULT_ROOT_PATH = "files"
#: ``minio.bucketName`` default.
DEFAULT_BUCKET = "a-bucket"

#: ``common.SegmentInsertLogPath``, ``common.SegmentDeltaLogPath``, ``common.SegmentStatslogPath``.
SEGMENT_INSERT_LOG_PATH = "insert_log"
SEGMENT_DELTA_LOG_PATH = "delta_log"
SEGMENT_STATSLOG_PATH = "stats_log"

#: ``storage.CompoundStatsType``: the log id of a flushed segment's merged primary-key stats log.
COMPOUND_STATS_TYPE = 1

#: ``storage.BinlogType`` values (``InsertBinlog``, ``DeleteBinlog``, ``StatsBinlog``).
INSERT_BINLOG = "insert"
DELETE_BINLOG = "delete"
STATS_BINLOG = "stats"

_INT64 = re.compile(r"[+-]?[0-9]+")
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def _parse_int64(text: str) -> int | None:
    """``strconv.ParseInt(text, 10, 64)``: ``None`` where Go returns an error."""
    if not _INT64.fullmatch(text):
        return None
    value = int(text)
    return value if _INT64_MIN <= value <= _INT64_MAX else None


def _path_join(*elems: str) -> str:
    """Go's ``path.Join``: empty elements are skipped and the result is cleaned."""
    parts = [e for e in elems if e]
    return posixpath.normpath(posixpath.join(*parts)) if parts else ""


def join_id_path(*ids: int) -> str:
    """``JoinIDPath``: ``1/2/3`` from ``(1, 2, 3)``."""
    return _path_join(*(str(i) for i in ids))


def build_insert_log_path(root_path: str, collection_id: int, partition_id: int, segment_id: int,
                          field_id: int, log_id: int) -> str:
    """``BuildInsertLogPath``: ``{root}/insert_log/{coll}/{part}/{seg}/{field}/{logID}``."""
    return _path_join(root_path, SEGMENT_INSERT_LOG_PATH,
                      join_id_path(collection_id, partition_id, segment_id, field_id, log_id))


def build_delta_log_path(root_path: str, collection_id: int, partition_id: int, segment_id: int,
                         log_id: int) -> str:
    """``BuildDeltaLogPath``: ``{root}/delta_log/{coll}/{part}/{seg}/{logID}`` (no field level)."""
    return _path_join(root_path, SEGMENT_DELTA_LOG_PATH,
                      join_id_path(collection_id, partition_id, segment_id, log_id))


def build_stats_log_path(root_path: str, collection_id: int, partition_id: int, segment_id: int,
                         field_id: int, log_id: int) -> str:
    """``BuildStatsLogPath``: ``{root}/stats_log/{coll}/{part}/{seg}/{pkField}/{logID}``."""
    return _path_join(root_path, SEGMENT_STATSLOG_PATH,
                      join_id_path(collection_id, partition_id, segment_id, field_id, log_id))


@dataclass(frozen=True)
class InsertLogPath:
    """The ids ``ParseInsertLogPath`` reads from the last five elements of a path."""

    collection_id: int
    partition_id: int
    segment_id: int
    field_id: int
    log_id: int


def parse_insert_log_path(path: str) -> InsertLogPath | None:
    """``ParseInsertLogPath``: the ids in the last five elements, or ``None`` (Go's ``ok == false``).

    As in Go, the path needs at least six ``/``-separated elements and only the last five are read, so
    a stats log path parses too; the root and the ``insert_log`` element are not checked.
    """
    infos = path.split("/")
    if len(infos) < 6:
        return None
    ids = [_parse_int64(text) for text in infos[-5:]]
    if any(i is None for i in ids):
        return None
    return InsertLogPath(*ids)


def _segment_id_from_path(log_path: str, segment_index: int) -> int:
    """``getSegmentIDFromPath``: the element ``segment_index`` from the end, 0 when absent or not a number."""
    infos = log_path.split("/")
    if len(infos) < segment_index:
        return 0
    value = _parse_int64(infos[-segment_index])
    return 0 if value is None else value


def get_segment_id_from_insert_log_path(log_path: str) -> int:
    """``GetSegmentIDFromInsertLogPath`` (0 when the path has no segment id where expected)."""
    return _segment_id_from_path(log_path, 3)


def get_segment_id_from_stats_log_path(log_path: str) -> int:
    """``GetSegmentIDFromStatsLogPath`` (0 when the path has no segment id where expected)."""
    return _segment_id_from_path(log_path, 3)


def get_segment_id_from_delta_log_path(log_path: str) -> int:
    """``GetSegmentIDFromDeltaLogPath`` (0 when the path has no segment id where expected)."""
    return _segment_id_from_path(log_path, 2)


def parse_segment_id_by_binlog(root_path: str, path: str) -> int:
    """``ParseSegmentIDByBinlog``: the segment id of a binlog, delta log or stats log path under ``root_path``.

    Raises ``ValueError`` with Go's messages when the path is not under the root or has the wrong shape.
    """
    if not path.startswith(root_path):
        raise ValueError(f'path "{path}" does not contains rootPath "{root_path}"')
    key = path[len(root_path):].lstrip("/").split("/")
    if key[0] == SEGMENT_DELTA_LOG_PATH:
        if len(key) == 5:
            return _checked_int(key[3])
        raise ValueError(f"{path} is not a valid delta log path")
    if len(key) == 6:
        return _checked_int(key[-3])
    raise ValueError(f"{path} is not a valid binlog path")


def _checked_int(text: str) -> int:
    """``strconv.ParseInt`` that fails as Go prints it."""
    value = _parse_int64(text)
    if value is None:
        raise ValueError(f'strconv.ParseInt: parsing "{text}": invalid syntax')
    return value


def get_log_id_from_binlog_path(log_path: str) -> int:
    """``GetLogIDFromBingLogPath`` (sic): the number after the last ``/``.

    A path without ``/`` is Milvus's ``invalid binlog path: <path>: invalid parameter``.
    """
    idx = log_path.rfind("/")
    if idx == -1:
        raise wrap_err_parameter_invalid_msg(f"invalid binlog path: {log_path}")
    return _checked_int(log_path[idx + 1:])


def compress_field_binlogs(field_binlogs: tuple[FieldBinlog, ...]) -> tuple[FieldBinlog, ...]:
    """``CompressFieldBinlogs``: every binlog with a path gets ``log_id`` from it and an empty path."""
    out = []
    for field_binlog in field_binlogs:
        binlogs = tuple(
            replace(b, log_id=get_log_id_from_binlog_path(b.log_path), log_path="") if b.log_path else b
            for b in field_binlog.binlogs
        )
        out.append(replace(field_binlog, binlogs=binlogs))
    return tuple(out)


def compress_save_binlog_paths(req: SaveBinlogPathsRequest) -> SaveBinlogPathsRequest:
    """``CompressSaveBinlogPaths``: what DataCoord stores keeps log ids only (delta, insert, stats logs)."""
    return replace(
        req,
        deltalogs=compress_field_binlogs(req.deltalogs),
        field2_binlog_paths=compress_field_binlogs(req.field2_binlog_paths),
        field2_statslog_paths=compress_field_binlogs(req.field2_statslog_paths),
    )


def build_log_path_with_root_path(root_path: str, binlog_type: str, collection_id: int, partition_id: int,
                                  segment_id: int, field_id: int, log_id: int) -> str:
    """``BuildLogPathWithRootPath``: the path of one log id of one kind (``field_id`` unused for deletes)."""
    if binlog_type == INSERT_BINLOG:
        return build_insert_log_path(root_path, collection_id, partition_id, segment_id, field_id, log_id)
    if binlog_type == DELETE_BINLOG:
        return build_delta_log_path(root_path, collection_id, partition_id, segment_id, log_id)
    if binlog_type == STATS_BINLOG:
        return build_stats_log_path(root_path, collection_id, partition_id, segment_id, field_id, log_id)
    raise wrap_err_parameter_invalid_msg("invalid binlog type")


def decompress_bin_log(binlog_type: str, collection_id: int, partition_id: int, segment_id: int,
                       field_binlogs: tuple[FieldBinlog, ...],
                       root_path: str = DEFAULT_ROOT_PATH) -> tuple[FieldBinlog, ...]:
    """``DecompressBinLog`` / ``DecompressBinLogWithRootPath``: rebuild the path of every binlog that has none."""
    out = []
    for field_binlog in field_binlogs:
        binlogs = tuple(
            b if b.log_path else replace(b, log_path=build_log_path_with_root_path(
                root_path, binlog_type, collection_id, partition_id, segment_id, field_binlog.field_id, b.log_id))
            for b in field_binlog.binlogs
        )
        out.append(replace(field_binlog, binlogs=binlogs))
    return tuple(out)


def decompress_bin_logs(info: SegmentInfo, root_path: str = DEFAULT_ROOT_PATH) -> SegmentInfo:
    """``DecompressBinLogs``: a segment record with the paths of its insert, delta and stats logs rebuilt."""
    ids = (info.collection_id, info.partition_id, info.id)
    return replace(
        info,
        binlogs=decompress_bin_log(INSERT_BINLOG, *ids, info.binlogs, root_path=root_path),
        deltalogs=decompress_bin_log(DELETE_BINLOG, *ids, info.deltalogs, root_path=root_path),
        statslogs=decompress_bin_log(STATS_BINLOG, *ids, info.statslogs, root_path=root_path),
    )


__all__ = [
    "DEFAULT_ROOT_PATH", "DEFAULT_BUCKET", "SEGMENT_INSERT_LOG_PATH", "SEGMENT_DELTA_LOG_PATH",
    "SEGMENT_STATSLOG_PATH", "COMPOUND_STATS_TYPE", "INSERT_BINLOG", "DELETE_BINLOG", "STATS_BINLOG",
    "join_id_path", "build_insert_log_path", "build_delta_log_path", "build_stats_log_path",
    "InsertLogPath", "parse_insert_log_path", "get_segment_id_from_insert_log_path",
    "get_segment_id_from_stats_log_path", "get_segment_id_from_delta_log_path",
    "parse_segment_id_by_binlog", "get_log_id_from_binlog_path", "compress_field_binlogs",
    "compress_save_binlog_paths", "build_log_path_with_root_path", "decompress_bin_log",
    "decompress_bin_logs",
]
