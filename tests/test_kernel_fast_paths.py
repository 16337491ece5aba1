"""The kernel's fast paths beside SimPy's own: ``DetachedProcess`` (``Simulation.spawn``) behaves as
``simpy.Process`` in everything but the one step it saves (the end event of a process that ended well
with nothing waiting for it), and ``Environment.run`` steps through the same events as SimPy's."""

from __future__ import annotations

import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

import milvus_edu
from milvus_edu.config import Config
from milvus_edu.events import NULL_RECORDER
from milvus_edu.sim.kernel import DetachedProcess, Environment, Simulation


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


def _join_order(start, child_end: int, waiter_sleeps: int, other_sleeps: list[int]) -> list:
    """What happens at the child's end: a waiter that sleeps ``waiter_sleeps`` then waits for the
    child (ending at ``child_end``, started by ``start``), and another process that sleeps
    ``other_sleeps`` in turn; both log when they go on."""
    env = simpy.Environment()
    trace = []
    child = start(env, _ender(env, child_end, "v"))

    def waiter():
        if waiter_sleeps:
            yield env.timeout(waiter_sleeps)
        trace.append(("joined", (yield child)))

    def other():
        for sleep in other_sleeps:
            yield env.timeout(sleep)
        trace.append("other")

    env.process(waiter())
    env.process(other())
    env.run()
    return trace


def test_a_waiter_that_comes_after_the_end_is_resumed_at_once_which_is_why_spawn_gives_no_handle():
    """The one difference from a plain process: a waiter that comes after the end, in the same instant
    as the end, is resumed at once, not with the end step, after the other events of that instant."""
    # the waiter's timeout is due after the child's, in the same instant
    assert _join_order(simpy.Environment.process, 1, 1, [1]) == ["other", ("joined", "v")]
    assert _join_order(DetachedProcess, 1, 1, [1]) == [("joined", "v"), "other"]
    sim = Simulation(1, NULL_RECORDER, Config())
    assert sim.spawn(_ender(sim.env, 2, "x")) is None


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


def test_yielding_something_that_is_not_an_event_says_so_as_a_process_does():
    messages = []
    for start in (simpy.Environment.process, DetachedProcess):
        env = simpy.Environment()

        def wrong():
            yield 5

        start(env, wrong())
        with pytest.raises(RuntimeError, match="Invalid yield value \"5\"") as info:
            env.run()
        messages.append(str(info.value).replace("Process", "").strip())
    assert messages[0] == messages[1] and "wrong" in messages[0]


def test_a_waiter_before_the_end_is_resumed_after_what_was_due_before_the_end_step():
    """A waiter of a detached process is resumed by its end step, in its turn: after an event of the
    same instant that was scheduled before the process ended."""
    # the other's second timeout is due at 2, scheduled before the child ends at 2
    assert (_join_order(DetachedProcess, 2, 0, [1, 1]) == _join_order(simpy.Environment.process, 2, 0, [1, 1])
            == ["other", ("joined", "v")])


# A program: processes, each a list of integer delays (integers, so events tie often); some
# processes also wait for an earlier one to end before they return.
_programs = st.lists(
    st.tuples(st.lists(st.integers(0, 3), max_size=4), st.one_of(st.none(), st.integers(0, 7))),
    min_size=1, max_size=8,
)


def _trace(program, detach: bool) -> list:
    """Run ``program``; with ``detach``, every process that no other waits for is detached."""
    env = simpy.Environment()
    trace = []
    procs = []
    waited = {w for _, w in program if w is not None}

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
            start = DetachedProcess if detach and i not in waited else simpy.Environment.process
            procs.append(start(env, body(i, delays, wait_for)))
            if i % 2:
                yield env.timeout(1)

    env.process(spawner())
    env.run()
    return trace


@settings(max_examples=300, deadline=None)
@given(_programs)
def test_processes_run_in_the_same_order_when_those_nothing_waits_for_are_detached(program):
    assert _trace(program, detach=True) == _trace(program, detach=False)


def test_spawn_starts_a_detached_process():
    sim = Simulation(1, NULL_RECORDER, Config())
    started = []

    def request():
        started.append(type(sim.env.active_process))
        yield sim.env.timeout(1)

    sim.spawn(request())
    sim.env.run()
    assert started == [DetachedProcess]


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
    monkeypatch.setattr(Simulation, "spawn", lambda self, generator: self.env.process(generator) and None)
    assert files(tmp_path / "plain") == detached


# ------------------------------------------------------------------------------ Environment.run


def _loop_trace(program, env_class, stops, fail_at=None) -> list:
    """Run ``program`` (as above) in ``env_class``, stopping at each of ``stops`` in turn, then to the
    end; the trace, with where each run stopped and what it returned or raised."""
    env = env_class()
    trace = []

    def body(i, delays):
        for k, delay in enumerate(delays):
            yield env.timeout(delay)
            trace.append((env.now, i, k))
            if fail_at == (i, k):
                raise KeyError(f"body {i} failed")
        return i

    for i, (delays, _) in enumerate(program):
        env.process(body(i, delays))
    for at in stops:
        if at <= env.now:
            continue
        try:
            trace.append(("stopped", env.run(until=at), env.now, env.peek()))
        except KeyError as exc:
            trace.append(("failed", str(exc), env.now))
            return trace
    try:
        trace.append(("ended", env.run(), env.now))
    except KeyError as exc:
        trace.append(("failed", str(exc), env.now))
    return trace


@settings(max_examples=200, deadline=None)
@given(_programs, st.lists(st.floats(0.5, 12.0) | st.integers(1, 12), max_size=4).map(sorted),
       st.none() | st.tuples(st.integers(0, 7), st.integers(0, 3)))
def test_the_run_loop_steps_through_what_simpys_steps_through(program, stops, fail_at):
    assert _loop_trace(program, Environment, stops, fail_at) == _loop_trace(program, simpy.Environment, stops, fail_at)


def test_run_until_a_time_not_ahead_is_refused_as_simpy_refuses_it():
    for env in (simpy.Environment(initial_time=5), Environment(initial_time=5)):
        with pytest.raises(ValueError, match=r"until \(5\.0\) must be greater than the current simulation time"):
            env.run(until=5.0)


def test_run_until_an_event_returns_its_value():
    env = Environment()
    proc = env.process(_ender(env, 4, "v"))
    assert env.run(until=proc) == "v" and env.now == 4


def test_the_environment_binds_its_event_classes_once():
    env = Environment()
    assert env.timeout is env.timeout and env.event is env.event and env.process is env.process


def _stop_elsewhere(env_class) -> list:
    """An event other than the run's own stop carries SimPy's stop callback, then another callback."""
    env = env_class()
    seen = []
    t = env.timeout(5, value="t")
    t.callbacks += [simpy.core.StopSimulation.callback, lambda event: seen.append(("after", env.now))]
    seen.append(("first run", env.run(until=10), env.now))
    seen.append(("second run", env.run(until=20), env.now, env.peek()))
    return seen


def test_a_run_stopped_by_another_event_goes_on_as_simpys_does():
    assert _stop_elsewhere(Environment) == _stop_elsewhere(simpy.Environment)
    assert _stop_elsewhere(Environment)[:2] == [("first run", "t", 5), ("after", 5)]


def test_a_step_replaced_for_tracing_sees_every_event():
    """SimPy's recipe for tracing replaces ``env.step``; the environment then runs SimPy's loop."""
    traced = []
    env = Environment()
    step = env.step

    def tracing_step():
        traced.append(env.peek())
        step()

    env.step = tracing_step
    env.process(_ender(env, 3, None))
    env.run(until=5)
    assert traced == [0, 3, 3, 5]
