"""How many runs a minute does a sweep get through? (prints figures, asserts nothing)

Runs the same sweep (``--runs`` seeds of ``--scenario`` for ``--duration`` simulated seconds) on
``local[1]``, on ``local[2]`` and on a standalone cluster of one 2-core worker started from the pyspark
installation, each in a fresh Python process with its own Spark session. Each process first sweeps a
few warm-up runs into a scratch folder (the JVM start, the Python workers and the package's import are
not what is measured), then times the sweep itself, resumed from nothing. Prints runs/minute per master
and the local[2] / local[1] ratio (the goal is 1.7x or more on a machine with two free cores), beside a
control: how much more two CPU-bound processes get done than one on this machine right now (on a shared
machine whose other work takes the second core, neither ratio can reach 2).

    python benchmarks/bench_sweep.py
    python benchmarks/bench_sweep.py --runs 200 --scenario tso-pause --duration 120
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WARMUP_RUNS = 4


def _burn(n: int) -> None:
    x = 0
    for i in range(n):
        x += i * i


def cpu_parallelism(n: int = 5_000_000) -> float:
    """How many times more CPU-bound work two processes finish than one in the same time, here and now."""
    from multiprocessing import Process

    def timed(k: int) -> float:
        procs = [Process(target=_burn, args=(n,)) for _ in range(k)]
        started = time.perf_counter()
        for p in procs:
            p.start()
        for p in procs:
            p.join()
        return time.perf_counter() - started

    return 2 * timed(1) / timed(2)


def one_master(master: str, scenario: str, runs: int, duration: float, folder: str) -> dict:
    """Sweep on ``master`` in this process: a warm-up, then the timed sweep; returns seconds and runs."""
    from milvus_edu.sweep import run_sweep

    grid = {"scenario": scenario, "duration_s": duration}
    warm = run_sweep({**grid, "seeds": [10_000 + i for i in range(WARMUP_RUNS)]}, Path(folder) / "warmup",
                     master=master, progress=False)
    started = time.perf_counter()
    swept = run_sweep({**grid, "seeds": runs}, Path(folder) / "timed", spark=warm.spark, progress=False)
    seconds = time.perf_counter() - started
    ok = swept.runs.filter("status = 'ok'").count()
    warm.spark.stop()
    return {"master": master, "runs": runs, "ok": ok, "seconds": seconds, "runs_per_min": runs / seconds * 60.0}


def _in_subprocess(master: str, args, folder: str) -> dict:
    cmd = [sys.executable, __file__, "--one", master, "--runs", str(args.runs), "--scenario", args.scenario,
           "--duration", str(args.duration), "--folder", folder]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=60)
    parser.add_argument("--scenario", default="timetick-basics")
    parser.add_argument("--duration", type=float, default=2.0)
    parser.add_argument("--one", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--folder", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one_master(args.one, args.scenario, args.runs, args.duration, args.folder)))
        return
    from milvus_edu.sweep import StandaloneCluster

    print(f"sweep of {args.runs} runs of {args.scenario} ({args.duration:g} simulated s each) on {os.cpu_count()} "
          f"CPUs; load average before: {os.getloadavg()[0]:.1f} (other work on the machine slows local[2] most)")
    results = {}
    with tempfile.TemporaryDirectory(prefix="bench-sweep-") as tmp:
        for master in ("local[1]", "local[2]"):
            results[master] = _in_subprocess(master, args, str(Path(tmp) / master.replace("[", "-").strip("]")))
        with StandaloneCluster(cores=2, memory="1g", log_dir=Path(tmp) / "cluster") as cluster:
            results["standalone"] = _in_subprocess(cluster.master_url, args, str(Path(tmp) / "standalone"))
    for name, r in results.items():
        print(f"  {name:<11} {r['seconds']:7.1f} s  {r['runs_per_min']:7.1f} runs/min  ({r['ok']} ok)")
    ratio = results["local[2]"]["runs_per_min"] / results["local[1]"]["runs_per_min"]
    print(f"  local[2] / local[1] = {ratio:.2f}x (goal >= 1.7x with two free cores); load average after: "
          f"{os.getloadavg()[0]:.1f}")
    print(f"  control: two CPU-bound processes get {cpu_parallelism():.2f}x the work of one on this machine now")


if __name__ == "__main__":
    main()
