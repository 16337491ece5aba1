"""The write buffer of one vchannel: rows wait here until a sync policy sends them to binlogs.

Models ``internal/flushcommon/writebuffer/write_buffer.go`` (``writeBufferBase``, ``checkpointCandidates``,
``PrepareInsert``) and ``l0_write_buffer.go`` (``l0WriteBuffer``) of Milvus 2.5.

The lesson is :meth:`WriteBuffer.get_checkpoint`: the channel checkpoint is the earliest start position
of any data not yet safely in a binlog, whether it is still buffered or already handed to a sync that
has not finished. Only when nothing is pending is it the last consumed position.

A sync in Go is ``syncMgr.SyncData(task, callback)``, asynchronous. Here :meth:`WriteBuffer.buffer_data`
(and :meth:`~WriteBuffer.evict_buffer`, :meth:`~WriteBuffer.close`) return the packs to sync *now*, already
cut: buffer removed, metacache ``StartSyncing`` applied, syncing candidate recorded. The caller runs each
pack (the sync manager and ``SyncTask``) and reports the outcome with :meth:`WriteBuffer.sync_done`,
Go's callback.

Simplification: no serializer here (``EncodeBuffer``'s errors belong to the sync task), no metrics, no
task observer, no streaming-service mode, no BM25 statistics, no schema.
Simplification: the RPCs ``NotifyDropPartition`` (before :meth:`~WriteBuffer.drop_partitions`) and
``DropVirtualChannel`` (after the drop syncs of :meth:`~WriteBuffer.close`) are the caller's; Go panics
when either fails.
Simplification: :meth:`WriteBuffer.evict_buffer` returns the packs it cut and waits for nothing; Go's
``EvictBuffer`` waits for their syncs (``conc.AwaitAll``) holding the write buffer's lock, so the channel's
``BufferData`` (its writeNode) and the memory check that asked wait until they end.
Simplification: the L0 segment id comes from an injected ``alloc_segment_id`` (Go: ``idAllocator.AllocOne``
with retry, panicking on failure).
Simplification: with ``skip_bf_stats_load=False`` the bloom filters are exact pk sets (metacache
``pk_stats``), checked one delete message at a time (no ``BloomFilterApplyBatchSize`` batches or pool).
Simplification: where Go ranges over a map (buffers, policy results, candidates) the model goes by
ascending segment id, and ``PrepareInsert``'s groups come in order of first appearance.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from ...config import DataNodeParams
from ...merr import SegmentNotFoundError, wrap_err_segment_not_found
from ...mq.msg import DeleteMsg, InsertMsg
from ...proto import MsgPosition, SegmentInfo as SegmentInfoPB, SegmentLevel, SegmentState
from ..metacache import (
    ALL_PARTITIONS_ID,
    MetaCache,
    roll_stats,
    segment_actions,
    set_start_pos_recorded,
    set_start_position_if_nil,
    start_syncing,
    update_buffered_rows,
    update_state,
    with_partition_id,
    with_partition_ids,
    with_segment_ids,
    with_segment_state,
)
from ..syncmgr.pack import InsertData, SyncPack
from .segment_buffer import SegmentBuffer
from .sync_policy import (
    NON_FLUSH_TS,
    SyncPolicy,
    get_dropped_segment_policy,
    get_flush_ts_policy,
    get_full_buffer_policy,
    get_sealed_segments_policy,
    get_sync_stale_buffer_policy,
)

#: Segment states whose pk statistics a delete is checked against (``dispatchDeleteMsgs``).
_BF_STATES = (SegmentState.GROWING, SegmentState.SEALED, SegmentState.FLUSHING, SegmentState.FLUSHED)


@dataclass(frozen=True)
class InsertGroup:
    """Go's ``writebuffer.InsertData`` (renamed: ``InsertData`` here is ``storage.InsertData``): the
    insert batches of one segment in one pack, with the smallest insert timestamp of each primary key
    (``intPKTs``/``strPKTs``)."""

    segment_id: int
    partition_id: int
    chunks: tuple[InsertData, ...]
    pk_min_ts: Mapping = field(default_factory=dict)

    @property
    def row_num(self) -> int:
        """``rowNum``: rows over all batches."""
        return sum(c.num_rows for c in self.chunks)

    def pk_exists(self, pk, ts: int) -> bool:
        """``pkExists``: the key was inserted in this batch *before* ``ts`` (a delete at the insert's own
        timestamp does not hit it, quirk 12)."""
        min_ts = self.pk_min_ts.get(pk)
        return min_ts is not None and ts > min_ts


def prepare_insert(insert_msgs: Iterable[InsertMsg]) -> list[InsertGroup]:
    """``PrepareInsert``: group insert messages by segment, one batch per message.

    A segment's partition is the one of its last message (Go's ``lo.SliceToMap``); groups come in order
    of the segment's first message.
    """
    chunks: dict[int, list[InsertData]] = {}
    partitions: dict[int, int] = {}
    pk_min_ts: dict[int, dict] = {}
    for msg in insert_msgs:
        chunks.setdefault(msg.segment_id, []).append(InsertData(msg.pks, msg.timestamps, msg.payload_bytes,
                                                                  msg.fields))
        partitions[msg.segment_id] = msg.partition_id
        seen = pk_min_ts.setdefault(msg.segment_id, {})
        for pk, ts in zip(msg.pks, msg.timestamps):
            if pk not in seen or ts < seen[pk]:
                seen[pk] = ts
    return [
        InsertGroup(seg, partitions[seg], tuple(batches), MappingProxyType(pk_min_ts[seg]))
        for seg, batches in chunks.items()
    ]


@dataclass(frozen=True)
class CheckpointCandidate:
    """``checkpointCandidate``: a position that may be the channel checkpoint, and where it came from
    (``"segment buffer"`` or ``"syncing task"``)."""

    segment_id: int
    position: MsgPosition
    source: str


class WriteBuffer:
    """``l0WriteBuffer`` on ``writeBufferBase``: one vchannel's segment buffers, sync policies, checkpoint.

    Policies, in Go's order: full buffer, stale buffer (``params.sync_period_ns``, jitter from ``rng``),
    sealed segments, dropped segments, flush ts.

    Bug switch ``checkpoint_ignores_syncing_segments``: :meth:`get_checkpoint` looks only at buffers and
    forgets the segments being synced. As soon as a buffer is handed to a sync, the checkpoint jumps past
    its rows; if the DataNode dies (or the sync fails) before ``SaveBinlogPaths`` lands, DataCoord holds a
    channel checkpoint after rows that are in no binlog, and the restarted channel seeks past them: the
    rows are lost.
    """

    def __init__(
        self,
        channel: str,
        metacache: MetaCache,
        params: DataNodeParams,
        rng: random.Random,
        *,
        alloc_segment_id: Callable[[], int],
        checkpoint_ignores_syncing_segments: bool = False,
    ):
        self.channel_name = channel
        self.collection_id = metacache.collection_id
        self.metacache = metacache
        self.params = params
        self.checkpoint_ignores_syncing_segments = checkpoint_ignores_syncing_segments
        self._alloc_segment_id = alloc_segment_id
        self._buffers: dict[int, SegmentBuffer] = {}
        self._sync_checkpoint: dict[tuple[int, int], MsgPosition] = {}
        self._checkpoint: MsgPosition | None = None
        # Go's flushTimestamp *atomic.Uint64, shared with GetFlushTsPolicy: a box the policy reads (not this
        # buffer's bound method, which would make the two a reference cycle holding the buffered rows)
        flush_ts = self._flush_ts = [NON_FLUSH_TS]
        self._l0_segments: dict[int, int] = {}
        self._l0_partition: dict[int, int] = {}
        self._policy_choices: list[tuple[str, tuple[int, ...]]] = []
        self.sync_policies: tuple[SyncPolicy, ...] = (
            get_full_buffer_policy(),
            get_sync_stale_buffer_policy(params.sync_period_ns, rng),
            get_sealed_segments_policy(metacache),
            get_dropped_segment_policy(metacache),
            get_flush_ts_policy(lambda: flush_ts[0], metacache),
        )

    # ---------------------------------------------------------------------------------------------
    # read-only views

    @property
    def checkpoint(self) -> MsgPosition | None:
        """``wb.checkpoint``: the end position of the last buffered pack (``None`` before the first)."""
        return self._checkpoint

    @property
    def buffers(self) -> Mapping[int, SegmentBuffer]:
        """The segment buffers by segment id (a read-only mapping; do not mutate the buffers)."""
        return MappingProxyType(self._buffers)

    @property
    def syncing_candidates(self) -> Mapping[tuple[int, int], MsgPosition]:
        """``syncCheckpoint``: start positions of syncs not yet confirmed, keyed (segment id, start ts)."""
        return MappingProxyType(self._sync_checkpoint)

    @property
    def l0_segments(self) -> Mapping[int, int]:
        """``l0Segments``: partition id -> its current L0 segment id."""
        return MappingProxyType(self._l0_segments)

    def has_segment(self, segment_id: int) -> bool:
        """``HasSegment``: whether the segment has a buffer here."""
        return segment_id in self._buffers

    def memory_size(self) -> int:
        """``MemorySize``: bytes in every segment buffer."""
        return sum(buf.memory_size() for buf in self._buffers.values())

    def set_flush_timestamp(self, flush_ts: int) -> None:
        """``SetFlushTimestamp``: request a flush of everything before ``flush_ts`` (0 clears it)."""
        self._flush_ts[0] = flush_ts

    def get_flush_timestamp(self) -> int:
        """``GetFlushTimestamp``."""
        return self._flush_ts[0]

    # ---------------------------------------------------------------------------------------------
    # checkpoint

    def get_checkpoint_candidate(self) -> CheckpointCandidate | None:
        """The earliest start position of data not yet in a binlog, with its source (what Go logs as
        ``cpSource``); ``None`` when every buffer is empty and no sync is pending.

        Buffers and syncing candidates are scanned by ascending key; a later one wins only if strictly
        earlier, so ties go to the buffer with the smallest segment id.
        """
        best: CheckpointCandidate | None = None
        for segment_id in sorted(self._buffers):
            pos = self._buffers[segment_id].earliest_position()
            if pos is not None and (best is None or pos.timestamp < best.position.timestamp):
                best = CheckpointCandidate(segment_id, pos, "segment buffer")
        if not self.checkpoint_ignores_syncing_segments:
            for (segment_id, _ts), pos in sorted(self._sync_checkpoint.items()):  # keys are unique: by key
                if best is None or pos.timestamp < best.position.timestamp:
                    best = CheckpointCandidate(segment_id, pos, "syncing task")
        return best

    def get_checkpoint(self) -> MsgPosition | None:
        """``GetCheckpoint``: the earliest start position among segment buffers and syncing candidates;
        when there is none ("checkpoint from latest consumed msg"), the last consumed position (``None``
        before the first pack)."""
        candidate = self.get_checkpoint_candidate()
        return self._checkpoint if candidate is None else candidate.position

    # ---------------------------------------------------------------------------------------------
    # buffering

    def create_new_growing_segment(self, partition_id: int, segment_id: int, start_pos: MsgPosition | None) -> None:
        """``CreateNewGrowingSegment``: add a Growing segment to the metacache unless it is known.

        Its start position is not yet recorded at DataCoord (the next sync reports it).
        """
        if self.metacache.get_segment_by_id(segment_id) is not None:
            return
        self.metacache.add_segment(
            SegmentInfoPB(
                id=segment_id, collection_id=self.collection_id, partition_id=partition_id,
                insert_channel=self.channel_name, state=SegmentState.GROWING, start_position=start_pos,
            ),
            set_start_pos_recorded(False),
        )

    def buffer_data(
        self,
        insert_msgs: Sequence[InsertMsg],
        delete_msgs: Sequence[DeleteMsg],
        start_pos: MsgPosition,
        end_pos: MsgPosition,
    ) -> list[SyncPack]:
        """``l0WriteBuffer.BufferData`` (with ``PrepareInsert``): buffer one pack, then ``triggerSync``.

        1. inserts, grouped by segment: create the segment if new, buffer, update its buffered rows and
           start position (``SetStartPositionIfNil``);
        2. deletes: to the partition's L0 segment, all of them (``dataNode.skip.BFStats.Load``, the
           default) or only those whose key may be in a segment of the partition (then the inserted keys
           join the segments' pk statistics);
        3. ``checkpoint = end_pos``;
        4. every policy is asked at ``end_pos.timestamp``; the packs of the selected segments are
           returned, and a synced L0 segment is forgotten so the next delete opens a new one.
        """
        if start_pos is None or end_pos is None:
            raise ValueError(
                "buffer_data needs both a start and an end position (the writeNode drops packs without them)")
        groups = prepare_insert(insert_msgs)
        for group in groups:
            self._buffer_insert(group, start_pos, end_pos)
        if self.params.skip_bf_stats_load:
            self._dispatch_delete_msgs_without_filter(delete_msgs, start_pos, end_pos)
        else:
            self._dispatch_delete_msgs(groups, delete_msgs, start_pos, end_pos)
            for group in groups:
                pks = [pk for chunk in group.chunks for pk in chunk.pks]
                self.metacache.update_segments(roll_stats(pks), with_segment_ids(group.segment_id))
        self._checkpoint = end_pos
        segment_ids, packs = self._trigger_sync()
        for segment_id in segment_ids:
            partition_id = self._l0_partition.pop(segment_id, None)
            if partition_id is not None:
                del self._l0_segments[partition_id]
        return packs

    def _get_or_create_buffer(self, segment_id: int) -> SegmentBuffer:
        """``getOrCreateBuffer``."""
        buf = self._buffers.get(segment_id)
        if buf is None:
            buf = self._buffers[segment_id] = SegmentBuffer(segment_id, self.params)
        return buf

    def _buffer_insert(self, group: InsertGroup, start_pos: MsgPosition, end_pos: MsgPosition) -> None:
        """``bufferInsert``."""
        self.create_new_growing_segment(group.partition_id, group.segment_id, start_pos)
        buf = self._get_or_create_buffer(group.segment_id)
        buf.insert_buffer.buffer(group.chunks, start_pos, end_pos)
        self.metacache.update_segments(
            segment_actions(update_buffered_rows(buf.insert_buffer.rows), set_start_position_if_nil(start_pos)),
            with_segment_ids(group.segment_id),
        )

    def _buffer_delete(self, segment_id: int, pks: Sequence, tss: Sequence[int], start_pos, end_pos) -> None:
        """``bufferDelete``."""
        self._get_or_create_buffer(segment_id).delta_buffer.buffer(pks, tss, start_pos, end_pos)

    def _get_l0_segment_id(self, partition_id: int, start_pos: MsgPosition) -> int:
        """``getL0SegmentID``: the partition's L0 segment, created (new id, Growing, level L0, start
        position not recorded) on first use."""
        segment_id = self._l0_segments.get(partition_id)
        if segment_id is None:
            segment_id = self._alloc_segment_id()
            self._l0_segments[partition_id] = segment_id
            self._l0_partition[segment_id] = partition_id
            self.metacache.add_segment(
                SegmentInfoPB(
                    id=segment_id, collection_id=self.collection_id, partition_id=partition_id,
                    insert_channel=self.channel_name, start_position=start_pos,
                    state=SegmentState.GROWING, level=SegmentLevel.L0,
                ),
                set_start_pos_recorded(False),
            )
        return segment_id

    def _dispatch_delete_msgs_without_filter(self, delete_msgs: Sequence[DeleteMsg], start_pos, end_pos) -> None:
        """``dispatchDeleteMsgsWithoutFilter``: every deleted key to the partition's L0 segment."""
        for msg in delete_msgs:
            l0_segment_id = self._get_l0_segment_id(msg.partition_id, start_pos)
            if msg.pks:
                self._buffer_delete(l0_segment_id, msg.pks, msg.timestamps, start_pos, end_pos)

    def _dispatch_delete_msgs(
        self, groups: Sequence[InsertGroup], delete_msgs: Sequence[DeleteMsg], start_pos, end_pos
    ) -> None:
        """``dispatchDeleteMsgs``: keep a deleted key only if a segment of its partition may hold it
        (pk statistics of Growing/Sealed/Flushing/Flushed segments) or this pack inserted it earlier.

        All hits are computed before any L0 segment is created, as Go waits for every batch first. The
        partition's L0 segment is created even when no key of the message hits.
        """
        hits_per_msg = []
        for msg in delete_msgs:
            segments = self.metacache.get_segments_by(
                with_partition_id(msg.partition_id), with_segment_state(*_BF_STATES))
            partition_groups = [
                g for g in groups if msg.partition_id == ALL_PARTITIONS_ID or msg.partition_id == g.partition_id
            ]
            hits_per_msg.append([
                any(pk in s.pk_stats for s in segments) or any(g.pk_exists(pk, ts) for g in partition_groups)
                for pk, ts in zip(msg.pks, msg.timestamps)
            ])
        for msg, hits in zip(delete_msgs, hits_per_msg):
            l0_segment_id = self._get_l0_segment_id(msg.partition_id, start_pos)
            pks = [pk for pk, hit in zip(msg.pks, hits) if hit]
            tss = [ts for ts, hit in zip(msg.timestamps, hits) if hit]
            if pks:
                self._buffer_delete(l0_segment_id, pks, tss, start_pos, end_pos)

    # ---------------------------------------------------------------------------------------------
    # syncing

    def _get_segments_to_sync(self, ts: int, policies: Iterable[SyncPolicy]) -> list[int]:
        """``getSegmentsToSync``: the union of every policy's choice (each policy is asked, even after an
        earlier one chose; the sealed policy's side effect always happens), ascending."""
        buffers = [self._buffers[i] for i in sorted(self._buffers)]
        selected: set[int] = set()
        for policy in policies:
            chosen = policy.select_segments(buffers, ts)
            if chosen:
                # Go logs "SyncPolicy selects segments" with the policy's reason; the caller may read it
                self._policy_choices.append((policy.reason, tuple(sorted(chosen))))
            selected.update(chosen)
        return sorted(selected)

    def take_policy_choices(self) -> list[tuple[str, tuple[int, ...]]]:
        """What every policy chose since the last call, as ``(reason, segment ids)`` in the order asked (Go's
        log line "SyncPolicy selects segments"), and forget them."""
        choices, self._policy_choices = self._policy_choices, []
        return choices

    def _trigger_sync(self) -> tuple[list[int], list[SyncPack]]:
        """``triggerSync``: (segments the policies selected, the packs cut for them)."""
        segment_ids = self._get_segments_to_sync(self._checkpoint.timestamp, self.sync_policies)
        return segment_ids, self._sync_segments(segment_ids)

    def _sync_segments(self, segment_ids: Iterable[int]) -> list[SyncPack]:
        """``syncSegments``: a pack per segment; a segment missing from the metacache is skipped (its
        buffer, if any, stays)."""
        packs = []
        for segment_id in segment_ids:
            try:
                packs.append(self._get_sync_task(segment_id))
            except SegmentNotFoundError:
                continue
        return packs

    def _get_sync_task(self, segment_id: int) -> SyncPack:
        """``getSyncTask``: yield and remove the segment's buffer, remember its start position as a
        syncing candidate, ``StartSyncing`` in the metacache, and build the pack.

        The pack is a flush when the segment is Flushing or is an L0 segment (L0 always syncs as
        flushed), a drop when it is Dropped; its checkpoint is the last consumed position.
        """
        info = self.metacache.get_segment_by_id(segment_id)
        if info is None:
            raise wrap_err_segment_not_found(segment_id)
        buf = self._buffers.pop(segment_id, None)
        insert: tuple[InsertData, ...] = ()
        delete = None
        start = None
        ts_from = ts_to = 0
        if buf is not None:
            start = buf.earliest_position()
            time_range = buf.get_time_range()
            ts_from, ts_to = time_range.timestamp_min, time_range.timestamp_max
            insert, delete = buf.yield_()
        if start is not None:
            self._sync_checkpoint[(segment_id, start.timestamp)] = start
        batch_rows = sum(chunk.num_rows for chunk in insert)
        self.metacache.update_segments(start_syncing(batch_rows), with_segment_ids(segment_id))
        return SyncPack(
            collection_id=self.collection_id,
            partition_id=info.partition_id,
            segment_id=segment_id,
            channel_name=self.channel_name,
            insert_data=insert,
            delete_data=delete,
            ts_from=ts_from,
            ts_to=ts_to,
            start_position=start,
            checkpoint=self._checkpoint,
            batch_rows=batch_rows,
            level=info.level,
            is_flush=info.state == SegmentState.FLUSHING or info.level == SegmentLevel.L0,
            is_drop=info.state == SegmentState.DROPPED,
        )

    def sync_done(self, pack: SyncPack, error: Exception | None = None) -> None:
        """The callback ``syncSegments`` (and ``Close``) give ``SyncData``: the outcome of one pack.

        Success: the pack's syncing candidate is removed (the checkpoint may move past its rows), and a
        flushed segment leaves the metacache (``dataNode.skip.BFStats.Load``: its pk statistics are not
        kept). ``Close``'s own callback skips the removal, but its packs are drops, whose task already
        removed the segment, so one callback serves both.

        Failure: nothing changes, so the candidate keeps holding the checkpoint at the pack's start. In
        Go the callback returns the error and the sync task's error handler (the write buffer's default,
        ``panic``) brings the DataNode down; here the caller decides whether the error is fatal.
        """
        if error is not None:
            return
        if pack.start_position is not None:
            self._sync_checkpoint.pop((pack.segment_id, pack.start_position.timestamp), None)
        if pack.is_flush and self.params.skip_bf_stats_load:
            self.metacache.remove_segments(with_segment_ids(pack.segment_id))

    def evict_buffer(self, *policies: SyncPolicy) -> list[SyncPack]:
        """``EvictBuffer``: sync what the given policies select at the last consumed time (nothing before
        the first pack: Go warns "evict buffer before buffering data").

        Unlike :meth:`buffer_data`, a synced L0 segment is *not* forgotten here (Go clears
        ``l0Segments`` only in ``BufferData``), so later deletes of that partition keep going to it.
        """
        if self._checkpoint is None:
            return []
        return self._sync_segments(self._get_segments_to_sync(self._checkpoint.timestamp, policies))

    def seal_segments(self, segment_ids: Iterable[int]) -> None:
        """``SealSegments``: every id must be in the metacache (else ``SegmentNotFound``, nothing
        changes); the Growing ones become Sealed (the sealed policy flushes them on the next pack)."""
        ids = list(segment_ids)
        for segment_id in ids:
            if self.metacache.get_segment_by_id(segment_id) is None:
                raise wrap_err_segment_not_found(segment_id)
        self.metacache.update_segments(
            update_state(SegmentState.SEALED), with_segment_ids(*ids), with_segment_state(SegmentState.GROWING)
        )

    def drop_partitions(self, partition_ids: Iterable[int]) -> list[int]:
        """``DropPartitions`` (after Go's ``NotifyDropPartition`` RPC): every segment of the partitions
        becomes Dropped (the dropped policy syncs them with ``drop``); returns their ids."""
        segment_ids = self.metacache.get_segment_ids_by(with_partition_ids(partition_ids))
        self.metacache.update_segments(update_state(SegmentState.DROPPED), with_segment_ids(*segment_ids))
        return segment_ids

    def close(self, drop: bool) -> list[SyncPack]:
        """``Close``: without ``drop`` the buffers are simply abandoned (the channel moves to another
        node, which replays them); with ``drop`` every buffer is cut as a drop pack. The caller syncs
        them, waits for all, then calls ``DropVirtualChannel`` (Go panics if any of this fails)."""
        if not drop:
            return []
        packs = []
        for segment_id in sorted(self._buffers):
            try:
                pack = self._get_sync_task(segment_id)
            except SegmentNotFoundError:
                continue
            packs.append(replace(pack, is_drop=True))
        return packs
