"""The TSO mechanism's scenarios: who runs, with which clocks, which faults happen when."""

from __future__ import annotations

from ...registry import Scenario
from ...sim.kernel import NodeClock, Simulation
from ...sim.nodes import RootCoordNode, TSOClient, build_tso_pause


def _rootcoords(sim: Simulation, offsets_ms: list[float], drifts_ppm: list[float] | None = None) -> list[RootCoordNode]:
    drifts = drifts_ppm or [0.0] * len(offsets_ms)
    nodes = []
    for i, (off, drift) in enumerate(zip(offsets_ms, drifts), start=1):
        node = RootCoordNode(sim, f"rootcoord-{i}", i, NodeClock(sim.env, off, drift))
        sim.add(node)
        nodes.append(node)
    return nodes


def _clients(sim: Simulation, specs: list[tuple[int, float]]) -> list[TSOClient]:
    clients = []
    for i, (count, interval) in enumerate(specs):
        c = TSOClient(sim, f"client-{i}", count=count, interval_ms=interval, jitter_ms=interval / 5)
        sim.add(c)
        clients.append(c)
    return clients


def _start(*groups) -> None:
    for group in groups:
        for node in group:
            node.start()


def _tso_basics(sim: Simulation) -> None:
    rcs = _rootcoords(sim, [0.0])
    cls = _clients(sim, [(1, 50.0), (1000, 200.0)])
    _start(rcs, cls)


def _tso_failover(sim: Simulation) -> None:
    # rootcoord-2's clock is 75 s behind: more than the failover takes, so its own clock would hand
    # out timestamps below those rootcoord-1 already gave; the saved window prevents that.
    rcs = _rootcoords(sim, [0.0, -75_000.0])
    cls = _clients(sim, [(1, 100.0), (10, 250.0)])
    _start(rcs, cls)
    sim.at(10_000.0, rcs[0].kill)


def _tso_clock_skew(sim: Simulation) -> None:
    rcs = _rootcoords(sim, [0.0], [150.0])
    cls = _clients(sim, [(1, 100.0), (40_000, 50.0)])
    _start(rcs, cls)
    sim.at(4_000.0, lambda: rcs[0].jump_clock(-8_000.0))
    sim.at(14_000.0, lambda: rcs[0].jump_clock(+5_000.0))


SCENARIOS = (
    Scenario(
        "tso-basics", "One rootcoord, two clients: the 3 s window, saves, batches and tsLoop.", 10.0,
        _tso_basics,
        "client-0 asks for 1 timestamp every ~50 ms, client-1 for batches of 1000 every ~200 ms. "
        "Watch the window end move 3 s ahead of the physical part and be re-saved when it is reached.",
    ),
    Scenario(
        "tso-failover", "Active rootcoord crashes at 10 s; the standby (clock 75 s behind) takes over.", 80.0,
        _tso_failover,
        "rootcoord-1 wins the ACTIVE key; rootcoord-2 waits as standby. At 10 s rootcoord-1 is killed. "
        "Its lease (60 s TTL) runs out, etcd deletes the ACTIVE key, rootcoord-2 claims it and starts "
        "one millisecond past the saved window, although its own clock is far behind.",
    ),
    Scenario(
        "tso-clock-skew", "The active's clock drifts, steps back 8 s, then forward; a heavy batch client.",
        20.0, _tso_clock_skew,
        "rootcoord-1's clock runs 150 ppm fast, jumps back 8 s at 4 s and forward 5 s at 14 s. "
        "client-1 takes batches of 40,000, so the logical counter overflows and maxLogical/2 steps matter.",
    ),
    Scenario(
        "tso-pause", "The active freezes for 70 s (a GC or VM pause) past its lease; the standby takes over; "
        "the old active wakes up.", 120.0, build_tso_pause,
        "rootcoord-1 freezes at 30 s. Its lease runs out, etcd deletes the ACTIVE key and rootcoord-2 takes over. "
        "At 100 s rootcoord-1 resumes still believing it is active: its overdue tsLoop saves a window over "
        "rootcoord-2's (no fencing) and it answers the calls queued during the freeze, until the DELETE waiting on "
        "its watch makes it exit.",
        gap="saveTimestamp has no fencing and AllocTimestamp checks no lease, so a resumed old active can hand out "
            "timestamps that are not above the new active's (in some seeds, not in seed 1)",
    ),
)
