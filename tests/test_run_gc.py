"""The collector during a run: survivors frozen while it lasts, everything unfrozen after it, and
a process's own frozen objects left alone (``milvus_edu.sim.run._fewer_gc_passes``)."""

from __future__ import annotations

import gc
import weakref

import milvus_edu
from milvus_edu.sim.run import _freeze_survivors


class _Node:
    def __init__(self):
        self.other = None


def _cycle():
    """A reference cycle, and a weak reference that says whether it was collected."""
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    return a, weakref.ref(a)


def test_survivors_are_frozen_during_a_run_and_a_cycle_dropped_meanwhile_is_collected_after_it():
    assert gc.get_freeze_count() == 0
    seen = {}

    def progress(done, total):
        if "ref" in seen:
            return
        obj, seen["ref"] = _cycle()
        gc.collect(0)  # the cycle survives (it is still referenced): it is frozen
        seen["frozen"] = gc.get_freeze_count()
        del obj  # now garbage, but frozen: the collector does not see it until the run ends
        gc.collect()
        seen["alive_during_run"] = seen["ref"]() is not None

    milvus_edu.simulate("tso-basics", seed=1, duration_s=2, progress=progress)
    assert seen["frozen"] > 0 and seen["alive_during_run"]
    assert gc.get_freeze_count() == 0 and _freeze_survivors not in gc.callbacks
    gc.collect()
    assert seen["ref"]() is None


def test_a_process_that_froze_objects_itself_keeps_them_frozen_and_nothing_more_is_frozen():
    gc.freeze()
    try:
        mine = gc.get_freeze_count()
        during = []

        def progress(done, total):
            gc.collect(0)
            during.append((gc.get_freeze_count(), _freeze_survivors in gc.callbacks))

        milvus_edu.simulate("tso-basics", seed=1, duration_s=2, progress=progress)
        # frozen objects that reference counting frees leave the count, so it may only go down;
        # unfreezing would take it to 0
        assert during and all(0 < frozen <= mine and not hooked for frozen, hooked in during)
        assert 0 < gc.get_freeze_count() <= mine
    finally:
        gc.unfreeze()


def test_a_forked_child_forgets_the_runs_in_progress_and_their_hook():
    """The sink process is forked while a run may be in progress (in another thread): the child
    must not keep freezing on the parent's behalf."""
    import os

    from milvus_edu.sim import run as run_module

    seen = {}

    def progress(done, total):
        if seen:
            return
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: report what it inherited, then leave at once
            state = (run_module._GC_RUNS[0], _freeze_survivors in gc.callbacks, run_module._GC_LOCK.locked())
            os.write(write, repr(state).encode())
            os._exit(0)
        os.close(write)
        seen["child"] = os.read(read, 200).decode()
        os.close(read)
        os.waitpid(pid, 0)
        seen["parent"] = (run_module._GC_RUNS[0], _freeze_survivors in gc.callbacks)

    milvus_edu.simulate("tso-basics", seed=1, duration_s=2, progress=progress)
    assert seen["parent"] == (1, True)
    assert seen["child"] == repr((0, False, False))


def test_a_collection_in_another_thread_after_the_runs_ended_freezes_nothing():
    """The hook checks, under the lock, that a run is in progress: called when none is, it does nothing."""
    assert gc.get_freeze_count() == 0
    _freeze_survivors("stop", {"generation": 0})
    assert gc.get_freeze_count() == 0
