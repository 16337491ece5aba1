"""The QueryNode's side of consistency (``internal/querynodev2`` and segcore): MVCC segments and the shard
delegator's tsafe, which a read waits on until it has consumed everything up to its guarantee timestamp."""

from .delegator import (TS_LAG_TOO_LARGE, DeadlineExceeded, ShardDelegator, TSafeChanged, TsLagTooLargeError,
                        go_duration)
from .exclude_info import ExcludedSegments
from .pipeline import DeleteNode, FilterNode, InsertNode, PackResult, Pipeline, TimeRange
from .segcore import (UNLIMITED, DeletedRecord, GrowingSegment, InsertRecord, Row, SealedSegment,
                      merge_segcore_retrieve_results)

__all__ = ["TS_LAG_TOO_LARGE", "DeadlineExceeded", "ShardDelegator", "TSafeChanged", "TsLagTooLargeError",
           "go_duration",
           "DeletedRecord", "GrowingSegment", "InsertRecord", "Row", "SealedSegment", "UNLIMITED",
           "merge_segcore_retrieve_results", "ExcludedSegments",
           "DeleteNode", "FilterNode", "InsertNode", "PackResult", "Pipeline", "TimeRange"]
