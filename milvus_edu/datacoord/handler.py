"""Where a (re)started DataNode resumes a vchannel: DataCoord's recovery answer (reference §4.8 step 1).

Models ``internal/datacoord/handler.go`` (Milvus 2.5): ``GetDataVChanPositions``,
``GetChannelSeekPosition``, ``getEarliestSegmentDMLPos``, ``getCollectionStartPos`` and
``toMsgPosition``. The seek position is, in order of preference:

1. the channel checkpoint - everything before it is in binlogs;
2. else the earliest position of a non-dropped segment of the channel (its DmlPosition, or its
   StartPosition when it never synced), by timestamp - a compatibility path for old versions;
3. else where the collection's pchannel stood when the collection was created, stamped with the
   collection's creation timestamp;
4. else none.

Simplification: a channel's start positions are its collection's (Go's ``RWChannel`` may carry its
own copy from the watch request, with the same content).
Simplification: no ``GetQueryVChanPositions`` (QueryCoord's view with L0, indexed and compaction
lineage); :meth:`Handler.get_data_vchan_positions` is the DataNode's view.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..mq.names import to_physical_channel
from ..proto import MsgPosition, SegmentState
from .meta import Meta, with_channel

#: ``allPartitionID``: a partition id not above it means "every partition".
ALL_PARTITION_ID = 0


@dataclass(frozen=True)
class VchannelInfo:
    """``datapb.VchannelInfo``: a vchannel's seek position and its segments split by state.

    ``flushed_segment_ids`` holds Flushing and Flushed segments; ``unflushed_segment_ids`` Growing and
    Sealed ones. ``collection_id`` is None when the channel belongs to no registered collection.
    """

    collection_id: int | None
    channel_name: str
    seek_position: MsgPosition | None
    flushed_segment_ids: tuple[int, ...] = ()
    unflushed_segment_ids: tuple[int, ...] = ()
    dropped_segment_ids: tuple[int, ...] = ()


def to_msg_position(channel: str, start_positions: Iterable[tuple[str, int]]) -> MsgPosition | None:
    """``toMsgPosition``: the start position recorded for the channel's pchannel (timestamp 0), or None."""
    pchannel = to_physical_channel(channel)
    for key, msg_id in start_positions:
        if key == pchannel:
            return MsgPosition(channel, msg_id, 0)
    return None


class Handler:
    """``ServerHandler``: the recovery queries over :class:`~.meta.Meta`."""

    def __init__(self, meta: Meta):
        self.meta = meta

    def collection_of_channel(self, channel: str) -> int | None:
        """The registered collection that owns the vchannel (Go's ``RWChannel.GetCollectionID``), or None."""
        for collection in self.meta.get_collections():
            if channel in collection.vchannel_names:
                return collection.id
        return None

    def get_data_vchan_positions(self, channel: str, partition_id: int = ALL_PARTITION_ID,
                                 collection_id: int | None = None) -> VchannelInfo:
        """``GetDataVChanPositions``: seek position and flushed / unflushed / dropped segment ids, ascending.

        Segments with neither a start nor a DmlPosition are skipped (no data consumed yet), as are
        importing ones and, when ``partition_id`` is above ``ALL_PARTITION_ID``, other partitions'.
        ``collection_id`` defaults to the registered collection owning the channel.
        """
        if collection_id is None:
            collection_id = self.collection_of_channel(channel)
        flushed, unflushed, dropped = [], [], []
        for s in self.meta.get_real_segments_for_channel(channel):
            if (partition_id > ALL_PARTITION_ID and s.partition_id != partition_id) or (
                    s.start_position is None and s.dml_position is None):
                continue
            if s.is_importing:
                continue
            if s.state == SegmentState.DROPPED:
                dropped.append(s.id)
            elif s.state in (SegmentState.FLUSHING, SegmentState.FLUSHED):
                flushed.append(s.id)
            else:
                unflushed.append(s.id)
        return VchannelInfo(
            collection_id=collection_id,
            channel_name=channel,
            seek_position=self.get_channel_seek_position(channel, (partition_id,), collection_id),
            flushed_segment_ids=tuple(flushed),
            unflushed_segment_ids=tuple(unflushed),
            dropped_segment_ids=tuple(dropped),
        )

    def get_channel_seek_position(self, channel: str, partition_ids: Iterable[int] = (),
                                  collection_id: int | None = None) -> MsgPosition | None:
        """``GetChannelSeekPosition``: channel checkpoint, else earliest segment position, else collection start."""
        seek = self.meta.get_channel_checkpoint(channel)
        if seek is not None:
            return seek
        seek = self.get_earliest_segment_dml_pos(channel, partition_ids)
        if seek is not None:
            return seek
        if collection_id is None:
            collection_id = self.collection_of_channel(channel)
        return self.get_collection_start_pos(channel, collection_id)

    def get_earliest_segment_dml_pos(self, channel: str, partition_ids: Iterable[int] = ()) -> MsgPosition | None:
        """``getEarliestSegmentDMLPos``: the smallest-timestamp position among the channel's live segments.

        Each non-dropped, non-importing segment contributes its DmlPosition, or its StartPosition if it
        has none; flushed segments count too. Ties keep the lower segment id.
        """
        partitions = {p for p in partition_ids if p > ALL_PARTITION_ID}
        best: MsgPosition | None = None
        for s in self.meta.select_segments(with_channel(channel)):
            if partitions and s.partition_id not in partitions:
                continue
            if s.start_position is None and s.dml_position is None:
                continue
            if s.is_importing or s.state == SegmentState.DROPPED:
                continue
            pos = s.dml_position if s.dml_position is not None else s.start_position
            if best is None or pos.timestamp < best.timestamp:
                best = pos
        return best

    def get_collection_start_pos(self, channel: str, collection_id: int | None) -> MsgPosition | None:
        """``getCollectionStartPos``: the collection's start position on the channel's pchannel, at ``CreatedAt``."""
        collection = None if collection_id is None else self.meta.get_collection(collection_id)
        if collection is None:
            return None
        pos = to_msg_position(channel, collection.start_positions)
        if pos is None:
            return None
        return MsgPosition(pos.channel_name, pos.msg_id, collection.created_at)
