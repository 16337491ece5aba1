"""With the faithful rules, 50 random seeds of every TimeTick scenario keep every promise.

Each seed is a different interleaving of proxies, requests, network delays and faults; the checkers
read each run log. Runs are shortened (and the restart scenario's session TTL cut to 6 s, so its old
session expires within the run) to keep the sweep to a couple of minutes on two cores; the mechanisms
and their timing rules are the ones of the full scenarios.
"""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor

import pytest

import milvus_edu
from milvus_edu.registry import get_mechanism

SEEDS = range(1000, 1050)  # 50 seeds none of the other tests use (benchmarks/reliability.py sweeps more)
S = 1_000_000_000
CASES = {
    "timetick-basics": dict(duration_s=1.0, options={"inserts_per_s": 400.0}),
    "timetick-proxy-stall": dict(duration_s=7.0, options={"inserts_per_s": 80.0}),
    "timetick-proxy-restart": dict(duration_s=12.0, options={"inserts_per_s": 30.0},
                                   params={"tso.session_ttl_ns": 6 * S}),
    "timetick-slow-link": dict(duration_s=2.0),
    "timetick-unlocked-enqueue": dict(duration_s=1.5, options={"inserts_per_s": 300.0}),
}


def _run(job):
    scenario, seed = job
    run = milvus_edu.simulate(scenario, seed=seed, keep_events=False, **CASES[scenario])
    checks = run.summary["checks"]
    return scenario, seed, checks["ok"], checks["violations"][:1], run.summary["timetick"]["time_ticks"]


def test_the_sweep_covers_every_timetick_scenario():
    assert set(CASES) == {s.name for s in get_mechanism("timetick").scenarios}


@pytest.mark.slow
def test_50_seeds_of_every_timetick_scenario_pass_every_checker():
    jobs = [(scenario, seed) for scenario in CASES for seed in SEEDS]
    with ProcessPoolExecutor(max_workers=min(2, os.cpu_count() or 1)) as pool:
        results = list(pool.map(_run, jobs, chunksize=20))
    failed = [(s, seed, v) for s, seed, ok, v, _ in results if not ok]
    assert not failed, f"{len(failed)} run(s) broke a promise; the first: {failed[0]}"
    assert all(ticks > 0 for *_, ticks in results), "every run must write time ticks, or it checks nothing"
    assert len(results) == len(SEEDS) * len(CASES)
