"""Many runs at once: any per-run metric grouped by a sweep's grid, and the checkers' verdicts as tables.

A sweep (:mod:`milvus_edu.sweep`) gives three Spark tables: its events (the run-log schema, ``run_id`` unique per
run), its ``runs`` (one row per run: ``run_id``, ``scenario``, ``seed``, ``switches`` -- ``""`` or the switch
names joined by commas --, one ``opt_<name>`` / ``param_<name>`` column per grid dimension, ``status`` ...) and its
``verdicts`` (one row per run and check: ``run_id``, ``mechanism``, ``check``, ``verdict`` -- ``pass``, ``fail``
or ``vacuous`` --, ``violations``, ``expected`` -- the check belongs to a scenario whose ``gap`` is a hole in
Milvus itself --, ``explanation``). Every analysis of :mod:`milvus_edu.analysis` returns rows keyed by
``run_id``, so its output joins the runs table; this module does that join and the grouping, and names no
mechanism.

* :func:`dimensions` -- the grid columns of a runs table that take more than one value (the seed excluded).
* :func:`by_dimensions` -- a metric's count, mean, min, max and approximate percentiles per point of the grid.
* :func:`run_detections` -- per run: did a check fail that the scenario does not expect to fail?
* :func:`detection_rate` -- per switch (and scenario): the share of seeds on which the checkers caught it.
* :func:`detection_by_seeds` -- per switch: the share of windows of ``n`` consecutive seeds that caught it.
* :func:`violations_per_scenario` -- per scenario and switches: failed runs and violations, expected or not.
* :func:`verdict_matrix` -- per scenario (or any runs column) and check: how often it passed, failed, was vacuous.

Percentiles come from Spark's ``percentile_approx`` (an exact answer up to a rank error of
``1 / accuracy`` of the group's size): cheap on hundreds of millions of rows, where the nearest-rank
percentiles of the per-run analyses would sort every group.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

#: The percentiles :func:`by_dimensions` reports by default.
PERCENTILES = (50, 90, 99)
#: ``percentile_approx``'s accuracy (Spark's default): its rank error is at most 1/10000 of a group's rows.
DEFAULT_ACCURACY = 10000
#: Runs-table columns that describe a run but are not a grid dimension.
NOT_DIMENSIONS = ("run_id", "seed", "status", "error", "events", "sim_s", "wall_s")
#: The columns of the grid a run may vary along, besides ``opt_*`` and ``param_*``.
GRID_COLUMNS = ("scenario", "switches")
VERDICTS = ("pass", "fail", "vacuous")
#: How :func:`by_dimensions` may first reduce a metric to one value per run.
PER_RUN = ("max", "min", "mean", "sum")


def _grid_columns(runs) -> list[str]:
    return [c for c in runs.columns if c in GRID_COLUMNS or c.startswith(("opt_", "param_"))]


def dimensions(runs) -> list[str]:
    """The grid columns of ``runs`` (``scenario``, ``switches``, ``opt_*``, ``param_*``) that take more than one
    value, in the table's order: what a sweep varied besides the seed (a sweep's ``.dimensions`` without
    ``seed``)."""
    from pyspark.sql import functions as F

    candidates = _grid_columns(runs)
    if not candidates:
        return []
    counts = runs.agg(*[F.countDistinct(F.coalesce(F.col(c).cast("string"), F.lit("\0"))).alias(c)
                        for c in candidates]).first()
    return [c for c in candidates if counts[c] > 1]


def _by(runs, by) -> list[str]:
    if by is None:
        return dimensions(runs)
    by = [by] if isinstance(by, str) else list(by)
    unknown = [c for c in by if c not in runs.columns]
    if unknown:
        raise ValueError(f"{unknown[0]!r} is not a column of the runs table; choose from {', '.join(runs.columns)}")
    return by


def by_dimensions(metric, runs, value: str, by: str | Sequence[str] | None = None, *, per_run: str | None = None,
                  percentiles: Iterable[int] = PERCENTILES, accuracy: int = DEFAULT_ACCURACY):
    """A metric of many runs per point of the grid (Spark).

    ``metric``: any DataFrame with a ``run_id`` column and a numeric column ``value`` -- an analysis's output
    (``read_waits(sweep.events)``, one row per run and level), filtered as you like. ``runs``: the sweep's runs
    table. ``by``: the runs columns to group by (default :func:`dimensions`, what the sweep varied besides the
    seed; grouping by ``seed`` too would make one group per run).
    ``per_run``: first reduce the metric to one value per run with ``max``, ``min``, ``mean`` or ``sum`` (so
    every run weighs the same whatever its number of channels); ``None`` keeps every row.

    Columns: the ``by`` columns, ``runs`` (runs with at least one non-null value), ``rows`` (non-null values),
    ``mean_<value>``, ``min_<value>``, ``p<P>_<value>`` per percentile (``percentile_approx`` with ``accuracy``)
    and ``max_<value>``, ordered by ``by``. Rows of a run missing from ``runs`` are dropped (an inner join), and
    a grid point none of whose runs has a value has no row.
    """
    from pyspark.sql import functions as F

    by = _by(runs, by)
    if value not in metric.columns or "run_id" not in metric.columns:
        raise ValueError(f"the metric needs the columns run_id and {value!r}; it has {', '.join(metric.columns)}")
    if per_run is not None and per_run not in PER_RUN:
        raise ValueError(f"per_run must be one of {', '.join(PER_RUN)} or None, got {per_run!r}")
    percentiles = [int(p) for p in percentiles]
    if any(not 0 < p < 100 for p in percentiles):
        raise ValueError(f"percentiles must lie between 0 and 100 (exclusive), got {percentiles}")
    rows = metric.select("run_id", F.col(value).cast("double").alias(value)).filter(F.col(value).isNotNull())
    if per_run is not None:
        rows = rows.groupBy("run_id").agg(getattr(F, "avg" if per_run == "mean" else per_run)(value).alias(value))
    stats = (rows.join(runs.select("run_id", *by), "run_id", "inner").groupBy(*by)
             .agg(F.countDistinct("run_id").alias("runs"), F.count(F.col(value)).alias("rows"),
                  F.avg(value).alias(f"mean_{value}"), F.min(value).alias(f"min_{value}"),
                  *[F.percentile_approx(value, p / 100, accuracy).alias(f"p{p}_{value}") for p in percentiles],
                  F.max(value).alias(f"max_{value}")))
    return stats.orderBy(*by) if by else stats


def run_detections(verdicts, runs):
    """Per run: whether a check failed that its scenario does not expect to fail (Spark).

    Columns: every runs column but the run's own statistics (``run_id``, ``scenario``, ``seed``, ``switches``,
    ``opt_*``, ``param_*``), ``checks`` (verdict rows), ``failed`` (checks that failed and are not expected to),
    ``detected`` (``failed > 0``), ``violations`` (their violations), ``expected_failed`` (checks that failed as
    the scenario's gap says they may) and ``vacuous`` (checks with nothing to check). A run without verdict rows
    (it failed before its checkers ran) counts 0 checks and is not detected.
    """
    from pyspark.sql import functions as F

    unexpected = (F.col("verdict") == "fail") & ~F.coalesce(F.col("expected"), F.lit(False))
    per_run = (verdicts.groupBy("run_id")
               .agg(F.count(F.lit(1)).alias("checks"),
                    F.sum(unexpected.cast("long")).alias("failed"),
                    F.sum(F.when(unexpected, F.col("violations")).otherwise(F.lit(0))).cast("long").alias("violations"),
                    F.sum(((F.col("verdict") == "fail") & F.coalesce(F.col("expected"), F.lit(False))).cast("long"))
                    .alias("expected_failed"),
                    F.sum((F.col("verdict") == "vacuous").cast("long")).alias("vacuous")))
    keep = [c for c in runs.columns if c not in NOT_DIMENSIONS or c in ("run_id", "seed")]
    zero = F.lit(0).cast("long")
    out = runs.select(*keep).join(per_run, "run_id", "left")
    for c in ("checks", "failed", "violations", "expected_failed", "vacuous"):
        out = out.withColumn(c, F.coalesce(F.col(c), zero))
    return out.withColumn("detected", F.col("failed") > 0)


def detection_rate(verdicts, runs, by: str | Sequence[str] = ("scenario", "switches")):
    """Per switch (the ``switches`` column, ``""`` for the faithful rules) and scenario: on how many seeds the
    checkers caught it (Spark).

    A run *catches* its switches when some check failed that its scenario does not expect to fail
    (:func:`run_detections`). Columns: the ``by`` columns, ``runs``, ``detected`` (runs that caught it),
    ``rate`` (``detected / runs``), ``first_seed`` (the smallest seed that caught it; null when none did),
    ``violations`` (their sum over the runs), ordered by ``by``. For the faithful rules (``switches == ""``)
    ``detected`` counts false alarms: it should be 0.
    """
    from pyspark.sql import functions as F

    by = _by(runs, by)
    return (run_detections(verdicts, runs).groupBy(*by)
            .agg(F.count(F.lit(1)).alias("runs"), F.sum(F.col("detected").cast("long")).alias("detected"),
                 F.min(F.when(F.col("detected"), F.col("seed"))).alias("first_seed"),
                 F.sum("violations").alias("violations"))
            .withColumn("rate", F.col("detected") / F.col("runs"))
            .select(*by, "runs", "detected", "rate", "first_seed", "violations")
            .orderBy(*by))


def detection_by_seeds(verdicts, runs, seeds: Iterable[int], by: str | Sequence[str] = ("scenario", "switches")):
    """How many consecutive seeds it takes to catch each switch (Spark).

    For every ``n`` in ``seeds`` and every group of ``by``: the runs are put in seed order, and every window of
    ``n`` consecutive runs (all ``runs - n + 1`` of them) is asked whether at least one of its runs caught the
    switch (:func:`run_detections`). ``rate`` is the share of windows that did: the chance that a student who
    tries ``n`` seeds in a row, starting anywhere in the sweep, sees the checker fail. Columns: the ``by``
    columns, ``seeds`` (``n``), ``windows``, ``caught``, ``rate``; a group with fewer than ``n`` runs has no row
    for that ``n``.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    by = _by(runs, by)
    sizes = sorted({int(n) for n in seeds})
    if not sizes or sizes[0] < 1:
        raise ValueError(f"seeds must be whole numbers of seeds, at least 1, got {sizes}")
    ordered = Window.partitionBy(*by).orderBy("seed", "run_id")
    base = (run_detections(verdicts, runs).select(*by, "seed", "run_id", F.col("detected").cast("long").alias("d"))
            .withColumn("pos", F.row_number().over(ordered))
            .withColumn("n_runs", F.count(F.lit(1)).over(Window.partitionBy(*by))))
    parts = []
    for n in sizes:
        window = ordered.rowsBetween(Window.currentRow, n - 1)
        parts.append(base.withColumn("caught_here", F.max("d").over(window))
                     .filter(F.col("pos") <= F.col("n_runs") - n + 1)
                     .groupBy(*by).agg(F.count(F.lit(1)).alias("windows"), F.sum("caught_here").alias("caught"))
                     .withColumn("seeds", F.lit(n).cast("long")))
    out = parts[0]
    for part in parts[1:]:
        out = out.unionByName(part)
    return (out.withColumn("rate", F.col("caught") / F.col("windows"))
            .select(*by, "seeds", "windows", "caught", "rate").orderBy(*by, "seeds"))


def violations_per_scenario(verdicts, runs, by: str | Sequence[str] = ("scenario", "switches")):
    """Per scenario and switches: how many runs broke a promise, and how many violations they found (Spark).

    Columns: the ``by`` columns, ``runs``, ``failed_runs`` (runs with a check that failed and is not expected
    to), ``violations`` (their violations), ``gap_runs`` (runs where a check failed that the scenario's gap
    expects), ``gap_rate`` (``gap_runs / runs``), ``vacuous_checks`` (vacuous verdicts over all runs), ordered
    by ``by``. With the faithful rules ``failed_runs`` must be 0; ``gap_rate`` is how often the gap shows.
    """
    from pyspark.sql import functions as F

    by = _by(runs, by)
    return (run_detections(verdicts, runs).groupBy(*by)
            .agg(F.count(F.lit(1)).alias("runs"), F.sum(F.col("detected").cast("long")).alias("failed_runs"),
                 F.sum("violations").alias("violations"),
                 F.sum((F.col("expected_failed") > 0).cast("long")).alias("gap_runs"),
                 F.sum("vacuous").alias("vacuous_checks"))
            .withColumn("gap_rate", F.col("gap_runs") / F.col("runs"))
            .select(*by, "runs", "failed_runs", "violations", "gap_runs", "gap_rate", "vacuous_checks")
            .orderBy(*by))


def verdict_matrix(verdicts, runs, rows: str | Sequence[str] = "scenario"):
    """Every check's verdicts counted per ``rows`` (a runs column or several, e.g. scenario) (Spark).

    Columns: the ``rows`` columns, ``mechanism``, ``check``, ``runs`` (verdicts), ``passed``, ``failed``,
    ``vacuous``, ``expected`` (whether its failures are the scenario's gap), ``share_failed``
    (``failed / runs``) and ``violations`` (their sum), ordered by the ``rows`` columns and check: the table
    behind :func:`milvus_edu.viz.many.verdict_heatmap`.
    """
    from pyspark.sql import functions as F

    rows = _by(runs, rows)
    counted = {v: F.sum((F.col("verdict") == v).cast("long")) for v in VERDICTS}
    return (verdicts.join(runs.select("run_id", *rows), "run_id", "inner")
            .groupBy(*rows, "mechanism", "check")
            .agg(F.count(F.lit(1)).alias("runs"), counted["pass"].alias("passed"), counted["fail"].alias("failed"),
                 counted["vacuous"].alias("vacuous"), F.max(F.col("expected").cast("boolean")).alias("expected"),
                 F.sum("violations").alias("violations"))
            .withColumn("share_failed", F.col("failed") / F.col("runs"))
            .select(*rows, "mechanism", "check", "runs", "passed", "failed", "vacuous", "expected", "share_failed",
                    "violations")
            .orderBy(*rows, "mechanism", "check"))
