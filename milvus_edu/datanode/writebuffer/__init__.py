"""The DataNode write buffer: segment buffers, sync policies, per-channel write buffers and their manager.

Models ``internal/flushcommon/writebuffer`` of Milvus 2.5 (see each module for the Go file it follows).
"""

from .manager import BufferManager
from .segment_buffer import (
    NO_LIMIT,
    BufferBase,
    DeltaBuffer,
    InsertBuffer,
    SegmentBuffer,
    TimeRange,
    delete_row_size,
    get_earliest_checkpoint,
    insert_data_memory_size,
)
from .sync_policy import (
    NON_FLUSH_TS,
    SyncPolicy,
    get_dropped_segment_policy,
    get_flush_ts_policy,
    get_full_buffer_policy,
    get_oldest_buffer_policy,
    get_sealed_segments_policy,
    get_sync_stale_buffer_policy,
)
from .write_buffer import CheckpointCandidate, InsertGroup, WriteBuffer, prepare_insert

__all__ = [
    "NON_FLUSH_TS",
    "NO_LIMIT",
    "BufferBase",
    "BufferManager",
    "CheckpointCandidate",
    "DeltaBuffer",
    "InsertBuffer",
    "InsertGroup",
    "SegmentBuffer",
    "SyncPolicy",
    "TimeRange",
    "WriteBuffer",
    "delete_row_size",
    "get_dropped_segment_policy",
    "get_earliest_checkpoint",
    "get_flush_ts_policy",
    "get_full_buffer_policy",
    "get_oldest_buffer_policy",
    "get_sealed_segments_policy",
    "get_sync_stale_buffer_policy",
    "insert_data_memory_size",
    "prepare_insert",
]
