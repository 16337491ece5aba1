"""DataCoord's RPCs for the flush and checkpoint story: SaveBinlogPaths, checkpoints, Flush, flush state.

Models ``internal/datacoord/services.go`` (Milvus 2.5): ``SaveBinlogPaths``, ``UpdateChannelCheckpoint``,
``Flush`` (with ``flushCollection``), ``GetFlushState``, ``GetSegmentInfo``, ``AssignSegmentID``,
``GetRecoveryInfo``; the server state check (``merr.CheckHealthy``); and, as a tiny
:class:`ChannelManager`, the parts of ``channel_manager.go`` / ``channel_store.go`` they ask
(``Match``, ``GetNodeChannelsByCollectionID``, ``GetChannelsByCollectionID``).

A Go error *status* in a response is raised here as the Milvus error (``merr``); ``Flush`` is an
effect generator, since it calls RootCoord for a timestamp and every DataNode (:class:`AllocTimestamp`,
:class:`FlushChannels`, and :class:`Sleep` between ``retry.Do`` attempts).

What the rules protect (reference §4.7):

* ``SaveBinlogPaths`` is accepted only from the node that watches the channel, so a DataNode that
  lost its channel cannot write over the new owner's progress; a report on a Dropped segment succeeds
  without effect; binlogs, start positions, checkpoint and state change in one catalog transaction;
* ``GetFlushState`` says "flushed" only when every channel checkpoint has reached the flush
  timestamp, which the DataNode passes only after the data before it is in binlogs.

Simplification: no index-build or compaction notification after a flushed SaveBinlogPaths, no
``CleanZeroSealedSegmentsOfChannel`` after a checkpoint update (see ``segment_manager``), no
streaming-service branches, no rolling-upgrade fallback (``FlushChannels`` unimplemented).
Simplification: channel assignment is a plain map (``watch``/``release``), not persisted; Go keeps it
in etcd and balances channels over DataNodes.
Simplification: collections are registered with :meth:`Server.add_collection` instead of being
fetched from RootCoord.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from ..effects import AllocTimestamp, FlushChannels, Sleep, Steps
from ..merr import (
    wrap_err_channel_not_found,
    wrap_err_collection_not_found,
    wrap_err_segment_not_found,
    wrap_err_service_not_ready,
)
from ..proto import FieldBinlog, MsgPosition, SaveBinlogPathsRequest, SegmentInfo, SegmentLevel, SegmentState
from ..sessionutil import retry_do_sleeps
from ..tsoutil import physical_time
from .catalog import Catalog, calc_row_count_from_binlog, compress_field_binlogs
from .handler import ALL_PARTITION_ID, Handler, VchannelInfo, to_msg_position
from .meta import (
    CollectionInfo,
    Meta,
    add_binlogs_operator,
    create_l0_operator,
    is_flush_state,
    is_segment_healthy,
    update_as_dropped_if_empty_when_flushing,
    update_check_point_operator,
    update_start_position,
    update_status_operator,
)
from .segment_manager import SegmentManager

#: ``typeutil.DataCoordRole``.
DATACOORD_ROLE = "datacoord"

#: ``flushCollection``: ``retry.Attempts(60)`` around the ``FlushChannels`` calls ("about 3min").
FLUSH_CHANNELS_ATTEMPTS = 60


class StateCode:
    """``commonpb.StateCode`` names."""

    INITIALIZING = "Initializing"
    HEALTHY = "Healthy"
    ABNORMAL = "Abnormal"
    STANDBY = "StandBy"
    STOPPING = "Stopping"


# ---- effects -------------------------------------------------------------------------------------


# ---- results -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class FlushResult:
    """``datapb.FlushResult``: what ``Flush`` answers.

    ``segment_ids`` were Sealed by this flush or already Sealed; ``flush_segment_ids`` are the other
    Flushing/Flushed L1 segments; ``channel_cps`` are the checkpoints read *before* sealing.
    ``time_of_seal`` is ``flush_ts``' physical time in Unix seconds.
    """

    collection_id: int
    segment_ids: tuple[int, ...]
    time_of_seal: int
    flush_segment_ids: tuple[int, ...]
    flush_ts: int
    channel_cps: dict[str, MsgPosition | None] = field(default_factory=dict)


@dataclass(frozen=True)
class SegmentInfoResult:
    """``GetSegmentInfoResponse``: the records asked for and the checkpoint of each of their channels."""

    infos: tuple[SegmentInfo, ...]
    channel_checkpoints: dict[str, MsgPosition | None]


@dataclass(frozen=True)
class SegmentBinlogs:
    """``datapb.SegmentBinlogs``: the logs of one flushed segment, for a loader."""

    segment_id: int
    num_of_rows: int
    insert_channel: str
    field_binlogs: tuple[FieldBinlog, ...] = ()
    statslogs: tuple[FieldBinlog, ...] = ()
    deltalogs: tuple[FieldBinlog, ...] = ()


@dataclass(frozen=True)
class RecoveryInfo:
    """``GetRecoveryInfoResponse``: per vchannel its recovery view, and the binlogs of flushed segments."""

    channels: tuple[VchannelInfo, ...]
    binlogs: tuple[SegmentBinlogs, ...]


# ---- channel manager -----------------------------------------------------------------------------

class ChannelManager:
    """``ChannelManagerImpl``, reduced to who watches which vchannel.

    A channel is *added* with its collection (Go: into the buffer, unwatched) and then *watched* by
    one DataNode. Nodes are remembered once seen, even without channels, as Go's channel store keeps
    every registered node. Maps are read in ascending order.
    """

    def __init__(self) -> None:
        self._collection_of: dict[str, int] = {}
        self._watcher: dict[str, int] = {}
        self._nodes: set[int] = set()

    def add_node(self, node_id: int) -> None:
        """``AddNode``: a DataNode joined (it holds no channel yet)."""
        self._nodes.add(node_id)

    def remove_node(self, node_id: int) -> list[str]:
        """``DeleteNode``: the node left; its channels go back to unwatched. Returns them."""
        self._nodes.discard(node_id)
        released = sorted(ch for ch, n in self._watcher.items() if n == node_id)
        for ch in released:
            del self._watcher[ch]
        return released

    def add_channel(self, channel: str, collection_id: int) -> None:
        """``Watch`` of a new channel: known, belonging to ``collection_id``, not yet on a node."""
        self._collection_of[channel] = collection_id

    def watch(self, channel: str, node_id: int, collection_id: int | None = None) -> None:
        """Assign ``channel`` to ``node_id`` (a reassignment replaces the old watcher).

        ``collection_id`` is needed only for a channel not added before.
        """
        if channel not in self._collection_of:
            if collection_id is None:
                raise ValueError(f"channel {channel!r} belongs to no collection; "
                                 "add the collection or pass collection_id")
            self._collection_of[channel] = collection_id
        self._nodes.add(node_id)
        self._watcher[channel] = node_id

    def release(self, channel: str) -> None:
        """Take ``channel`` off its node (it stays known, unwatched)."""
        self._watcher.pop(channel, None)

    def match(self, node_id: int, channel: str) -> bool:
        """``Match``: whether ``node_id`` watches ``channel``."""
        return self._watcher.get(channel) == node_id

    def find_watcher(self, channel: str) -> int | None:
        """``FindWatcher``: the node watching ``channel``, or None."""
        return self._watcher.get(channel)

    def get_node_channels_by_collection_id(self, collection_id: int) -> dict[int, list[str]]:
        """``GetNodeChannelsByCollectionID``: every node -> its channels of the collection (maybe none)."""
        return {
            node: sorted(ch for ch, n in self._watcher.items()
                         if n == node and self._collection_of[ch] == collection_id)
            for node in sorted(self._nodes)
        }

    def get_channels_by_collection_id(self, collection_id: int) -> list[str]:
        """``GetChannelsByCollectionID``: the collection's channels, watched or not."""
        return sorted(ch for ch, c in self._collection_of.items() if c == collection_id)


# ---- the server ----------------------------------------------------------------------------------

class Server:
    """DataCoord's ``Server``: meta, segment manager, handler and channel manager behind the RPCs.

    ``catalog`` holds the persistent meta (a restarted server over the same catalog sees the same
    segments and checkpoints); ``alloc_id`` gives new segment ids; ``now_ns`` stamps dropped segments;
    ``server_id`` names the server in ``ServiceNotReady``; ``state_code`` is the component state (only
    ``Healthy`` serves).
    """

    def __init__(self, catalog: Catalog, alloc_id: Callable[[], int], now_ns: Callable[[], int] = lambda: 0,
                 server_id: int = 1, state_code: str = StateCode.HEALTHY):
        self.server_id = server_id
        self._state_code = state_code
        self.meta = Meta(catalog, now_ns)
        self.segment_manager = SegmentManager(self.meta, alloc_id)
        self.handler = Handler(self.meta)
        self.channel_manager = ChannelManager()

    def get_state_code(self) -> str:
        """``GetStateCode``."""
        return self._state_code

    def update_state_code(self, code: str) -> None:
        """``UpdateStateCode``: e.g. ``Abnormal`` when the server stops."""
        self._state_code = code

    def _check_healthy(self) -> None:
        """``merr.CheckHealthy``: anything but Healthy is ``ServiceNotReady``."""
        if self._state_code != StateCode.HEALTHY:
            raise wrap_err_service_not_ready(DATACOORD_ROLE, self.server_id, self._state_code)

    def add_collection(self, collection_id: int, channels: Iterable[str],
                       start_positions: Iterable[tuple[str, int]] = (), created_at: int = 0,
                       partitions: Iterable[int] = ()) -> CollectionInfo:
        """Register a collection (Go: RootCoord's ``WatchChannels`` and the meta's ``AddCollection``).

        ``start_positions`` are ``(pchannel, msg_id)`` pairs, ``created_at`` its creation timestamp.
        Its vchannels become known to the channel manager, unwatched.
        """
        info = CollectionInfo(collection_id, tuple(channels), tuple(start_positions), created_at, tuple(partitions))
        self.meta.add_collection(info)
        for ch in info.vchannel_names:
            self.channel_manager.add_channel(ch, collection_id)
        return info

    def watch_channels(self, collection_id: int, channels: Iterable[str], start_positions: Iterable[tuple[str, int]],
                       create_ts: int, partitions: Iterable[int] = ()) -> list[MsgPosition]:
        """``WatchChannels`` (RootCoord, when a collection is created): register the collection's vchannels and
        *initialise each channel checkpoint* at the collection's start position (``CreateTimestamp``).

        That first checkpoint is what a DataNode seeks to before its first checkpoint update: without it
        the seek position falls back to the earliest segment position, which knows nothing of deletes still
        buffered in an unsynced L0 segment. Go only logs a failure to write it and goes on (so does this:
        the positions actually stored are returned).
        """
        self._check_healthy()
        info = self.add_collection(collection_id, channels, start_positions, create_ts, partitions)
        stored = []
        for channel in info.vchannel_names:
            pos = to_msg_position(channel, info.start_positions)
            if pos is None:
                continue
            pos = MsgPosition(pos.channel_name, pos.msg_id, create_ts)
            try:
                if self.meta.update_channel_checkpoint(channel, pos):
                    stored.append(pos)
            except Exception:  # noqa: BLE001 - Go: "failed to init channel checkpoint" is logged, not returned
                continue
        return stored

    def assign_segment_id(self, collection_id: int, partition_id: int, channel: str, count: int) -> int:
        """``AssignSegmentID`` for one request: the growing segment rows of (partition, channel) go to."""
        self._check_healthy()
        return self.segment_manager.assign_segment_id(collection_id, partition_id, channel, count)

    def save_binlog_paths(self, req: SaveBinlogPathsRequest, node_id: int | None = None) -> SegmentInfo | None:
        """``SaveBinlogPaths``: record a sync's binlogs, start positions and checkpoint, atomically.

        Checks in Go's order: healthy (``ServiceNotReady``); a named channel must be watched by the
        sender (``ChannelNotFound``; ``node_id`` defaults to ``req.source_id``); binlog paths are
        compressed to log ids; an L0 report creates its segment if new; otherwise the segment must exist
        (``SegmentNotFound``), a Dropped one makes the call a successful no-op (returns None), another
        unhealthy one is ``SegmentNotFound``; ``dropped`` sets Dropped, else ``flushed`` sets Flushing
        (either first stops the segment manager tracking it, even if the write below then fails).
        Returns the segment's record after the update.
        """
        self._check_healthy()
        node = req.source_id if node_id is None else node_id
        if req.channel and not self.channel_manager.match(node, req.channel):
            raise wrap_err_channel_not_found(req.channel, msg=f"for node {node}")
        deltalogs = compress_field_binlogs(req.deltalogs)
        binlogs = compress_field_binlogs(req.field2_binlog_paths)
        statslogs = compress_field_binlogs(req.field2_statslog_paths)

        operators = []
        if req.seg_level == SegmentLevel.L0:
            operators.append(create_l0_operator(req.collection_id, req.partition_id, req.segment_id, req.channel))
        else:
            segment = self.meta.get_segment(req.segment_id)
            if segment is None:
                raise wrap_err_segment_not_found(req.segment_id)
            if segment.state == SegmentState.DROPPED:
                return None
            if not is_segment_healthy(segment):
                raise wrap_err_segment_not_found(req.segment_id)
            if req.dropped:
                self.segment_manager.drop_segment(req.channel, req.segment_id)
                operators.append(update_status_operator(req.segment_id, SegmentState.DROPPED))
            elif req.flushed:
                self.segment_manager.drop_segment(req.channel, req.segment_id)
                operators.append(update_status_operator(req.segment_id, SegmentState.FLUSHING))
        operators += [
            add_binlogs_operator(req.segment_id, binlogs, statslogs, deltalogs),
            update_start_position(req.start_positions),
            update_check_point_operator(req.segment_id, req.check_points),
            update_as_dropped_if_empty_when_flushing(req.segment_id),
        ]
        self.meta.update_segments_info(*operators)
        return self.meta.get_segment(req.segment_id)

    def post_flush(self, segment_id: int) -> SegmentInfo:
        """``postFlush``: a segment reported flushed (Flushing) becomes Flushed.

        Go runs it from ``flushCh`` after a ``SaveBinlogPaths`` with ``Flushed`` set; the index and
        compaction notifications that follow are not modelled. An unknown or unhealthy segment is
        ``SegmentNotFound`` ("might be a faked segment").
        """
        if self.meta.get_healthy_segment(segment_id) is None:
            raise wrap_err_segment_not_found(segment_id, msg="segment not found, might be a faked segment, ignore post flush")
        self.meta.update_segments_info(update_status_operator(segment_id, SegmentState.FLUSHED))
        return self.meta.get_segment(segment_id)

    def handle_data_node_tt_msg(self, channel: str, ts: int, source_id: int) -> list[SegmentInfo]:
        """``handleDataNodeTtMsg``: a DataNode's time tick for ``channel``; returns the segments to flush.

        A report from a node that does not watch the channel is ignored. Otherwise the channel's
        flushable sealed segments (:meth:`SegmentManager.get_flushable_segments`) are stamped with
        DataCoord's clock and returned: the caller sends them to ``source_id`` as ``FlushSegments``
        (a failure there is fine, the next time tick after ``segmentFlushInterval`` asks again).
        """
        self._check_healthy()
        if not self.channel_manager.match(source_id, channel):
            return []
        now = self.meta.now_ns()
        ids = self.segment_manager.get_flushable_segments(channel, ts, now)
        infos = [info for info in (self.meta.get_healthy_segment(i) for i in ids) if info is not None]
        self.segment_manager.set_last_flush_time([i.id for i in infos], now)
        return infos

    def update_channel_checkpoint(self, node_id: int, vchannel: str | None = None, position: MsgPosition | None = None,
                                  positions: Iterable[MsgPosition | None] = ()) -> list[MsgPosition]:
        """``UpdateChannelCheckpoint``: returns the positions actually saved.

        Legacy form (``vchannel`` and ``position`` both given): the node must watch the channel
        (``ChannelNotFound``), then ``meta.update_channel_checkpoint``. Batch form (``positions``): the
        positions of channels the node does not watch are silently dropped, the rest go to
        ``meta.update_channel_checkpoints`` (which ignores non-advancing ones).
        """
        self._check_healthy()
        if vchannel and position is not None:
            if not self.channel_manager.match(node_id, vchannel):
                raise wrap_err_channel_not_found(vchannel, msg=f"from node {node_id}")
            return [position] if self.meta.update_channel_checkpoint(vchannel, position) else []
        mine = [p for p in positions if self.channel_manager.match(node_id, p.channel_name if p is not None else "")]
        return self.meta.update_channel_checkpoints(mine)

    def flush(self, collection_id: int, segment_ids: Iterable[int] = ()) -> Steps[FlushResult]:
        """``Flush``: take ``flushTs`` from the TSO, seal, then tell every DataNode to flush up to it.

        Effects: :class:`AllocTimestamp` (its failure propagates), then :class:`FlushChannels` per
        DataNode in ascending node order; if one fails the whole round is retried (already-told nodes
        again) after a :class:`Sleep`, up to 60 attempts (``retry.Do``), and the last error propagates.
        The seal happens before any DataNode is called, so it stands even when they all fail.
        """
        self._check_healthy()
        flush_ts = yield AllocTimestamp()
        return (yield from self._flush_collection(collection_id, flush_ts, tuple(segment_ids)))

    def _flush_collection(self, collection_id: int, flush_ts: int, to_flush: tuple[int, ...]) -> Steps[FlushResult]:
        """``flushCollection``: checkpoints first (so they are older than any sealed segment's end), seal, call."""
        coll = self.meta.get_collection(collection_id)
        if coll is None:
            raise wrap_err_collection_not_found(collection_id)
        channel_cps = {ch: self.meta.get_channel_checkpoint(ch) for ch in coll.vchannel_names}
        sealed: set[int] = set()
        for channel in coll.vchannel_names:
            sealed.update(self.segment_manager.seal_all_segments(channel, to_flush))
        flush_segment_ids = tuple(
            s.id for s in self.meta.get_segments_of_collection(collection_id)
            if is_flush_state(s.state) and s.level != SegmentLevel.L0 and s.id not in sealed
        )
        sleeps = retry_do_sleeps(FLUSH_CHANNELS_ATTEMPTS)
        for attempt in range(FLUSH_CHANNELS_ATTEMPTS):
            try:
                for node, channels in self.channel_manager.get_node_channels_by_collection_id(collection_id).items():
                    yield FlushChannels(node, flush_ts, tuple(channels))
                break
            except Exception:
                yield Sleep(next(sleeps))
                if attempt == FLUSH_CHANNELS_ATTEMPTS - 1:
                    raise
        return FlushResult(
            collection_id=collection_id,
            segment_ids=tuple(sorted(sealed)),
            time_of_seal=physical_time(flush_ts) // 1000,
            flush_segment_ids=flush_segment_ids,
            flush_ts=flush_ts,
            channel_cps=channel_cps,
        )

    def get_flush_state(self, segment_ids: Iterable[int] = (), collection_id: int = 0, flush_ts: int = 0) -> bool:
        """``GetFlushState``: whether everything up to ``flush_ts`` is in binlogs.

        1. every given segment must be absent, unhealthy (dropped, compacted away) or Flushing/Flushed;
        2. a collection without channels counts as flushed (compatibility with old clients);
        3. every channel's checkpoint must exist and have ``timestamp >= flush_ts``.
        """
        self._check_healthy()
        for sid in segment_ids:
            segment = self.meta.get_healthy_segment(sid)
            if segment is not None and not is_flush_state(segment.state):
                return False
        channels = self.channel_manager.get_channels_by_collection_id(collection_id)
        if not channels:
            return True
        for channel in channels:
            cp = self.meta.get_channel_checkpoint(channel)
            if cp is None or cp.timestamp < flush_ts:
                return False
        return True

    def get_segment_info(self, segment_ids: Iterable[int], include_unhealthy: bool = False) -> SegmentInfoResult:
        """``GetSegmentInfo``: the records (row counts corrected from binlogs) and their channels' checkpoints.

        A missing segment - or, without ``include_unhealthy``, a Dropped one - raises ``SegmentNotFound``.
        A channel without a checkpoint maps to None; a segment without a channel adds no entry.
        """
        self._check_healthy()
        infos, cps = [], {}
        for sid in segment_ids:
            info = self.meta.get_segment(sid) if include_unhealthy else self.meta.get_healthy_segment(sid)
            if info is None:
                raise wrap_err_segment_not_found(sid)
            count = calc_row_count_from_binlog(info)
            infos.append(info if count <= 0 or count == info.num_of_rows else _rows(info, count))
            if info.insert_channel and info.insert_channel not in cps:
                cps[info.insert_channel] = self.meta.get_channel_checkpoint(info.insert_channel)
        return SegmentInfoResult(tuple(infos), cps)

    def get_data_vchan_positions(self, channel: str, partition_id: int = ALL_PARTITION_ID) -> VchannelInfo:
        """``Handler.GetDataVChanPositions``: what a DataNode watching ``channel`` recovers from."""
        return self.handler.get_data_vchan_positions(channel, partition_id)

    def get_recovery_info(self, collection_id: int, partition_id: int = ALL_PARTITION_ID) -> RecoveryInfo:
        """``GetRecoveryInfo``: each vchannel's recovery view and the binlogs of its flushed segments.

        Flushed ids whose record is gone raise ``SegmentNotFound``; segments not Flushing, Flushed or
        Dropped, importing ones and those without insert binlogs are left out. Simplification: the
        channel view is ``GetDataVChanPositions``'s (Go uses QueryCoord's ``GetQueryVChanPositions``).
        """
        self._check_healthy()
        coll = self.meta.get_collection(collection_id)
        if coll is None:
            raise wrap_err_collection_not_found(collection_id)
        channels = tuple(self.handler.get_data_vchan_positions(ch, partition_id, collection_id)
                         for ch in coll.vchannel_names)
        binlogs = []
        for sid in sorted({i for info in channels for i in info.flushed_segment_ids}):
            segment = self.meta.get_segment(sid)
            if segment is None:
                raise wrap_err_segment_not_found(sid)
            if segment.state not in (SegmentState.FLUSHED, SegmentState.FLUSHING, SegmentState.DROPPED):
                continue
            if segment.is_importing or not segment.binlogs:
                continue
            count = calc_row_count_from_binlog(segment)
            rows = count if count > 0 and count != segment.num_of_rows else segment.num_of_rows
            binlogs.append(SegmentBinlogs(sid, rows, segment.insert_channel, segment.binlogs,
                                          segment.statslogs, segment.deltalogs))
        return RecoveryInfo(channels, tuple(binlogs))


def _rows(segment: SegmentInfo, rows: int) -> SegmentInfo:
    """``ReCalcRowCount``'s corrected copy."""
    return replace(segment, num_of_rows=rows)
