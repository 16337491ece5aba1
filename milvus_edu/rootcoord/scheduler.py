"""RootCoord's DDL scheduler, reduced to the bookkeeping behind the DDL source's time tick.

Models ``internal/rootcoord/scheduler.go`` (``scheduler``: ``AddTask``, ``setTs``, ``enqueue``,
``taskLoop``, ``execute``, ``setMinDdlTs``, ``GetMinDdlTs``, ``syncTsLoop``,
``updateLatestTsoAsMinDdlTs``, ``executeTaskWithLock``) and ``baseTask`` of ``task.go``.

Every DDL task gets its timestamp from ``GenerateTSO(1)`` under the scheduler lock and is pushed onto
a min-heap by timestamp in the same critical section. After a task runs, finished tasks are popped
from the top of the heap while the top is finished; the last popped timestamp is ``minDdlTs``. So
``minDdlTs`` is the timestamp of a finished task below which every task has finished: rootcoord's
DDL messages up to it are all out, and it may promise that time to the DML channels. A slow task
holds the value back for every channel until it finishes. ``syncTsLoop`` adds an empty task every
``proxy.timeTickInterval`` so the value keeps moving when no DDL arrives.

Simplification: task ids (``setID`` from the id allocator) are not modelled.
Simplification: a task's ``Prepare``/``Execute`` are the simulator's business; it reports the outcome
to :meth:`Scheduler.execute`.
Simplification: the cluster/database/collection key locks of the lock path are not modelled, and the
task channel is unbounded (Go's holds 10240 and blocks ``AddTask`` when full).
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from itertools import count

from ..tso import TSOError

SYNC_TS_TASK = "syncTs"


@dataclass(eq=False)
class DdlTask:
    """``baseTask``: the fields the min-ddl-ts bookkeeping reads (``ts``, ``isFinished``) and the outcome."""

    name: str = SYNC_TS_TASK
    ts: int = 0
    finished: bool = False
    error: str | None = None

    def is_finished(self) -> bool:
        """``IsFinished``: set by ``NotifyDone``, success or failure."""
        return self.finished


class Scheduler:
    """``scheduler``: timestamps, the task queue, the heap of unfinished timestamps and ``minDdlTs``.

    ``generate_tso(count)`` returns the LAST timestamp of a batch (``GlobalTSOAllocator.generate_tso``)
    and raises :class:`~milvus_edu.tso.TSOError` when it cannot allocate.
    """

    def __init__(self, generate_tso: Callable[[int], int]):
        self.generate_tso = generate_tso
        self._min_ddl_ts = 0
        self._heap: list[tuple[int, int, DdlTask]] = []
        self._queue: deque[DdlTask] = deque()
        self._seq = count()  # equal timestamps leave the heap in arrival order (Go's order is arbitrary)

    # ---- adding tasks ---------------------------------------------------------------------------
    def _set_ts(self, task: DdlTask) -> int:
        """``setTs``: allocate the task's ts and push it onto the heap (a failed allocation pushes nothing)."""
        ts = self.generate_tso(1)
        task.ts = ts
        heapq.heappush(self._heap, (ts, next(self._seq), task))
        return ts

    def add_task(self, task: DdlTask) -> int:
        """``AddTask`` for a task without a locker key: ts, heap push and enqueue in one critical section.

        Returns the task's ts; a :class:`~milvus_edu.tso.TSOError` propagates and the task is not queued.
        """
        ts = self._set_ts(task)
        self._queue.append(task)
        return ts

    def add_task_with_lock(self, task: DdlTask) -> int:
        """``AddTask`` -> ``executeTaskWithLock``: the path of DDL tasks with a locker key.

        With ``rootCoord.useLockScheduler`` (2.5 default true) such a task never enters the queue:
        its ts is allocated and pushed under the scheduler lock, then the calling RPC runs it at once,
        concurrently with the queue. The caller reports the end with :meth:`execute`. Returns the ts.
        """
        return self._set_ts(task)

    def update_latest_tso_as_min_ddl_ts(self) -> int | None:
        """``updateLatestTsoAsMinDdlTs`` (one ``syncTsLoop`` tick): enqueue an empty base task.

        Its ts is newer than every task in the heap, so once it runs ``minDdlTs`` catches up with
        the TSO. Returns its ts, or ``None`` when allocation failed (Go only logs that).
        """
        try:
            return self.add_task(DdlTask(SYNC_TS_TASK))
        except TSOError:
            return None

    # ---- running tasks --------------------------------------------------------------------------
    def next_task(self) -> DdlTask | None:
        """``taskLoop``'s receive from ``taskChan``: the oldest queued task, or ``None`` if none is queued."""
        return self._queue.popleft() if self._queue else None

    def execute(self, task: DdlTask, error: str | None = None) -> list[int]:
        """``execute``: the task is done (``NotifyDone(err)``), then ``setMinDdlTs`` runs whatever the outcome.

        ``error`` is the text of a failed ``Prepare``/``Execute``, ``None`` for success. Returns the
        timestamps popped from the heap. ``ValueError`` for a task that already finished (Go would
        block on its full ``done`` channel).
        """
        if task.finished:
            raise ValueError(f"DDL task {task.name!r} with ts {task.ts} already finished; execute each task once")
        task.error = error
        task.finished = True
        return self.set_min_ddl_ts()

    def set_min_ddl_ts(self) -> list[int]:
        """``setMinDdlTs``: pop finished tasks from the heap top, storing each popped ts as ``minDdlTs``."""
        popped = []
        while self._heap and self._heap[0][2].is_finished():
            ts, _, _ = heapq.heappop(self._heap)
            self._min_ddl_ts = ts
            popped.append(ts)
        return popped

    def get_min_ddl_ts(self) -> int:
        """``GetMinDdlTs``: 0 until the first task finished (the tick loop then skips as "starting")."""
        return self._min_ddl_ts

    # ---- read-only views ------------------------------------------------------------------------
    def heap_ts(self) -> list[int]:
        """The timestamps still in the heap, ascending: unfinished tasks and finished ones behind them."""
        return sorted(ts for ts, _, _ in self._heap)

    def queued(self) -> list[DdlTask]:
        """The tasks waiting in the queue, oldest first."""
        return list(self._queue)
