"""Many-run analysis (milvus_edu.analysis.many) and its pictures (milvus_edu.viz.many) over sweep-shaped tables.

The tables are built here the way a sweep lays them out (events with a run id unique per run; one runs row per
run with ``opt_*`` / ``param_*`` columns; one verdict row per run and check, from each run's summary), from real
runs of :func:`milvus_edu.simulate`, so the numbers checked are the model's. Every test here uses Spark.
"""

from __future__ import annotations

import itertools
import re

import matplotlib
import pandas as pd
import pytest

import milvus_edu
from milvus_edu.analysis import spark_schema, to_pandas
from milvus_edu.analysis import many
from milvus_edu.mechanisms.query.analysis import read_waits, read_waits_pd
from milvus_edu.events.schema import FIELDS
from milvus_edu.registry import get_scenario, mechanisms, scenario_mechanisms
from milvus_edu.viz import many as viz_many

matplotlib.use("Agg")
pytestmark = pytest.mark.spark

MS = 1_000_000
PROXIES = (1, 2)
INTERVALS_NS = (50 * MS, 200 * MS)
WAIT_SEEDS = (1, 2, 3)
SWITCH = "skip_wait_tsafe"
CATCH_SEEDS = (1, 2, 3, 4)


def _column(name: str) -> str:
    return re.sub(r"[^0-9A-Za-z]", "_", name)


def _sweep_tables(spark, jobs):
    """(events, runs, verdicts) of ``jobs`` -- ``(scenario, seed, switches, options, params)`` -- laid out as a
    sweep lays them out; each run's id names every grid coordinate, so it is unique."""
    frames, run_rows, verdict_rows = [], [], []
    for scenario, seed, switches, options, params in jobs:
        run = milvus_edu.simulate(scenario, seed=seed, switches=list(switches), options=options, params=params)
        run_id = (f"{scenario}-s{seed}" + "".join(f"+{s}" for s in switches)
                  + "".join(f"|{k}={v}" for k, v in sorted({**options, **params}.items())))
        frame = run.events
        frames.append(frame.assign(run_id=run_id))
        row = {"run_id": run_id, "scenario": scenario, "seed": seed, "switches": ",".join(switches)}
        row.update({f"opt_{k}": float(v) for k, v in options.items()})
        row.update({f"param_{_column(k)}": float(v) for k, v in params.items()})
        row.update({"status": "ok", "error": None, "events": len(frame), "sim_s": float(run.summary["duration_s"]),
                    "wall_s": 0.0})
        run_rows.append(row)
        spec = get_scenario(scenario)
        checks = run.summary["checks"]
        vacuous = {c for names in checks["vacuous"].values() for c in names}
        for mech in scenario_mechanisms(spec):
            if mech.checker is None:
                continue
            for check in mech.checker().invariants:
                count = int(checks["violation_counts"][check])
                verdict = "fail" if count else ("vacuous" if check in vacuous else "pass")
                verdict_rows.append({"run_id": run_id, "mechanism": mech.name, "check": check, "verdict": verdict,
                                     "violations": count, "expected": bool(spec.gap), "explanation": ""})
    events = pd.concat(frames, ignore_index=True)
    events = spark.createDataFrame(events[[f.name for f in FIELDS]].astype(object).where(events.notna(), None),
                                   spark_schema())
    runs = spark.createDataFrame(pd.DataFrame(run_rows).astype(object).where(lambda f: f.notna(), None))
    verdicts = spark.createDataFrame(pd.DataFrame(verdict_rows),
                                     "run_id string, mechanism string, check string, verdict string, "
                                     "violations long, expected boolean, explanation string")
    return events, runs, verdicts


@pytest.fixture(scope="module")
def waits_sweep(spark):
    """seed-example at 1 and 2 proxies and a 50 or 200 ms time tick, 3 seeds each: 12 runs."""
    jobs = [("seed-example", seed, (), {"proxies": p}, {"timetick.time_tick_interval_ns": t})
            for p, t, seed in itertools.product(PROXIES, INTERVALS_NS, WAIT_SEEDS)]
    return _sweep_tables(spark, jobs)


@pytest.fixture(scope="module")
def catch_sweep(spark):
    """insert-then-search with the faithful rules and with skip_wait_tsafe, and tso-pause (a gap), 4 seeds each."""
    jobs = [("insert-then-search", seed, sw, {}, {}) for sw in ((), (SWITCH,)) for seed in CATCH_SEEDS]
    jobs += [("tso-pause", seed, (), {}, {}) for seed in CATCH_SEEDS]
    return _sweep_tables(spark, jobs)


# ---- the grid -------------------------------------------------------------------------------------------

def test_dimensions_are_the_grid_columns_that_vary(waits_sweep, catch_sweep):
    assert many.dimensions(waits_sweep[1]) == ["opt_proxies", "param_timetick_time_tick_interval_ns"]
    assert many.dimensions(catch_sweep[1]) == ["scenario", "switches"]


def test_every_analysis_keys_its_rows_by_run(waits_sweep):
    events = waits_sweep[0]
    analyses = {name: fns for m in mechanisms() if m.analyses for name, fns in m.analyses().items()}
    assert len(analyses) >= 4 * 3, "every mechanism registers its analyses"
    for name, (spark_fn, _) in analyses.items():
        assert spark_fn(events).columns[0] == "run_id", name


# ---- a metric per grid point ----------------------------------------------------------------------------

def test_strong_wait_per_grid_point(waits_sweep):
    events, runs, _ = waits_sweep
    strong = read_waits(events).filter("level = 'Strong'")
    table = to_pandas(many.by_dimensions(strong, runs, "p50_wait_ms"))
    assert len(table) == len(PROXIES) * len(INTERVALS_NS)
    assert set(zip(table.opt_proxies, table.param_timetick_time_tick_interval_ns)) == \
        {(float(p), float(t)) for p in PROXIES for t in INTERVALS_NS}
    assert (table.runs == len(WAIT_SEEDS)).all() and (table.rows == len(WAIT_SEEDS)).all()
    cols = ["min_p50_wait_ms", "p50_p50_wait_ms", "p90_p50_wait_ms", "p99_p50_wait_ms", "max_p50_wait_ms"]
    assert (table[cols].diff(axis=1).iloc[:, 1:] >= 0).all().all(), "percentiles must not decrease"
    # the same numbers by hand, from each run's pandas twin
    every_event = to_pandas(events)  # one Spark job; each run's twin on its own rows
    per_run = pd.concat([read_waits_pd(every_event[every_event.run_id == r]) for r in runs.toPandas().run_id])
    per_run = per_run[per_run.level == "Strong"].merge(runs.toPandas(), on="run_id")
    for row in table.itertuples():
        values = per_run[(per_run.opt_proxies == row.opt_proxies)
                         & (per_run.param_timetick_time_tick_interval_ns == row.param_timetick_time_tick_interval_ns)]
        assert row.mean_p50_wait_ms == pytest.approx(values.p50_wait_ms.mean())
        assert row.max_p50_wait_ms == values.p50_wait_ms.max()
        assert row.p50_p50_wait_ms in set(values.p50_wait_ms)  # percentile_approx returns one of the values
    # Strong reads wait for the next time tick: a 4x longer tick makes the median wait longer at every count
    by_tick = table.pivot(index="opt_proxies", columns="param_timetick_time_tick_interval_ns", values="p50_p50_wait_ms")
    assert (by_tick[float(INTERVALS_NS[1])] > by_tick[float(INTERVALS_NS[0])]).all()


def test_per_run_reduction_and_explicit_grouping(waits_sweep):
    events, runs, _ = waits_sweep
    waits = read_waits(events)  # one row per run and level: the max over levels is one value per run
    table = to_pandas(many.by_dimensions(waits, runs, "max_wait_ms", by="opt_proxies", per_run="max",
                                         percentiles=(25, 75)))
    assert list(table.opt_proxies) == [float(p) for p in PROXIES]
    assert (table.runs == table.rows).all() and table.runs.sum() == len(PROXIES) * len(INTERVALS_NS) * len(WAIT_SEEDS)
    assert {"p25_max_wait_ms", "p75_max_wait_ms"} <= set(table.columns) and "p50_max_wait_ms" not in table.columns
    overall = to_pandas(many.by_dimensions(waits, runs, "max_wait_ms", by=[]))
    assert len(overall) == 1 and overall.rows.iloc[0] == waits.filter("max_wait_ms IS NOT NULL").count()


def test_bad_arguments_say_what_is_wrong(waits_sweep):
    events, runs, _ = waits_sweep
    waits = read_waits(events)
    with pytest.raises(ValueError, match="'nope' is not a column of the runs table"):
        many.by_dimensions(waits, runs, "max_wait_ms", by="nope")
    with pytest.raises(ValueError, match="needs the columns run_id and 'wait'"):
        many.by_dimensions(waits, runs, "wait")
    with pytest.raises(ValueError, match="per_run must be one of"):
        many.by_dimensions(waits, runs, "max_wait_ms", per_run="median")
    with pytest.raises(ValueError, match="between 0 and 100"):
        many.by_dimensions(waits, runs, "max_wait_ms", percentiles=(0, 50))
    with pytest.raises(ValueError, match="at least 1"):
        many.detection_by_seeds(waits_sweep[2], runs, seeds=[0])


# ---- verdicts across runs -------------------------------------------------------------------------------

def test_detection_rate_of_a_switch_caught_at_seed_1(catch_sweep):
    _, runs, verdicts = catch_sweep
    rate = to_pandas(many.detection_rate(verdicts, runs)).set_index(["scenario", "switches"])
    assert len(rate) == 3 and (rate.runs == len(CATCH_SEEDS)).all()
    caught = rate.loc[("insert-then-search", SWITCH)]
    assert caught.rate == 1.0 and caught.detected == len(CATCH_SEEDS) and caught.first_seed == 1
    assert caught.violations > 0
    faithful = rate.loc[("insert-then-search", "")]
    assert faithful.detected == 0 and faithful.rate == 0 and pd.isna(faithful.first_seed)
    # tso-pause's failures are its gap, expected: they are no detection
    assert rate.loc[("tso-pause", "")].detected == 0


def test_detection_by_seeds_counts_windows(catch_sweep):
    _, runs, verdicts = catch_sweep
    table = to_pandas(many.detection_by_seeds(verdicts, runs, seeds=[1, 2, 4, 5]))
    assert set(table.seeds) == {1, 2, 4}, "a group of 4 runs has no window of 5"
    for row in table.itertuples():
        assert row.windows == len(CATCH_SEEDS) - row.seeds + 1
        assert row.caught == (row.windows if row.switches == SWITCH else 0)


def test_detection_by_seeds_on_a_partial_pattern(spark):
    runs = spark.createDataFrame([(f"r{s}", "sc", s, "sw") for s in range(1, 7)], "run_id string, scenario string, "
                                 "seed long, switches string")
    caught_on = {2, 6}  # seeds 1..6: caught on 2 and 6
    verdicts = spark.createDataFrame([(f"r{s}", "m", "c", "fail" if s in caught_on else "pass",
                                       1 if s in caught_on else 0, False, "") for s in range(1, 7)],
                                     "run_id string, mechanism string, check string, verdict string, "
                                     "violations long, expected boolean, explanation string")
    table = to_pandas(many.detection_by_seeds(verdicts, runs, seeds=[1, 2, 3, 4])).set_index("seeds")
    # windows of 2: 12 23 34 45 56 -> 12, 23, 56 caught; of 3: 123 234 345 456 -> all but 345; of 4: all 3
    assert table.caught.to_dict() == {1: 2, 2: 3, 3: 3, 4: 3}
    assert table.windows.to_dict() == {1: 6, 2: 5, 3: 4, 4: 3}
    assert to_pandas(many.detection_rate(verdicts, runs)).first_seed.iloc[0] == 2


def test_violations_per_scenario_and_the_verdict_matrix(catch_sweep):
    _, runs, verdicts = catch_sweep
    per = to_pandas(many.violations_per_scenario(verdicts, runs)).set_index(["scenario", "switches"])
    assert per.loc[("insert-then-search", ""), "failed_runs"] == 0
    assert per.loc[("insert-then-search", ""), "violations"] == 0
    assert per.loc[("insert-then-search", SWITCH), "failed_runs"] == len(CATCH_SEEDS)
    pause = per.loc[("tso-pause", "")]
    assert pause.failed_runs == 0 and pause.gap_rate == pause.gap_runs / len(CATCH_SEEDS)
    vd = verdicts.toPandas().merge(runs.toPandas(), on="run_id")
    pause_failed = vd[(vd.scenario == "tso-pause") & (vd.verdict == "fail")].run_id.nunique()
    assert pause.gap_runs == pause_failed
    matrix = to_pandas(many.verdict_matrix(verdicts, runs, rows=["scenario", "switches"]))
    assert (matrix.passed + matrix.failed + matrix.vacuous == matrix.runs).all()
    assert matrix.runs.sum() == verdicts.count()
    wait = matrix[(matrix.switches == SWITCH) & (matrix.check == "strong-sees-acked")]
    assert wait.failed.iloc[0] == len(CATCH_SEEDS) and wait.share_failed.iloc[0] == 1.0


# ---- the pictures ---------------------------------------------------------------------------------------

def test_pictures_draw_the_tables(waits_sweep, catch_sweep):
    events, runs, _ = waits_sweep
    strong = read_waits(events).filter("level = 'Strong'")
    table = many.by_dimensions(strong, runs, "p50_wait_ms")
    fig = viz_many.metric_vs_parameter(table, "param_timetick_time_tick_interval_ns", "p50_wait_ms", unit="ms",
                                       parameter_unit="ms", scale=1e-6, lines="opt_proxies")
    ax = fig.axes[0]
    assert ax.get_xlabel() == "timetick_time_tick_interval_ns (ms)"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [f"proxies={p}: median" for p in PROXIES] + [
        "runs: min–p90", "runs: p90–p99"]
    assert ax.get_ylabel() == "p50_wait_ms (ms)"
    assert len(ax.lines) == len(PROXIES) + 2 and list(ax.lines[0].get_xdata()) == [50.0, 200.0]
    assert len(ax.collections) == 2 * len(PROXIES)  # two bars per line and grid point
    # each line's bars stand beside the others' at a grid point, in the line's order
    bar_x = [seg[0][0] for c in ax.collections[::2] for seg in c.get_segments()[:1]]
    assert bar_x == sorted(bar_x) and len(set(bar_x)) == len(PROXIES) and abs(bar_x[0] - 50.0) < 5

    _, runs, verdicts = catch_sweep
    fig = viz_many.detection_vs_seeds(many.detection_by_seeds(verdicts, runs, seeds=[1, 2, 3]))
    ax = fig.axes[0]
    assert len(ax.lines) == 3 and "%" in ax.get_ylabel() and "seeds" in ax.get_xlabel()
    assert max(max(line.get_ydata()) for line in ax.lines) == 100.0

    matrix = many.verdict_matrix(verdicts, runs)
    fig = viz_many.verdict_heatmap(matrix)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["insert-then-search", "tso-pause"]
    assert len(ax.get_xticklabels()) == matrix.select("check").distinct().count()
    assert fig.axes[1].get_ylabel() == "runs where the check failed (%)"


def test_pictures_say_which_column_is_missing():
    with pytest.raises(ValueError, match="needs the column"):
        viz_many.detection_vs_seeds(pd.DataFrame({"seeds": [1]}))
    with pytest.raises(TypeError, match="pandas or Spark"):
        viz_many.verdict_heatmap([1, 2])


# ---- on a real sweep ------------------------------------------------------------------------------------

def test_a_real_sweep_groups_by_its_grid(spark, tmp_path):
    from milvus_edu.sweep import run_sweep

    grid = {"scenario": "seed-example", "seeds": [1, 2], "options": {"proxies": list(PROXIES)},
            "params": {"timetick.time_tick_interval_ns": list(INTERVALS_NS)}}
    sweep = run_sweep(grid, tmp_path / "sweep", spark=spark, progress=False)
    assert many.dimensions(sweep.runs) == [d for d in sweep.dimensions if d != "seed"]
    strong = read_waits(sweep.events).filter("level = 'Strong'")
    table = to_pandas(many.by_dimensions(strong, sweep.runs, "max_wait_ms"))
    assert len(table) == len(PROXIES) * len(INTERVALS_NS) and (table.runs == 2).all()
    assert (table.min_max_wait_ms <= table.p50_max_wait_ms).all()
    assert (table.p50_max_wait_ms <= table.p99_max_wait_ms).all() and (table.p99_max_wait_ms <= table.max_max_wait_ms).all()
    rate = to_pandas(many.detection_rate(sweep.verdicts, sweep.runs))
    assert rate.runs.tolist() == [len(PROXIES) * len(INTERVALS_NS) * 2] and rate.detected.tolist() == [0]
    matrix = to_pandas(many.verdict_matrix(sweep.verdicts, sweep.runs))
    assert matrix.runs.sum() == sweep.verdicts.count() and (matrix.failed == 0).all()
