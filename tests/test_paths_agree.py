"""Two ways of computing the same thing agree on runs where something went wrong.

milvus-edu computes many things along more than one path: a run's checks in process, in the sink process, from a
replayed token, and from the run log read back as a DataFrame (the explorer of a bare log); a run advanced at once
or in steps (``simulate(progress=...)``, which the CLI uses on a terminal); a run and a fork of it before the fork
point; the explorer's "Why?" and :func:`milvus_edu.why`; an analysis in Spark and its pandas twin. On a healthy run
every path says "no violation", so a path that drops something agrees by accident: every test here runs a broken
run (a bug switch on) or a faulty one (kills, restarts, pauses) and asserts that what it compares is not empty.
"""

from __future__ import annotations

from milvus_edu import Kill, Restart, simulate


def _lease_faults() -> list:
    """proxy-2 dies, comes back off the 500 ms grid of etcd's lessor, and dies again: its new session's lease runs
    out between two of the lessor's checks."""
    return [Kill("proxy-2", t_ms=1000.0), Restart("proxy-2", t_ms=1234.567), Kill("proxy-2", t_ms=2000.0)]


def test_a_run_advanced_in_steps_logs_what_the_same_run_advanced_at_once_logs():
    """``simulate(progress=...)`` advances the run in 50 steps (the CLI does so on a terminal). Each step used to start
    another etcd lessor, off the first one's grid, so a lease that ran out between two checks was revoked earlier:
    here the restarted proxy's session was lost at 4.24 s instead of 4.5 s, and the tick stall ended earlier."""
    kw = dict(seed=1, duration_s=6, interventions=_lease_faults(), options={"inserts_per_s": 100},
              params={"tso.session_ttl_ns": 3_000_000_000})
    at_once = simulate("timetick-basics", **kw)
    stepped = []
    in_steps = simulate("timetick-basics", progress=lambda done, total: stepped.append(done), **kw)
    assert len(stepped) == 50
    assert in_steps.rows == at_once.rows
    assert in_steps.summary == at_once.summary
    # what made the two differ: etcd revoked the lease of the session proxy-2 registered when it came back (its
    # second server id, 112), which ran out off the lessor's grid
    events = at_once.events
    lost = events[events["kind"] == "session.lost"]
    assert list(lost["detail"].astype(str).str.contains("session/proxy-112")) == [False, True]
    assert at_once.summary["checks"]["stalls"]
