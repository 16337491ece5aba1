"""The proxy's side of TimeTick (``internal/proxy``): the DML queue's pchannel statistics and the ticker."""

from .channels_time_ticker import ChannelsTimeTicker, TickResult, channels_time_tick_msg
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
