"""With the faithful rules, 50 random seeds of every query scenario keep every promise.

Each seed is a different interleaving of proxies, task times, network delays and time ticks; the checkers read each
run log (the read-consistency checker works out every read's expected rows from the pchannels' messages alone).
"""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor

import pytest

import milvus_edu
from milvus_edu.registry import get_mechanism

SEEDS = range(2000, 2050)  # 50 seeds none of the other tests use (benchmarks/reliability.py sweeps more)
CASES = ("seed-example", "workload", "insert-then-search", "clock-skew-bounded", "tsafe-stall-proxy-restart",
         "lag-too-large", "insert-delete-reorder", "ddl-recreate-under-load", "delete-then-read")


def _run(job):
    scenario, seed = job
    run = milvus_edu.simulate(scenario, seed=seed, keep_events=False)
    s = run.summary
    return scenario, seed, s["checks"]["ok"], s["checks"]["violations"][:1], sum(s["query"]["reads_by_level"].values())


def test_the_sweep_covers_every_query_scenario():
    assert set(CASES) == {s.name for s in get_mechanism("query").scenarios}


@pytest.mark.slow
def test_50_seeds_of_every_query_scenario_pass_every_checker():
    jobs = [(scenario, seed) for scenario in CASES for seed in SEEDS]
    with ProcessPoolExecutor(max_workers=min(2, os.cpu_count() or 1)) as pool:
        results = list(pool.map(_run, jobs, chunksize=25))
    failed = [(s, seed, v) for s, seed, ok, v, _ in results if not ok]
    assert not failed, f"{len(failed)} run(s) broke a promise; the first: {failed[0]}"
    assert all(reads > 0 for *_, reads in results), "every run must answer reads, or it checks nothing"
    assert len(results) == len(SEEDS) * len(CASES)
