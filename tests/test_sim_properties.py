"""Property: whatever the clocks, kills and network do, timestamps handed out never go back."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from milvus_edu.mechanisms.tso.check import check_tso
from milvus_edu.config import S, Config, TSOParams
from milvus_edu.events import MemorySink, Recorder, rows_to_frame
from milvus_edu.sim import NetworkParams, NodeClock, Simulation
from milvus_edu.cluster.rootcoord import RootCoordNode, TSOClient

clock_offsets = st.floats(min_value=-120_000, max_value=120_000, allow_nan=False)
jumps = st.lists(st.tuples(st.floats(100, 20_000), st.integers(0, 2), st.floats(-30_000, 30_000)), max_size=4)


def _run(seed, offsets, drifts, kill_at, jump_list, drop, counts):
    sink = MemorySink()
    # A short session TTL so that chains of failovers fit in the run.
    params = TSOParams(session_ttl_ns=3 * S)
    sim = Simulation(seed, Recorder("prop", sinks=[sink]), Config(tso=params),
                     NetworkParams(drop_prob=drop, timeout_ms=200))
    rcs = []
    for i, (off, drift) in enumerate(zip(offsets, drifts), start=1):
        node = RootCoordNode(sim, f"rootcoord-{i}", i, NodeClock(sim.env, off, drift))
        sim.add(node)
        rcs.append(node)
    for i, count in enumerate(counts):
        sim.add(TSOClient(sim, f"client-{i}", count=count, interval_ms=40, jitter_ms=20, retry_ms=200))
    for node in sim.nodes.values():
        node.start()
    for t, who, delta in jump_list:
        node = rcs[who % len(rcs)]
        sim.at(t, lambda node=node, delta=delta: node.jump_clock(delta))
    for i, t in enumerate(kill_at):
        sim.at(t, rcs[i].kill)
    sim.run(25_000)
    return rows_to_frame(sink.rows)


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10_000),
    offsets=st.lists(clock_offsets, min_size=3, max_size=3),
    drifts=st.lists(st.floats(-500, 500), min_size=3, max_size=3),
    kill_at=st.lists(st.floats(1_000, 12_000), max_size=2),
    jump_list=jumps,
    drop=st.sampled_from([0.0, 0.05]),
    counts=st.lists(st.sampled_from([1, 7, 1000, 100_000]), min_size=1, max_size=3),
)
def test_timestamps_never_go_back_across_failovers_and_clock_jumps(seed, offsets, drifts, kill_at, jump_list,
                                                                     drop, counts):
    events = _run(seed, offsets, drifts, sorted(kill_at), jump_list, drop, counts)
    assert check_tso(events) == []
    assert (events.kind == "client.recv").sum() > 0
    if kill_at:  # rootcoord-1 (the first active) was killed: a standby must have taken over
        assert (events.kind == "session.active").sum() >= 2
