"""Python's cyclic garbage collector around simulation runs: paused while a run steps, with what
the run keeps handed to the oldest generation unscanned, and Python's own rule for full
collections applied to what was handed over.

Why. A run allocates many short-lived objects (events, messages, generator frames), which
reference counting frees, and many that live to its end (the broker's logs, the processes, the
nodes). It makes next to no cyclic garbage: none in the TSO and TimeTick scenarios, under a
thousand objects per simulated minute in the fault scenarios, where exceptions travel
(``tests/test_run_gc.py`` holds every registered scenario to at most 3,000 per simulated minute).
With the collector running, every collection during a run scans what lives and frees nothing;
paused, a 60-s TimeTick run takes a fifth to a quarter less CPU than with Python's default
settings (4.2-4.5 s against 5.7-6.1 s, in memory), and a few percent less than scanning every
50,000 allocations and freezing the survivors, as this package did before.

How, for :func:`collector_paused` (``simulate`` wraps its run in it):

* While at least one run is in progress in the process (runs may overlap in threads), the
  collector is off; when the last one ends, it is on again. A process whose collector is off when
  a run starts, or that froze objects of its own (``gc.freeze``), is left as it is: nothing here
  touches its collector. A ``gc.disable()`` made during a run is undone when the run ends.
* Hand-over: at the end of a run that leaves at least :data:`HANDOVER_MIN` young objects (and at
  the end of any run while others are still in progress, whose objects the collector will not
  see while it is off), what is young is moved to the oldest generation (``gc.freeze`` then
  ``gc.unfreeze``: two list moves), instead of being scanned in each younger generation on its
  way there. A smaller run is not handed over: its objects die young once it returns, and a
  young collection frees them more cheaply than a full one.
* A finished simulation is mostly freed by reference counting when ``simulate`` returns
  (:meth:`~milvus_edu.sim.kernel.Simulation.close` breaks its cycles); what is left in cycles (an
  error kept with the frames that raised it), and what a run hands over that dies later, only a
  full collection frees. Python starts one when what its collections promoted since the last
  exceeds a quarter of what survived it, but the hand-over promotes without being counted (and
  ``gc.freeze`` resets the generation counters). So a run starts with a full collection
  (``gc.collect()``, outside the lock) when the runs handed over more than a quarter of the objects
  the collector tracked after the last full collection (``heap``, measured when first needed after
  one came) and the objects tracked now are still more than that heap and a quarter: handed-over
  objects freed since by reference counting (a run's kept rows, dropped) call for no collection. A
  loop of runs keeps a bounded heap: over 20 ten-second TimeTick runs, about 220 MB with
  ``keep_events=False`` and 470 MB with ``keep_events=True``, as with the collector left alone (225
  and 490 MB), where scanning every 50,000 allocations and freezing, as before, reached 590 MB and
  3 GB (measured before runs were closed).
* A ``progress`` callback runs with the collector on, after a hand-over of what the run allocated
  so far, when its run is the only one in progress (:meth:`CollectorPause.resumed`): garbage it
  makes (a plot redrawn at every step) is collected as usual.
* A child forked while the collector is paused (the sink process, or a ``multiprocessing`` worker)
  gets it back on and no runs in progress.
"""

from __future__ import annotations

import gc
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

#: A run's end hands over what is young only from this many objects on (see the module docs).
HANDOVER_MIN = 50_000


class _State:
    """The process's account of runs and hand-overs (one per process; guarded by ``lock``)."""

    def __init__(self):
        self.lock = threading.Lock()
        #: Runs in progress that paused the collector, and whether it is off because of them (set
        #: before ``gc.disable()`` and cleared after ``gc.enable()``, so a forked child knows).
        self.runs = 0
        self.paused = False
        #: Objects handed over since the last full collection, the count of full collections
        #: when last looked, and the objects tracked after the last full collection (None: not
        #: measured yet; it is, when a run starts with objects handed over).
        self.unscanned = 0
        self.full_collections = -1
        self.heap: int | None = None


_STATE = _State()


def _full_collections() -> int:
    return gc.get_stats()[-1]["collections"]


def _heap_size() -> int:
    """Objects the collector tracks now (every generation but the frozen one)."""
    return len(gc.get_objects())


def _tracked_now() -> int:
    """Objects the collector tracks now, counted again when the account says a full collection is due.

    The same count as :func:`_heap_size`, kept apart because the two answer different questions (how big
    the heap was after a collection, how much it has grown since) and ``tests/test_run_gc.py`` replaces
    the first alone, to count the heap as nothing."""
    return len(gc.get_objects())


def _young_size() -> int:
    """Objects in the two younger generations, about: what a hand-over moves.

    The youngest is counted by the collector's own counter (allocations less deallocations since
    it was last emptied, by a collection or a freeze; a little more than its size, as objects that
    were untracked still count), because walking it would touch every object a long run made
    (60 ms for a 60-s TimeTick run); the next one, small unless a young collection came during the
    run (``gc.collect(0)``), is walked."""
    return gc.get_count()[0] + len(gc.get_objects(generation=1))


def _settle(state: _State) -> None:
    """Under the lock: if a full collection came since we last looked (ours, Python's or the
    user's), it saw what was handed over, and the heap after it is to be measured when needed."""
    full = _full_collections()
    if full != state.full_collections:
        state.full_collections = full
        state.unscanned = 0
        state.heap = None


def _hand_over(state: _State, young: int) -> None:
    """Under the lock, the collector off: move what is young (``young`` objects, from
    :func:`_young_size`) to the oldest generation, and count it."""
    if gc.get_freeze_count() == 0:  # a freeze of someone else's would be undone by the unfreeze
        _settle(state)
        state.unscanned += young
        gc.freeze()
        gc.unfreeze()


def _forget_runs_in_child() -> None:
    """After a fork, the child runs no simulation: no runs in progress, and its collector back."""
    global _STATE
    if _STATE.paused:
        gc.enable()
    _STATE = _State()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_runs_in_child)


class CollectorPause:
    """One run's pause of the collector (see the module docs); use :func:`collector_paused`."""

    def __init__(self):
        self._state = _STATE
        self._joined = False

    def __enter__(self) -> CollectorPause:
        state = self._state
        with state.lock:
            if state.runs == 0 and (not gc.isenabled() or gc.get_freeze_count() > 0):
                return self  # the process's own choice: leave its collector alone
            self._joined = True
            _settle(state)
            if state.unscanned and state.heap is None:
                # measured only now (a walk of the heap): what is tracked, less what was handed over since
                state.heap = max(_heap_size() - state.unscanned, 0)
            due = state.unscanned > 0 and state.unscanned > state.heap // 4
            if due:
                # What was handed over may be gone already, freed by reference counting (a run's kept rows,
                # dropped by its caller): what is tracked now decides, before a full collection is paid for
                # (a count costs about a fifth of one), and is what counts as handed over from here.
                state.unscanned = max(_tracked_now() - state.heap, 0)
                due = state.unscanned > state.heap // 4
        if due:  # outside the lock: finalizers run, and may themselves simulate
            gc.collect()
        with state.lock:
            if due:
                _settle(state)
            state.runs += 1
            if not state.paused:
                state.paused = True
                gc.disable()
        return self

    def __exit__(self, *exc) -> None:
        if not self._joined:
            return
        state = self._state
        with state.lock:
            state.runs -= 1
            young = _young_size()
            if state.runs > 0 or young >= HANDOVER_MIN:
                _hand_over(state, young)
            if state.runs == 0 and state.paused:
                gc.enable()
                state.paused = False

    @contextmanager
    def resumed(self) -> Iterator[None]:
        """The collector on around a callback (``progress``), after a hand-over of what the run
        allocated so far, when this run is the only one in progress; paused again after it.

        The hand-over here has no :data:`HANDOVER_MIN`: the run goes on, so what it allocated lives
        on, and the collector would only scan it again at every step."""
        state = self._state
        with state.lock:
            alone = self._joined and state.runs == 1 and state.paused
            if alone:
                _hand_over(state, _young_size())
                gc.enable()
                state.paused = False
        try:
            yield
        finally:
            if alone:
                with state.lock:
                    if not state.paused:
                        state.paused = True
                        gc.disable()


def collector_paused() -> CollectorPause:
    """``with collector_paused() as pause:`` around a run: see the module docs."""
    return CollectorPause()
