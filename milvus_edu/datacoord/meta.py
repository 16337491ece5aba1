"""DataCoord's meta: the segments of every collection and the checkpoint of every channel.

Models ``internal/datacoord/meta.go`` (Milvus 2.5): ``AddSegment``, ``DropSegment``, ``GetSegment``,
``GetHealthySegment``, ``SetState``, ``UpdateSegmentsInfo`` with its update operators
(``CreateL0Operator``, ``UpdateStatusOperator``, ``AddBinlogsOperator``, ``UpdateStartPosition``,
``UpdateCheckPointOperator``, ``UpdateAsDroppedIfEmptyWhenFlushing``), ``UpdateChannelCheckpoint(s)``,
``MarkChannelCheckpointDropped``, ``GetChannelCheckpoint(s)``, ``DropChannelCheckpoint`` and
``reloadFromKV``; plus ``mergeFieldBinlogs`` (``util.go``).

Two rules carry the lesson:

* an update is all or nothing: the operators work on copies, the catalog writes every changed record
  in one transaction, and memory changes only after that write succeeded - a failed write leaves
  DataCoord exactly as it was, so the DataNode's retry starts from the same state;
* positions never go backwards: a segment's DmlPosition ignores an older checkpoint, and a channel
  checkpoint is saved only when it is strictly newer than the stored one (equal or older is silently
  ignored, quirk 9) - so a late or replayed report can never make recovery seek back.

Simplification: collections are registered by the caller (``add_collection``); Go reloads them from
RootCoord, and DataCoord does not store them, so a restarted meta needs them registered again.
Simplification: no allocations, compaction, index, import, partition-stats or metrics bookkeeping.
Simplification: Go ranges over maps; here segments are visited by ascending id and channels by name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType

from ..merr import wrap_err_segment_not_found
from ..proto import (
    CheckPoint,
    FieldBinlog,
    MsgPosition,
    SegmentInfo,
    SegmentLevel,
    SegmentStartPosition,
    SegmentState,
)
from .catalog import Catalog, calc_row_count_from_binlog

#: ``math.MaxUint64``: the timestamp of a dropped channel's checkpoint.
MAX_UINT64 = (1 << 64) - 1


@dataclass(frozen=True)
class CollectionInfo:
    """``collectionInfo``: what DataCoord knows of a collection (from RootCoord).

    ``start_positions`` are ``(pchannel, msg_id)`` pairs (``commonpb.KeyDataPair``): where each of
    the collection's pchannels stood when it was created; ``created_at`` is its creation timestamp.
    """

    id: int
    vchannel_names: tuple[str, ...] = ()
    start_positions: tuple[tuple[str, int], ...] = ()
    created_at: int = 0
    partitions: tuple[int, ...] = ()


def is_segment_healthy(segment: SegmentInfo | None) -> bool:
    """``isSegmentHealthy``: present and neither NotExist nor Dropped."""
    return segment is not None and segment.state not in (SegmentState.NOT_EXIST, SegmentState.DROPPED)


def is_flush_state(state: str) -> bool:
    """``isFlushState``: Flushing or Flushed."""
    return state in (SegmentState.FLUSHING, SegmentState.FLUSHED)


def merge_field_binlogs(current: Iterable[FieldBinlog], new: Iterable[FieldBinlog]) -> tuple[FieldBinlog, ...]:
    """``mergeFieldBinlogs``: append each new field's binlogs to that field's list (or add the field)."""
    out = list(current)
    for fb in new:
        for i, cur in enumerate(out):
            if cur.field_id == fb.field_id:
                out[i] = FieldBinlog(cur.field_id, cur.binlogs + fb.binlogs)
                break
        else:
            out.append(fb)
    return tuple(out)


class UpdateSegmentPack:
    """``updateSegmentPack``: the working copies an ``UpdateSegmentsInfo`` call builds up.

    ``segments`` are the changed records (not yet in meta); ``increments`` the ids whose logs must
    be written with them (``BinlogsIncrement``).
    """

    def __init__(self, meta: "Meta"):
        self.meta = meta
        self.segments: dict[int, SegmentInfo] = {}
        self.increments: set[int] = set()

    def get(self, segment_id: int) -> SegmentInfo | None:
        """``updateSegmentPack.Get``: the working copy, first taken from meta (any state; None if absent)."""
        if segment_id in self.segments:
            return self.segments[segment_id]
        segment = self.meta.get_segment(segment_id)
        if segment is None:
            return None
        self.segments[segment_id] = segment
        return segment

    def put(self, segment: SegmentInfo) -> None:
        """Replace the working copy (records are immutable, so an operator stores its changed copy)."""
        self.segments[segment.id] = segment


UpdateOperator = Callable[[UpdateSegmentPack], bool]
"""``UpdateOperator``: changes working copies in the pack; returns whether it applied."""


def _to_state(meta: "Meta", segment: SegmentInfo, state: str) -> SegmentInfo:
    """``updateSegStateAndPrepareMetrics``: set the state; a drop records when (``DroppedAt``)."""
    if state == SegmentState.DROPPED:
        return replace(segment, state=state, dropped_at=meta.now_ns())
    return replace(segment, state=state)


def create_l0_operator(collection_id: int, partition_id: int, segment_id: int, channel: str) -> UpdateOperator:
    """``CreateL0Operator``: add a Flushed L0 segment unless meta already has this id."""

    def op(pack: UpdateSegmentPack) -> bool:
        if pack.meta.get_segment(segment_id) is None:
            pack.put(SegmentInfo(id=segment_id, collection_id=collection_id, partition_id=partition_id,
                                 insert_channel=channel, state=SegmentState.FLUSHED, level=SegmentLevel.L0))
        return True

    return op


def update_status_operator(segment_id: int, status: str) -> UpdateOperator:
    """``UpdateStatusOperator``: set the state (no-op when already there)."""

    def op(pack: UpdateSegmentPack) -> bool:
        segment = pack.get(segment_id)
        if segment is None or segment.state == status:
            return False
        pack.put(_to_state(pack.meta, segment, status))
        return True

    return op


def add_binlogs_operator(segment_id: int, binlogs: Iterable[FieldBinlog] = (), statslogs: Iterable[FieldBinlog] = (),
                         deltalogs: Iterable[FieldBinlog] = ()) -> UpdateOperator:
    """``AddBinlogsOperator``: append the new logs per field; their keys are written with the record."""

    def op(pack: UpdateSegmentPack) -> bool:
        segment = pack.get(segment_id)
        if segment is None:
            return False
        pack.put(replace(
            segment,
            binlogs=merge_field_binlogs(segment.binlogs, binlogs),
            statslogs=merge_field_binlogs(segment.statslogs, statslogs),
            deltalogs=merge_field_binlogs(segment.deltalogs, deltalogs),
        ))
        pack.increments.add(segment_id)
        return True

    return op


def update_start_position(start_positions: Iterable[SegmentStartPosition]) -> UpdateOperator:
    """``UpdateStartPosition``: record each segment's start position; an empty MsgID is ignored."""

    def op(pack: UpdateSegmentPack) -> bool:
        for sp in start_positions:
            if sp.start_position is None or sp.start_position.msg_id is None:
                continue
            segment = pack.get(sp.segment_id)
            if segment is None:
                continue
            pack.put(replace(segment, start_position=sp.start_position))
        return True

    return op


def update_check_point_operator(segment_id: int, checkpoints: Iterable[CheckPoint]) -> UpdateOperator:
    """``UpdateCheckPointOperator``: advance the DmlPosition, then take the row count from the binlogs.

    A checkpoint of another segment is skipped; one not newer than the stored DmlPosition is ignored
    (the position never goes back). ``NumOfRows`` becomes the binlogs' ``EntriesNum`` total when that
    is positive; the reported ``NumOfRows`` is only compared (Go logs a mismatch).
    """

    def op(pack: UpdateSegmentPack) -> bool:
        segment = pack.get(segment_id)
        if segment is None:
            return False
        for cp in checkpoints:
            if cp.segment_id != segment_id:
                continue
            if segment.dml_position is not None:
                if cp.position is None:
                    raise ValueError(f"checkpoint of segment {segment_id} has no position (Go dereferences nil here)")
                if segment.dml_position.timestamp >= cp.position.timestamp:
                    continue
            segment = replace(segment, dml_position=cp.position)
        count = calc_row_count_from_binlog(segment)
        if count > 0:
            segment = replace(segment, num_of_rows=count)
        pack.put(segment)
        return True

    return op


def update_as_dropped_if_empty_when_flushing(segment_id: int) -> UpdateOperator:
    """``UpdateAsDroppedIfEmptyWhenFlushing``: a Flushing segment with no rows goes straight to Dropped."""

    def op(pack: UpdateSegmentPack) -> bool:
        segment = pack.get(segment_id)
        if segment is None:
            return False
        if segment.num_of_rows == 0 and segment.state == SegmentState.FLUSHING:
            pack.put(_to_state(pack.meta, segment, SegmentState.DROPPED))
        return True

    return op


SegmentFilter = Callable[[SegmentInfo], bool]
"""``SegmentFilter``: a predicate on segment records."""


def with_channel(channel: str) -> SegmentFilter:
    """``WithChannel``."""
    return lambda s: s.insert_channel == channel


def with_collection(collection_id: int) -> SegmentFilter:
    """``WithCollection``."""
    return lambda s: s.collection_id == collection_id


class Meta:
    """``meta``: segments by id, channel checkpoints by vchannel, collections; persisted by a :class:`Catalog`.

    Creating a ``Meta`` loads every segment and checkpoint from the catalog (``reloadFromKV``), so a
    restarted DataCoord over the same KV sees the same meta. ``now_ns`` stamps ``DroppedAt``.
    """

    def __init__(self, catalog: Catalog, now_ns: Callable[[], int] = lambda: 0):
        self.catalog = catalog
        self.now_ns = now_ns
        self._segments: dict[int, SegmentInfo] = {}
        self._channel_cps: dict[str, MsgPosition] = {}
        self._collections: dict[int, CollectionInfo] = {}
        self.reload_from_kv()

    def reload_from_kv(self) -> None:
        """``reloadFromKV``: replace memory by the catalog's segments and channel checkpoints.

        As Go (issue 22181), a loaded checkpoint's channel name is set to its key's vchannel.
        """
        self._segments = {s.id: s for s in self.catalog.list_segments()}
        stored = self.catalog.list_channel_checkpoint()
        self._channel_cps = {ch: replace(pos, channel_name=ch) for ch, pos in stored.items()}

    # ---- collections -------------------------------------------------------------------------
    def add_collection(self, collection: CollectionInfo) -> None:
        """``AddCollection``: register (or replace) a collection's info."""
        self._collections[collection.id] = collection

    def get_collection(self, collection_id: int) -> CollectionInfo | None:
        """``GetCollection``: the info, or None."""
        return self._collections.get(collection_id)

    def get_collections(self) -> list[CollectionInfo]:
        """``GetCollections``: every registered collection, by id."""
        return [c for _, c in sorted(self._collections.items())]

    # ---- segments ----------------------------------------------------------------------------
    @property
    def segments(self) -> Mapping[int, SegmentInfo]:
        """Every segment record by id (read-only view)."""
        return MappingProxyType(self._segments)

    def add_segment(self, segment: SegmentInfo) -> None:
        """``AddSegment``: persist, then keep in memory."""
        self.catalog.add_segment(segment)
        self._segments[segment.id] = segment

    def drop_segment(self, segment_id: int) -> bool:
        """``DropSegment``: remove record and logs from the catalog, then from memory; False if absent."""
        segment = self._segments.get(segment_id)
        if segment is None:
            return False
        self.catalog.drop_segment(segment)
        del self._segments[segment_id]
        return True

    def get_segment(self, segment_id: int) -> SegmentInfo | None:
        """``GetSegment``: the record in any state, or None."""
        return self._segments.get(segment_id)

    def get_healthy_segment(self, segment_id: int) -> SegmentInfo | None:
        """``GetHealthySegment``: the record unless it is absent, NotExist or Dropped."""
        segment = self._segments.get(segment_id)
        return segment if is_segment_healthy(segment) else None

    def select_segments(self, *filters: SegmentFilter) -> list[SegmentInfo]:
        """``SelectSegments``: records passing every filter, by ascending id."""
        return [s for _, s in sorted(self._segments.items()) if all(f(s) for f in filters)]

    def get_segments_by_channel(self, channel: str) -> list[SegmentInfo]:
        """``GetSegmentsByChannel``: healthy segments of a vchannel."""
        return self.select_segments(is_segment_healthy, with_channel(channel))

    def get_real_segments_for_channel(self, channel: str) -> list[SegmentInfo]:
        """``GetRealSegmentsForChannel``: every segment of a vchannel, dropped ones included."""
        return self.select_segments(with_channel(channel))

    def get_segments_of_collection(self, collection_id: int) -> list[SegmentInfo]:
        """``GetSegmentsOfCollection``: healthy segments of a collection."""
        return self.select_segments(is_segment_healthy, with_collection(collection_id))

    def get_segments_id_of_collection(self, collection_id: int) -> list[int]:
        """``GetSegmentsIDOfCollection``."""
        return [s.id for s in self.get_segments_of_collection(collection_id)]

    def get_segments_id_of_partition(self, collection_id: int, partition_id: int) -> list[int]:
        """``GetSegmentsIDOfPartition``: healthy segments of one partition."""
        return [s.id for s in self.get_segments_of_collection(collection_id) if s.partition_id == partition_id]

    def get_unflushed_segments(self) -> list[SegmentInfo]:
        """``GetUnFlushedSegments``: Growing or Sealed segments."""
        return self.select_segments(lambda s: s.state in (SegmentState.GROWING, SegmentState.SEALED))

    def set_state(self, segment_id: int, target_state: str) -> SegmentInfo | None:
        """``SetState``: persist a healthy segment's new state; returns the new record (None if unchanged).

        Dropping an absent segment is a no-op (idempotent drop); another state on an absent segment
        raises ``SegmentNotFound``. A Dropped or NotExist segment is left as it is.
        """
        current = self._segments.get(segment_id)
        if current is None:
            if target_state == SegmentState.DROPPED:
                return None
            raise wrap_err_segment_not_found(segment_id, msg="segment is not exist")
        if not is_segment_healthy(current):
            return None
        updated = _to_state(self, current, target_state)
        self.catalog.alter_segments([updated])
        self._segments[segment_id] = updated
        return updated

    def update_segments_info(self, *operators: UpdateOperator) -> tuple[SegmentInfo, ...]:
        """``UpdateSegmentsInfo``: run the operators on copies, persist all changes at once, then apply.

        Returns the records written (by id), or ``()`` when no operator found its segment. If the
        catalog write fails its error propagates and memory is unchanged.
        """
        pack = UpdateSegmentPack(self)
        for operator in operators:
            operator(pack)
        if not pack.segments:
            return ()
        changed = [pack.segments[i] for i in sorted(pack.segments)]
        increments = [pack.segments[i] for i in sorted(pack.increments)]
        self.catalog.alter_segments(changed, increments)
        for segment in changed:
            self._segments[segment.id] = segment
        return tuple(changed)

    # ---- channel checkpoints -----------------------------------------------------------------
    def update_channel_checkpoint(self, vchannel: str, pos: MsgPosition | None) -> bool:
        """``UpdateChannelCheckpoint``: save ``pos`` if the channel has none or ``pos`` is strictly newer.

        Returns whether it was saved (Go returns nil either way: an equal or older position is
        silently ignored). A missing position or MsgID raises ``channelCP is nil``.
        """
        if pos is None or pos.msg_id is None:
            raise ValueError(f"channelCP is nil, vChannel={vchannel}")
        old = self._channel_cps.get(vchannel)
        if old is not None and old.timestamp >= pos.timestamp:
            return False
        self.catalog.save_channel_checkpoint(vchannel, pos)
        self._channel_cps[vchannel] = pos
        return True

    def update_channel_checkpoints(self, positions: Iterable[MsgPosition | None]) -> list[MsgPosition]:
        """``UpdateChannelCheckpoints``: save, in one transaction, every position that advances its channel.

        Positions that are None, lack a MsgID or a channel name are dropped (Go warns), as are those
        not strictly newer than the stored checkpoint. Each is compared with the *stored* checkpoint
        only: two positions of one channel in a batch both pass, and the later one in the list wins.
        Returns the positions saved.
        """
        to_update = []
        for pos in positions:
            if pos is None or pos.msg_id is None or pos.channel_name == "":
                continue
            old = self._channel_cps.get(pos.channel_name)
            if old is None or old.timestamp < pos.timestamp:
                to_update.append(pos)
        self.catalog.save_channel_checkpoints(to_update)
        for pos in to_update:
            self._channel_cps[pos.channel_name] = pos
        return to_update

    def mark_channel_checkpoint_dropped(self, vchannel: str) -> MsgPosition:
        """``MarkChannelCheckpointDropped``: checkpoint at MaxUint64 (no MsgID), so no update passes it."""
        cp = MsgPosition(vchannel, None, MAX_UINT64)
        self.catalog.save_channel_checkpoints([cp])
        self._channel_cps[vchannel] = cp
        return cp

    def get_channel_checkpoint(self, vchannel: str) -> MsgPosition | None:
        """``GetChannelCheckpoint``: the stored checkpoint, or None."""
        return self._channel_cps.get(vchannel)

    def get_channel_checkpoints(self) -> dict[str, MsgPosition]:
        """``GetChannelCheckpoints``: every checkpoint, by channel name."""
        return dict(sorted(self._channel_cps.items()))

    def drop_channel_checkpoint(self, vchannel: str) -> None:
        """``DropChannelCheckpoint``: remove it from the catalog, then from memory."""
        self.catalog.drop_channel_checkpoint(vchannel)
        self._channel_cps.pop(vchannel, None)
