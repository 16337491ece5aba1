"""Who may sync now: one sync per segment at a time, a bounded number overall.

Models ``internal/flushcommon/syncmgr/sync_manager.go`` (``syncManager.SyncData``, ``Close``, the pool
resize handler) and ``key_lock_dispatcher.go`` (``keyLockDispatcher.Submit``) of Milvus 2.5, as a pure
scheduler: it decides which submitted tasks may run; the simulator runs them and calls :meth:`finish`.

Why per segment: two syncs of one segment must reach DataCoord in order, because each carries the
segment's checkpoint (DataCoord ignores a DmlPosition that does not advance) and its start positions.
Syncs of different segments run in parallel, up to ``dataNode.dataSync.maxParallelSyncMgrTasks``.

In Go, ``Submit`` takes the segment's key lock in the *caller's* goroutine and the worker pool blocks
when full, so the write buffer that submits a second sync of a busy segment waits there. Here
:meth:`SyncManager.submit` returns ``False`` for such a task and queues it; the caller decides whether
to model that wait (see :attr:`SyncManager.pending`).

Simplification: the key lock and the pool's waiters are served first come, first served (Go's mutex
and the pool's condition variable make no such promise); when a task ends, the next task of its
segment takes the key before the freed worker goes to the oldest task waiting for one.
Simplification: no futures, callbacks, task statistics (``TaskStatsJSON``) or release timeout.
"""

from __future__ import annotations

from collections import deque
from typing import Protocol


class SyncTaskLike(Protocol):
    """``syncmgr.Task`` as the scheduler sees it: the segment it syncs."""

    @property
    def segment_id(self) -> int: ...


class SyncManagerClosedError(RuntimeError):
    """``SyncData`` after ``Close``: ``sync manager is closed``."""


class SyncManager:
    """``syncManager`` + ``keyLockDispatcher[int64]``: tasks keyed by segment id on a bounded pool.

    A task is *running* (holds its segment's key and a worker), *waiting for a worker* (holds the key)
    or *waiting for its key* (another task of its segment holds it).
    """

    def __init__(self, max_parallel_sync_mgr_tasks: int = 256):
        if max_parallel_sync_mgr_tasks < 1:
            raise ValueError(f"max_parallel_sync_mgr_tasks must be at least 1, got {max_parallel_sync_mgr_tasks}")
        self._cap = max_parallel_sync_mgr_tasks
        self._running: list[SyncTaskLike] = []
        self._key_holders: dict[int, SyncTaskLike] = {}
        self._waiting_worker: deque[SyncTaskLike] = deque()
        self._waiting_key: dict[int, deque[SyncTaskLike]] = {}
        self._closed = False

    @property
    def cap(self) -> int:
        """The pool's size (``workerPool.Cap``)."""
        return self._cap

    @property
    def running(self) -> tuple[SyncTaskLike, ...]:
        """Tasks running, in the order they started."""
        return tuple(self._running)

    @property
    def pending(self) -> tuple[SyncTaskLike, ...]:
        """Tasks not running yet: those waiting for a worker (oldest first), then those waiting for
        their segment's key (by segment id, each segment's queue oldest first)."""
        waiting_key = (t for key in sorted(self._waiting_key) for t in self._waiting_key[key])
        return (*self._waiting_worker, *waiting_key)

    @property
    def waiting_for_worker(self) -> tuple[SyncTaskLike, ...]:
        """Tasks that hold their segment's key but wait for a free worker, oldest first."""
        return tuple(self._waiting_worker)

    def is_busy(self, segment_id: int) -> bool:
        """Whether a task of this segment holds its key (running or waiting for a worker)."""
        return segment_id in self._key_holders

    def submit(self, task: SyncTaskLike) -> bool:
        """``SyncData`` / ``Submit``: ``True`` if ``task`` may run now, else it is queued (FIFO per segment).

        It may run when no other task of its segment is running or queued ahead of it and fewer than
        ``cap`` tasks are running. Raises :class:`SyncManagerClosedError` after :meth:`close`.
        """
        if self._closed:
            raise SyncManagerClosedError("sync manager is closed")
        if any(t is task for t in (*self._running, *self.pending)):
            raise ValueError("task already submitted: a sync task runs once; build a new one")
        key = task.segment_id
        if key in self._key_holders:
            self._waiting_key.setdefault(key, deque()).append(task)
            return False
        self._key_holders[key] = task
        return self._want_worker(task)

    def _want_worker(self, task: SyncTaskLike) -> bool:
        if len(self._running) < self._cap and not self._waiting_worker:
            self._running.append(task)
            return True
        self._waiting_worker.append(task)
        return False

    def _fill_workers(self) -> list[SyncTaskLike]:
        started = []
        while self._waiting_worker and len(self._running) < self._cap:
            task = self._waiting_worker.popleft()
            self._running.append(task)
            started.append(task)
        return started

    def finish(self, task: SyncTaskLike) -> list[SyncTaskLike]:
        """The end of a running task (its callbacks done): the tasks that may run now, in start order.

        The key is released first (Go's deferred ``Unlock`` runs inside the worker), so the next task
        of the same segment takes it, then the freed worker goes to the oldest task waiting for one.
        """
        if not any(t is task for t in self._running):
            raise ValueError("finish() of a task that is not running; call it once per started task")
        key = task.segment_id
        del self._key_holders[key]
        queue = self._waiting_key.get(key)
        if queue:
            nxt = queue.popleft()
            if not queue:
                del self._waiting_key[key]
            self._key_holders[key] = nxt
            self._waiting_worker.append(nxt)
        self._running = [t for t in self._running if t is not task]
        return self._fill_workers()

    def resize(self, size: int) -> list[SyncTaskLike]:
        """``resizeHandler`` (``workerPool.Resize``): a new pool size; returns the tasks that may run now.

        A size below 1 raises ``ValueError`` and leaves the pool as it was (Go logs and keeps it).
        Shrinking stops no running task.
        """
        if size < 1:
            raise ValueError(f"sync manager pool size must be at least 1, got {size}")
        self._cap = size
        return self._fill_workers()

    def close(self) -> None:
        """``Close``: no more submissions; tasks already submitted still run and finish."""
        self._closed = True


__all__ = ["SyncManager", "SyncManagerClosedError", "SyncTaskLike"]
