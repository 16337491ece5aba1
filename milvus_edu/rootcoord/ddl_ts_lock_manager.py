"""The DDL timestamp of rootcoord's background work (collection and partition garbage collection).

Models ``internal/rootcoord/ddl_ts_lock_manager.go`` (``ddlTsLockManager``). Dropping a collection's
data is not a scheduler task: the garbage collector takes this manager's lock, raises the in-progress
count, allocates a timestamp and broadcasts the drop message to the DML channels, then records that
timestamp with ``UpdateLastTs``. While the count is above zero, the time-tick loop gets the last
recorded timestamp instead of a fresh one, so no tick can pass the drop message still being sent.

Simplification: Go's mutex and atomics are a flag and plain integers; a pure component cannot block,
so taking the lock while it is held raises instead of waiting (the simulator waits first).
"""

from __future__ import annotations

from collections.abc import Callable

from ..tso import TSOError


class DdlTsLockManager:
    """``ddlTsLockManager``: ``GetMinDdlTs``, ``AddRefCnt``, ``Lock``, ``Unlock``, ``UpdateLastTs``.

    ``generate_tso(count)`` returns the LAST timestamp of a batch (``GlobalTSOAllocator.generate_tso``)
    and raises :class:`~milvus_edu.tso.TSOError` when it cannot allocate.
    """

    def __init__(self, generate_tso: Callable[[int], int]):
        self.generate_tso = generate_tso
        self.last_ts = 0
        self.in_progress_cnt = 0
        self._locked = False

    @property
    def locked(self) -> bool:
        """True while someone holds the lock (the garbage collector, or ``GetMinDdlTs`` itself)."""
        return self._locked

    def get_min_ddl_ts(self) -> int:
        """``GetMinDdlTs``: while background DDL is in progress, the last recorded ts; else a fresh one.

        The fresh ts is allocated under the lock and recorded as ``last_ts``; if allocation fails the
        last recorded ts is returned (0 before anything was recorded, which the tick loop skips).
        """
        if self.in_progress_cnt > 0:
            return self.last_ts
        self.lock()
        try:
            ts = self.generate_tso(1)
            self.update_last_ts(ts)
        except TSOError:
            return self.last_ts
        finally:
            self.unlock()
        return ts

    def add_ref_cnt(self, delta: int) -> None:
        """``AddRefCnt``: count background DDL in progress up (1) or down (-1); Go does not check the sign."""
        self.in_progress_cnt += delta

    def lock(self) -> None:
        """``Lock``: take the mutex; raises ``RuntimeError`` if it is held (Go would block here)."""
        if self._locked:
            raise RuntimeError("ddlTsLockManager lock is already held; wait for unlock() before calling lock()")
        self._locked = True

    def unlock(self) -> None:
        """``Unlock``: release the mutex; raises ``RuntimeError`` if it is not held (Go panics)."""
        if not self._locked:
            raise RuntimeError("ddlTsLockManager unlock of an unlocked lock; call lock() first")
        self._locked = False

    def update_last_ts(self, ts: int) -> None:
        """``UpdateLastTs``: record ``ts`` (the garbage collector's drop message ts) as the last DDL ts."""
        self.last_ts = ts
