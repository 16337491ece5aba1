"""The timestamp oracle of rootcoord (``internal/tso``)."""

from .global_allocator import GlobalTSOAllocator, TSOError, drive_with_sleep
from .tso import AtomicObject, TimestampOracle

__all__ = ["GlobalTSOAllocator", "TimestampOracle", "AtomicObject", "TSOError", "drive_with_sleep"]
