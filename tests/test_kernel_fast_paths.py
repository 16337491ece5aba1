"""The kernel's fast path beside SimPy's own: ``Environment.run`` steps through the same events as SimPy's."""

from __future__ import annotations

import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from milvus_edu.sim.kernel import Environment


def _ender(env, delay, value):
    yield env.timeout(delay)
    return value


# A program: processes, each a list of integer delays (integers, so events tie often).
_programs = st.lists(st.lists(st.integers(0, 3), max_size=4), min_size=1, max_size=8)


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

    for i, delays in enumerate(program):
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
