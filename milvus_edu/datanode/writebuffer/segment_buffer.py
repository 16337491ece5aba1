"""What the write buffer holds for one segment: an insert buffer and a delete buffer.

Models ``internal/flushcommon/writebuffer/{insert_buffer.go, delta_buffer.go, segment_buffer.go}``
(Milvus 2.5): ``BufferBase`` (rows, size, limits, timestamp range, start/end positions and
``UpdateStatistics``), ``InsertBuffer``, ``DeltaBuffer``, ``segmentBuffer`` and ``TimeRange``.

The start position of a buffer is what holds the channel checkpoint back: it is the position of the
first pack whose rows are in the buffer (the smallest position timestamp seen), so a restart that seeks
there replays every row that is not yet in a binlog.

Simplification: an insert batch is ``syncmgr.pack.InsertData`` (primary keys, timestamps and an opaque
payload size), so a batch's memory size is estimated: 8 bytes each for RowID and Timestamp, the primary
key (8 bytes for an int, its UTF-8 length for a string) and the payload (see :func:`insert_data_memory_size`).
Simplification: no BM25 statistics buffer (``stats_buffer.go``) and no schema (so no "Invalid schema"
error from ``NewInsertBuffer``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ...config import DataNodeParams
from ...proto import MsgPosition
from ...tsoutil import MAX_TIMESTAMP
from ..syncmgr.pack import DeleteData, InsertData

#: ``noLimit``: a row or size limit that never makes a buffer full.
NO_LIMIT = -1

_NUMBER_BYTES = 8
#: ``storage.Int64PrimaryKey`` as ``DeleteData.Size`` counts it (the key struct, not just the int).
_INT64_PK_DELETE_BYTES = 16


@dataclass(frozen=True)
class TimeRange:
    """``TimeRange``: the smallest and largest row timestamp; the empty range is ``(MaxUint64, 0)``."""

    timestamp_min: int = MAX_TIMESTAMP
    timestamp_max: int = 0

    def merge(self, other: "TimeRange") -> "TimeRange":
        """``TimeRange.Merge``: the range covering both (returns a new range; Go mutates in place)."""
        return TimeRange(min(self.timestamp_min, other.timestamp_min), max(self.timestamp_max, other.timestamp_max))


def timestamp_range(timestamps: Iterable[int]) -> TimeRange:
    """``getTimestampRange``: the range of the given row timestamps (empty input: the empty range)."""
    tss = list(timestamps)
    if not tss:
        return TimeRange()
    return TimeRange(min(tss), max(tss))


def _pk_bytes(pk) -> int:
    return len(pk.encode("utf-8")) if isinstance(pk, str) else _NUMBER_BYTES


def insert_data_memory_size(chunk: InsertData) -> int:
    """``storage.InsertData.GetMemorySize`` of one batch: RowID and Timestamp, primary key, payload."""
    return 2 * _NUMBER_BYTES * chunk.num_rows + sum(_pk_bytes(pk) for pk in chunk.pks) + chunk.payload_bytes


def delete_row_size(pk) -> int:
    """``DeleteData.Append``'s size increase for one row: the key (16 bytes for an int64 key, its length
    plus 8 for a string key) and 8 bytes of timestamp, as ``delta_buffer_test.go`` pins."""
    key = _INT64_PK_DELETE_BYTES if not isinstance(pk, str) else len(pk.encode("utf-8")) + _NUMBER_BYTES
    return key + _NUMBER_BYTES


class BufferBase:
    """``BufferBase``: what insert and delete buffers share.

    ``start_pos`` is the position with the smallest timestamp among the packs buffered, ``end_pos`` the
    one with the largest; ``timestamp_from``/``timestamp_to`` bound the rows' own timestamps.
    """

    def __init__(self, size_limit: int, row_limit: int = NO_LIMIT):
        self.rows = 0
        self.row_limit = row_limit
        self.size = 0
        self.size_limit = size_limit
        self.timestamp_from = MAX_TIMESTAMP
        self.timestamp_to = 0
        self.start_pos: MsgPosition | None = None
        self.end_pos: MsgPosition | None = None

    def update_statistics(
        self, entry_num: int, size: int, tr: TimeRange, start_pos: MsgPosition, end_pos: MsgPosition
    ) -> None:
        """``UpdateStatistics``: count the rows and bytes, widen the ts range, keep the extreme positions."""
        self.rows += entry_num
        self.size += size
        self.timestamp_from = min(self.timestamp_from, tr.timestamp_min)
        self.timestamp_to = max(self.timestamp_to, tr.timestamp_max)
        if self.start_pos is None or start_pos.timestamp < self.start_pos.timestamp:
            self.start_pos = start_pos
        if self.end_pos is None or end_pos.timestamp > self.end_pos.timestamp:
            self.end_pos = end_pos

    def is_full(self) -> bool:
        """``IsFull``: the row limit or the size limit is reached (``NO_LIMIT`` never is)."""
        return (self.row_limit != NO_LIMIT and self.rows >= self.row_limit) or (
            self.size_limit != NO_LIMIT and self.size >= self.size_limit
        )

    def is_empty(self) -> bool:
        """``IsEmpty``: no rows and no bytes."""
        return self.rows == 0 and self.size == 0

    def min_timestamp(self) -> int:
        """``MinTimestamp``: the start position's timestamp, or MaxUint64 when nothing was buffered."""
        return MAX_TIMESTAMP if self.start_pos is None else self.start_pos.timestamp

    def get_time_range(self) -> TimeRange:
        """``GetTimeRange``: the rows' timestamp range."""
        return TimeRange(self.timestamp_from, self.timestamp_to)


class InsertBuffer(BufferBase):
    """``InsertBuffer``: the insert batches of one segment, in arrival order; full at ``insertBufSize`` bytes."""

    def __init__(self, size_limit: int = DataNodeParams().insert_buf_size):
        super().__init__(size_limit)
        self._chunks: list[InsertData] = []

    def buffer(self, chunks: Sequence[InsertData], start_pos: MsgPosition, end_pos: MsgPosition) -> int:
        """``InsertBuffer.Buffer``: append each batch (one per insert message); returns the bytes added.

        Go passes the segment's ``writebuffer.InsertData`` and reads its batches; the batches are passed
        here directly.
        """
        buffered = 0
        for chunk in chunks:
            size = insert_data_memory_size(chunk)
            self._chunks.append(chunk)
            self.update_statistics(chunk.num_rows, size, timestamp_range(chunk.timestamps), start_pos, end_pos)
            buffered += size
        return buffered

    def yield_(self) -> tuple[InsertData, ...]:
        """``InsertBuffer.Yield``: the buffered batches (empty tuple for Go's nil), and forget them."""
        chunks, self._chunks = tuple(self._chunks), []
        return chunks


class DeltaBuffer(BufferBase):
    """``DeltaBuffer``: deleted primary keys of one segment with their timestamps; full at ``deleteBufBytes``."""

    def __init__(self, size_limit: int = DataNodeParams().delete_buf_bytes):
        super().__init__(size_limit)
        self._pks: list = []
        self._tss: list[int] = []

    def buffer(self, pks: Sequence, tss: Sequence[int], start_pos: MsgPosition, end_pos: MsgPosition) -> int:
        """``DeltaBuffer.Buffer``: append the rows; returns the bytes added."""
        if len(pks) != len(tss):
            raise ValueError(f"{len(pks)} primary keys but {len(tss)} timestamps; give every deleted key one timestamp")
        size = sum(delete_row_size(pk) for pk in pks)
        self._pks.extend(pks)
        self._tss.extend(tss)
        self.update_statistics(len(pks), size, timestamp_range(tss), start_pos, end_pos)
        return size

    def yield_(self) -> DeleteData | None:
        """``DeltaBuffer.Yield``: the buffered deletes, or ``None`` when the buffer is empty."""
        if self.is_empty():
            return None
        return DeleteData(tuple(self._pks), tuple(self._tss))


class SegmentBuffer:
    """``segmentBuffer``: the insert and delete buffers of one segment."""

    def __init__(self, segment_id: int, params: DataNodeParams = DataNodeParams()):
        self.segment_id = segment_id
        self.insert_buffer = InsertBuffer(params.insert_buf_size)
        self.delta_buffer = DeltaBuffer(params.delete_buf_bytes)

    def is_full(self) -> bool:
        """``IsFull``: either buffer is full."""
        return self.insert_buffer.is_full() or self.delta_buffer.is_full()

    def yield_(self) -> tuple[tuple[InsertData, ...], DeleteData | None]:
        """``Yield``: (insert batches, deletes or ``None``); Go also yields BM25 stats, not modelled."""
        return self.insert_buffer.yield_(), self.delta_buffer.yield_()

    def min_timestamp(self) -> int:
        """``MinTimestamp``: the smaller of the two buffers' start timestamps (MaxUint64 when both are empty)."""
        return min(self.insert_buffer.min_timestamp(), self.delta_buffer.min_timestamp())

    def earliest_position(self) -> MsgPosition | None:
        """``EarliestPosition``: the earlier of the two start positions (insert wins a tie), ``None`` if neither."""
        return get_earliest_checkpoint(self.insert_buffer.start_pos, self.delta_buffer.start_pos)

    def get_time_range(self) -> TimeRange:
        """``GetTimeRange``: the rows' timestamp range over both buffers."""
        return TimeRange().merge(self.insert_buffer.get_time_range()).merge(self.delta_buffer.get_time_range())

    def memory_size(self) -> int:
        """``MemorySize``: bytes in the insert buffer plus bytes in the delete buffer."""
        return self.insert_buffer.size + self.delta_buffer.size

    def __repr__(self) -> str:
        return (
            f"SegmentBuffer(segment_id={self.segment_id}, insert_rows={self.insert_buffer.rows}, "
            f"delete_rows={self.delta_buffer.rows}, min_ts={self.min_timestamp()})"
        )


def get_earliest_checkpoint(*positions: MsgPosition | None) -> MsgPosition | None:
    """``getEarliestCheckpoint``: the position with the smallest timestamp, skipping ``None`` (first wins a tie)."""
    result = None
    for pos in positions:
        if pos is None:
            continue
        if result is None or pos.timestamp < result.timestamp:
            result = pos
    return result
