"""How fast does Spark read run logs and run the first TSO analyses? (prints figures, asserts nothing)

Builds data sets of about 1M and 10M events cheaply: a few real simulations, then their rows
replicated with pyarrow under new run ids (``<run_id>~r000123``), written as Parquet files of about
1M rows each in a temporary folder. Then, per size, it times

* ``load``: ``load_events`` on the folder and ``malformed_count`` (one full pass that reads and
  validates every row),
* each analysis (``allocations_per_window``, ``kv_saves_per_second``, ``failover_gaps``), forced
  with Spark's ``noop`` writer (computes every row of the result, writes nothing),

and prints seconds and events per second. Sizes up to ``--pandas-max`` also time the pandas twins
for comparison (read with pyarrow, then the ``_pd`` functions).

    python benchmarks/bench_spark.py                  # 1e6 and 1e7
    python benchmarks/bench_spark.py --sizes 1e6      # only 1M
    MILVUS_EDU_SPARK_MASTER=local[2] python benchmarks/bench_spark.py --driver-memory 2g
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

import milvus_edu
from milvus_edu.analysis import load_events, spark_session
from milvus_edu.events import arrow_schema, table_to_frame
from milvus_edu.mechanisms.tso.analysis import (allocations_per_window, allocations_per_window_pd, failover_gaps,
                                                failover_gaps_pd, kv_saves_per_second, kv_saves_per_second_pd)

BASE_RUNS = [("tso-basics", 1), ("tso-basics", 2), ("tso-failover", 1), ("tso-failover", 2),
             ("tso-clock-skew", 1)]
ROWS_PER_FILE = 1_000_000
ANALYSES = [("allocations_per_window", allocations_per_window, allocations_per_window_pd),
            ("kv_saves_per_second", kv_saves_per_second, kv_saves_per_second_pd),
            ("failover_gaps", failover_gaps, failover_gaps_pd)]


def simulate_base(folder: Path) -> tuple[pa.Table, list[Path]]:
    """Simulate BASE_RUNS into ``folder``; their events as one Arrow table, and the run folders."""
    tables, dirs = [], []
    for scenario, seed in BASE_RUNS:
        out = folder / f"{scenario}-s{seed}"
        milvus_edu.simulate(scenario, seed=seed, out_dir=out, keep_events=False)
        tables.append(pq.read_table(out / "events.parquet", schema=arrow_schema()))
        dirs.append(out)
    return pa.concat_tables(tables), dirs


def build_dataset(base: pa.Table, n_events: int, folder: Path) -> int:
    """Write about ``n_events`` rows (whole replicas of ``base``) as Parquet files; return the row count."""
    folder.mkdir(parents=True)
    replicas = max(1, math.ceil(n_events / base.num_rows))
    per_file = max(1, ROWS_PER_FILE // base.num_rows)
    run_col = base.schema.get_field_index("run_id")
    written, part = 0, 0
    for first in range(0, replicas, per_file):
        chunk = []
        for r in range(first, min(first + per_file, replicas)):
            run_id = pc.binary_join_element_wise(base.column("run_id"), pa.scalar(f"~r{r:06d}"), "")
            chunk.append(base.set_column(run_col, base.schema.field(run_col), run_id))
        table = pa.concat_tables(chunk)
        pq.write_table(table, folder / f"part-{part:05d}.parquet", compression="zstd", row_group_size=131_072)
        written += table.num_rows
        part += 1
    return written


def force(df) -> None:
    """Compute every row of ``df`` without collecting it."""
    df.write.format("noop").mode("overwrite").save()


def timed(label: str, n: int, fn, results: list) -> None:
    t0 = time.perf_counter()
    fn()
    dt = time.perf_counter() - t0
    results.append((label, dt))
    print(f"  {label:<32} {dt:8.2f} s  {n / dt:>14,.0f} events/s", flush=True)


def bench_spark(spark, folder: Path, n: int) -> float:
    results: list = []
    holder = {}

    def load():
        loaded = load_events(spark, folder)
        holder["count"] = loaded.malformed_count
        holder["events"] = loaded.events

    timed("load + validate (spark)", n, load, results)
    if holder["count"]:
        print(f"  !! {holder['count']} malformed rows", flush=True)
    for name, fn, _ in ANALYSES:
        timed(f"{name} (spark)", n, lambda fn=fn: force(fn(holder["events"])), results)
    total = sum(dt for _, dt in results)
    print(f"  {'total (spark)':<32} {total:8.2f} s  {n / total:>14,.0f} events/s", flush=True)
    return total


def bench_pandas(folder: Path, n: int) -> None:
    results: list = []
    holder = {}

    def load():
        holder["frame"] = table_to_frame(pq.read_table(folder, schema=arrow_schema()))

    timed("load (pandas)", n, load, results)
    for name, _, fn in ANALYSES:
        timed(f"{name} (pandas)", n, lambda fn=fn: fn(holder["frame"]), results)
    total = sum(dt for _, dt in results)
    print(f"  {'total (pandas)':<32} {total:8.2f} s  {n / total:>14,.0f} events/s", flush=True)
    holder.clear()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", nargs="+", type=float, default=[1e6, 1e7], help="event counts (default 1e6 1e7)")
    parser.add_argument("--master", default=None, help="Spark master (default $MILVUS_EDU_SPARK_MASTER or local[*])")
    parser.add_argument("--driver-memory", default=None, help="Spark driver memory (default $MILVUS_EDU_SPARK_DRIVER_MEMORY or 1g)")
    parser.add_argument("--pandas-max", type=float, default=1e6, help="also time pandas up to this size (default 1e6; 0: never)")
    parser.add_argument("--workdir", default=None, help="where to write the data sets (default: a temp folder)")
    parser.add_argument("--keep", action="store_true", help="keep the data sets")
    args = parser.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="milvus-edu-bench-", dir=args.workdir))
    try:
        t0 = time.perf_counter()
        base, run_dirs = simulate_base(work / "base")
        print(f"base: {len(BASE_RUNS)} simulated runs, {base.num_rows:,} events ({time.perf_counter() - t0:.1f} s)")
        spark = spark_session(args.master, args.driver_memory, app_name="milvus-edu-bench")
        conf = spark.sparkContext.getConf()
        print(f"spark {spark.version}, master {spark.sparkContext.master}, driver memory "
              f"{conf.get('spark.driver.memory')}, {os.cpu_count()} CPUs, python {sys.version.split()[0]}")
        # warm-up on the base runs (JIT, class loading), not timed
        warm = load_events(spark, run_dirs)
        for _, fn, _ in ANALYSES:
            force(fn(warm.events))
        for size in args.sizes:
            folder = work / f"events-{int(size)}"
            t0 = time.perf_counter()
            n = build_dataset(base, int(size), folder)
            mb = sum(p.stat().st_size for p in folder.iterdir()) / 1e6
            print(f"\n{n:,} events ({n // base.num_rows * len(BASE_RUNS):,} runs), "
                  f"{len(list(folder.iterdir()))} Parquet files, {mb:,.0f} MB, built in {time.perf_counter() - t0:.1f} s",
                  flush=True)
            bench_spark(spark, folder, n)
            if size <= args.pandas_max:
                bench_pandas(folder, n)
            if not args.keep:
                shutil.rmtree(folder)
        spark.stop()
    finally:
        if args.keep:
            print(f"\ndata kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
