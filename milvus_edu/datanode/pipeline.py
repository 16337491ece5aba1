"""The DataNode's flowgraph for one vchannel: input -> ddNode -> writeNode -> ttNode.

Models ``internal/util/flowgraph/input_node.go`` (the DataNode's skip mode) and
``internal/flushcommon/pipeline/{flow_graph_dd_node.go, flow_graph_write_node.go,
flow_graph_time_tick_node.go, data_sync_service.go}`` of Milvus 2.5. A pack from the dispatcher goes
through the four nodes in one call (:meth:`DataSyncService.operate`), as the flowgraph passes one
message per node per tick; what the nodes ask of the outside (syncs to run, checkpoint tasks) comes
back as return values and calls on the injected buffer manager and checkpoint updater.
:func:`init_meta_cache` is ``initMetaCache``, which builds the channel's metacache before the nodes.

The lesson is in two places:

* ``DDNode.try_to_filter_segment_insert_messages`` — after a restart, inserts already in binlogs
  (at or before a segment's DmlPosition) are dropped, so a replay repeats nothing;
* ``TTNode.operate`` — the channel checkpoint is the buffer's (never past unflushed data), submitted
  every ``updateChannelCheckpointInterval`` of *message* time, or at once when a flush is waiting
  (``needUpdate``); the periodic path wins when both hold (quirk 6).

Simplification: no embedding node, no compaction executor, no streaming-service message handler
(CreateSegment / FlushSegment / ManualFlush messages), no tracing or metrics.
Simplification: the writeNode's segment statistics for DataCoord's allocator (``timetickSender``,
every ``dataNode.timetick.interval``) are not sent; the model's segment allocation does not use them.
Simplification: Go's nodes run in their own goroutines joined by queues of ``maxQueueLength``; here a
pack passes all four nodes at once, so back-pressure between nodes is not modelled.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from ..config import DataNodeParams
from ..merr import ChannelNotFoundError
from ..mq.msg import DeleteMsg, InsertMsg, MsgPack
from ..proto import MsgPosition, MsgType, SegmentInfo
from ..tsoutil import physical_time
from .metacache import MetaCache
from .syncmgr.pack import SyncPack

#: ``time.Time{}`` as milliseconds: so long ago that the first pack always submits a checkpoint.
_ZERO_TIME_MS = None


class BufferManagerLike(Protocol):
    """What the flowgraph calls on ``writebuffer.BufferManager`` (see ``datanode/writebuffer/manager.py``)."""

    def buffer_data(self, channel: str, insert_msgs, delete_msgs, start_pos, end_pos) -> list[SyncPack]: ...
    def get_checkpoint(self, channel: str) -> tuple[MsgPosition | None, bool]: ...
    def notify_checkpoint_updated(self, channel: str, ts: int) -> None: ...
    def drop_channel(self, channel: str) -> list[SyncPack]: ...
    def drop_partitions(self, channel: str, partition_ids: list[int]) -> None: ...


class CheckpointUpdaterLike(Protocol):
    """What the ttNode calls on ``ChannelCheckpointUpdater`` (see ``datanode/checkpoint_updater.py``)."""

    def add_task(self, pos: MsgPosition | None, flush: bool, callback: Callable[[], None]) -> bool: ...


@dataclass(slots=True)
class MsgStreamMsg:
    """``flowgraph.MsgStreamMsg``: a pack as the input node hands it on (``is_close``: the stream ended).

    Not frozen: one is built per pack, and a frozen dataclass's ``__init__`` costs several times a plain one's;
    as in Go the nodes pass it on and never change one they have passed on.
    """

    msgs: tuple = ()
    timestamp_min: int = 0
    timestamp_max: int = 0
    start_positions: tuple[MsgPosition, ...] = ()
    end_positions: tuple[MsgPosition, ...] = ()
    is_close: bool = False


@dataclass(slots=True)
class FlowGraphMsg:
    """``FlowGraphMsg``: what ddNode passes to writeNode and writeNode to ttNode (not frozen, as
    :class:`MsgStreamMsg`)."""

    insert_messages: tuple[InsertMsg, ...] = ()
    delete_messages: tuple[DeleteMsg, ...] = ()
    timestamp_min: int = 0
    timestamp_max: int = 0
    start_positions: tuple[MsgPosition, ...] = ()
    end_positions: tuple[MsgPosition, ...] = ()
    drop_collection: bool = False
    drop_partitions: tuple[int, ...] = ()
    is_close: bool = False


class InputNode:
    """``flowgraph.InputNode`` with the DataNode role: packs in, ``MsgStreamMsg`` out, and skip mode.

    Skip mode (``dataNode.dataSync.skipMode``): when a pack's first message is a TimeTick and no other
    message came for ``coldTime``, only every ``skipNum + 1``-th such pack is passed on. Quirk: the
    dispatcher's packs never contain the TimeTick message itself (``groupingMsgs`` builds them from
    the DML/DDL messages only), so in 2.5 a pure-tick pack has no messages, the ``len(Msgs) > 0`` guard
    fails, and skip mode never engages on this path; the model keeps the rule, and so the same outcome.
    ``now_ms`` is the node's wall clock (``time.Now``), which skip mode compares against.
    """

    def __init__(self, params: DataNodeParams, now_ms: Callable[[], int]):
        self.params = params
        self._now_ms = now_ms
        self.skip_mode = False
        self.skip_count = 0
        self.last_not_timetick_ms = now_ms()
        self.last_pack: MsgPack | None = None

    def operate(self, pack: MsgPack | None) -> MsgStreamMsg | None:
        """``InputNode.Operate``: ``None`` in means the input closed (a graceful close carries the last positions)."""
        if pack is None:
            last = self.last_pack
            if last is not None:
                return MsgStreamMsg((), last.begin_ts, last.end_ts, last.start_positions, last.end_positions, True)
            return MsgStreamMsg(is_close=True)
        self.last_pack = pack
        if pack.msgs and self.params.skip_mode_enable:
            if pack.msgs[0].msg_type == MsgType.TIME_TICK:
                if self.skip_mode:
                    if self.skip_count == self.params.skip_mode_skip_num:
                        self.skip_count = 0
                    else:
                        self.skip_count += 1
                        return None
                elif (self._now_ms() - self.last_not_timetick_ms) * 1_000_000 > self.params.skip_mode_cold_time_ns:
                    self.skip_mode = True
            else:
                self.skip_mode = False
                self.skip_count = 0
                self.last_not_timetick_ms = self._now_ms()
        return MsgStreamMsg(pack.msgs, pack.begin_ts, pack.end_ts, pack.start_positions, pack.end_positions)


class DDNode:
    """``ddNode``: keeps this collection's DML, notices drops, and filters what is already flushed.

    ``sealed`` are the segments flushed (or flushing) when the channel was watched, ``growing`` the
    unflushed ones, both DataCoord's records with their DmlPosition; ``dropped_segment_ids`` the dropped.
    """

    def __init__(
        self,
        collection_id: int,
        vchannel: str,
        dropped_segment_ids: Iterable[int] = (),
        sealed: Iterable[SegmentInfo] = (),
        growing: Iterable[SegmentInfo] = (),
        *,
        skip_recovery_filter: bool = False,
    ):
        self.collection_id = collection_id
        self.vchannel = vchannel
        self.dropped_segment_ids = list(dropped_segment_ids)
        self.sealed_seg_info: dict[int, SegmentInfo] = {s.id: s for s in sealed}
        self.growing_seg_info: dict[int, SegmentInfo] = {s.id: s for s in growing}
        self.drop_mode = False
        self.skip_recovery_filter = skip_recovery_filter
        """Bug switch: no recovery filter, so inserts already in binlogs are buffered again after a
        restart and written twice (duplicate rows in the segment)."""
        self.filtered: list[InsertMsg] = []
        """The inserts dropped by the recovery filter in the last :meth:`operate` (for the run log)."""

    def operate(self, msg: MsgStreamMsg) -> FlowGraphMsg | None:
        """``ddNode.Operate``: ``None`` when in drop mode (nothing flows any more)."""
        self.filtered = []
        if msg.is_close:
            return FlowGraphMsg(
                timestamp_min=msg.timestamp_min, timestamp_max=msg.timestamp_max,
                start_positions=msg.start_positions, end_positions=msg.end_positions, is_close=True,
            )
        if self.drop_mode:
            return None
        inserts: list[InsertMsg] = []
        deletes: list[DeleteMsg] = []
        drop_collection = False
        drop_partitions: list[int] = []
        for m in msg.msgs:
            if m.msg_type == MsgType.DROP_COLLECTION:
                if m.collection_id == self.collection_id:
                    self.drop_mode = True
                    drop_collection = True
            elif m.msg_type == MsgType.DROP_PARTITION:
                if m.collection_id == self.collection_id:
                    drop_partitions.append(m.partition_id)
            elif m.msg_type == MsgType.INSERT:
                if m.collection_id != self.collection_id:
                    continue
                if self.try_to_filter_segment_insert_messages(m):
                    self.filtered.append(m)
                    continue
                inserts.append(m)
            elif m.msg_type == MsgType.DELETE:
                if m.collection_id != self.collection_id:
                    continue
                deletes.append(m)
        return FlowGraphMsg(
            tuple(inserts), tuple(deletes), msg.timestamp_min, msg.timestamp_max,
            msg.start_positions, msg.end_positions, drop_collection, tuple(drop_partitions),
        )

    def try_to_filter_segment_insert_messages(self, msg: InsertMsg) -> bool:
        """``tryToFilterSegmentInsertMessages``: True drops the insert.

        Another vchannel's insert (a pchannel carries several) and a dropped segment's are dropped.
        The sealed map is pruned on *any* newer message, whatever its segment (quirk 10); a growing
        segment is filtered until its first message newer than its DmlPosition, which ends its filter.
        Iterates the sealed segments by id (Go ranges over a map).
        """
        if msg.shard_name != self.vchannel:
            return True
        if msg.segment_id in self.dropped_segment_ids:
            return True
        if self.skip_recovery_filter:
            return False
        for seg_id in sorted(self.sealed_seg_info):
            if msg.end_ts() > _dml_ts(self.sealed_seg_info[seg_id]):
                del self.sealed_seg_info[seg_id]
        if msg.segment_id in self.sealed_seg_info:
            return True
        growing = self.growing_seg_info.get(msg.segment_id)
        if growing is not None:
            if msg.end_ts() <= _dml_ts(growing):
                return True
            del self.growing_seg_info[msg.segment_id]
        return False


def _dml_ts(info: SegmentInfo) -> int:
    """``GetDmlPosition().GetTimestamp()``: 0 when the segment has no DmlPosition (nothing flushed)."""
    return info.dml_position.timestamp if info.dml_position is not None else 0


class WriteNode:
    """``writeNode``: buffers the pack's rows in the channel's write buffer; returns the syncs to run."""

    def __init__(self, vchannel: str, wb_manager: BufferManagerLike):
        self.vchannel = vchannel
        self.wb_manager = wb_manager
        self._renamed: tuple[MsgPosition | None, MsgPosition | None] = (None, None)  # (pchannel's, renamed)

    def _on_vchannel(self, pos: MsgPosition) -> MsgPosition:
        """``pos`` named after the vchannel (Go clones every position of every pack and sets its ChannelName).

        A pack starts where the one before it ended (the stream's next start position is the same object
        as its last end position), so the position renamed last serves again instead of a second copy.
        """
        source, renamed = self._renamed
        if pos is not source:
            renamed = MsgPosition(self.vchannel, pos.msg_id, pos.timestamp, pos.msg_group)
            self._renamed = (pos, renamed)
        return renamed

    def operate(self, fg: FlowGraphMsg) -> tuple[FlowGraphMsg | None, list[SyncPack]]:
        """``writeNode.Operate``: (message for ttNode or ``None``, sync packs cut by this pack).

        Positions are renamed to the vchannel (they come from the pchannel). A pack without start or
        end positions is dropped. A dropped collection closes the buffer with ``drop`` (its syncs are
        returned too); dropped partitions are handed to the manager.
        """
        if fg.is_close:
            return fg, []
        starts = tuple(self._on_vchannel(p) for p in fg.start_positions)
        ends = tuple(self._on_vchannel(p) for p in fg.end_positions)
        if not starts or not ends:
            return None, []
        packs = list(self.wb_manager.buffer_data(
            self.vchannel, list(fg.insert_messages), list(fg.delete_messages), starts[0], ends[0],
        ))
        out = FlowGraphMsg(
            timestamp_min=fg.timestamp_min, timestamp_max=fg.timestamp_max,
            start_positions=starts, end_positions=ends, drop_collection=fg.drop_collection,
        )
        if fg.drop_collection:
            packs.extend(self.wb_manager.drop_channel(self.vchannel))
        if fg.drop_partitions:
            self.wb_manager.drop_partitions(self.vchannel, list(fg.drop_partitions))
        return out, packs


@dataclass
class CheckpointSubmission:
    """What one ttNode call submitted to the checkpoint updater (for the run log)."""

    position: MsgPosition | None
    flush: bool
    periodic: bool


class TTNode:
    """``ttNode``: decides when the channel checkpoint goes to the updater.

    Time here is the pack's ``TimestampMax`` (message time), not the wall clock: a stalled channel
    submits nothing. ``last_update_ms`` is set when a task is submitted, not when the RPC succeeds.
    """

    def __init__(
        self,
        vchannel: str,
        wb_manager: BufferManagerLike,
        cp_updater: CheckpointUpdaterLike,
        params: DataNodeParams,
        drop_callback: Callable[[], None] | None = None,
    ):
        self.vchannel = vchannel
        self.wb_manager = wb_manager
        self.cp_updater = cp_updater
        self.params = params
        self.drop_callback = drop_callback
        self.drop_mode = False
        self.last_update_ms: int | None = _ZERO_TIME_MS

    def operate(self, fg: FlowGraphMsg) -> CheckpointSubmission | None:
        """``ttNode.Operate``: the submission made, if any.

        A ``ChannelNotFound`` from the buffer manager (channel not registered yet, or gone) makes
        the node do nothing for this pack, as Go returns early.
        """
        if fg.drop_collection:
            self.drop_mode = True
            if self.drop_callback is not None:
                self.drop_callback()
        if self.drop_mode:
            return None
        cur_ms = physical_time(fg.timestamp_max)
        try:
            position, need_update = self.wb_manager.get_checkpoint(self.vchannel)
        except ChannelNotFoundError:
            return None
        if fg.is_close:
            if fg.end_positions:
                return self._update_channel_cp(position, cur_ms, flush=False, periodic=False)
            return None
        interval_ms = self.params.update_channel_checkpoint_interval_ns // 1_000_000
        if self.last_update_ms is None or cur_ms - self.last_update_ms >= interval_ms:
            return self._update_channel_cp(position, cur_ms, flush=False, periodic=True)
        if need_update:
            return self._update_channel_cp(position, cur_ms, flush=True, periodic=False)
        return None

    def _update_channel_cp(self, position: MsgPosition | None, cur_ms: int, flush: bool, periodic: bool):
        """``updateChannelCP``: the callback tells the buffer manager the checkpoint it carried got stored."""
        ts = position.timestamp if position is not None else 0

        def callback() -> None:
            self.wb_manager.notify_checkpoint_updated(self.vchannel, ts)

        self.cp_updater.add_task(position, flush, callback)
        self.last_update_ms = cur_ms
        return CheckpointSubmission(position, flush, periodic)


def init_meta_cache(
    collection_id: int,
    vchannel: str,
    params: DataNodeParams,
    load_pk_stats: Callable[[SegmentInfo], Iterable],
    *,
    flushed: Iterable[SegmentInfo] = (),
    unflushed: Iterable[SegmentInfo] = (),
) -> MetaCache:
    """``initMetaCache``: the metacache of a vchannel being watched, with its segments' pk statistics.

    The statistics of the unflushed segments are always loaded (the merged stats log a later flush writes
    covers the whole segment); those of the flushed ones only when ``dataNode.skip.BFStats.Load`` is off,
    because only then do deletes consult them. ``load_pk_stats`` is ``compaction.LoadStats`` over the
    object store (:func:`~milvus_edu.datanode.syncmgr.storage_serializer.load_stats`).
    """
    flushed, unflushed = tuple(flushed), tuple(unflushed)
    wanted = {s.id for s in unflushed}
    if not params.skip_bf_stats_load:
        wanted.update(s.id for s in flushed)
    return MetaCache(collection_id, vchannel, flushed=flushed, unflushed=unflushed,
                     pk_stats=lambda info: load_pk_stats(info) if info.id in wanted else ())


@dataclass
class OperateResult:
    """What one pack did to a channel's flowgraph: syncs to run, inserts filtered, checkpoint submitted."""

    sync_packs: list[SyncPack] = field(default_factory=list)
    filtered: list[InsertMsg] = field(default_factory=list)
    submission: CheckpointSubmission | None = None
    skipped: bool = False
    written: bool = False
    """The writeNode buffered the pack (``BufferData``), so Go's writeNode reports its end timestamp to the
    time-tick sender; not for a pack skipped, dropped in drop mode or without positions, nor a close."""


class DataSyncService:
    """``DataSyncService``: the four nodes of one vchannel, assembled as ``getServiceWithChannel`` does.

    ``flushed``/``unflushed`` are DataCoord's segment records at watch time (``GetDataVChanPositions``
    then ``GetSegmentInfo``); the metacache was built from the same records by the caller, and the
    channel is registered in the buffer manager *after* the nodes exist (a ``FlushChannels`` before
    that gets ``ChannelNotFound``).
    """

    def __init__(
        self,
        collection_id: int,
        vchannel: str,
        wb_manager: BufferManagerLike,
        cp_updater: CheckpointUpdaterLike,
        params: DataNodeParams,
        now_ms: Callable[[], int],
        *,
        flushed: Iterable[SegmentInfo] = (),
        unflushed: Iterable[SegmentInfo] = (),
        dropped_segment_ids: Iterable[int] = (),
        drop_callback: Callable[[], None] | None = None,
        skip_recovery_filter: bool = False,
    ):
        self.vchannel = vchannel
        self.input_node = InputNode(params, now_ms)
        self.dd_node = DDNode(collection_id, vchannel, dropped_segment_ids, flushed, unflushed,
                              skip_recovery_filter=skip_recovery_filter)
        self.write_node = WriteNode(vchannel, wb_manager)
        self.tt_node = TTNode(vchannel, wb_manager, cp_updater, params, drop_callback)

    def operate(self, pack: MsgPack | None) -> OperateResult:
        """Pass one pack (``None``: the input closed) through input, dd, write and tt nodes."""
        result = OperateResult()
        stream_msg = self.input_node.operate(pack)
        if stream_msg is None:
            result.skipped = True
            return result
        fg = self.dd_node.operate(stream_msg)
        result.filtered = list(self.dd_node.filtered)
        if fg is None:
            return result
        fg, packs = self.write_node.operate(fg)
        result.sync_packs = packs
        if fg is None:
            return result
        result.written = not fg.is_close
        result.submission = self.tt_node.operate(fg)
        return result
