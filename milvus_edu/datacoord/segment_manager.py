"""DataCoord's segment manager, deliberately small: which growing segment a row goes to, and sealing.

Models ``internal/datacoord/segment_manager.go`` (Milvus 2.5): ``AllocSegment`` (as
:meth:`SegmentManager.assign_segment_id`), ``openNewSegment``, ``SealAllSegments``, ``DropSegment``
and ``loadSegmentsFromMeta``. It keeps Milvus's bookkeeping - per vchannel a set of growing and a set
of sealed segment ids, rebuilt from meta on start - and one growing segment per (partition, vchannel).

What Milvus's segment allocation does that this does not (one line each for the book's table):

* Simplification: no size limit - Go estimates a segment's max rows from the schema and
  ``dataCoord.segment.maxSize`` and opens a new segment when the request does not fit.
* Simplification: allocations are reduced to their expiry - each ``assign_segment_id`` stamps the segment's
  ``LastExpireTime`` (DataCoord's clock + ``dataCoord.segment.assignmentExpiration``, 2 s, where Go asks the TSO), which
  ``flushPolicyL1`` waits for; the granted rows are not counted against a capacity (there is none).
* Simplification: no seal policies - Go seals by size, lifetime, idle time, binlog count and per
  channel (``tryToSealSegment`` on every DataNode time tick); here only ``Flush`` seals.
* Simplification: ``GetFlushableSegments`` runs no ``tryToSealSegment`` first (no seal policies) and
  ``CleanZeroSealedSegmentsOfChannel`` is left out (it drops empty sealed segments whose allocations
  expired).
* Simplification: segment ids come from an injected function (Go: an ``AllocID`` RPC to RootCoord).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ..config import S
from ..tsoutil import compose_ts
from ..merr import wrap_err_collection_not_found
from ..proto import SegmentInfo, SegmentLevel, SegmentState
from .meta import Meta, is_segment_healthy


class SegmentManager:
    """``SegmentManager``: growing/sealed segment ids per vchannel over :class:`~.meta.Meta`.

    ``alloc_id`` returns a fresh unique id for each new segment. Sets are visited in ascending id order
    (Go ranges over hash sets).
    """

    def __init__(self, meta: Meta, alloc_id: Callable[[], int], flush_interval_ns: int = 2 * S,
                 seg_assignment_expiration_ns: int = 2 * S):
        self.meta = meta
        self.seg_assignment_expiration_ns = seg_assignment_expiration_ns  # dataCoord.segment.assignmentExpiration
        # SegmentInfo.LastExpireTime: in memory, like Go's allocations (0 after a restart: nothing to wait for).
        self._last_expire: dict[int, int] = {}
        self._alloc_id = alloc_id
        self._growing: dict[str, set[int]] = {}
        self._sealed: dict[str, set[int]] = {}
        self.flush_interval_ns = flush_interval_ns  # dataCoord.segmentFlushInterval (2 s)
        # SegmentInfo.lastFlushTime: in memory only, the zero time at start (so the first ask is due).
        self._last_flush_ns: dict[int, int] = {}
        self.load_segments_from_meta()

    def load_segments_from_meta(self) -> None:
        """``loadSegmentsFromMeta``: the Growing and Sealed L1 segments of meta, by channel."""
        self._growing, self._sealed = {}, {}
        for segment in self.meta.get_unflushed_segments():
            if segment.level == SegmentLevel.L0:
                continue
            target = self._growing if segment.state == SegmentState.GROWING else self._sealed
            target.setdefault(segment.insert_channel, set()).add(segment.id)

    def growing_segments(self, channel: str) -> tuple[int, ...]:
        """The growing segment ids of a channel, ascending."""
        return tuple(sorted(self._growing.get(channel, ())))

    def sealed_segments(self, channel: str) -> tuple[int, ...]:
        """The sealed segment ids of a channel that have not been flushed or dropped yet, ascending."""
        return tuple(sorted(self._sealed.get(channel, ())))

    def assign_segment_id(self, collection_id: int, partition_id: int, channel: str, count: int) -> int:
        """``AllocSegment``, reduced: the growing segment of (partition, channel), opened if there is none.

        ``count`` is the number of rows asked for; it must be positive, and any count fits (no size
        limit). An unknown collection raises ``CollectionNotFound`` (Go: ``estimateMaxNumOfRows``
        fails with "failed to get collection").
        """
        if count <= 0:
            raise ValueError(f"cannot assign a segment for {count} rows; ask for at least one row")
        if self.meta.get_collection(collection_id) is None:
            raise wrap_err_collection_not_found(collection_id, msg="failed to get collection")
        growing = self._growing.setdefault(channel, set())
        chosen = None
        for segment_id in sorted(growing):
            segment = self.meta.get_healthy_segment(segment_id)
            if segment is None:
                growing.discard(segment_id)
                continue
            if segment.partition_id == partition_id:
                chosen = segment_id
                break
        if chosen is None:
            chosen = self.open_new_segment(collection_id, partition_id, channel)
        self._last_expire[chosen] = self._gen_expire_ts()
        return chosen

    def _gen_expire_ts(self) -> int:
        """``genExpireTs``: now plus ``dataCoord.segment.assignmentExpiration`` as a hybrid ts (logical 0: Go keeps the TSO's)."""
        return compose_ts((self.meta.now_ns() + self.seg_assignment_expiration_ns) // 1_000_000, 0)

    def last_expire_time(self, segment_id: int) -> int:
        """``SegmentInfo.LastExpireTime``: when the segment's latest allocation expires (0 when none)."""
        return self._last_expire.get(segment_id, 0)

    def open_new_segment(self, collection_id: int, partition_id: int, channel: str) -> int:
        """``openNewSegment``: a fresh id, a Growing L1 record in meta (persisted), tracked as growing."""
        segment_id = self._alloc_id()
        self.meta.add_segment(SegmentInfo(id=segment_id, collection_id=collection_id, partition_id=partition_id,
                                          insert_channel=channel, state=SegmentState.GROWING,
                                          level=SegmentLevel.L1))
        self._growing.setdefault(channel, set()).add(segment_id)
        return segment_id

    def seal_all_segments(self, channel: str, segment_ids: Iterable[int] = ()) -> list[int]:
        """``SealAllSegments``: seal the channel's growing segments; return sealed + newly sealed ids.

        With ``segment_ids`` only those are considered: the Sealed ones among them are returned and the
        Growing ones sealed. Quirk kept from Go: that filter does not check the channel, so an id of
        another channel is sealed too and recorded in *this* channel's sealed set.
        """
        ids = list(segment_ids)
        sealed = self._sealed.setdefault(channel, set())
        growing = self._growing.get(channel, set())
        if ids:
            already = [i for i in ids if self._healthy_in_state(i, SegmentState.SEALED)]
            to_seal = [i for i in ids if self._healthy_in_state(i, SegmentState.GROWING)]
        else:
            already = [i for i in sorted(sealed) if is_segment_healthy(self.meta.get_segment(i))]
            to_seal = [i for i in sorted(growing) if is_segment_healthy(self.meta.get_segment(i))]
        result = list(already)
        for segment_id in to_seal:
            self.meta.set_state(segment_id, SegmentState.SEALED)
            sealed.add(segment_id)
            growing.discard(segment_id)
            result.append(segment_id)
        return result

    def _healthy_in_state(self, segment_id: int, state: str) -> bool:
        segment = self.meta.get_segment(segment_id)
        return is_segment_healthy(segment) and segment.state == state

    def get_flushable_segments(self, channel: str, ts: int, now_ns: int) -> list[int]:
        """``GetFlushableSegments``: the channel's sealed segments that ``flushPolicyL1`` lets go, ascending.

        ``flushPolicyL1``: Sealed, not L0, at least ``segmentFlushInterval`` since DataCoord last asked a
        DataNode to flush it (``now_ns`` is DataCoord's clock), its last allocation expired by the time
        tick ``ts`` (``LastExpireTime <= ts``: no insert granted to it can still arrive), rows counted
        (``NumOfRows != 0``: a sealed segment whose rows never reached a binlog is not flushable yet), not
        importing.
        """
        result = []
        for segment_id in sorted(self._sealed.get(channel, ())):
            info = self.meta.get_healthy_segment(segment_id)
            if info is None:
                continue
            last = self._last_flush_ns.get(segment_id)
            if (info.state == SegmentState.SEALED and info.level != SegmentLevel.L0
                    and (last is None or now_ns - last >= self.flush_interval_ns)
                    and self._last_expire.get(segment_id, 0) <= ts
                    and info.num_of_rows != 0 and not info.is_importing):
                result.append(segment_id)
        return result

    def set_last_flush_time(self, segment_ids: Iterable[int], now_ns: int) -> None:
        """``setLastFlushTime``: remember when DataCoord last asked for these segments' flush."""
        for segment_id in segment_ids:
            self._last_flush_ns[segment_id] = now_ns

    def drop_segment(self, channel: str, segment_id: int) -> None:
        """``DropSegment``: stop tracking a segment (it was flushed or dropped); meta is not touched."""
        self._growing.get(channel, set()).discard(segment_id)
        self._sealed.get(channel, set()).discard(segment_id)
