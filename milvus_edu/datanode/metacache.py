"""The DataNode's per-vchannel cache of segment metadata.

Models ``internal/flushcommon/metacache/{segment.go, meta_cache.go, actions.go}`` (Milvus 2.5):
``SegmentInfo`` (state, start position, checkpoint, flushed/buffered/syncing rows, syncing tasks),
``MetaCache`` (``AddSegment``, ``UpdateSegments``, ``RemoveSegments``, ``GetSegmentsBy``,
``GetSegmentByID``, ``GetSegmentIDsBy``, ``PredictSegments``, ``DetectMissingSegments``), the segment
filters (``WithSegmentIDs``, ``WithSegmentState``, ``WithPartitionID``, ``WithLevel``,
``WithStartPosNotRecorded``, ``WithNoSyncingTask``) and actions (``UpdateState``,
``UpdateCheckpoint``, ``UpdateNumOfRows``, ``SetStartPositionIfNil``, ``UpdateBufferedRows``,
``StartSyncing``, ``FinishSyncing``, ``SetStartPosRecorded``, ``RollStats``).

As in Go, an update replaces the segment with an updated clone, so a ``SegmentInfo`` a caller holds
never changes under it.

Simplification: the primary-key bloom filter set (``pkoracle.PkStat``) is an exact set of primary keys,
so ``PredictSegments`` has no false positives. No BM25 stats, no schema, no ``UpdateSegmentView``.
Simplification: Go ranges over maps (random order); here segments are visited by ascending id, so runs
are deterministic.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from ..proto import ALL_PARTITIONS_ID, MsgPosition, SegmentInfo as SegmentInfoPB, SegmentLevel, SegmentState


@dataclass(frozen=True)
class SegmentInfo:
    """``metacache.SegmentInfo``: what one DataNode knows of one segment of its vchannel.

    ``num_of_rows`` is flushed + syncing + buffered rows (``NumOfRows``); ``flushed_rows`` are the rows
    already in binlogs (``FlushedRows``, which ``SaveBinlogPaths`` reports).
    """

    segment_id: int
    partition_id: int
    state: str
    level: str = SegmentLevel.L1
    start_position: MsgPosition | None = None
    checkpoint: MsgPosition | None = None
    start_pos_recorded: bool = False
    flushed_rows: int = 0
    buffer_rows: int = 0
    syncing_rows: int = 0
    syncing_tasks: int = 0
    pk_stats: frozenset = field(default_factory=frozenset)

    @property
    def num_of_rows(self) -> int:
        """``NumOfRows``: flushed, syncing and buffered rows together."""
        return self.flushed_rows + self.syncing_rows + self.buffer_rows

    @classmethod
    def from_pb(cls, info: SegmentInfoPB, pks: Iterable = ()) -> "SegmentInfo":
        """``NewSegmentInfo``: from DataCoord's record; the start position counts as recorded."""
        return cls(
            segment_id=info.id,
            partition_id=info.partition_id,
            state=info.state,
            level=info.level,
            start_position=info.start_position,
            checkpoint=info.dml_position,
            start_pos_recorded=True,
            flushed_rows=info.num_of_rows,
            pk_stats=frozenset(pks),
        )


SegmentAction = Callable[[SegmentInfo], SegmentInfo]
"""``SegmentAction``: a function from a segment to its updated copy."""

SegmentFilter = Callable[[SegmentInfo], bool]
"""``SegmentFilter``: a predicate on segments (all given filters must hold)."""


def with_segment_ids(*segment_ids: int) -> SegmentFilter:
    """``WithSegmentIDs``."""
    wanted = frozenset(segment_ids)
    return lambda info: info.segment_id in wanted


def with_segment_state(*states: str) -> SegmentFilter:
    """``WithSegmentState``."""
    wanted = frozenset(states)
    return lambda info: info.state in wanted


def with_partition_id(partition_id: int) -> SegmentFilter:
    """``WithPartitionID``: ``ALL_PARTITIONS_ID`` matches every partition."""
    return lambda info: partition_id == ALL_PARTITIONS_ID or info.partition_id == partition_id


def with_partition_ids(partition_ids: Iterable[int]) -> SegmentFilter:
    """``WithPartitionIDs``."""
    wanted = frozenset(partition_ids)
    return lambda info: info.partition_id in wanted


def with_level(level: str) -> SegmentFilter:
    """``WithLevel``."""
    return lambda info: info.level == level


def with_start_pos_not_recorded() -> SegmentFilter:
    """``WithStartPosNotRecorded``: segments whose start position DataCoord has not stored yet."""
    return lambda info: not info.start_pos_recorded


def with_no_syncing_task() -> SegmentFilter:
    """``WithNoSyncingTask``."""
    return lambda info: info.syncing_tasks == 0


def segment_actions(*actions: SegmentAction) -> SegmentAction:
    """``SegmentActions`` / ``MergeSegmentAction``: apply each action in turn."""

    def apply(info: SegmentInfo) -> SegmentInfo:
        for action in actions:
            info = action(info)
        return info

    return apply


def update_state(state: str) -> SegmentAction:
    """``UpdateState``."""
    return lambda info: replace(info, state=state)


def update_checkpoint(checkpoint: MsgPosition | None) -> SegmentAction:
    """``UpdateCheckpoint``."""
    return lambda info: replace(info, checkpoint=checkpoint)


def update_num_of_rows(num_of_rows: int) -> SegmentAction:
    """``UpdateNumOfRows``: sets the flushed rows."""
    return lambda info: replace(info, flushed_rows=num_of_rows)


def set_start_position_if_nil(start_pos: MsgPosition | None) -> SegmentAction:
    """``SetStartPositionIfNil``: the first position a segment was buffered at stays its start."""
    return lambda info: info if info.start_position is not None else replace(info, start_position=start_pos)


def update_buffered_rows(buffered_rows: int) -> SegmentAction:
    """``UpdateBufferedRows``."""
    return lambda info: replace(info, buffer_rows=buffered_rows)


def start_syncing(batch_rows: int) -> SegmentAction:
    """``StartSyncing``: buffered rows become syncing rows; one more sync task in flight."""
    return lambda info: replace(
        info,
        syncing_rows=info.syncing_rows + batch_rows,
        buffer_rows=info.buffer_rows - batch_rows,
        syncing_tasks=info.syncing_tasks + 1,
    )


def finish_syncing(batch_rows: int) -> SegmentAction:
    """``FinishSyncing``: syncing rows become flushed rows; one sync task fewer."""
    return lambda info: replace(
        info,
        flushed_rows=info.flushed_rows + batch_rows,
        syncing_rows=info.syncing_rows - batch_rows,
        syncing_tasks=info.syncing_tasks - 1,
    )


def set_start_pos_recorded(flag: bool) -> SegmentAction:
    """``SetStartPosRecorded``."""
    return lambda info: replace(info, start_pos_recorded=flag)


def roll_stats(pks: Iterable) -> SegmentAction:
    """``RollStats``: add the primary keys of a synced batch to the segment's pk statistics."""
    new = frozenset(pks)
    return lambda info: replace(info, pk_stats=info.pk_stats | new)


class MetaCache:
    """``metaCacheImpl``: the segments of one vchannel, by id.

    ``flushed`` and ``unflushed`` are DataCoord's segments at watch time (``NewMetaCache`` / ``init``):
    flushed ones keep their state, unflushed ones are forced to Growing.
    """

    def __init__(
        self,
        collection_id: int,
        vchannel: str,
        flushed: Iterable[SegmentInfoPB] = (),
        unflushed: Iterable[SegmentInfoPB] = (),
        pk_stats: Callable[[SegmentInfoPB], Iterable] = lambda info: (),
    ):
        self.collection_id = collection_id
        self.vchannel = vchannel
        self._segments: dict[int, SegmentInfo] = {}
        for seg in flushed:
            self._add(SegmentInfo.from_pb(seg, pk_stats(seg)))
        for seg in unflushed:
            seg = replace(seg, state=SegmentState.GROWING)
            self._add(SegmentInfo.from_pb(seg, pk_stats(seg)))

    def _add(self, segment: SegmentInfo) -> None:
        self._segments[segment.segment_id] = segment

    def _matching(self, filters: tuple[SegmentFilter, ...]) -> list[SegmentInfo]:
        return [s for _, s in sorted(self._segments.items()) if all(f(s) for f in filters)]

    def add_segment(self, info: SegmentInfoPB, *actions: SegmentAction, pks: Iterable = ()) -> SegmentInfo:
        """``AddSegment``: a segment from its DataCoord record, then ``actions`` applied; returns it."""
        segment = segment_actions(*actions)(SegmentInfo.from_pb(info, pks))
        self._add(segment)
        return segment

    def update_segments(self, action: SegmentAction, *filters: SegmentFilter) -> list[int]:
        """``UpdateSegments``: replace every matching segment by ``action(segment)``; returns their ids."""
        ids = []
        for segment in self._matching(filters):
            self._segments[segment.segment_id] = action(segment)
            ids.append(segment.segment_id)
        return ids

    def remove_segments(self, *filters: SegmentFilter) -> list[int]:
        """``RemoveSegments``: drop the matching segments; with no filter nothing is removed (Go warns)."""
        if not filters:
            return []
        ids = [s.segment_id for s in self._matching(filters)]
        for segment_id in ids:
            del self._segments[segment_id]
        return ids

    def get_segments_by(self, *filters: SegmentFilter) -> list[SegmentInfo]:
        """``GetSegmentsBy``: matching segments by ascending id."""
        return self._matching(filters)

    def get_segment_by_id(self, segment_id: int, *filters: SegmentFilter) -> SegmentInfo | None:
        """``GetSegmentByID``: the segment, or ``None`` when unknown or a filter rejects it."""
        segment = self._segments.get(segment_id)
        if segment is None or not all(f(segment) for f in filters):
            return None
        return segment

    def get_segment_ids_by(self, *filters: SegmentFilter) -> list[int]:
        """``GetSegmentIDsBy``."""
        return [s.segment_id for s in self._matching(filters)]

    def predict_segments(self, pk, *filters: SegmentFilter) -> tuple[list[int], bool]:
        """``PredictSegments``: segments whose pk statistics hold ``pk`` (exact here, no false positives)."""
        hits = [s.segment_id for s in self._matching(filters) if pk in s.pk_stats]
        return hits, bool(hits)

    def detect_missing_segments(self, segment_ids: Iterable[int]) -> list[int]:
        """``DetectMissingSegments``: the given ids this cache does not know, ascending."""
        return sorted(i for i in set(segment_ids) if i not in self._segments)

    def __len__(self) -> int:
        return len(self._segments)
