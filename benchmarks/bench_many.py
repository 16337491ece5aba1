"""The many-run analysis at scale: 10M and 100M distinct events produced by a sweep (prints figures, asserts nothing).

Unlike ``bench_spark.py``, which replicates a few runs' rows, every event here comes from its own simulated run:
a sweep of ``timetick-basics`` seeds of 60 simulated seconds (about 0.8M events a run) is run until the wanted size is reached, into a
sweep folder that is kept and reused (``--workdir``), so the expensive part is paid once. Then, per size, with a
1g driver:

* ``start``: the SparkSession (JVM start);
* ``load + count``: :func:`milvus_edu.sweep.load_sweep` and a count of its events;
* the three TimeTick analyses (``tick_lag``, ``produce_reorder``, ``pack_sizes``) forced with Spark's ``noop``
  writer, and each joined to the runs table and grouped by the grid's dimension (``by_dimensions``);
* peak memory: the driver JVM's peak resident set (``VmHWM`` of the java processes this Python started) and
  this Python's own peak (``ru_maxrss``).

Sizes up to ``--pandas-max`` (default 1e7) also time the pandas twins on the same run folders.

    python benchmarks/bench_many.py --sizes 1e7 1e8 --workdir /tmp/many     # the issue's figures
    python benchmarks/bench_many.py --sizes 1e6                            # a quick look
"""

from __future__ import annotations

import argparse
import math
import os
import resource
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq

from milvus_edu.analysis.many import by_dimensions
from milvus_edu.analysis.session import spark_session
from milvus_edu.events import arrow_schema, table_to_frame
from milvus_edu.mechanisms.timetick.analysis import (pack_sizes, pack_sizes_pd, produce_reorder, produce_reorder_pd,
                                                     tick_lag, tick_lag_pd)
from milvus_edu.sweep import load_sweep, run_sweep

SCENARIO = "timetick-basics"
DURATION_S = 60.0  # simulated seconds a run: its default (5 s) makes about 66,600 events
EVENTS_PER_RUN = 800_000  # measured: 12 runs of 5 s gave 799,308 events, about 13,300 a simulated second
ANALYSES = [("tick_lag", tick_lag, tick_lag_pd), ("produce_reorder", produce_reorder, produce_reorder_pd),
            ("pack_sizes", pack_sizes, pack_sizes_pd)]


def force(df) -> None:
    """Compute every row of ``df`` without collecting it."""
    df.write.format("noop").mode("overwrite").save()


def java_peak_mb() -> float:
    """Peak resident memory (VmHWM) of the java processes that are children of this Python, in MB."""
    peak = 0.0
    me = str(os.getpid())
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            status = Path(f"/proc/{pid}/status").read_text()
            stat = Path(f"/proc/{pid}/stat").read_text().split()
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if stat[3] == me and b"java" in cmd:
            for line in status.splitlines():
                if line.startswith("VmHWM:"):
                    peak = max(peak, int(line.split()[1]) / 1024)
    return peak


def python_peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def timed(label: str, n: int, fn) -> float:
    t0 = time.perf_counter()
    fn()
    dt = time.perf_counter() - t0
    print(f"  {label:<40} {dt:8.2f} s  {n / dt:>14,.0f} events/s", flush=True)
    return dt


def make_sweep(folder: Path, size: float, master: str | None) -> Path:
    """A sweep folder of enough timetick-basics seeds for ``size`` events (reused if it is already there)."""
    runs = max(1, math.ceil(size / EVENTS_PER_RUN))
    out = folder / f"{SCENARIO}-{runs}x{DURATION_S:g}s"
    t0 = time.perf_counter()
    sweep = run_sweep({"scenario": SCENARIO, "seeds": runs, "duration_s": DURATION_S}, out, master=master,
                      progress=False)
    sweep.spark.stop()
    print(f"sweep of {runs} runs ready in {time.perf_counter() - t0:.1f} s ({out})", flush=True)
    return out


def bench(out: Path, driver_memory: str, master: str | None, pandas_max: float) -> None:
    t0 = time.perf_counter()
    spark = spark_session(master, driver_memory, app_name="milvus-edu-bench-many")
    print(f"  {'start':<40} {time.perf_counter() - t0:8.2f} s  (spark {spark.version}, "
          f"{spark.sparkContext.master}, driver {driver_memory})", flush=True)
    holder = {}

    def load():
        sweep = load_sweep(out, spark=spark)
        holder["sweep"] = sweep
        holder["n"] = sweep.events.count()

    t0 = time.perf_counter()
    load()
    n = holder["n"]
    dt = time.perf_counter() - t0
    print(f"  {'load + count':<40} {dt:8.2f} s  {n / dt:>14,.0f} events/s  ({n:,} events)", flush=True)
    sweep = holder["sweep"]
    total = 0.0
    for name, fn, _ in ANALYSES:
        total += timed(f"{name}", n, lambda fn=fn: force(fn(sweep.events)))
    for name, fn, _ in ANALYSES:
        metric = fn(sweep.events)
        value = next(c for c in metric.columns if c not in ("run_id",) and dict(metric.dtypes)[c] in
                     ("double", "bigint", "int", "float"))
        total += timed(f"{name} by grid point ({value})", n,
                       lambda m=metric, v=value: force(by_dimensions(m, sweep.runs, v, ["scenario"])))
    print(f"  {'analyses in all':<40} {total:8.2f} s", flush=True)
    print(f"  peak memory: driver JVM {java_peak_mb():,.0f} MB, Python {python_peak_mb():,.0f} MB", flush=True)
    spark.stop()
    if n <= pandas_max:
        files = sorted(out.glob("runs/*/events.parquet"))
        frame = {}
        t_load = timed("pandas: load", n, lambda: frame.setdefault(
            "f", table_to_frame(pq.read_table(files, schema=arrow_schema()))))
        t_all = t_load + sum(timed(f"pandas: {name}", n, lambda fn=fn: fn(frame["f"])) for name, _, fn in ANALYSES)
        print(f"  {'pandas in all':<40} {t_all:8.2f} s; Python peak {python_peak_mb():,.0f} MB", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", nargs="+", type=float, default=[1e7, 1e8], help="event counts (default 1e7 1e8)")
    parser.add_argument("--workdir", default="milvus-edu-bench-many", help="where the sweeps are kept and reused")
    parser.add_argument("--master", default=None, help="Spark master for the sweeps and the analyses")
    parser.add_argument("--driver-memory", default="1g", help="Spark driver memory (default 1g)")
    parser.add_argument("--pandas-max", type=float, default=1e7, help="also time pandas up to this size (0: never)")
    args = parser.parse_args(argv)
    folder = Path(args.workdir)
    folder.mkdir(parents=True, exist_ok=True)
    for size in args.sizes:
        print(f"\n== about {size:,.0f} events", flush=True)
        out = make_sweep(folder, size, args.master)
        bench(out, args.driver_memory, args.master, args.pandas_max)
    return 0


if __name__ == "__main__":
    sys.exit(main())
