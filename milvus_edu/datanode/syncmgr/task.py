"""One sync: write a segment's buffered rows as binlogs, then tell DataCoord where they are.

Models ``internal/flushcommon/syncmgr/task.go`` (``SyncTask.Run``, ``prefetchIDs``, ``nextID``,
``processInsertBlobs``, ``processStatsBlob``, ``processDeltaBlob``, ``writeLogs``, ``writeMeta``) and
``options.go`` of Milvus 2.5. Building a :class:`SyncTask` is Go's ``EncodeBuffer`` (the serializer
turns the pack into blobs and rolls its pks into the metacache); :meth:`SyncTask.run` is ``Run``.

The order is the lesson. Files are written first, under freshly allocated log ids, and only then
reported to DataCoord with the pack's checkpoint; the metacache counts the rows as flushed last. A
node that dies anywhere in between leaves at worst files nobody points at (orphans, which garbage
collection removes in Milvus), never a DataCoord record pointing at missing files, and the rows are
still not flushed from the DataNode's point of view, so they are replayed from the channel.

Simplification: no BM25 stats logs, no metrics, no ``MarshalJSON`` task stats, no failure callback
(the error propagates to the caller, who plays the write buffer's callback).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from ...effects import AllocIDs, Steps, WriteObjects
from ...merr import wrap_err_segment_not_found
from ...proto import Binlog, FieldBinlog, MsgPosition, SaveBinlogPathsRequest, SegmentState
from ...storage.binlog import (
    COMPOUND_STATS_TYPE,
    DEFAULT_ROOT_PATH,
    build_delta_log_path,
    build_insert_log_path,
    build_stats_log_path,
)
from ..metacache import MetaCache, SegmentInfo, finish_syncing, segment_actions, update_state, with_segment_ids
from .meta_writer import BrokerMetaWriter, RetryConfig, retry_handle, retry_unless_canceled
from .pack import SyncPack
from .storage_serializer import Blob, EncodedBuffer, StorageSerializer

#: :attr:`SyncTask.phase` values.
PHASE_CREATED = "created"
PHASE_ALLOC_IDS = "alloc_ids"
PHASE_WRITE_OBJECTS = "write_objects"
PHASE_SAVE_BINLOG_PATHS = "save_binlog_paths"
PHASE_DONE = "done"
PHASE_DISCARDED = "discarded"
PHASE_FAILED = "failed"


class SyncTask:
    """``SyncTask``: one segment's sync, built from its pack (``EncodeBuffer``) and run as effects.

    ``run()`` yields, in this order (every yield is a point where the simulator may crash the node):

    1. ``alloc_ids`` — :class:`AllocIDs` (one ``Alloc`` for every blob);
    2. ``write_objects`` — :class:`WriteObjects`, and after a failed write ``write_retry_sleep`` —
       :class:`~milvus_edu.effects.Sleep` before trying again (``retry.Handle``);
    3. ``save_binlog_paths`` — :class:`~.meta_writer.SaveBinlogPaths`, and after a failure
       ``save_retry_sleep`` — :class:`~milvus_edu.effects.Sleep`;

    then, with no further effect, the metacache: ``FinishSyncing(batchRows)`` (+ ``Flushed`` for a flush;
    the segment removed for a drop). Errors propagate to the caller.

    ``meta_writer`` ``None`` skips step 3, as a Go task without a meta writer does.
    """

    STEPS = ("alloc_ids", "write_objects", "write_retry_sleep", "save_binlog_paths", "save_retry_sleep")

    def __init__(
        self,
        pack: SyncPack,
        *,
        metacache: MetaCache,
        serializer: StorageSerializer,
        meta_writer: BrokerMetaWriter | None = None,
        chunk_manager_root: str = DEFAULT_ROOT_PATH,
        write_retry: RetryConfig = RetryConfig(),
    ):
        if serializer.metacache is not metacache:
            raise ValueError(
                "the serializer must encode into the task's metacache: build it with StorageSerializer(metacache)")
        self.pack = pack
        self.metacache = metacache
        self.meta_writer = meta_writer
        self.root_path = chunk_manager_root
        self.write_retry = write_retry
        self.pk_field_id = serializer.pk_field_id
        self.encoded: EncodedBuffer = serializer.encode_buffer(pack)
        self._ids: list[int] = []
        self._segment: SegmentInfo | None = None
        self._segment_data: dict[str, bytes] = {}
        self._insert_binlogs: dict[int, FieldBinlog] = {}
        self._stats_binlogs: dict[int, FieldBinlog] = {}
        self._delta_binlog = FieldBinlog(field_id=0)
        self._phase = PHASE_CREATED
        self._request: SaveBinlogPathsRequest | None = None
        self._error: Exception | None = None

    @property
    def segment_id(self) -> int:
        """``SegmentID``: the key the sync manager serialises on."""
        return self.pack.segment_id

    @property
    def checkpoint(self) -> MsgPosition | None:
        """``Checkpoint``: the channel position this sync reports as the segment's DmlPosition."""
        return self.pack.checkpoint

    @property
    def start_position(self) -> MsgPosition | None:
        """``StartPosition``."""
        return self.pack.start_position

    @property
    def channel_name(self) -> str:
        """``ChannelName``."""
        return self.pack.channel_name

    @property
    def is_flush(self) -> bool:
        """``IsFlush``."""
        return self.pack.is_flush

    @property
    def phase(self) -> str:
        """Where ``run`` is: ``created``, the step awaited (``alloc_ids`` ...), ``done``, ``discarded``, ``failed``."""
        return self._phase

    @property
    def error(self) -> Exception | None:
        """The error ``run`` raised, if any."""
        return self._error

    @property
    def segment_data(self) -> Mapping[str, bytes]:
        """The objects to write (``segmentData``): key -> bytes, filled once ids are allocated."""
        return MappingProxyType(self._segment_data)

    @property
    def request(self) -> SaveBinlogPathsRequest | None:
        """The ``SaveBinlogPaths`` request once it was accepted (or counted as accepted)."""
        return self._request

    def binlogs(self) -> tuple[Mapping[int, FieldBinlog], Mapping[int, FieldBinlog], FieldBinlog]:
        """``Binlogs``: insert binlogs by field, stats logs by field, the delta logs."""
        return MappingProxyType(self._insert_binlogs), MappingProxyType(self._stats_binlogs), self._delta_binlog

    def id_count(self) -> int:
        """How many ids ``prefetchIDs`` asks for: one per insert blob, the batch stats log, the delta log."""
        e = self.encoded
        return len(e.binlog_blobs) + (e.batch_stats_blob is not None) + (e.delta_blob is not None)

    def run(self) -> Steps[str]:
        """``Run``: the sync's effects in Go's order; returns ``done``, or ``discarded`` for a dropped segment.

        A segment missing from the metacache is discarded if the sync drops it and otherwise raises
        ``SegmentNotFoundError``.
        """
        try:
            return (yield from self._run())
        except Exception as exc:
            self._phase = PHASE_FAILED
            self._error = exc
            raise

    def _run(self) -> Steps[str]:
        pack = self.pack
        segment = self.metacache.get_segment_by_id(pack.segment_id)
        if segment is None:
            if pack.is_drop:
                self._phase = PHASE_DISCARDED
                return PHASE_DISCARDED
            raise wrap_err_segment_not_found(pack.segment_id)
        self._segment = segment

        yield from self.prefetch_ids()
        self.process_insert_blobs()
        self.process_stats_blob()
        self.process_delta_blob()

        self._phase = PHASE_WRITE_OBJECTS
        yield from self.write_logs()

        if self.meta_writer is not None:
            self._phase = PHASE_SAVE_BINLOG_PATHS
            insert, stats, delta = self.binlogs()
            self._request = yield from self.meta_writer.update_sync(pack, self.metacache, insert, stats, delta)

        actions = [finish_syncing(pack.batch_rows)]
        if pack.is_flush:
            actions.append(update_state(SegmentState.FLUSHED))
        self.metacache.update_segments(segment_actions(*actions), with_segment_ids(pack.segment_id))
        if pack.is_drop:
            self.metacache.remove_segments(with_segment_ids(pack.segment_id))
        self._phase = PHASE_DONE
        return PHASE_DONE

    def prefetch_ids(self) -> Steps[None]:
        """``prefetchIDs``: one ``Alloc`` for all the ids this sync needs (asked even when it needs none)."""
        self._phase = PHASE_ALLOC_IDS
        count = self.id_count()
        start = yield AllocIDs(count)
        self._ids = list(range(start, start + count))

    def next_id(self) -> int:
        """``nextID``: the next pre-fetched id; Go panics when they are exhausted."""
        if not self._ids:
            raise RuntimeError("pre-fetched ids exhausted")
        return self._ids.pop(0)

    def _binlog(self, blob: Blob, key: str, entries_num: int, memory_size: int) -> Binlog:
        return Binlog(
            entries_num=entries_num,
            timestamp_from=self.pack.ts_from,
            timestamp_to=self.pack.ts_to,
            log_path=key,
            log_size=len(blob.value),
            memory_size=memory_size,
        )

    def process_insert_blobs(self) -> None:
        """``processInsertBlobs``: an insert binlog path per field (ascending field id: Go ranges over a map)."""
        p = self.pack
        for field_id, blob in sorted(self.encoded.binlog_blobs.items()):
            key = build_insert_log_path(self.root_path, p.collection_id, p.partition_id, p.segment_id,
                                        field_id, self.next_id())
            self._segment_data[key] = blob.value
            self._insert_binlogs[field_id] = FieldBinlog(
                field_id, (self._binlog(blob, key, blob.row_num, blob.memory_size),))

    def process_stats_blob(self) -> None:
        """``processStatsBlob``: the batch stats log (next id), and the merged one under log id 1.

        The merged log's ``EntriesNum`` is the segment's row count when ``run`` started.
        """
        stats = []
        if self.encoded.batch_stats_blob is not None:
            stats.append((self.encoded.batch_stats_blob, self.next_id(), self.pack.batch_rows))
        if self.encoded.merged_stats_blob is not None:
            stats.append((self.encoded.merged_stats_blob, COMPOUND_STATS_TYPE, self._segment.num_of_rows))
        for blob, log_id, rows in stats:
            self.convert_blob_to_stats_binlog(blob, self.pk_field_id, log_id, rows)

    def convert_blob_to_stats_binlog(self, blob: Blob, field_id: int, log_id: int, row_num: int) -> None:
        """``convertBlob2StatsBinlog``: one stats log path and entry (``MemorySize`` = file size, as Go)."""
        p = self.pack
        key = build_stats_log_path(self.root_path, p.collection_id, p.partition_id, p.segment_id, field_id, log_id)
        self._segment_data[key] = blob.value
        old = self._stats_binlogs.get(field_id, FieldBinlog(field_id))
        entry = self._binlog(blob, key, row_num, len(blob.value))
        self._stats_binlogs[field_id] = FieldBinlog(field_id, old.binlogs + (entry,))

    def process_delta_blob(self) -> None:
        """``processDeltaBlob``: the delta log path (next id) and entry (``EntriesNum = deltaRowCount``)."""
        blob = self.encoded.delta_blob
        if blob is None:
            return
        p = self.pack
        key = build_delta_log_path(self.root_path, p.collection_id, p.partition_id, p.segment_id, self.next_id())
        self._segment_data[key] = blob.value
        entry = self._binlog(blob, key, self.encoded.delta_row_count, blob.memory_size)
        self._delta_binlog = FieldBinlog(0, self._delta_binlog.binlogs + (entry,))

    def write_logs(self) -> Steps[None]:
        """``writeLogs``: ``MultiWrite`` of every object with ``retry.Handle`` (a cancel/timeout is not retried)."""
        yield from retry_handle(WriteObjects(MappingProxyType(dict(self._segment_data))),
                                retry_unless_canceled, self.write_retry)


__all__ = [
    "AllocIDs", "WriteObjects", "SyncTask", "PHASE_CREATED", "PHASE_ALLOC_IDS", "PHASE_WRITE_OBJECTS",
    "PHASE_SAVE_BINLOG_PATHS", "PHASE_DONE", "PHASE_DISCARDED", "PHASE_FAILED",
]
