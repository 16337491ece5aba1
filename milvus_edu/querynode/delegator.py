"""The shard delegator's tsafe: how far a QueryNode has consumed a vchannel, and the wait a read makes on it.

Models ``internal/querynodev2/delegator/delegator.go`` (``UpdateTSafe``, ``GetTSafe``, ``waitTSafe``, ``Close``,
``Serviceable``, the ``lifetime.Add(lifetime.IsWorking)`` that opens ``Search`` / ``Query``, and their read step:
``MvccTimestamp = tsafe`` when the request has none) and ``types.go`` (``ErrTsLagTooLarge``).

A read first passes the delegator's lifetime check: a closed (``Stopped``) delegator refuses it at once with
``service not ready[querynode=<id>]: Stopped``, even when tsafe already passed its guarantee; a read already
waiting when the delegator closes wakes up and fails with ``channel not available`` instead.

``tsafe`` is the end timestamp of the last pack the pipeline finished (the deleteNode publishes it after applying
the pack's deletes). It never goes back. A read with guarantee ``g`` proceeds at once when ``tsafe >= g``;
otherwise it waits until the pipeline has consumed up to ``g`` — and then reads at the tsafe *at wake-up*, which
may be past ``g``: the read timestamp is the tsafe, not the guarantee.

:meth:`ShardDelegator.wait_tsafe` is an effect generator (:mod:`milvus_edu.effects`): it yields
:class:`TSafeChanged` each time it must wait; the driver resumes it after the next ``update_tsafe`` or ``close``,
or throws :class:`DeadlineExceeded` into it when the request's context times out (the simulated QueryNode
performs it: ``QueryNodeNode._perform_tsafe_changed``).

Data path (``delegator_data.go``): ``ProcessInsert`` creates a growing segment on its first rows unless the segment
is excluded; ``ProcessDelete`` puts the deletes into the delete buffer and forwards them to every segment it
serves; ``LoadSegments`` of a sealed segment applies the buffered deletes to it (``loadStreamDelete``);
``SyncTargetVersion`` releases the growing copy of a segment now served sealed; ``AddExcludedSegments`` /
``VerifyExcludedSegments`` / ``TryCleanExcludedSegments`` over :class:`ExcludedSegments`.

Simplification: no segment distribution, versions or remote workers: the delegator reads its own segments.
Simplification: no bloom filters (``pkOracle``): a delete is offered to every segment, and segcore keeps only
the rows of its key. The delete buffer is never discarded (Go's ``TryDiscard`` drops entries before the target
checkpoint); a loaded segment gets every buffered delete, which segcore's timestamp rule makes harmless.
"""

from __future__ import annotations


from ..effects import TSafeChanged
from ..merr import wrap_err_channel_not_available, wrap_err_service_not_ready
from ..tsoutil import physical_time
from .exclude_info import CLEAN_EXCLUDE_SEGMENT_INTERVAL_NS, ExcludedSegments
from .segcore import GrowingSegment, Row, SealedSegment, merge_segcore_retrieve_results

S_NS = 1_000_000_000
#: ``queryNode.scheduler.maxTimestampLag``: a guarantee further than this past tsafe is refused at once.
MAX_TIMESTAMP_LAG_NS = 86400 * S_NS


def go_duration(ns: int) -> str:
    """A duration as Go's ``time.Duration.String`` prints it (``1h2m3.5s``, ``1.5s``, ``250ms``, ``0s``)."""
    if ns == 0:
        return "0s"
    sign, ns = ("-", -ns) if ns < 0 else ("", ns)
    if ns < S_NS:
        for unit, size in (("ms", 10**6), ("µs", 10**3), ("ns", 1)):
            if ns >= size:
                return sign + f"{ns / size:.9f}".rstrip("0").rstrip(".") + unit
    h, rest = divmod(ns, 3600 * S_NS)
    m, rest = divmod(rest, 60 * S_NS)
    secs = f"{rest / S_NS:.9f}".rstrip("0").rstrip(".") + "s"
    if h:
        return f"{sign}{h}h{m}m{secs}"
    if m:
        return f"{sign}{m}m{secs}"
    return sign + secs


#: ``ErrTsLagTooLarge``'s text (delegator/types.go), which every such refusal's message starts with: what a run
#: log's readers look for in a ``querynode.read`` row's ``error``.
TS_LAG_TOO_LARGE = "Timestamp lag too large"


class TsLagTooLargeError(Exception):
    """``ErrTsLagTooLarge``: ``Timestamp lag too large lag(<d>) max(<d>)``."""

    def __init__(self, lag_ns: int, max_lag_ns: int):
        super().__init__(f"{TS_LAG_TOO_LARGE} lag({go_duration(lag_ns)}) max({go_duration(max_lag_ns)})")
        self.lag_ns = lag_ns
        self.max_lag_ns = max_lag_ns


class DeadlineExceeded(Exception):
    """The read's context ran out while it waited (``context deadline exceeded``)."""

    def __init__(self) -> None:
        super().__init__("context deadline exceeded")


class ShardDelegator:
    """One vchannel's delegator on a QueryNode: tsafe, the wait, and reads over its segments.

    ``start_ts``: the initial tsafe (``NewShardDelegator``'s ``startTs``); ``max_timestamp_lag_ns``:
    ``queryNode.scheduler.maxTimestampLag`` (86,400 s); ``downgrade_tsafe``: ``queryNode.downgradeTsafe``
    (false: a read never proceeds below its guarantee); ``node_id``: the QueryNode's session id, which the
    lifetime check's error names.
    """

    def __init__(self, vchannel: str, start_ts: int = 0, max_timestamp_lag_ns: int = MAX_TIMESTAMP_LAG_NS,
                 downgrade_tsafe: bool = False, delete_ignores_timestamps: bool = False,
                 clean_exclude_interval_ns: int = CLEAN_EXCLUDE_SEGMENT_INTERVAL_NS, now_ns=lambda: 0,
                 node_id: int = 0):
        self.vchannel = vchannel
        self.node_id = node_id
        self._tsafe = start_ts
        self.max_timestamp_lag_ns = max_timestamp_lag_ns
        self.downgrade_tsafe = downgrade_tsafe
        self.delete_ignores_timestamps = delete_ignores_timestamps
        self.serviceable = True
        self.growing: dict[int, GrowingSegment] = {}
        self.sealed: dict[int, SealedSegment] = {}
        self.excluded = ExcludedSegments(clean_exclude_interval_ns, now_ns)
        #: ``deleteBuffer``: every ``(pk, ts)`` delete consumed, in order, for segments loaded later.
        self.delete_buffer: list[tuple[object, int]] = []

    def set_delete_ignores_timestamps(self, on: bool) -> None:
        """The ``delete_ignores_timestamps`` switch flipped: segments made from now on and the deletes every
        segment records from now on follow ``on`` (rows already hidden stay hidden)."""
        self.delete_ignores_timestamps = on
        for segment in (*self.sealed.values(), *self.growing.values()):
            segment.deleted.delete_ignores_timestamps = on

    # ------------------------------------------------------------------------------ tsafe

    def update_tsafe(self, tsafe: int) -> bool:
        """``UpdateTSafe``: store ``tsafe`` only if it is larger (never back); returns whether it moved."""
        if tsafe > self._tsafe:
            self._tsafe = tsafe
            return True
        return False

    def get_tsafe(self) -> int:
        """``GetTSafe``."""
        return self._tsafe

    def close(self) -> None:
        """``Close``: stop serving (lifetime ``Stopped``); waiting reads wake up and fail, new ones are refused."""
        self.serviceable = False

    def lifetime_add(self) -> None:
        """``lifetime.Add(lifetime.IsWorking)``, the first step of ``Search`` and ``Query``: a closed delegator
        raises ``service not ready[querynode=<id>]: Stopped`` before any wait or read."""
        if not self.serviceable:
            raise wrap_err_service_not_ready("querynode", self.node_id, "Stopped")

    def wait_tsafe(self, guarantee_ts: int, deadline: float | None = None):
        """``waitTSafe(ctx, ts)``: the tsafe to read at, once it is at least ``guarantee_ts`` (an effect generator);
        ``deadline`` is the context's (see :class:`TSafeChanged`).

        Immediate when tsafe already reached the guarantee, or when ``downgrade_tsafe`` is on (then possibly
        below it). A guarantee more than ``max_timestamp_lag_ns`` past tsafe (physical parts) raises
        :class:`TsLagTooLargeError` at once. Otherwise it yields :class:`TSafeChanged` until tsafe reaches the
        guarantee (returning tsafe at wake-up) or the delegator closes (``channel not available``: "delegator closed
        during wait tsafe"); a :class:`DeadlineExceeded` thrown in propagates.
        """
        cur = self._tsafe
        if cur >= guarantee_ts:
            return cur
        if self.downgrade_tsafe:
            return cur
        lag_ns = (physical_time(guarantee_ts) - physical_time(cur)) * 1_000_000
        if lag_ns > self.max_timestamp_lag_ns:
            raise TsLagTooLargeError(lag_ns, self.max_timestamp_lag_ns)
        while self._tsafe < guarantee_ts and self.serviceable:
            yield TSafeChanged(guarantee_ts, self.vchannel, deadline)
        if not self.serviceable:
            raise wrap_err_channel_not_available(self.vchannel, "delegator closed during wait tsafe")
        return self._tsafe

    # ------------------------------------------------------------------------------ data and reads

    def insert(self, segment_id: int, rows) -> bool:
        """``ProcessInsert`` for one segment: append ``rows`` to its growing segment, creating it on the first rows.

        A new growing segment is refused when the segment is excluded at all (``VerifyExcludedSegments(id, 0)``
        false: Go forbids re-creating a growing copy of a segment already served sealed); returns whether the rows
        were taken.
        """
        growing = self.growing.get(segment_id)
        if growing is None:
            if not self.excluded.verify(segment_id, 0):
                return False
            growing = self.growing[segment_id] = GrowingSegment(segment_id, self.delete_ignores_timestamps)
        growing.insert(rows)
        return True

    def process_delete(self, pks, tss) -> int:
        """``ProcessDelete``: buffer the deletes and forward them to every segment this delegator serves; returns
        the rows newly hidden."""
        self.delete_buffer.extend(zip(pks, tss))
        segments = [*self.sealed.values(), *self.growing.values()]
        return sum(s.delete(pks, tss) for s in segments)

    # ------------------------------------------------------------------------------ exclusions and sealed data

    def add_excluded_segments(self, exclude_info) -> None:
        """``AddExcludedSegments``: segment id -> ts up to which the stream's inserts of it are dropped."""
        self.excluded.insert(exclude_info)

    def verify_excluded_segments(self, segment_id: int, ts: int) -> bool:
        """``VerifyExcludedSegments``: False when an insert of ``segment_id`` at ``ts`` must be dropped."""
        return self.excluded.verify(segment_id, ts)

    def try_clean_excluded_segments(self, ts: int) -> list[int]:
        """``TryCleanExcludedSegments``: clean entries older than ``ts`` when the clean interval has passed."""
        if self.excluded.should_clean():
            return self.excluded.clean_invalid(ts)
        return []

    def load_sealed(self, segment_id: int, rows) -> int:
        """``LoadSegments`` of a sealed segment read from its binlogs, then ``loadStreamDelete``: every buffered
        delete is applied to it. Returns the rows those deletes hid."""
        segment = SealedSegment(segment_id, rows, self.delete_ignores_timestamps)
        self.sealed[segment_id] = segment
        if not self.delete_buffer:
            return 0
        pks, tss = zip(*self.delete_buffer)
        return segment.delete(pks, tss)

    def sync_target_version(self, sealed_in_target, dropped_in_target=()) -> list[int]:
        """``SyncTargetVersion``: a growing segment now served sealed (or dropped) is redundant and released;
        returns the released ids, sorted."""
        redundant = sorted(s for s in self.growing if s in set(sealed_in_target) | set(dropped_in_target))
        for s in redundant:
            del self.growing[s]
        return redundant

    def query(self, guarantee_ts: int, mvcc_ts: int = 0):
        """``Query`` (a search is the same here): the lifetime check, the wait for tsafe, then the read at
        ``mvcc_ts`` or, when it is 0, at the tsafe the wait returned. Returns ``(read_ts, rows)``, rows as
        :meth:`read` gives them."""
        self.lifetime_add()
        tsafe = yield from self.wait_tsafe(guarantee_ts)
        read_ts = mvcc_ts or tsafe
        return read_ts, self.read(read_ts)

    def read(self, ts: int, pred=None) -> list[Row]:
        """The rows a query at ``ts`` returns from this shard (those ``pred(pk, fields)`` accepts, when given: the
        filter sees the row's key and dynamic field), one per primary key, in key order.

        ``retrieveOnSegments`` then ``MergeSegcoreRetrieveResults``: each sealed and growing segment retrieves its
        rows (``find_first``), and the merge keeps, per key, the row with the largest timestamp — a key inserted
        twice (Milvus does not deduplicate keys on insert) is returned once, its newest visible row. The query's
        ``limit`` is applied after this merge, by the proxy (simplification: Go also passes it to each segment).
        """
        results = [s.retrieve(ts, pred) for s in self.sealed.values()]
        results += [s.retrieve(ts, pred) for s in self.growing.values()]
        return merge_segcore_retrieve_results(results)
