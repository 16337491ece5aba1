"""Reporting a sync to DataCoord: the ``SaveBinlogPaths`` request and its retry.

Models ``internal/flushcommon/syncmgr/meta_writer.go`` (``brokerMetaWriter.UpdateSync``,
``DropChannel``, ``NotifyDropPartition``) and the retry loop they use, ``retry.Handle`` of
``pkg/util/retry/{retry.go, options.go}`` (10 attempts, 200 ms first back-off doubling up to 3 s), of
Milvus 2.5. The sync task's object-storage write uses the same retry.

``update_sync`` is an effect generator: it yields :class:`SaveBinlogPaths` (and :class:`~milvus_edu.effects.Sleep`
between attempts); the caller performs the RPC and sends back ``None`` or throws the failure in.

The request is where the DataNode's consumption position becomes durable: ``CheckPoints`` carries
``pack.checkpoint`` as the segment's new DmlPosition, and ``StartPositions`` tells DataCoord where
not-yet-reported segments began. Only after DataCoord accepted it are those start positions marked
recorded in the metacache, so a failed or interrupted report sends them again next time.

Simplification: ``retry.Handle``'s context deadline check is left out (sync contexts have no deadline);
a ``TimeoutError`` thrown in plays Go's ``context.DeadlineExceeded``/``Canceled`` (not retried).
Simplification: ``NotifyDropPartition``'s ``ErrServiceUnimplemented`` branch (an old DataCoord) is left
out; 2.5's DataCoord implements the RPC.
Simplification: no ``Field2Bm25LogPaths``, no ``MsgBase`` other than the source id, no logs or metrics.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ...config import MS, S
from ...effects import DropVirtualChannel, NotifyDropPartition, SaveBinlogPaths, Sleep, Steps
from ...merr import ChannelNotFoundError, ParameterInvalidError, SegmentNotFoundError, wrap_err_segment_not_found
from ...proto import CheckPoint, FieldBinlog, SaveBinlogPathsRequest, SegmentLevel, SegmentStartPosition, SegmentState
from ..metacache import (
    MetaCache,
    set_start_pos_recorded,
    with_level,
    with_segment_ids,
    with_segment_state,
    with_start_pos_not_recorded,
)
from .pack import SyncPack


@dataclass(frozen=True)
class RetryConfig:
    """``retry.config`` with ``newDefaultConfig``'s values: attempts, first back-off, back-off cap (ns)."""

    attempts: int = 10
    sleep_ns: int = 200 * MS
    max_sleep_ns: int = 3 * S

    def __post_init__(self):
        if self.attempts < 1:
            raise ValueError(f"RetryConfig.attempts must be at least 1, got {self.attempts} "
                             "(Go's Handle with 0 attempts never calls the function)")
        if self.sleep_ns < 0 or self.max_sleep_ns < 0:
            raise ValueError("RetryConfig back-off times must not be negative")


def is_canceled_or_timeout(exc: BaseException) -> bool:
    """``merr.IsCanceledOrTimeout``: the model's stand-in for ``context.Canceled``/``DeadlineExceeded``."""
    return isinstance(exc, TimeoutError)


ErrorRule = Callable[[Exception], tuple[bool, Exception | None]]
"""What an attempt's failure means: ``(should_retry, error)``; ``error`` ``None`` counts as success."""


def retry_unless_canceled(exc: Exception) -> tuple[bool, Exception | None]:
    """The rule of every ``retry.Handle`` caller here: retry anything but a cancel or timeout."""
    return not is_canceled_or_timeout(exc), exc


def retry_handle(effect: object, on_error: ErrorRule, config: RetryConfig) -> Steps[None]:
    """``retry.Handle``: yield ``effect`` until it succeeds, ``on_error`` says stop, or attempts run out.

    Go's quirks kept: a failed attempt is followed by a back-off even when it was the last one; a
    non-retryable cancel/timeout after earlier failures returns the earlier error instead.
    """
    last_err: Exception | None = None
    sleep = config.sleep_ns
    for _ in range(config.attempts):
        try:
            yield effect
        except Exception as exc:  # noqa: BLE001 - on_error decides what a failure means
            should_retry, err = on_error(exc)
            if err is None:
                return
            if not should_retry:
                if is_canceled_or_timeout(err) and last_err is not None:
                    raise last_err from None
                raise err
            last_err = err
            yield Sleep(sleep)
            sleep = min(sleep * 2, config.max_sleep_ns)
        else:
            return
    assert last_err is not None
    raise last_err


class BrokerMetaWriter:
    """``brokerMetaWriter``: reports syncs (and channel/partition drops) to DataCoord, with retry.

    ``server_id`` is the DataNode's id (the request's ``Base.SourceID``).
    """

    STEPS = ("save_binlog_paths", "retry_sleep")
    """Effects ``update_sync`` yields, i.e. where the simulator may crash it."""

    def __init__(self, server_id: int, retry: RetryConfig = RetryConfig()):
        self.server_id = server_id
        self.retry = retry

    def build_request(self, pack: SyncPack, metacache: MetaCache,
                      insert_binlogs: Mapping[int, FieldBinlog], stats_binlogs: Mapping[int, FieldBinlog],
                      delta_binlog: FieldBinlog) -> SaveBinlogPathsRequest:
        """The ``SaveBinlogPathsRequest`` of ``UpdateSync`` (field maps by ascending field id: Go's map has no order).

        ``NumOfRows`` is the segment's flushed rows plus this batch; ``StartPositions`` lists every L1
        segment in Growing/Sealed/Flushing whose start was never recorded, plus, for an L0 segment,
        itself with the pack's start position. Raises ``SegmentNotFoundError`` when the segment is gone.
        """
        segment = metacache.get_segment_by_id(pack.segment_id)
        if segment is None:
            raise wrap_err_segment_not_found(pack.segment_id)
        check_points = (CheckPoint(pack.segment_id, pack.checkpoint, segment.flushed_rows + pack.batch_rows),)
        not_recorded = metacache.get_segments_by(
            with_segment_state(SegmentState.GROWING, SegmentState.SEALED, SegmentState.FLUSHING),
            with_level(SegmentLevel.L1),
            with_start_pos_not_recorded(),
        )
        start_positions = [SegmentStartPosition(s.segment_id, s.start_position) for s in not_recorded]
        if segment.level == SegmentLevel.L0:
            start_positions.append(SegmentStartPosition(pack.segment_id, pack.start_position))
        return SaveBinlogPathsRequest(
            segment_id=pack.segment_id,
            collection_id=pack.collection_id,
            partition_id=pack.partition_id,
            channel=pack.channel_name,
            field2_binlog_paths=tuple(insert_binlogs[f] for f in sorted(insert_binlogs)),
            field2_statslog_paths=tuple(stats_binlogs[f] for f in sorted(stats_binlogs)),
            deltalogs=(delta_binlog,) if delta_binlog.binlogs else (),
            check_points=check_points,
            start_positions=tuple(start_positions),
            flushed=pack.is_flush,
            dropped=pack.is_drop,
            seg_level=pack.level,
            source_id=self.server_id,
        )

    def update_sync(self, pack: SyncPack, metacache: MetaCache,
                    insert_binlogs: Mapping[int, FieldBinlog], stats_binlogs: Mapping[int, FieldBinlog],
                    delta_binlog: FieldBinlog) -> Steps[SaveBinlogPathsRequest]:
        """``UpdateSync``: send the request with retry; on success mark its start positions recorded.

        ``SegmentNotFound`` (for any sync: Go's first, non-flush branch and its second branch both stop
        the retry) and ``ChannelNotFound`` count as success: the segment was compacted away or the
        channel moved to another node, so the sync goes on as if reported. Returns the request sent.
        """
        request = self.build_request(pack, metacache, insert_binlogs, stats_binlogs, delta_binlog)

        def on_error(exc: Exception) -> tuple[bool, Exception | None]:
            # Go first stops on SegmentNotFound for a non-flush sync ("stale segment ... could be
            # compacted"), then on SegmentNotFound/ChannelNotFound for any sync: one rule in effect.
            if isinstance(exc, (SegmentNotFoundError, ChannelNotFoundError)):
                return False, None
            return retry_unless_canceled(exc)

        yield from retry_handle(SaveBinlogPaths(request), on_error, self.retry)
        ids = [p.segment_id for p in request.start_positions]
        metacache.update_segments(set_start_pos_recorded(True), with_segment_ids(*ids))
        return request

    def drop_channel(self, channel_name: str) -> Steps[None]:
        """``DropChannel``: ``DropVirtualChannel`` with retry; the last error is raised."""
        yield from retry_handle(DropVirtualChannel(channel_name, self.server_id), retry_unless_canceled, self.retry)

    def notify_drop_partition(self, collection_id: int, channel_name: str, partition_ids: list[int]) -> Steps[None]:
        """``NotifyDropPartition``: tell DataCoord the partitions are gone, with retry.

        No partition ids is Milvus's ``invalid parameter[expected=non-empty partitionIDs][actual=empty partitionIDs]``.
        """
        if not partition_ids:
            raise ParameterInvalidError(("expected", "non-empty partitionIDs"), ("actual", "empty partitionIDs"))
        effect = NotifyDropPartition(channel_name, collection_id, tuple(partition_ids))
        yield from retry_handle(effect, retry_unless_canceled, self.retry)


__all__ = [
    "RetryConfig", "Sleep", "SaveBinlogPaths", "DropVirtualChannel", "NotifyDropPartition",
    "is_canceled_or_timeout", "retry_unless_canceled", "retry_handle", "BrokerMetaWriter",
]
