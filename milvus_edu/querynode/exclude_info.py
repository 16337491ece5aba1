"""Segments a shard delegator must not take inserts for: the QueryNode's analogue of the DataNode's ddNode filter.

Models ``internal/querynodev2/delegator/exclude_info.go`` (``ExcludedSegments``: ``Insert``, ``Verify``,
``CleanInvalid``, ``ShouldClean``) and the delegator's ``AddExcludedSegments`` / ``VerifyExcludedSegments`` /
``TryCleanExcludedSegments`` (``delegator_data.go``).

Why it exists: once a sealed segment is loaded from its binlogs, the same rows may still arrive on the stream
(a replay after a seek, or the tail of a segment whose growing copy was released). An insert of an excluded
segment with ``ts <= excludeTs`` is dropped, so nothing is served twice. Entries are forgotten only once a pack
ends strictly after their ts, and only every ``queryCoord.cleanExcludeSegmentInterval`` (60 s) of wall time.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

#: ``queryCoord.cleanExcludeSegmentInterval``: how often (wall time) stale entries may be cleaned.
CLEAN_EXCLUDE_SEGMENT_INTERVAL_NS = 60 * 1_000_000_000


class ExcludedSegments:
    """``ExcludedSegments``: segment id -> the timestamp up to which its stream inserts are dropped.

    ``now_ns``: the node's wall clock (Go's ``time.Now``); ``last_clean`` starts at the zero time, so the first
    ``should_clean`` is true, as in Go.
    """

    def __init__(self, clean_interval_ns: int = CLEAN_EXCLUDE_SEGMENT_INTERVAL_NS,
                 now_ns: Callable[[], int] = lambda: 0):
        self.segments: dict[int, int] = {}
        self.clean_interval_ns = clean_interval_ns
        self._now_ns = now_ns
        self.last_clean_ns: int | None = None

    def insert(self, exclude_info: Mapping[int, int]) -> None:
        """``Insert``: set each segment's exclude ts (a later insert replaces an earlier one, even a larger ts)."""
        for segment_id, ts in exclude_info.items():
            self.segments[segment_id] = ts

    def verify(self, segment_id: int, ts: int) -> bool:
        """``Verify``: False when the segment is excluded and ``ts <= excludeTs`` (the insert must be dropped)."""
        exclude_ts = self.segments.get(segment_id)
        return not (exclude_ts is not None and ts <= exclude_ts)

    def clean_invalid(self, ts: int) -> list[int]:
        """``CleanInvalid``: forget every entry with ``excludeTs < ts``; returns their segment ids, sorted."""
        gone = sorted(s for s, exclude_ts in self.segments.items() if exclude_ts < ts)
        for s in gone:
            del self.segments[s]
        self.last_clean_ns = self._now_ns()
        return gone

    def should_clean(self) -> bool:
        """``ShouldClean``: more than the clean interval since the last clean (always, before the first)."""
        if self.last_clean_ns is None:
            return True
        return self._now_ns() - self.last_clean_ns > self.clean_interval_ns
