"""The TSO mechanism's scenarios: who runs, with which clocks, which faults happen when."""

from __future__ import annotations

from ...cluster.builder import ClusterSpec, RootCoordSpec, TSOClientSpec, build
from ...registry import Scenario
from ...sim.kernel import Simulation


def _spec(rootcoords: list[RootCoordSpec], clients: list[tuple[int, float]], deadline_ms: float | None = None
          ) -> ClusterSpec:
    """Rootcoords and TSO clients (``(count, interval_ms)`` each), nothing else."""
    return ClusterSpec(rootcoords=tuple(rootcoords),
                       tso_clients=tuple(TSOClientSpec(n, ms, deadline_ms) for n, ms in clients))


def _tso_basics(sim: Simulation) -> None:
    build(sim, _spec([RootCoordSpec()], [(1, 50.0), (1000, 200.0)])).start()


def _tso_failover(sim: Simulation) -> None:
    # rootcoord-2's clock is 75 s behind: more than the failover takes, so its own clock would hand
    # out timestamps below those rootcoord-1 already gave; the saved window prevents that.
    cluster = build(sim, _spec([RootCoordSpec(), RootCoordSpec(offset_ms=-75_000.0)], [(1, 100.0), (10, 250.0)]))
    cluster.start()
    sim.at(10_000.0, lambda: cluster.kill("rootcoord-1"))


def _tso_clock_skew(sim: Simulation) -> None:
    cluster = build(sim, _spec([RootCoordSpec(drift_ppm=150.0)], [(1, 100.0), (40_000, 50.0)]))
    cluster.start()
    rc = cluster.node("rootcoord-1")
    sim.at(4_000.0, lambda: rc.jump_clock(-8_000.0))
    sim.at(14_000.0, lambda: rc.jump_clock(+5_000.0))


PAUSE_AT_MS = 30_000.0
PAUSE_FOR_MS = 70_000.0


def build_tso_pause(sim: Simulation) -> None:
    """Scenario ``tso-pause``: the active rootcoord freezes past its TTL, the standby takes over, it resumes.

    Two rootcoords on the same clock; two clients whose calls give up after 1 s. At 30 s
    rootcoord-1 (active) freezes for 70 s, a long GC or VM pause: no keep-alive, no ``tsLoop``, no
    answers. Its last keep-alive was answered at 20.5 s, so etcd expires its lease at 80.5 s and
    deletes the ACTIVE key; rootcoord-2 claims it and starts from its own clock, past the saved
    window. At 100 s rootcoord-1 resumes, unaware: its overdue ``tsLoop`` tick saves a window end
    with a plain Save (no lease, no fencing) over rootcoord-2's, and it answers the calls that
    queued up during the pause, before the DELETE on its watch of the ACTIVE key makes it exit.
    Run it for 120 s.
    """
    cluster = build(sim, _spec([RootCoordSpec(), RootCoordSpec()], [(1, 100.0), (10, 250.0)], deadline_ms=1000.0))
    cluster.start()
    rc = cluster.node("rootcoord-1")
    sim.at(PAUSE_AT_MS, lambda: rc.pause(PAUSE_FOR_MS))


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
    build(sim, _spec([RootCoordSpec(activate_ms=activate_ms)], [(1, 50.0), (batch, interval_ms)])).start()


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
