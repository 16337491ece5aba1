"""When a segment's buffer goes to sync: the write buffer's sync policies.

Models ``internal/flushcommon/writebuffer/sync_policy.go`` (Milvus 2.5). A policy looks at the segment
buffers and the write buffer's current time ``ts`` (the timestamp of the last consumed position:
*message* time, never the wall clock) and names the segments to sync. The write buffer syncs the union
of what its policies select (``options.go defaultWBOption`` + the flush-ts policy).

Simplification: Go's ``rand.Float64`` (global source) becomes an injected ``random.Random``, and the
buffers come in ascending segment id rather than Go's map order, so the stale policy's jitter draws
are reproducible.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ...proto import SegmentState
from ...tsoutil import NS_PER_MS, physical_time
from ..metacache import MetaCache, update_state, with_segment_ids, with_segment_state
from .segment_buffer import SegmentBuffer

#: ``nonFlushTS``: no flush requested.
NON_FLUSH_TS = 0

SelectSegmentFunc = Callable[[Sequence[SegmentBuffer], int], list[int]]
"""``SelectSegmentFunc``: (buffers, ts) -> ids of the segments to sync."""


@dataclass(frozen=True)
class SyncPolicy:
    """``SyncPolicy`` (``SelectSegmentFnPolicy``): a selector and the reason Go logs for its choices."""

    fn: SelectSegmentFunc
    reason: str

    def select_segments(self, buffers: Sequence[SegmentBuffer], ts: int) -> list[int]:
        """``SelectSegments``: the ids this policy wants synced now (a new list, the caller's to keep)."""
        return self.fn(buffers, ts)


def get_full_buffer_policy() -> SyncPolicy:
    """``GetFullBufferPolicy``: buffers whose insert or delete part reached its size limit."""
    return SyncPolicy(lambda buffers, _ts: [b.segment_id for b in buffers if b.is_full()], "buffer full")


def get_sync_stale_buffer_policy(sync_period_ns: int, rng: random.Random) -> SyncPolicy:
    """``GetSyncStaleBufferPolicy``: buffers whose oldest data is older than the period plus a jitter.

    ``phys(ts) - phys(buffer.min_timestamp()) > sync_period + jitter``, with a fresh jitter uniform in
    ``[0, 0.1 * sync_period)`` drawn for every buffer on every call (so buffers of one age do not all
    sync in the same tick). An empty buffer (MinTimestamp = MaxUint64) is never stale, but still draws.
    """

    def select(buffers: Sequence[SegmentBuffer], ts: int) -> list[int]:
        current_ms = physical_time(ts)
        ids = []
        for buf in buffers:
            start_ms = physical_time(buf.min_timestamp())
            jitter_ns = int(rng.random() * 0.1 * sync_period_ns)
            if (current_ms - start_ms) * NS_PER_MS > sync_period_ns + jitter_ns:
                ids.append(buf.segment_id)
        return ids

    return SyncPolicy(select, "buffer stale")


def get_sealed_segments_policy(metacache: MetaCache) -> SyncPolicy:
    """``GetSealedSegmentsPolicy``: every Sealed segment of the metacache, buffered or not.

    Side effect, as in Go: the selected segments move from Sealed to Flushing, so the sync cut for them
    right after is a flush (``WithFlush``). A sealed segment without a buffer still gets an (empty) sync.
    """

    sealed = with_segment_state(SegmentState.SEALED)  # one filter for every call (a call per pack)

    def select(_buffers: Sequence[SegmentBuffer], _ts: int) -> list[int]:
        ids = metacache.get_segment_ids_by(sealed)
        if not ids:
            return ids  # nothing sealed (most packs): Go's update by no ids changes nothing either
        metacache.update_segments(update_state(SegmentState.FLUSHING), with_segment_ids(*ids), sealed)
        return ids

    return SyncPolicy(select, "segment flushing")


def get_dropped_segment_policy(metacache: MetaCache) -> SyncPolicy:
    """``GetDroppedSegmentPolicy``: every Dropped segment of the metacache (on every call until its drop
    sync removes it from the metacache)."""
    dropped = with_segment_state(SegmentState.DROPPED)  # one filter for every call (a call per pack)
    return SyncPolicy(lambda _buffers, _ts: metacache.get_segment_ids_by(dropped), "segment dropped")


def get_flush_ts_policy(flush_ts_getter: Callable[[], int], metacache: MetaCache) -> SyncPolicy:
    """``GetFlushTsPolicy``: once ``ts >= flushTs`` (a flush is requested and consumed up to it), every
    buffer of a segment the metacache knows whose data starts before ``flushTs``."""

    def select(buffers: Sequence[SegmentBuffer], ts: int) -> list[int]:
        flush_ts = flush_ts_getter()
        if flush_ts == NON_FLUSH_TS or ts < flush_ts:
            return []
        return [
            b.segment_id for b in buffers
            if metacache.get_segment_by_id(b.segment_id) is not None and b.min_timestamp() < flush_ts
        ]

    return SyncPolicy(select, "flush ts")


def get_oldest_buffer_policy(num: int) -> SyncPolicy:
    """``GetOldestBufferPolicy``: the ``num`` buffers with the smallest MinTimestamp (memory force-sync).

    Go keeps a bounded max-heap; ties are broken here by the order of ``buffers`` (stable sort), and
    the ids come back oldest first.
    """

    def select(buffers: Sequence[SegmentBuffer], _ts: int) -> list[int]:
        oldest = sorted(buffers, key=lambda b: b.min_timestamp())[: max(num, 0)]
        return [b.segment_id for b in oldest]

    return SyncPolicy(select, "oldest buffers")
