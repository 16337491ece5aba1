"""Reliability at scale: every scenario with the faithful rules, and every bug switch in the scenario that teaches it.

The sweep is data, in ``milvus_edu/sweep/grids/`` (in the package, because the break-it lab reads which scenario
teaches which switch from it; not in ``sweeps/``, which the README and the book use as the place a sweep writes its
output):

* ``reliability-scenarios.json``: one grid, every scenario but ``workload`` (which runs only the steps it is
  given) x seeds 1-1000, no switch; ``milvus-edu sweep`` takes it as it is.
* ``reliability-switches.json``: a list of grids, one per scenario that teaches a switch (the scenario the lab's
  "break it" section runs it in), each x seeds 1-200; every entry is a grid ``milvus-edu sweep`` takes.

This script sweeps them all with :func:`milvus_edu.sweep.run_sweep` (one Spark job per grid, in one session) into
``OUT/scenarios`` and ``OUT/switches/<scenario>``, and prints (and writes as Markdown) three tables: violations
per scenario (zero, except where a scenario's ``gap`` is a hole in Milvus itself, whose rate is given), detection
rate per switch, and the vacuous checks per scenario and check. Sweeping into the same ``OUT`` again resumes.

    python benchmarks/reliability.py --out /tmp/reliability                  # the full size: 1000 and 200 seeds
    nice -n 19 python benchmarks/reliability.py --seeds 20 --out /tmp/rel20 --book book/reliability.md

``--seeds N`` sweeps seeds 1..N of every grid instead; ``--book PAGE`` replaces the generated block of the
book's page with the tables; ``--master`` (or ``MILVUS_EDU_SPARK_MASTER``) picks the cluster.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

GRIDS = Path(__file__).resolve().parents[1] / "milvus_edu" / "sweep" / "grids"
SCENARIOS_GRID = GRIDS / "reliability-scenarios.json"
SWITCHES_GRIDS = GRIDS / "reliability-switches.json"
#: Switches that no checker may catch in their scenario, and why: the switch changes no answer a client gets.
NOT_CAUGHT = {("flush-ts-boundary", "reset_flush_ts_inclusive"):
              "not caught by design: alone, >= changes no answer a client gets (quirk P23)"}
BEGIN = "<!-- reliability tables: begin (written by benchmarks/reliability.py; do not edit by hand) -->"
END = "<!-- reliability tables: end -->"


def grids(seeds: int | None = None) -> list[tuple[str, dict]]:
    """The documented sweep as ``(folder, grid)`` pairs: ``scenarios`` first, then ``switches/<scenario>``.

    ``seeds``: sweep seeds 1..``seeds`` of every grid instead of each grid's own (1000 and 200).
    """
    scenario_grid = json.loads(SCENARIOS_GRID.read_text(encoding="utf-8"))
    pairs = [("scenarios", scenario_grid)]
    pairs += [(f"switches/{g['scenario']}", g) for g in json.loads(SWITCHES_GRIDS.read_text(encoding="utf-8"))]
    if seeds is not None:
        if seeds < 1:
            raise ValueError(f"--seeds must be at least 1, got {seeds}")
        pairs = [(folder, {**grid, "seeds": f"1-{seeds}"}) for folder, grid in pairs]
    return pairs


@dataclass
class Reliability:
    """The swept tables (Spark DataFrames): the faithful-rules sweep's ``runs``/``verdicts``, the switch sweeps'
    (unioned), and the size and wall time of the sweep."""

    runs: object
    verdicts: object
    switch_runs: object
    switch_verdicts: object
    scenario_seeds: int
    switch_seeds: int
    wall_s: float


def _seed_count(grid: dict) -> int:
    from milvus_edu.sweep import normalise_grid

    return len(normalise_grid(grid)["seeds"])


def run(out, seeds: int | None = None, *, master: str | None = None, spark=None,
        progress: bool = True) -> Reliability:
    """Sweep every grid of :func:`grids` into ``out`` (resuming what is there) and return the tables."""
    from milvus_edu.sweep import run_sweep

    out = Path(out)
    started = time.perf_counter()
    swept = []
    for folder, grid in grids(seeds):
        sweep = run_sweep(grid, out / folder, master=master, spark=spark, progress=progress)
        spark = sweep.spark
        swept.append((grid, sweep))
    (scen_grid, scen), rest = swept[0], swept[1:]
    runs, verdicts = rest[0][1].runs, rest[0][1].verdicts
    for _, sweep in rest[1:]:
        runs = runs.unionByName(sweep.runs, allowMissingColumns=True)
        verdicts = verdicts.unionByName(sweep.verdicts, allowMissingColumns=True)
    return Reliability(scen.runs, scen.verdicts, runs, verdicts, _seed_count(scen_grid), _seed_count(rest[0][0]),
                       time.perf_counter() - started)


def _listing(counts) -> str:
    """``check (n), ...`` from a frame of ``check`` and ``n`` (runs), in check order."""
    return ", ".join(f"{r.check} ({r.n})" for r in counts.sort_values("check").itertuples())


def tables(result: Reliability) -> dict:
    """The three result tables as pandas DataFrames: ``violations`` (per scenario, faithful rules), ``detection``
    (per switch, in its scenario, with the checks that caught it and what is expected) and ``vacuous`` (per
    scenario and check, faithful rules, the checks with at least one vacuous verdict); plus ``errors``: runs
    whose simulation raised."""
    from pyspark.sql import functions as F

    from milvus_edu.analysis.many import detection_rate, verdict_matrix, violations_per_scenario
    from milvus_edu.registry import get_scenario

    violations = violations_per_scenario(result.verdicts, result.runs, by="scenario").toPandas()
    violations["gap"] = [bool(get_scenario(s).gap) for s in violations.scenario]
    failed_checks = (result.verdicts.filter(F.col("verdict") == "fail").join(result.runs, "run_id")
                     .groupBy("scenario", "check").agg(F.countDistinct("run_id").alias("n")).toPandas())
    violations["failed_checks"] = [_listing(failed_checks[failed_checks.scenario == s]) for s in violations.scenario]

    detection = detection_rate(result.switch_verdicts, result.switch_runs).toPandas()
    caught = (result.switch_verdicts.filter((F.col("verdict") == "fail") & ~F.col("expected"))
              .join(result.switch_runs, "run_id").groupBy("scenario", "switches", "check")
              .agg(F.countDistinct("run_id").alias("n")).toPandas())
    detection["caught_by"] = [_listing(caught[(caught.scenario == d.scenario) & (caught.switches == d.switches)])
                              for d in detection.itertuples()]
    detection["expected"] = [NOT_CAUGHT.get((d.scenario, d.switches), "caught") for d in detection.itertuples()]

    matrix = verdict_matrix(result.verdicts, result.runs, rows="scenario").toPandas()
    vacuous = matrix[matrix.vacuous > 0][["scenario", "mechanism", "check", "runs", "vacuous"]].reset_index(drop=True)
    every = result.runs.unionByName(result.switch_runs, allowMissingColumns=True)
    errors = every.filter(F.col("status") != "ok").select("run_id", "error").toPandas()
    run_wall_s = every.agg(F.sum("wall_s")).first()[0] or 0.0
    return {"violations": violations, "detection": detection, "vacuous": vacuous, "errors": errors,
            "run_wall_s": float(run_wall_s)}


def problems(t: dict) -> list[str]:
    """What the tables show that the project promises cannot happen, one line each (empty: all is well).

    * a run whose simulation raised;
    * with the faithful rules, a violation outside a scenario's documented gap;
    * a gap shown by a scenario that declares none (it is counted as a violation above, so this is the same);
    * a switch no seed caught (unless :data:`NOT_CAUGHT` says it cannot be), or one caught that cannot be.
    """
    found = [f"run {r.run_id} raised: {r.error}" for r in t["errors"].itertuples()]
    for r in t["violations"].itertuples():
        if r.failed_runs:
            found.append(f"{r.scenario}: {r.failed_runs} of {r.runs} runs broke a check outside a documented gap "
                         f"({r.failed_checks})")
    for d in t["detection"].itertuples():
        if (d.scenario, d.switches) in NOT_CAUGHT:
            if d.detected:
                found.append(f"{d.switches} in {d.scenario}: caught in {d.detected} runs, though {d.expected}")
        elif not d.detected:
            found.append(f"{d.switches} in {d.scenario}: no seed of {d.runs} caught it")
    return found


def _pct(part: int, whole: int) -> str:
    return f"{part} of {whole} ({100 * part / whole:.0f}%)" if whole else "0 of 0"


def markdown(t: dict, result: Reliability, master: str) -> str:
    """The tables as Markdown, headed by the size of the sweep they come from."""
    v, d, vac = t["violations"], t["detection"], t["vacuous"]
    runs = int(v.runs.sum()) + int(d.runs.sum())
    lines = [f"Measured by `benchmarks/reliability.py` with **{result.scenario_seeds} seeds per scenario** and "
             f"**{result.switch_seeds} seeds per switch**: {runs:,} runs on `{master}`, whose simulations took "
             f"{t['run_wall_s'] / 60:.1f} minutes of wall time added up (each timed inside its Spark task).", ""]
    if len(t["errors"]):
        lines += [f"**{len(t['errors'])} runs raised** (see `runs.parquet`).", ""]
    lines += ["**Violations per scenario, faithful rules.** A violation outside a gap would be a bug of the model; "
              "a scenario with a gap shows a hole in Milvus itself, on the share of seeds given.", "",
              "| scenario | runs | runs with a violation | gap | runs showing the gap | checks that failed (runs) |",
              "|---|---:|---:|---|---:|---|"]
    for r in v.itertuples():
        gap = _pct(int(r.gap_runs), int(r.runs)) if r.gap else "—"
        lines.append(f"| `{r.scenario}` | {r.runs} | {r.failed_runs} | {'yes' if r.gap else 'no'} | {gap} | "
                     f"{r.failed_checks or '—'} |")
    lines += ["", "**Detection rate per switch**, each in the scenario that teaches it: the share of seeds on which "
              "some check failed.", "",
              "| switch | scenario | seeds caught | first seed | checks that caught it (runs) | expected |",
              "|---|---|---:|---:|---|---|"]
    for r in d.itertuples():
        first = "—" if r.first_seed is None or r.first_seed != r.first_seed else int(r.first_seed)
        names = " + ".join(f"`{s}`" for s in r.switches.split(","))
        lines.append(f"| {names} | `{r.scenario}` | {_pct(int(r.detected), int(r.runs))} | {first} | "
                     f"{r.caught_by or '—'} | {r.expected} |")
    lines += ["", "**Vacuous checks, faithful rules**: a check is vacuous in a run where nothing could have broken "
              "it (it passed without being tested). Per scenario, the checks vacuous in at least one run, with the "
              "number of runs they were vacuous in.", "",
              "| scenario | runs | vacuous checks (runs) |", "|---|---:|---|"]
    for scenario, rows in vac.groupby("scenario", sort=True):
        ordered = rows.sort_values(["mechanism", "check"]).itertuples()
        checks = ", ".join(f"`{r.check}` ({int(r.vacuous)})" for r in ordered)
        lines.append(f"| `{scenario}` | {int(rows.runs.max())} | {checks} |")
    return "\n".join(lines) + "\n"


def write_book(page: Path, text: str) -> None:
    """Replace the block between :data:`BEGIN` and :data:`END` of ``page`` with ``text``."""
    content = page.read_text(encoding="utf-8")
    if BEGIN not in content or END not in content:
        raise ValueError(f"{page} has no generated block; add the lines {BEGIN} and {END}")
    head, rest = content.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    page.write_text(f"{head}{BEGIN}\n{text}{END}{tail}", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    """The command line: sweep, print the tables, write them; exit 1 when :func:`problems` finds any, 2 on bad input."""
    import os

    from milvus_edu.analysis.session import ENV_MASTER
    from milvus_edu.sweep import GridError

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="folder for the sweeps (the same folder and size resumes)")
    ap.add_argument("--seeds", type=int, help="seeds 1..N of every grid (default: 1000 per scenario, 200 per switch)")
    ap.add_argument("--master", help="Spark master (default $MILVUS_EDU_SPARK_MASTER, else local[2])")
    ap.add_argument("--markdown", help="where to write the tables (default OUT/reliability.md)")
    ap.add_argument("--book", help="also put the tables into this page's generated block (book/reliability.md)")
    args = ap.parse_args(argv)
    if args.seeds is not None and args.seeds < 1:
        print(f"--seeds must be at least 1, got {args.seeds}", file=sys.stderr)
        return 2
    if args.book and not Path(args.book).is_file():
        print(f"--book {args.book}: no such page", file=sys.stderr)
        return 2
    master = args.master or os.environ.get(ENV_MASTER) or "local[2]"
    try:
        result = run(args.out, args.seeds, master=master)
    except GridError as exc:
        print(exc, file=sys.stderr)
        return 2
    t = tables(result)
    text = markdown(t, result, master)
    print(text)
    print(f"this invocation took {result.wall_s / 60:.1f} minutes (runs already in --out are not run again)")
    target = Path(args.markdown) if args.markdown else Path(args.out) / "reliability.md"
    target.write_text(text, encoding="utf-8")
    if args.book:
        write_book(Path(args.book), text)
    found = problems(t)
    for line in found:
        print(f"problem: {line}", file=sys.stderr)
    result.runs.sparkSession.stop()
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
