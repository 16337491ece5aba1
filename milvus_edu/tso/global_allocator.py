"""``GlobalTSOAllocator``: the allocator rootcoord exposes, over a :class:`TimestampOracle`.

Models ``internal/tso/global_allocator.go`` (Milvus 2.5).

``GenerateTSO`` may sleep (200 ms while the oracle is not initialised, 50 ms when the logical counter
overflows) and retries up to 10 times. A pure component cannot sleep, so the faithful loop is written
once as a generator, :meth:`GlobalTSOAllocator.generate_tso_steps`, that *yields* each sleep as a
:class:`~milvus_edu.effects.Sleep` effect and *returns* the timestamp. :func:`drive_with_sleep` runs it with
real sleeps (live mode); in the simulator the rootcoord node's effect interpreter runs it with simulated ones.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ..config import MS, BugSwitches, TSOParams
from ..effects import Sleep, Steps, drive, sleeping
from ..events import NULL_RECORDER, Recorder
from ..tsoutil import compose_ts
from .tso import ZERO_TIME, TimestampOracle


class TSOError(Exception):
    """GenerateTSO failed ("tso count should be positive", "can not get timestamp")."""


SleepSteps = Steps[int]
"""A step generator that yields only :class:`~milvus_edu.effects.Sleep` effects."""


def drive_with_sleep(steps: Steps, sleep: Callable[[float], None] = time.sleep):
    """Run a step generator that yields only :class:`~milvus_edu.effects.Sleep` to completion, really sleeping
    (``sleep(seconds)``) for each; returns its value. :func:`milvus_edu.effects.drive` with a sleeping handler,
    kept under this name because the TSO's callers and the book use it."""
    return drive(steps, sleeping(sleep))


class GlobalTSOAllocator:
    """``GlobalTSOAllocator``: Initialize, UpdateTSO, SetTSO, GenerateTSO, Alloc, AllocOne, Reset."""

    def __init__(
        self,
        key: str,
        txn_kv,
        now_ns: Callable[[], int],
        params: TSOParams | None = None,
        switches: BugSwitches | None = None,
        recorder: Recorder = NULL_RECORDER,
        node: str = "rootcoord",
    ):
        self.params = params or TSOParams()
        self.tso = TimestampOracle(key, txn_kv, now_ns, self.params, switches, recorder, node)
        self.limit_max_logic = self.params.limit_max_logic
        self.recorder = recorder
        self.node = node
        # the event of every allocation, bound once (the hottest emit of a TSO run)
        self._emit_alloc = recorder.emitter("tso.alloc", "ts", "count", "physical_ms", "logical", "window_end_ms",
                                            "clock_ms")

    def initialize(self) -> None:
        """``Initialize``: ``InitTimestamp``."""
        self.tso.init_timestamp()

    def update_tso(self) -> None:
        """``UpdateTSO``: ``UpdateTimestamp``."""
        self.tso.update_timestamp()

    def set_tso(self, tso: int) -> None:
        """``SetTSO``: ``ResetUserTimestamp``."""
        self.tso.reset_user_timestamp(tso)

    def reset(self) -> None:
        """``Reset``: ``ResetTimestamp``."""
        self.tso.reset_timestamp()

    def get_last_saved_time(self) -> int:
        """``GetLastSavedTime``: the saved window end (Unix ns)."""
        return self.tso.last_saved_time_ns

    def set_limit_max_logic(self, flag: bool) -> None:
        """``SetLimitMaxLogic``: when False the logical part may carry into the physical bits."""
        self.limit_max_logic = flag

    def generate_tso_steps(self, count: int) -> SleepSteps:
        """``GenerateTSO`` as a step generator: yields :class:`~milvus_edu.effects.Sleep`, returns the LAST ts of the batch.

        The batch is ``[ret - count + 1, ret]``. The logical counter is bumped even when the attempt
        is then rejected for overflow (as in Go); the next ``UpdateTimestamp`` replaces the window
        because more than half the logical space is used.
        """
        if count <= 0:
            self.recorder.emit("tso.alloc_failed", self.node, count=count, error="tso count should be positive")
            raise TSOError("tso count should be positive")
        p = self.params
        for _ in range(p.generate_max_retry):
            cur = self.tso.tso
            if cur is None or cur.physical_ns == ZERO_TIME:
                self.recorder.emit("tso.alloc_retry", self.node, count=count, error="sync hasn't completed yet")
                yield Sleep(p.not_initialised_sleep_ns)
                continue
            physical = cur.physical_ms
            cur.logical += count
            logical = cur.logical
            if logical >= p.max_logical and self.limit_max_logic:
                self.recorder.emit(
                    "tso.alloc_retry", self.node, count=count, physical_ms=physical, logical=logical,
                    error="logical part outside of max logical interval",
                )
                yield Sleep(p.update_timestamp_step_ns)
                continue
            ts = compose_ts(physical, logical)
            self._emit_alloc(self.node, ts, count, physical, logical, self.tso.last_saved_time_ns // MS,
                             self.tso.now_ns() // MS)
            return ts
        self.recorder.emit("tso.alloc_failed", self.node, count=count, error="can not get timestamp")
        raise TSOError("can not get timestamp")

    def generate_tso(self, count: int, sleep: Callable[[float], None] = time.sleep) -> int:
        """``GenerateTSO`` with real sleeps between retries."""
        return drive_with_sleep(self.generate_tso_steps(count), sleep)

    def alloc(self, count: int, sleep: Callable[[float], None] = time.sleep) -> int:
        """``Alloc``: ``GenerateTSO(count)``; despite Go's comment this is the LAST ts of the batch."""
        return self.generate_tso(count, sleep)

    def alloc_one(self, sleep: Callable[[float], None] = time.sleep) -> int:
        """``AllocOne``: ``GenerateTSO(1)``."""
        return self.generate_tso(1, sleep)
