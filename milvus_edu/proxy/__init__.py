"""The proxy's side of TimeTick (``internal/proxy``): the DML queue's pchannel statistics, the ticker, and the
collection meta cache."""

from .channels_time_ticker import ChannelsTimeTicker, TickResult, channels_time_tick_msg
from .meta_cache import CollectionInfo, MetaCache, check_schema_timestamp
from .task_scheduler import (
    DmlTask,
    DmTaskQueue,
    HeapPChanStats,
    PChanStatistics,
    PChanStats,
    ScanPChanStats,
    TooManyRequestsError,
)

__all__ = [
    "ChannelsTimeTicker",
    "CollectionInfo",
    "MetaCache",
    "check_schema_timestamp",
    "TickResult",
    "channels_time_tick_msg",
    "DmlTask",
    "DmTaskQueue",
    "HeapPChanStats",
    "PChanStatistics",
    "PChanStats",
    "ScanPChanStats",
    "TooManyRequestsError",
]
