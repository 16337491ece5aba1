"""The start of the book's calibration table: how long a read waits right after a write, model against a real Milvus.

For each consistency level, ``--rounds`` rounds of "Client1 inserts a key, then queries that key 30 ms later" (0.5 s
apart), run as one workload on the model (the ``workload`` scenario, ``--seeds`` seeds) and on a real Milvus 2.3.5
(:mod:`milvus_edu.real`), with the time-tick interval at its default (200 ms) and at ``--fast-tick`` ms. Prints,
per level, the median and largest wait (from sending the query to its answer) and how many queries saw their own
insert, on each side; then the real server's start time and memory. Prints figures only; needs the ``real`` extra.

    python benchmarks/real_calibration.py [--rounds 20] [--seeds 1 2 3] [--fast-tick 50]
"""

from __future__ import annotations

import argparse
import statistics
import sys

from milvus_edu import simulate
from milvus_edu.mechanisms.query.levels import reads
from milvus_edu.real import RealMilvus
from milvus_edu.real.workload import run_workload

LEVELS = ("Strong", "Session", "Bounded", "Eventually")


def steps(rounds: int) -> list[dict]:
    """The workload: per level, ``rounds`` inserts each followed 30 ms later by a query of that key."""
    out = [{"at": 0.5, "client": "Client1", "op": "create_collection", "collection": "C0"}]
    at = 1.0
    for level in LEVELS:
        for i in range(rounds):
            key = f"{level[:2]}{i}"
            out.append({"at": round(at, 3), "client": "Client1", "op": "insert", "collection": "C0",
                        "data": [{"id": key}]})
            out.append({"at": round(at + 0.03, 3), "client": "Client1", "op": "query", "collection": "C0",
                        "ids": [key], "consistency_level": level, "label": key})
            at += 0.5
    return out


def figures(events, waits_from) -> dict[str, tuple[float, float, int, int]]:
    """Per level: (median wait ms, largest wait ms, reads that saw their key, reads)."""
    r = reads(events)
    out = {}
    for level in LEVELS:
        mine = r[r["level"] == level]
        waits = [waits_from(row) for row in mine.itertuples(index=False)]
        saw = sum(1 for row in mine.itertuples(index=False) if row.label in (row.rows or []))
        out[level] = (statistics.median(waits), max(waits), saw, len(mine))
    return out


def model_figures(work, seed: int, params: dict) -> dict:
    result = simulate("workload", seed=seed, duration_s=work[-1]["at"] + 5.0, options={"steps": work}, params=params)
    ev = result.events
    starts = {int(r.request): float(r.t_ms) for r in ev[ev["kind"] == "client.read_start"].itertuples(index=False)}
    return figures(ev, lambda row: row.t_ms - starts[int(row.request)])


def real_figures(work, params: dict) -> tuple[dict, RealMilvus]:
    with RealMilvus(params=params) as server:
        run = run_workload(work, server=server, server_logs=False)
    ev = run.events
    lat = {}
    for r in ev[ev["kind"] == "client.read"].itertuples(index=False):
        import json

        lat[int(r.request)] = json.loads(r.detail)["latency_ms"]
    return figures(ev, lambda row: lat[int(row.request)]), server


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--fast-tick", type=int, default=50, help="the second time-tick interval, ms")
    args = parser.parse_args()
    work = steps(args.rounds)
    for tick in (200, args.fast_tick):
        params = {} if tick == 200 else {"timetick.time_tick_interval_ns": tick * 1_000_000}
        real, server = real_figures(work, params)
        print(f"proxy.timeTickInterval = {tick} ms; real server started in {server.start_s:.1f} s, "
              f"{server.rss_mb_at_start:.0f} MiB resident")
        print(f"  {'level':<11}{'real median/max ms':>20}{'saw own':>9}   " +
              "".join(f"{'model s' + str(s) + ' median/max':>24}{'saw':>6}" for s in args.seeds))
        models = {s: model_figures(work, s, params) for s in args.seeds}
        for level in LEVELS:
            med, top, saw, n = real[level]
            line = f"  {level:<11}{f'{med:.0f} / {top:.0f}':>20}{f'{saw}/{n}':>9}   "
            for s in args.seeds:
                m_med, m_top, m_saw, m_n = models[s][level]
                line += f"{f'{m_med:.0f} / {m_top:.0f}':>24}{f'{m_saw}/{m_n}':>6}"
            print(line)
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
