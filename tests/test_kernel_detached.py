"""``DetachedProcess`` (``Simulation.spawn``) behaves as ``simpy.Process`` in everything but the one
step it saves: the end event of a process that ended well with nothing waiting for it."""

from __future__ import annotations

import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

import milvus_edu
from milvus_edu.config import Config
from milvus_edu.events import NULL_RECORDER
from milvus_edu.sim.kernel import DetachedProcess, Simulation


def _ender(env, delay, value):
    yield env.timeout(delay)
    return value


def _steps(env) -> int:
    """Run ``env`` to the end; the number of events it stepped through."""
    n = 0
    while env.peek() != float("inf"):
        env.step()
        n += 1
    return n


def test_a_detached_process_that_ends_with_no_waiter_takes_one_step_less():
    plain, detached = simpy.Environment(), simpy.Environment()
    p = plain.process(_ender(plain, 5, "done"))
    d = DetachedProcess(detached, _ender(detached, 5, "done"))
    assert _steps(plain) == 3  # Initialize, the timeout, the process's own end event
    assert _steps(detached) == 2
    for proc in (p, d):
        assert proc.processed and proc.ok and proc.value == "done" and not proc.is_alive


def test_a_waiter_that_comes_before_the_end_is_resumed_by_the_end_event():
    env = simpy.Environment()
    got = []
    child = DetachedProcess(env, _ender(env, 3, 42))

    def parent():
        got.append((yield child))
        got.append(env.now)

    env.process(parent())
    env.run()
    assert got == [42, 3]


def test_a_waiter_that_comes_after_the_end_gets_the_value_at_once():
    env = simpy.Environment()
    child = DetachedProcess(env, _ender(env, 1, "v"))
    got = []

    def late():
        yield env.timeout(10)
        got.append((yield child))
        got.append(env.now)

    env.process(late())
    env.run()
    assert got == ["v", 10]


def test_a_failing_detached_process_stops_the_run_as_a_process_does():
    def boom(env):
        yield env.timeout(1)
        raise KeyError("lost")

    for start in (simpy.Environment.process, DetachedProcess):
        env = simpy.Environment()
        start(env, boom(env))
        with pytest.raises(KeyError, match="lost"):
            env.run()


def test_a_failure_reaches_a_waiter_and_a_failed_event_reaches_the_generator():
    env = simpy.Environment()
    seen = []

    def fails():
        yield env.timeout(1)
        raise ValueError("no")

    def catches(child):
        try:
            yield child
        except ValueError as exc:
            seen.append(str(exc))
        bad = env.event()
        bad.fail(RuntimeError("event failed"))
        try:
            yield bad
        except RuntimeError as exc:
            seen.append(str(exc))

    child = DetachedProcess(env, fails())
    DetachedProcess(env, catches(child))
    env.run()
    assert seen == ["no", "event failed"]


def test_a_detached_process_can_be_interrupted():
    env = simpy.Environment()
    seen = []

    def sleeper():
        try:
            yield env.timeout(100)
        except simpy.Interrupt as irq:
            seen.append((env.now, irq.cause))

    proc = DetachedProcess(env, sleeper())

    def waker():
        yield env.timeout(7)
        proc.interrupt("wake")

    env.process(waker())
    env.run()
    assert seen == [(7, "wake")]


def test_yielding_something_that_is_not_an_event_says_so():
    env = simpy.Environment()

    def wrong():
        yield 5

    DetachedProcess(env, wrong())
    with pytest.raises(RuntimeError, match="only yield SimPy events"):
        env.run()


# A program: processes, each a list of integer delays (integers, so events tie often); some
# processes also wait for an earlier one to end before they return.
_programs = st.lists(
    st.tuples(st.lists(st.integers(0, 3), max_size=4), st.one_of(st.none(), st.integers(0, 7))),
    min_size=1, max_size=8,
)


def _trace(program, start) -> list:
    env = simpy.Environment()
    trace = []
    procs = []

    def body(i, delays, wait_for):
        for k, delay in enumerate(delays):
            yield env.timeout(delay)
            trace.append((env.now, i, k))
        if wait_for is not None and wait_for < len(procs):
            value = yield procs[wait_for]
            trace.append((env.now, i, "joined", value))
        return i

    def spawner():  # processes started from inside a step too, as clients start requests
        for i, (delays, wait_for) in enumerate(program):
            procs.append(start(env, body(i, delays, wait_for)))
            if i % 2:
                yield env.timeout(1)

    env.process(spawner())
    env.run()
    return trace


@settings(max_examples=200, deadline=None)
@given(_programs)
def test_processes_run_in_the_same_order_with_or_without_the_end_steps(program):
    assert _trace(program, DetachedProcess) == _trace(program, simpy.Environment.process)


def test_spawn_starts_a_detached_process():
    sim = Simulation(1, NULL_RECORDER, Config())
    proc = sim.spawn(_ender(sim.env, 2, "x"))
    assert isinstance(proc, DetachedProcess)
    sim.env.run()
    assert proc.value == "x"


@pytest.mark.parametrize("scenario, seconds, switches", [
    ("timetick-basics", 2.0, []), ("timetick-proxy-restart", 7.0, []), ("flush-basics", 12.0, []),
    ("datanode-crash-recovery", 30.0, []),
])
def test_runs_are_the_same_when_requests_start_as_plain_processes(scenario, seconds, switches, tmp_path, monkeypatch):
    """Whole runs write byte-identical files whether ``spawn`` starts detached or plain processes."""

    def files(folder):
        milvus_edu.simulate(scenario, seed=5, duration_s=seconds, switches=switches, out_dir=folder,
                            keep_events=False, sink_process=False)
        return [(folder / name).read_bytes() for name in ("events.jsonl", "summary.json")]

    detached = files(tmp_path / "detached")
    monkeypatch.setattr(Simulation, "spawn", lambda self, generator: self.env.process(generator))
    assert files(tmp_path / "plain") == detached
