"""RootCoord: the TSO wiring (``internal/rootcoord/root_coord.go``) and the time-tick sync
(``timeticksync.go``, ``ddl_ts_lock_manager.go``, ``scheduler.go``)."""

from .ddl_ts_lock_manager import DdlTsLockManager
from .root_coord import GLOBAL_ID_ALLOCATOR_SUB_PATH, GLOBAL_TSO_ALLOCATOR_KEY, KV_ROOT_PATH, Core
from .scheduler import DdlTask, Scheduler
from .timeticksync import (
    DDL_SOURCE_ID,
    ChanTsMsg,
    MinDdlTsTick,
    Status,
    TimeTickUpdate,
    TimetickSync,
    TtHistogram,
    UpdateTimeTickError,
    min_time_tick,
    send_min_ddl_ts_as_tt,
    send_time_tick,
    update_channel_time_tick,
)

__all__ = [
    "Core",
    "KV_ROOT_PATH",
    "GLOBAL_ID_ALLOCATOR_SUB_PATH",
    "GLOBAL_TSO_ALLOCATOR_KEY",
    "DDL_SOURCE_ID",
    "ChanTsMsg",
    "DdlTask",
    "DdlTsLockManager",
    "MinDdlTsTick",
    "Scheduler",
    "Status",
    "TimeTickUpdate",
    "TimetickSync",
    "TtHistogram",
    "UpdateTimeTickError",
    "min_time_tick",
    "send_min_ddl_ts_as_tt",
    "send_time_tick",
    "update_channel_time_tick",
]
