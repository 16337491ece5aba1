"""The TSO mechanism's scenarios: who runs, with which clocks, which faults happen when."""

from __future__ import annotations

from ...cluster.rootcoord import RootCoordNode, TSOClient, build_tso_pause
from ...registry import Scenario
from ...sim.kernel import NodeClock, Simulation


def _rootcoords(sim: Simulation, offsets_ms: list[float], drifts_ppm: list[float] | None = None,
                activate_ms: float = 0.0) -> list[RootCoordNode]:
    drifts = drifts_ppm or [0.0] * len(offsets_ms)
    nodes = []
    for i, (off, drift) in enumerate(zip(offsets_ms, drifts), start=1):
        node = RootCoordNode(sim, f"rootcoord-{i}", i, NodeClock(sim.env, off, drift), activate_ms=activate_ms)
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


#: ``tso-logical-overflow``'s knobs: the heavy client's batch size and pause between answers, and how long the
#: rootcoord's activation goes on after its InitTimestamp.
OVERFLOW_OPTIONS = {"batch": 100_000, "interval_ms": 10.0, "activate_ms": 300.0}


def _tso_logical_overflow(sim: Simulation, batch: int, interval_ms: float, activate_ms: float) -> None:
    # tsLoop moves the physical part on every 50 ms, so one physical value must serve a whole tsLoop period:
    # 2**18 - 1 timestamps at most. Batches of 100,000 every 12 to 13 ms ask for some 400,000 per period, so
    # the third batch of a period finds the logical space used up, and GenerateTSO sleeps and retries.
    if batch < 1 or batch >= 1 << 18:
        raise ValueError(f"option batch must be from 1 to {(1 << 18) - 1} (one physical value's logical space), "
                         f"got {batch}")
    if not interval_ms > 0:
        raise ValueError(f"option interval_ms must be positive, got {interval_ms!r}")
    if not activate_ms >= 0:
        raise ValueError(f"option activate_ms must be 0 or more, got {activate_ms!r}")
    rcs = _rootcoords(sim, [0.0], activate_ms=activate_ms)
    cls = _clients(sim, [(1, 50.0), (batch, interval_ms)])
    _start(rcs, cls)


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
        "client-1 takes batches of 40,000. While the clock is behind the physical part, tsLoop moves the physical "
        "part on by 1 ms only once more than half the logical space is used (the maxLogical/2 rule), so the "
        "logical counter climbs past 2^17; it never reaches 2^18.",
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
    Scenario(
        "tso-logical-overflow", "A client asks for more than 2^18 timestamps per tsLoop period: GenerateTSO sleeps "
        "50 ms and retries; before that, clients are refused while rootcoord activates.", 5.0,
        _tso_logical_overflow,
        "rootcoord-1 wins the ACTIVE key at once and initialises its TSO, but its activation goes on for 300 ms; "
        "clients that ask meanwhile get 'service not ready' and retry about 500 ms later. Then client-1 asks for "
        "batches of 100,000 every 12 to 13 ms. tsLoop moves the physical part on only every 50 ms, and one physical "
        "value holds 2^18 - 1 timestamps, so the third batch of a period overflows the logical counter: "
        "GenerateTSO sleeps 50 ms, and its retry succeeds on a later physical value.",
        options=OVERFLOW_OPTIONS,
    ),
)
