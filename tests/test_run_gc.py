"""The collector around runs (``milvus_edu.sim.run._collector_paused``): off while a run is in
progress, on again after it; what a run kept handed to the oldest generation; a full collection
before a run when earlier runs handed over more than a quarter of the heap; a process's own choices
(collector off, objects frozen) left alone; and the premise of it all, that no scenario makes much
cyclic garbage while it runs."""

from __future__ import annotations

import contextlib
import gc
import os

import pytest

import milvus_edu
from milvus_edu.registry import scenarios
from milvus_edu.sim import run as run_module
from milvus_edu.sim.kernel import Simulation


@pytest.fixture
def fresh_state(monkeypatch):
    """A fresh account of the runs (earlier tests' runs left theirs), put back after the test."""
    state = run_module._GCState()
    monkeypatch.setattr(run_module, "_GC", state)
    return state


def _full_collections() -> int:
    return gc.get_stats()[-1]["collections"]


def _dead_simulations() -> int:
    """Simulations still in memory (no test keeps one: every one counted is garbage not yet freed)."""
    return sum(1 for obj in gc.get_objects() if isinstance(obj, Simulation))


def test_the_collector_is_off_during_a_run_and_on_after_it_with_its_thresholds(fresh_state):
    before = gc.get_threshold()
    seen = []
    milvus_edu.simulate("tso-basics", seed=1, duration_s=2,
                        progress=lambda done, total: seen.append(gc.isenabled()))
    assert seen and not any(seen)
    assert gc.isenabled() and gc.get_threshold() == before and gc.get_freeze_count() == 0


def test_what_a_run_kept_goes_to_the_oldest_generation_unscanned(fresh_state):
    gc.collect()
    collections = [stats["collections"] for stats in gc.get_stats()]
    milvus_edu.simulate("timetick-basics", seed=1, duration_s=2, keep_events=False)
    # no collection of any generation came during the run, yet the young generation holds only
    # what was allocated after it: the run's objects were moved on
    assert fresh_state.unscanned > 20_000
    assert len(gc.get_objects(generation=0)) < 5_000
    assert [stats["collections"] for stats in gc.get_stats()][:2] == collections[:2]


def test_a_process_that_turned_the_collector_off_keeps_it_off_and_gets_no_collection(fresh_state):
    gc.disable()
    try:
        fresh_state.unscanned, fresh_state.heap = 10**9, 0  # a collection would be due
        full = _full_collections()
        milvus_edu.simulate("tso-basics", seed=1, duration_s=2)
        assert not gc.isenabled()
        assert _full_collections() == full
    finally:
        gc.enable()


def test_a_process_that_froze_objects_itself_keeps_them_frozen(fresh_state):
    gc.freeze()
    try:
        mine = gc.get_freeze_count()
        milvus_edu.simulate("tso-basics", seed=1, duration_s=2)
        # reference counting may free frozen objects, so the count may only fall; unfreezing would
        # take it to 0, and the run's objects stay out of the frozen generation
        assert 0 < gc.get_freeze_count() <= mine
        assert gc.isenabled()
    finally:
        gc.unfreeze()


def test_a_child_forked_during_a_run_has_its_collector_back_and_no_runs_in_progress(fresh_state):
    seen = {}

    def progress(done, total):
        if seen:
            return
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: report what it inherited, then leave at once
            os.write(write, repr((gc.isenabled(), run_module._GC.runs)).encode())
            os._exit(0)
        os.close(write)
        seen["child"] = os.read(read, 200).decode()
        os.close(read)
        os.waitpid(pid, 0)
        seen["parent"] = (gc.isenabled(), run_module._GC.runs)

    milvus_edu.simulate("tso-basics", seed=1, duration_s=2, progress=progress)
    assert seen["parent"] == (False, 1)
    assert seen["child"] == repr((True, 0))


def test_runs_back_to_back_keep_a_bounded_heap_when_collections_are_due(fresh_state):
    """With the heap counted small, every run hands over more than a quarter of it: each run starts
    with a full collection, and dead simulations do not pile up."""
    gc.collect()
    gc.collect()
    assert _dead_simulations() == 0
    full = _full_collections()
    for seed in range(6):
        fresh_state.heap = 0
        milvus_edu.simulate("timetick-basics", seed=seed, duration_s=0.5, keep_events=False)
    # a collection frees the simulation before last and finalizes the last one (its suspended
    # generators), which the next one frees
    assert _dead_simulations() <= 2
    assert _full_collections() - full == 5
    assert fresh_state.unscanned > 0 and fresh_state.heap > 0


def test_no_collection_before_a_run_while_earlier_runs_handed_over_less_than_a_quarter(fresh_state):
    gc.collect()
    gc.collect()
    full = _full_collections()
    for seed in range(4):
        fresh_state.heap = 10**12
        milvus_edu.simulate("timetick-basics", seed=seed, duration_s=0.5, keep_events=False)
    assert _full_collections() == full
    assert _dead_simulations() >= 3  # what the rule is for: nothing frees them meanwhile
    gc.collect()
    gc.collect()
    assert _dead_simulations() == 0


def test_a_full_collection_that_came_between_runs_settles_the_account(fresh_state):
    milvus_edu.simulate("tso-basics", seed=1, duration_s=2)
    assert fresh_state.unscanned > 0
    gc.collect()
    full = _full_collections()
    fresh_state.heap = 0  # would make a collection due, had none come
    milvus_edu.simulate("tso-basics", seed=2, duration_s=2)
    assert _full_collections() == full
    assert 0 < fresh_state.unscanned  # this run's objects only


@pytest.mark.parametrize("name", sorted(scenarios()))
def test_a_scenario_makes_little_cyclic_garbage_while_it_runs(name, monkeypatch):
    """The premise of pausing the collector: a run frees almost everything it drops by reference
    counting. Run with the collector on and scanning often, what it finds is at most one object per
    five events (most scenarios: none; a per-event cycle would be several per event)."""
    found = []

    def count(phase, info):
        if phase == "stop":
            found.append(info["collected"])

    @contextlib.contextmanager
    def scanning_often():
        threshold = gc.get_threshold()
        gc.set_threshold(1000)
        gc.callbacks.append(count)
        try:
            yield
        finally:
            gc.callbacks.remove(count)
            gc.set_threshold(*threshold)

    monkeypatch.setattr(run_module, "_collector_paused", scanning_often)
    gc.collect()
    gc.collect()  # earlier tests' garbage is not this run's
    spec = run_module.get_scenario(name)
    result = milvus_edu.simulate(name, seed=1, duration_s=min(spec.duration_s, 20.0), keep_events=False)
    events = result.summary["events"]
    assert len(found) > 0 or events < 1000  # the collector did scan during the run
    assert sum(found) <= events / 5, f"{name}: {sum(found)} objects of cyclic garbage in {events} events"
