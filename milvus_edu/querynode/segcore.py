"""Segcore's MVCC: which rows of a segment a read at timestamp ``T`` sees.

Models ``internal/core/src/segcore/InsertRecord.h`` (``search_pk``), ``DeletedRecord.h`` (``InternalPush``,
``Query``), ``SegmentGrowingImpl.cpp`` (``get_active_count``, ``mask_with_delete``), ``SegmentSealedImpl.cpp``
(``mask_with_timestamps``) and ``exec/operator/MvccNode.cpp`` (the visibility filter a search or query applies);
a query's rows come out of a segment through ``find_first`` (``InsertRecord.h``: ``OffsetOrderedMap`` for a growing
segment, ``OffsetOrderedArray`` for a sealed one) and are merged across segments by
``internal/querynodev2/segments/result.go`` ``MergeSegcoreRetrieveResults``
(:func:`merge_segcore_retrieve_results`).

The rules, as the reference's §5.4 states them: a row is visible at ``T`` iff it was inserted at ``ts <= T`` and
no recorded delete of it has ``dts <= T``. A delete of primary key ``pk`` at ``dts`` is recorded against every row
of ``pk`` present when it arrives with ``insert_ts <= dts`` — except a row with ``insert_ts == dts``, which a delete
never hides — and a row takes only the first delete recorded against it.

Milvus does not deduplicate primary keys on insert: a key inserted twice is two rows, both visible, and
``count(*)`` counts both. A query still returns one row per key: a growing segment's ``find_first`` takes, per key
in key order, its newest visible row that passes the filter; a sealed segment's returns every visible row in key
order; the merge keeps, per key, the row with the largest timestamp.

Simplification: rows are ``(pk, ts)`` pairs with an optional payload and dynamic field (no vectors, typed scalar
fields or indexes); no snapshot
bitmaps (``DELETE_DUMP_BATCH_SIZE``) — the sorted delete list is scanned; no TTL masking.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

#: ``typeutil.Unlimited`` / segcore's ``Unlimited``: a retrieve without a limit.
UNLIMITED = -1
#: segcore's ``NoLimit``: ``find_first`` treats it as :data:`UNLIMITED`.
NO_LIMIT = 0

#: A read's filter: ``pred(pk, fields)`` (the row's key and dynamic field), or None for every row.
RowFilter = Callable[[object, Mapping | None], bool] | None


def _passes(pred: RowFilter, row: "Row") -> bool:
    return pred is None or pred(row.pk, row.fields)


@dataclass(frozen=True)
class Row:
    """One row: its primary key, its insert timestamp, what else it carries (the "vector", here any value) and its
    dynamic field ``fields`` (``$meta``: the keys a row was inserted with besides ``id`` and ``vector``; None when
    it had none). A filter sees ``pk`` and ``fields``; rows compare by ``pk``, ``ts`` and ``payload``."""

    pk: int
    ts: int
    payload: object = None
    fields: Mapping | None = field(default=None, compare=False)


class InsertRecord:
    """``InsertRecord``: rows by offset, and an index from primary key to offsets."""

    def __init__(self) -> None:
        self.rows: list[Row] = []
        self._by_pk: dict[int, list[int]] = {}

    def append(self, row: Row) -> int:
        """Add ``row`` at the next offset; returns the offset."""
        offset = len(self.rows)
        self.rows.append(row)
        self._by_pk.setdefault(row.pk, []).append(offset)
        return offset

    def search_pk(self, pk: int, ts: int) -> list[int]:
        """``search_pk``: every offset of ``pk`` whose row was inserted at or before ``ts``."""
        return [o for o in self._by_pk.get(pk, ()) if self.rows[o].ts <= ts]

    def offsets_by_pk(self) -> list[tuple[object, list[int]]]:
        """``pk2offset_`` walked in key order: each key with its offsets, oldest first (``std::map`` order)."""
        return sorted(self._by_pk.items(), key=lambda kv: kv[0])

    def distinct_pks(self) -> int:
        """``map_.size()``: how many different keys the record holds, visible or not."""
        return len(self._by_pk)

    def __len__(self) -> int:
        return len(self.rows)


@dataclass
class DeletedRecord:
    """``DeletedRecord``: the deletes recorded against rows of one segment, sorted by delete timestamp.

    ``delete_ignores_timestamps`` (bug switch): a delete hides every row of its primary key present, whatever
    their timestamps, and from every read — a read at a timestamp before the delete, or a row inserted with the
    delete's own timestamp or later (the design documents' insert A -> delete A -> insert A, book/seeds.md), loses rows it must see.
    """

    record: InsertRecord
    delete_ignores_timestamps: bool = False
    _entries: list[tuple[int, int]] = field(default_factory=list)  # (dts, offset), sorted
    _masked: set[int] = field(default_factory=set)

    def push(self, pks, tss) -> int:
        """``Delete`` then ``InternalPush``: sort the batch by timestamp (``SegmentGrowingImpl::Delete`` /
        ``SegmentSealedImpl::Delete`` do), then record each ``(pk, dts)``; returns how many rows it newly hid."""
        hidden = 0
        for dts, _i, pk in sorted((dts, i, pk) for i, (pk, dts) in enumerate(zip(pks, tss))):
            if self.delete_ignores_timestamps:
                offsets = self.record.search_pk(pk, 2**64)
                dts = 0
            else:
                offsets = self.record.search_pk(pk, dts)
            for o in offsets:
                if o in self._masked:
                    continue  # a row takes the first delete recorded against it
                if not self.delete_ignores_timestamps and self.record.rows[o].ts == dts:
                    continue  # a delete never hides a row inserted with its own timestamp
                bisect.insort(self._entries, (dts, o))
                self._masked.add(o)
                hidden += 1
        return hidden

    def query(self, ts: int, insert_barrier: int) -> set[int]:
        """``Query``: offsets below ``insert_barrier`` deleted at or before ``ts``."""
        end = bisect.bisect_right(self._entries, (ts, 2**63))
        return {o for dts, o in self._entries[:end] if o < insert_barrier}

    def __len__(self) -> int:
        return len(self._entries)


class GrowingSegment:
    """A growing segment: rows appended as the QueryNode's insertNode consumes them, in timestamp order.

    ``insert`` refuses a row older than the last one (``ValueError``): ``get_active_count`` relies on the order,
    and the pipeline sorts each pack's inserts by timestamp before it appends them.
    """

    def __init__(self, segment_id: int, delete_ignores_timestamps: bool = False):
        self.segment_id = segment_id
        self.record = InsertRecord()
        self.deleted = DeletedRecord(self.record, delete_ignores_timestamps)
        self._ts: list[int] = []

    def insert(self, rows) -> None:
        """``Insert``: append ``rows`` (each a :class:`Row`)."""
        for row in rows:
            if self._ts and row.ts < self._ts[-1]:
                raise ValueError(f"segment {self.segment_id}: row ts {row.ts} is older than the last one "
                                 f"({self._ts[-1]}); insert rows in timestamp order")
            self.record.append(row)
            self._ts.append(row.ts)

    def delete(self, pks, tss) -> int:
        """``Delete``: record deletes (see :meth:`DeletedRecord.push`); returns the rows newly hidden."""
        return self.deleted.push(pks, tss)

    def get_active_count(self, ts: int) -> int:
        """``get_active_count``: the leading rows inserted at or before ``ts`` (an upper bound on the offsets)."""
        return bisect.bisect_right(self._ts, ts)

    def visible(self, ts: int) -> list[Row]:
        """The rows a read at ``ts`` sees: inserted at or before ``ts``, not deleted at or before ``ts``."""
        barrier = self.get_active_count(ts)
        gone = self.deleted.query(ts, barrier)
        return [self.record.rows[o] for o in range(barrier) if o not in gone]

    def retrieve(self, ts: int, pred: RowFilter = None, limit: int = UNLIMITED) -> list[Row]:
        """A query's rows from this segment at ``ts``: ``OffsetOrderedMap::find_first``.

        Keys are walked in order; of each key, the offsets newest first, and the first one visible at ``ts`` that
        ``pred`` accepts is taken — one row per key, its newest. Without a limit the limit is the number of keys
        the segment holds (``map_.size()``), which cuts no key off, since a key gives at most one row (Milvus 2.3
        counted every matching row of a key against it: a key inserted twice used up the place of a later key).
        """
        barrier = self.get_active_count(ts)
        gone = self.deleted.query(ts, barrier)
        hits = [o for o in range(barrier) if o not in gone and _passes(pred, self.record.rows[o])]
        if limit in (UNLIMITED, NO_LIMIT):
            limit = self.record.distinct_pks()
        limit = min(limit, len(hits))
        hit = set(hits)
        out: list[Row] = []
        for _pk, offsets in self.record.offsets_by_pk():
            if len(out) >= limit:
                break
            for o in reversed(offsets):  # offsets follow timestamps: the last hit is the newest row
                if o in hit:
                    out.append(self.record.rows[o])
                    break
        return out

    def __len__(self) -> int:
        return len(self.record)


class SealedSegment:
    """A sealed segment loaded from binlogs: its rows in any order, masked by timestamp at read time."""

    def __init__(self, segment_id: int, rows=(), delete_ignores_timestamps: bool = False):
        self.segment_id = segment_id
        self.record = InsertRecord()
        for row in rows:
            self.record.append(row)
        self.deleted = DeletedRecord(self.record, delete_ignores_timestamps)

    def delete(self, pks, tss) -> int:
        """``Delete`` (deletes forwarded to a loaded segment): see :meth:`DeletedRecord.push`."""
        return self.deleted.push(pks, tss)

    def mask_with_timestamps(self, ts: int) -> set[int]:
        """``mask_with_timestamps``: offsets of rows inserted after ``ts``."""
        return {o for o, row in enumerate(self.record.rows) if row.ts > ts}

    def visible(self, ts: int) -> list[Row]:
        """The rows a read at ``ts`` sees."""
        masked = self.mask_with_timestamps(ts) | self.deleted.query(ts, len(self.record))
        return [row for o, row in enumerate(self.record.rows) if o not in masked]

    def retrieve(self, ts: int, pred: RowFilter = None, limit: int = UNLIMITED) -> list[Row]:
        """A query's rows from this segment at ``ts``: ``OffsetOrderedArray::find_first``.

        Every visible row ``pred`` accepts, in ``(key, offset)`` order — a key inserted twice gives two rows.
        Without a limit the limit is the segment's row count; a limit counts rows, so the copies of one key use it
        up before the merge keeps one of them.
        """
        masked = self.mask_with_timestamps(ts) | self.deleted.query(ts, len(self.record))
        hits = {o for o, row in enumerate(self.record.rows) if o not in masked and _passes(pred, row)}
        if limit in (UNLIMITED, NO_LIMIT):
            limit = len(self.record)
        out: list[Row] = []
        for _pk, offsets in self.record.offsets_by_pk():
            for o in offsets:
                if len(out) >= limit:
                    return out
                if o in hits:
                    out.append(self.record.rows[o])
        return out

    def __len__(self) -> int:
        return len(self.record)


# ---------------------------------------------------------------------------------------------- the merge


def select_min_pk_with_timestamp(results: list[list[Row]], cursors: list[int]) -> int:
    """``typeutil.SelectMinPKWithTimestamp``: the result whose row under its cursor has the smallest key, and of
    equal keys the largest timestamp (the first such result on a tie); -1 when every result is drained."""
    sel, best = -1, None
    for i, cursor in enumerate(cursors):
        if cursor >= len(results[i]):
            continue
        row = results[i][cursor]
        if best is None or row.pk < best.pk or (row.pk == best.pk and row.ts > best.ts):
            sel, best = i, row
    return sel


def merge_segcore_retrieve_results(results: list[list[Row]], limit: int = UNLIMITED) -> list[Row]:
    """``MergeSegcoreRetrieveResults`` (``internal/querynodev2/segments/result.go``): merge the segments' results
    of one query, each in key order, into one row per key, in key order.

    The results are merged by key (:func:`select_min_pk_with_timestamp`); the first row of a key takes its place;
    a later row of the same key with a larger timestamp replaces the row kept for that key (Go looks the key up
    among its selections, the fix of Milvus PR #35826); at most ``limit`` keys (:data:`UNLIMITED`: all).
    Empty results are skipped. Not modelled: ``maxOutputSize``, the iterator's stop-when-drained, and the second
    phase that fetches output fields by offset.
    """
    valid = [r for r in results if r]
    cursors = [0] * len(valid)
    kept: list[Row] = []
    slot: dict[object, int] = {}
    for _ in range(sum(len(r) for r in valid)):
        if limit != UNLIMITED and len(kept) >= limit:
            break
        sel = select_min_pk_with_timestamp(valid, cursors)
        if sel == -1:
            break
        row = valid[sel][cursors[sel]]
        if row.pk not in slot:
            slot[row.pk] = len(kept)
            kept.append(row)
        elif row.ts != 0 and row.ts > kept[slot[row.pk]].ts:
            kept[slot[row.pk]] = row
        cursors[sel] += 1
    return kept
