"""Live mode: the real TSO on the wall clock, with ``tsLoop`` as a background thread.

The same components as the simulator (``Core``, ``GlobalTSOAllocator``, ``TimestampOracle``), driven
by ``time.time_ns`` and real sleeps, through the one effect interpreter (:func:`milvus_edu.effects.drive`, sleeps
answered with ``time.sleep``). Allocation is thread-safe: every step of ``GenerateTSO`` and every ``UpdateTSO``
runs under one lock (Go uses atomics on the window object); retry sleeps happen outside the lock, so ``tsLoop`` can
move the window on while an allocation waits, as in Milvus.

Use it to feel the speed of the real algorithm, or to keep a durable TSO in a SQLite file::

    with LiveTSO.open("tso.db") as tso:
        ts = tso.alloc_one()
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from .sim.ticker import next_grid_tick
from .config import MS, BugSwitches, TSOParams
from .effects import drive, sleeping
from .events import NULL_RECORDER, Recorder
from .rootcoord import Core
from .storage.kv import MemoryKV, SQLiteKV


class LiveTSO:
    """A rootcoord TSO on the wall clock; ``start()`` it (or use ``with``) before allocating.

    ``monotonic``: the clock ``tsLoop``'s ticker keeps its grid on (seconds; Go's tickers use the monotonic clock).
    """

    def __init__(self, kv=None, params: TSOParams | None = None, switches: BugSwitches | None = None,
                 recorder: Recorder = NULL_RECORDER, node: str = "rootcoord",
                 monotonic: Callable[[], float] = time.monotonic):
        self.kv = kv if kv is not None else MemoryKV(time.time_ns)
        self.core = Core(self.kv, time.time_ns, node, params, switches, recorder)
        self.params = self.core.params
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._monotonic = monotonic
        self.update_errors = 0

    @classmethod
    def open(cls, path: str | Path, **kwargs) -> "LiveTSO":
        """A live TSO whose window is kept in the SQLite file ``path`` (created if missing)."""
        return cls(SQLiteKV(path, time.time_ns), **kwargs)

    def start(self) -> "LiveTSO":
        """``initTSOAllocator`` then start the ``tsLoop`` thread (every ``UpdateTimestampStep``)."""
        if self._thread is not None:
            raise RuntimeError("LiveTSO already started")
        with self._lock:
            self.core.init_tso_allocator()
        self._stop.clear()
        self._thread = threading.Thread(target=self._ts_loop, name="tsLoop", daemon=True)
        self._thread.start()
        return self

    def _ts_loop(self) -> None:
        """``tsLoop`` on a ``time.Ticker``: ticks on a fixed grid from the start; one that fell due while a tick's
        body ran comes at once, the ones after it are dropped."""
        step = self.params.update_timestamp_step_ns / 1e9
        due = self._monotonic() + step
        while not self._stop.wait(max(0.0, due - self._monotonic())):
            due = next_grid_tick(due, step, self._monotonic())
            with self._lock:
                if not self.core.ts_loop_tick():
                    self.update_errors += 1

    def stop(self) -> None:
        """Stop ``tsLoop`` (the saved window stays in the KV)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def __enter__(self) -> "LiveTSO":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
        if isinstance(self.kv, SQLiteKV):
            self.kv.close()

    def alloc(self, count: int, peer: str | None = None) -> int:
        """``AllocTimestamp``: reserve ``count`` timestamps and return the FIRST of the batch."""
        if self._thread is None:
            raise RuntimeError("call start() (or use `with LiveTSO(...)`) before allocating")
        steps = _each_step_under(self._lock, self.core.alloc_timestamp_steps(count, peer=peer))
        return drive(steps, sleeping(time.sleep))[0]

    def alloc_one(self) -> int:
        """One timestamp."""
        return self.alloc(1)

    def last_saved_time_ms(self) -> int:
        """The saved window end, in Unix milliseconds."""
        return self.core.tso_allocator.get_last_saved_time() // MS


def _each_step_under(lock: threading.Lock, steps):
    """``steps`` with every step between two effects run while holding ``lock``, and the effects (GenerateTSO's
    retry sleeps) answered outside it, so ``tsLoop`` can move the window on while an allocation waits."""
    try:
        with lock:
            effect = next(steps)
        while True:
            result = yield effect
            with lock:
                effect = steps.send(result)
    except StopIteration as stop:
        return stop.value
