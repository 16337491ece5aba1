"""DataCoord: segment meta, channel checkpoints, SaveBinlogPaths, Flush and flush state, recovery positions.

Models ``internal/datacoord`` and ``internal/metastore/kv/datacoord`` of Milvus 2.5. Components here
are pure (no simulation imports): ids, time and the KV are injected, and ``Server.flush`` is an effect
generator the simulator drives.
"""

from .catalog import (
    CHANNEL_CHECKPOINT_PREFIX,
    META_ROOT_PATH,
    SEGMENT_BINLOG_PATH_PREFIX,
    SEGMENT_DELTALOG_PATH_PREFIX,
    SEGMENT_PREFIX,
    SEGMENT_STATSLOG_PATH_PREFIX,
    Catalog,
    CatalogError,
    build_channel_cp_key,
    build_field_binlog_path,
    build_field_deltalog_path,
    build_field_statslog_path,
    build_segment_path,
    calc_row_count_from_binlog,
    compress_field_binlogs,
    get_log_id_from_binlog_path,
)
from .handler import ALL_PARTITION_ID, Handler, VchannelInfo, to_msg_position
from .meta import (
    MAX_UINT64,
    CollectionInfo,
    Meta,
    UpdateOperator,
    UpdateSegmentPack,
    add_binlogs_operator,
    create_l0_operator,
    is_flush_state,
    is_segment_healthy,
    merge_field_binlogs,
    update_as_dropped_if_empty_when_flushing,
    update_check_point_operator,
    update_start_position,
    update_status_operator,
    with_channel,
    with_collection,
)
from .segment_manager import SegmentManager
from .services import (
    DATACOORD_ROLE,
    FLUSH_CHANNELS_ATTEMPTS,
    AllocTimestamp,
    ChannelManager,
    FlushChannels,
    FlushResult,
    RecoveryInfo,
    SegmentBinlogs,
    SegmentInfoResult,
    Server,
    Sleep,
    StateCode,
)

__all__ = [
    "ALL_PARTITION_ID", "CHANNEL_CHECKPOINT_PREFIX", "DATACOORD_ROLE", "FLUSH_CHANNELS_ATTEMPTS", "MAX_UINT64",
    "META_ROOT_PATH", "SEGMENT_BINLOG_PATH_PREFIX", "SEGMENT_DELTALOG_PATH_PREFIX", "SEGMENT_PREFIX",
    "SEGMENT_STATSLOG_PATH_PREFIX", "AllocTimestamp", "Catalog", "CatalogError", "ChannelManager",
    "CollectionInfo", "FlushChannels", "FlushResult", "Handler", "Meta", "RecoveryInfo", "SegmentBinlogs",
    "SegmentInfoResult", "SegmentManager", "Server", "Sleep", "StateCode", "UpdateOperator",
    "UpdateSegmentPack", "VchannelInfo", "add_binlogs_operator", "build_channel_cp_key",
    "build_field_binlog_path", "build_field_deltalog_path", "build_field_statslog_path", "build_segment_path",
    "calc_row_count_from_binlog", "compress_field_binlogs", "create_l0_operator", "get_log_id_from_binlog_path",
    "is_flush_state", "is_segment_healthy", "merge_field_binlogs", "to_msg_position",
    "update_as_dropped_if_empty_when_flushing", "update_check_point_operator", "update_start_position",
    "update_status_operator", "with_channel", "with_collection",
]
