"""The node base (``milvus_edu.cluster.node``): work bound to a node's life, pauses, and the effect interpreter.

A killed node's work stops at its next resumption and nothing of it runs after; a restart is a fresh life; an
effect already in flight (an RPC on the wire) completes; and the simulator performs the effects of
``milvus_edu.effects`` with the results (and failures) a synchronous driver gives.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from milvus_edu.cluster.node import Node
from milvus_edu.config import MS
from milvus_edu.effects import Call, Parallel, Sleep, drive
from milvus_edu.events import MemorySink, Recorder
from milvus_edu.sim import NetworkParams, RPCError, Simulation


def new_sim(seed: int = 1, **net) -> tuple[Simulation, MemorySink]:
    sink = MemorySink()
    return Simulation(seed, Recorder("node", sinks=[sink]), network=NetworkParams(**net)), sink


def node_in(sim: Simulation, name: str = "n1") -> Node:
    node = Node(sim, name)
    sim.add(node)
    return node


# ---- life cycle ----------------------------------------------------------------------------------------

def test_a_killed_nodes_loop_stops_at_its_next_resumption_and_is_closed():
    sim, sink = new_sim()
    node = node_in(sim)
    ticks, closed_at = [], []

    def loop():
        try:
            while True:
                yield sim.env.timeout(10)
                ticks.append(sim.env.now)
        finally:
            closed_at.append(sim.env.now)

    node.process(loop())
    sim.at(25, lambda: node.kill("test"))
    sim.env.run(until=100)
    assert ticks == [10, 20]
    assert closed_at == [30]  # its timer fired once more; the loop body did not run
    kills = [r for r in sink.rows if r["kind"] == "fault.kill"]
    assert len(kills) == 1 and kills[0]["node"] == "n1"


def test_restart_is_a_fresh_incarnation_and_nothing_of_the_old_one_runs():
    sim, _ = new_sim()
    node = node_in(sim)
    seen = []

    def loop(tag):
        while True:
            yield sim.env.timeout(10)
            seen.append((tag, sim.env.now))

    node.process(loop("old"))

    def restart():
        node._new_life()
        node.process(loop("new"))

    sim.at(15, restart)  # a restart without a kill ends the old life too
    sim.env.run(until=40)
    assert node.alive and node.incarnation == 1
    assert seen == [("old", 10), ("new", 25), ("new", 35)]


def test_work_handed_to_a_dead_node_never_runs():
    sim, _ = new_sim()
    node = node_in(sim)
    node.kill()
    ran = []

    def work():
        ran.append("started")
        yield sim.env.timeout(1)

    proc = node.process(work())
    sim.env.run(until=5)
    assert ran == [] and proc.triggered and proc.value is None


def test_an_rpc_in_flight_reaches_its_callee_though_the_caller_died_but_the_caller_goes_no_further():
    sim, _ = new_sim(latency_ms=5.0, jitter_ms=0.0)
    caller, callee = node_in(sim, "caller"), node_in(sim, "callee")
    served, after = [], []

    def handler():
        served.append(sim.env.now)
        return "answer"

    def work():
        answer = yield Call("callee", handler)
        after.append(answer)

    caller.process(work())
    sim.at(2, lambda: caller.kill())  # the request is on the wire until t=5
    sim.env.run(until=50)
    assert served == [5.0] and after == []
    assert callee.alive


def test_a_node_that_ends_its_own_life_and_asks_for_more_is_stopped_before_the_effect():
    sim, _ = new_sim()
    node = node_in(sim)
    served = []

    def work():
        node.kill("its own panic")
        yield Call("n2", lambda: served.append(1))

    node_in(sim, "n2")
    node.process(work())
    sim.env.run(until=10)
    assert served == []


def test_a_callback_does_nothing_once_the_life_that_made_it_ended():
    sim, _ = new_sim()
    node = node_in(sim)
    got = []
    cb = node.callback(got.append, "a")
    cb()
    node.kill()
    cb()
    assert got == ["a"]


# ---- pauses --------------------------------------------------------------------------------------------

def test_a_pause_holds_every_resumption_until_the_node_resumes():
    sim, sink = new_sim()
    node = node_in(sim)
    ticks = []

    def loop():
        while True:
            yield sim.env.timeout(10)
            ticks.append(sim.env.now)

    node.process(loop())
    sim.at(15, lambda: node.pause(30))
    sim.env.run(until=70)
    assert ticks == [10, 45, 55, 65]  # the tick due at 20 runs on resume, at 45
    kinds = [r["kind"] for r in sink.rows]
    assert kinds == ["fault.pause", "fault.resume"]
    with pytest.raises(ValueError, match="positive"):
        node.pause(0)


def test_a_request_to_a_paused_node_is_answered_when_it_resumes_and_fails_if_it_died_meanwhile():
    sim, _ = new_sim(latency_ms=1.0, jitter_ms=0.0)
    client, server = node_in(sim, "client"), node_in(sim, "server")
    answers = []

    def ask(tag):
        try:
            answers.append((tag, (yield Call("server", lambda: tag)), sim.env.now))
        except RPCError as exc:
            answers.append((tag, str(exc), sim.env.now))

    server.pause(20)
    client.process(ask("first"))
    sim.env.run(until=30)
    sim.at(0, lambda: server.pause(20))  # relative to now (t=30): paused until 50
    sim.at(5, lambda: client.process(ask("second")))
    sim.at(10, lambda: server.kill())
    sim.env.run(until=80)
    assert answers[0] == ("first", "first", 21.0)  # arrived at 1, answered at 20, back at 21
    assert answers[1][:2] == ("second", "server exited before answering")


# ---- the interpreter ----------------------------------------------------------------------------------

def test_sleep_takes_its_duration_in_simulated_time():
    sim, _ = new_sim()
    node = node_in(sim)
    done = []

    def work():
        yield Sleep(250 * MS)
        done.append(sim.env.now)

    node.process(work())
    sim.env.run(until=1_000)
    assert done == [250.0]


def test_a_call_answers_with_a_plain_functions_value_or_a_generators_and_a_failure_is_thrown_at_the_yield():
    sim, _ = new_sim(latency_ms=1.0, jitter_ms=0.0)
    node = node_in(sim)
    node_in(sim, "other")
    got = []

    def slow():
        yield Sleep(10 * MS)
        return "slow"

    def boom():
        raise ValueError("no such segment")

    def work():
        got.append(((yield Call("other", lambda: "plain")), sim.env.now))
        got.append(((yield Call("other", slow)), sim.env.now))
        try:
            yield Call("other", boom)
        except RPCError as exc:  # the line that asked gets the failure
            got.append((str(exc), sim.env.now))
        try:
            yield Call("nobody", lambda: 1)
        except RPCError as exc:
            got.append((str(exc), sim.env.now))

    node.process(work())
    sim.env.run(until=100)
    assert got == [("plain", 2.0), ("slow", 14.0), ("no such segment", 16.0),
                   ("connection refused by nobody", 17.0)]


def test_parallel_runs_its_effects_at_once_and_lists_failures_as_results():
    sim, _ = new_sim(latency_ms=1.0, jitter_ms=0.0)
    node = node_in(sim)
    node_in(sim, "other")
    got = []

    def boom():
        raise RuntimeError("etcd timeout")

    def work():
        results = yield Parallel((Sleep(5 * MS), Call("other", lambda: 7), Call("other", boom)))
        got.append((results[:2], type(results[2]).__name__, str(results[2]), sim.env.now))

    node.process(work())
    sim.env.run(until=100)
    assert got == [([None, 7], "RPCError", "etcd timeout", 5.0)]


def test_an_effect_no_performer_knows_is_a_type_error_at_the_yield():
    sim, _ = new_sim()
    node = node_in(sim)
    got = []

    def work():
        try:
            yield "not an effect"
        except TypeError as exc:
            got.append(str(exc))

    node.process(work())
    sim.env.run(until=1)
    assert got == ["n1 cannot perform 'not an effect'"]


# ---- the two drivers agree --------------------------------------------------------------------------

def _handler(kind: str, value: int):
    """An RPC handler: answers ``value`` at once, after a sleep, or fails."""
    if kind == "plain":
        return lambda: value
    if kind == "waits":
        def waits():
            yield Sleep(value * MS)
            return value
        return waits

    def fails():
        raise ValueError(f"bad {value}")
    return fails


_effect = st.one_of(
    st.builds(Sleep, st.integers(0, 50).map(lambda ms: ms * MS)),
    st.builds(lambda k, v: Call("peer", _handler(k, v)), st.sampled_from(["plain", "waits", "fails"]),
              st.integers(0, 20)),
)
_effects = st.lists(st.one_of(_effect, st.lists(_effect, max_size=3).map(lambda es: Parallel(tuple(es)))),
                    max_size=8)


def _component(effects):
    """Yields each effect; records what came back (a failure by its message)."""
    seen = []
    for effect in effects:
        try:
            result = yield effect
        except Exception as exc:  # noqa: BLE001 - what the driver threw in is the observation
            seen.append(("failed", str(exc)))
        else:
            if isinstance(result, list):
                result = [("failed", str(r)) if isinstance(r, Exception) else r for r in result]
            seen.append(result)
    return seen


def _sync(effect):
    if isinstance(effect, Parallel):
        return effect.gather(_sync)
    if isinstance(effect, Sleep):
        return None
    answer = effect.handler()
    return drive(answer, _sync) if hasattr(answer, "send") else answer


@settings(max_examples=60, deadline=None)
@given(_effects, st.integers(0, 3))
def test_the_synchronous_and_the_simulated_drivers_give_the_same_results(effects, seed):
    expected = drive(_component(effects), _sync)
    sim, _ = new_sim(seed)
    node = node_in(sim)
    node_in(sim, "peer")
    proc = node.process(_component(effects))
    sim.env.run()
    assert proc.value == expected
