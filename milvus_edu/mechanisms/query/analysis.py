"""Query analyses over many runs (guarantee-timestamp reads, tsafe), each in Spark and as a pandas twin.

Like :mod:`milvus_edu.mechanisms.timetick.analysis` and :mod:`milvus_edu.mechanisms.flush.analysis`: every Spark function takes the
events DataFrame of :func:`~milvus_edu.analysis.load_events` and returns a Spark DataFrame; its ``_pd`` twin takes
the pandas frame of :func:`milvus_edu.events.load_run` (or several concatenated) and returns the same columns,
sorted by the keys, with dtypes ``Int64`` / ``float64`` / ``string``; ``to_pandas(f(events))`` equals
``f_pd(frame)``. Only run-log columns are read (the typed ``request``, ``level``, ``vchannel``, ``ts``, ``t_ms``,
``seq``, ``error``; never the JSON ``detail``); nothing of the model runs again. Order is ``seq``.

A read is one ``request`` id of a run: ``client.read_start``, ``proxy.read``, per shard ``querynode.wait`` (only
when it had to wait) and ``querynode.read``, then ``client.read``. Its **level** is the one the proxy applied
(``proxy.read``'s ``level``: a read at the collection's default gets the default's name); a read that never
reached a proxy (connection refused) keeps the level the client asked for (``client.read_start``), or
:data:`UNRESOLVED_LEVEL` when it asked for the collection's default. Percentiles are nearest-rank (the
``ceil(p * n / 100)``-th smallest, ties broken by ``seq``), as in the other analyses.

* :func:`read_waits` -- per level: how many reads, how many failed, what share of shard reads waited for tsafe
  and how long.
* :func:`read_staleness` -- per level: how old the data each successful read returned was, by the proxy's
  begin timestamp and by true simulated time.
* :func:`tsafe_lag` -- per vchannel: how far the QueryNode's tsafe trails true time.

:data:`ANALYSES` maps each name to its ``(spark_fn, pandas_fn)`` pair.
"""

from __future__ import annotations

import pandas as pd

from ...analysis.frames import PERCENTILES, as_strings, pandas_analysis, sorted_by, spark_analysis, with_percentiles
from ...events.schema import SIM_EPOCH_MS
from ...tsoutil import LOGICAL_BITS

KEYS_LEVEL = ["run_id", "level"]
KEYS_VCHANNEL = ["run_id", "vchannel"]
KEYS_REQUEST = ["run_id", "request"]
KEYS_SHARD = ["run_id", "request", "vchannel"]

READ_WAITS_COLUMNS = ["run_id", "level", "reads", "answered", "failed_reads", "shard_reads", "shard_waits",
                      "share_waited", "p50_wait_ms", "p95_wait_ms", "p99_wait_ms", "max_wait_ms"]
READ_STALENESS_COLUMNS = ["run_id", "level", "reads", "p50_staleness_ms", "p95_staleness_ms", "p99_staleness_ms",
                          "max_staleness_ms", "p50_true_staleness_ms", "p95_true_staleness_ms",
                          "p99_true_staleness_ms", "max_true_staleness_ms"]
TSAFE_LAG_COLUMNS = ["run_id", "vchannel", "updates", "p50_lag_ms", "p95_lag_ms", "max_lag_ms",
                     "max_lag_before_update_ms"]

#: The percentiles the read analyses report (tsafe_lag reports timetick's 50 and 95, with the shared helper).
READ_PERCENTILES = (50, 95, 99)
#: The level of a read that asked for the collection's default and never reached a proxy to resolve it.
UNRESOLVED_LEVEL = "default"
READ_KINDS = ("client.read_start", "proxy.read", "client.read")
_ONE_PHYSICAL_MS = 1 << LOGICAL_BITS


# --- helpers -------------------------------------------------------------------------------------

def _spark_ranked(rows, keys: list[str], value: str):
    """``rows`` with the rank of ``value`` in its ``keys`` group (by value, then seq) and the group's size, and
    the aggregate expressions picking each of :data:`READ_PERCENTILES` (Spark's nearest rank)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    group = Window.partitionBy(*keys)
    rank, n = f"_rank_{value}", f"_n_{value}"
    rows = (rows.withColumn(rank, F.row_number().over(group.orderBy(value, "seq")))
            .withColumn(n, F.count(F.lit(1)).over(group)))
    picks = [F.max(F.when(F.col(rank) == F.expr(f"({n} * {p} + 99) div 100"), F.col(value))).alias(f"p{p}_{value}")
             for p in READ_PERCENTILES]
    return rows, picks


def _requests(events):
    """Per run and request (Spark): level (as the module docstring says), sent (a ``client.read_start`` row),
    answered / failed (a ``client.read`` without / with ``error``), begin_ts (``proxy.read``'s ``ts``),
    answer_t_ms and answer_seq (the successful ``client.read``'s ``t_ms`` and ``seq``)."""
    from pyspark.sql import functions as F

    kind = F.col("kind")
    start, proxy, answer = (kind == "client.read_start"), (kind == "proxy.read"), (kind == "client.read")
    ok = answer & F.col("error").isNull()
    return (events.filter(kind.isin(*READ_KINDS) & F.col("request").isNotNull())
            .groupBy(*KEYS_REQUEST)
            .agg(F.coalesce(F.max(F.when(proxy, F.col("level"))), F.max(F.when(start, F.col("level"))),
                            F.lit(UNRESOLVED_LEVEL)).alias("level"),
                 F.max(start.cast("long")).alias("sent"),
                 F.max(ok.cast("long")).alias("answered"),
                 F.max((answer & F.col("error").isNotNull()).cast("long")).alias("failed"),
                 F.min(F.when(proxy, F.col("ts"))).alias("begin_ts"),
                 F.min(F.when(ok, F.col("t_ms"))).alias("answer_t_ms"),
                 F.min(F.when(ok, F.col("seq"))).alias("answer_seq")))


def _requests_pd(frame: pd.DataFrame) -> pd.DataFrame:
    """The pandas twin of :func:`_requests`."""
    ev = frame[frame["kind"].isin(READ_KINDS) & frame["request"].notna()]
    ev = ev.sort_values("seq", kind="stable")
    out = ev[KEYS_REQUEST].drop_duplicates().reset_index(drop=True)
    start = ev[ev["kind"] == "client.read_start"]
    proxy = ev[ev["kind"] == "proxy.read"]
    answer = ev[ev["kind"] == "client.read"]
    ok = answer[answer["error"].isna()]
    asked = start.groupby(KEYS_REQUEST, sort=False)["level"].max().rename("asked")
    applied = proxy.groupby(KEYS_REQUEST, sort=False).agg(applied=("level", "max"), begin_ts=("ts", "min"))
    answered = ok.groupby(KEYS_REQUEST, sort=False).agg(answer_t_ms=("t_ms", "min"), answer_seq=("seq", "min"))
    failed = answer[answer["error"].notna()].groupby(KEYS_REQUEST, sort=False).size().rename("n_failed")
    sent = start.groupby(KEYS_REQUEST, sort=False).size().rename("n_sent")
    for part in (asked, applied, answered, failed, sent):
        out = out.merge(part.reset_index(), on=KEYS_REQUEST, how="left")
    out["level"] = out["applied"].fillna(out["asked"]).fillna(UNRESOLVED_LEVEL).astype("string")
    out["sent"] = out["n_sent"].notna().astype("int64")
    out["answered"] = out["answer_seq"].notna().astype("int64")
    out["failed"] = out["n_failed"].notna().astype("int64")
    out["begin_ts"] = out["begin_ts"].astype("Int64")
    out["answer_seq"] = out["answer_seq"].astype("Int64")
    return out[KEYS_REQUEST + ["level", "sent", "answered", "failed", "begin_ts", "answer_t_ms", "answer_seq"]]


# --- read waits ----------------------------------------------------------------------------------

@spark_analysis
def read_waits(events):
    """Per run and level: how many reads there were, how many failed, and how often and how long shard reads
    waited for tsafe to reach their guarantee (Spark).

    ``reads``: requests sent (``client.read_start``); ``answered`` / ``failed_reads``: requests whose
    ``client.read`` has no ``error`` / has one (a read still running when the run ended is neither).
    ``shard_reads``: ``querynode.read`` rows (one per request and vchannel, failed ones included);
    ``shard_waits``: those for which a ``querynode.wait`` row of the same request and vchannel exists (tsafe was
    below the guarantee on arrival); ``share_waited = shard_waits / shard_reads`` (null when no shard read).
    The wait of a shard read that waited is the true time between its ``querynode.wait`` and its
    ``querynode.read`` (``t_ms`` difference; the same number as ``detail.waited_ms`` up to that field's rounding,
    and it needs no JSON): ``p50_wait_ms``, ``p95_wait_ms``, ``p99_wait_ms`` (nearest rank) and ``max_wait_ms``
    over the shard reads that waited, those that failed at their deadline included (so a Strong read that timed
    out shows its timeout); null when none waited. A shard read still waiting when the run ended has no
    ``querynode.read`` and does not count.
    """
    from pyspark.sql import functions as F

    reqs = _requests(events)
    per_level = (reqs.groupBy(*KEYS_LEVEL)
                 .agg(F.sum("sent").alias("reads"), F.sum("answered").alias("answered"),
                      F.sum("failed").alias("failed_reads")))
    waits = (events.filter(F.col("kind") == "querynode.wait")
             .groupBy(*KEYS_SHARD).agg(F.min("t_ms").alias("wait_t_ms")))
    shards = (events.filter(F.col("kind") == "querynode.read")
              .select(*KEYS_SHARD, "seq", F.col("t_ms").alias("read_t_ms"), F.col("level").alias("shard_level"))
              .join(waits, KEYS_SHARD, "left")
              .join(reqs.select(*KEYS_REQUEST, "level"), KEYS_REQUEST, "left")
              .withColumn("level", F.coalesce("level", "shard_level"))
              .withColumn("waited", F.col("wait_t_ms").isNotNull())
              .withColumn("wait_ms", F.col("read_t_ms") - F.col("wait_t_ms")))
    counts = (shards.groupBy(*KEYS_LEVEL)
              .agg(F.count(F.lit(1)).alias("shard_reads"), F.sum(F.col("waited").cast("long")).alias("shard_waits")))
    waited, picks = _spark_ranked(shards.filter(F.col("waited")), KEYS_LEVEL, "wait_ms")
    times = waited.groupBy(*KEYS_LEVEL).agg(*picks, F.max("wait_ms").alias("max_wait_ms"))
    zero = F.lit(0).cast("long")
    return (per_level.join(counts, KEYS_LEVEL, "full_outer").join(times, KEYS_LEVEL, "left")
            .withColumn("reads", F.coalesce("reads", zero)).withColumn("answered", F.coalesce("answered", zero))
            .withColumn("failed_reads", F.coalesce("failed_reads", zero))
            .withColumn("shard_reads", F.coalesce("shard_reads", zero))
            .withColumn("shard_waits", F.coalesce("shard_waits", zero))
            .withColumn("share_waited", F.when(F.col("shard_reads") > 0,
                                               F.col("shard_waits").cast("double") / F.col("shard_reads")))
            .select(*READ_WAITS_COLUMNS))


@pandas_analysis
def read_waits_pd(frame: pd.DataFrame) -> pd.DataFrame:
    """The pandas twin of :func:`read_waits` (same columns and numbers), sorted."""
    reqs = _requests_pd(frame)
    per_level = (reqs.groupby(KEYS_LEVEL, sort=False)
                 .agg(reads=("sent", "sum"), answered=("answered", "sum"), failed_reads=("failed", "sum"))
                 .reset_index())
    waits = (frame[frame["kind"] == "querynode.wait"].groupby(KEYS_SHARD, sort=False)["t_ms"].min()
             .rename("wait_t_ms").reset_index())
    shards = frame[frame["kind"] == "querynode.read"][KEYS_SHARD + ["seq", "t_ms", "level"]]
    shards = shards.rename(columns={"t_ms": "read_t_ms", "level": "shard_level"})
    shards = (shards.merge(waits, on=KEYS_SHARD, how="left")
              .merge(reqs[KEYS_REQUEST + ["level"]], on=KEYS_REQUEST, how="left"))
    shards["level"] = shards["level"].fillna(shards["shard_level"]).astype("string")
    shards["waited"] = shards["wait_t_ms"].notna().astype("int64")
    shards["wait_ms"] = shards["read_t_ms"].astype("float64") - shards["wait_t_ms"].astype("float64")
    counts = (shards.groupby(KEYS_LEVEL, sort=False).agg(shard_reads=("seq", "size"), shard_waits=("waited", "sum"))
              .reset_index())
    waited = shards[shards["waited"] == 1]
    times = waited.groupby(KEYS_LEVEL, sort=False).agg(max_wait_ms=("wait_ms", "max")).reset_index()
    times = with_percentiles(times, waited, KEYS_LEVEL, "wait_ms", READ_PERCENTILES)
    out = per_level.merge(counts, on=KEYS_LEVEL, how="outer").merge(times, on=KEYS_LEVEL, how="left")
    for c in ("reads", "answered", "failed_reads", "shard_reads", "shard_waits"):
        out[c] = out[c].fillna(0).astype("Int64")
    reads = out["shard_reads"].astype("float64")
    out["share_waited"] = (out["shard_waits"].astype("float64") / reads).where(reads > 0).astype("float64")
    for c in ("p50_wait_ms", "p95_wait_ms", "p99_wait_ms", "max_wait_ms"):
        out[c] = out[c].astype("float64")
    as_strings(out, *KEYS_LEVEL)
    return sorted_by(out, KEYS_LEVEL, READ_WAITS_COLUMNS)


# --- read staleness ------------------------------------------------------------------------------

@spark_analysis
def read_staleness(events):
    """Per run and level: how stale the data each successful read returned was (Spark).

    A successful read is a request whose ``client.read`` has no ``error``. Its read timestamp is the smallest
    ``ts`` of its ``querynode.read`` rows (the MVCC timestamp of the shard that read the oldest data; the same
    number ``client.read`` carries). ``staleness_ms`` is the read's begin timestamp (``proxy.read``'s ``ts``) minus
    its read timestamp, in physical ms (``(begin_ts >> 18) - (read_ts >> 18)``, an integer): how old the answer is
    by the proxy's reckoning. A Strong read waits until tsafe passes its begin, so it is 0 or negative; a Bounded
    read is about one time tick stale -- but a non-Strong begin comes from the proxy's own clock, so a clock
    running ahead inflates it. ``true_staleness_ms`` needs no clock: the true simulated time the client got the
    answer (``client.read``'s ``t_ms``) minus the true time the read timestamp stands for,
    ``t_ms - ((read_ts >> 18) - SIM_EPOCH_MS)``. On clock-skew-bounded the proxy that runs 8 s ahead reports
    ~5 s of staleness while its true staleness is a few hundred ms. Columns: run_id, level, reads (successful
    reads), p50/p95/p99/max of ``staleness_ms`` (``Int64``) and of ``true_staleness_ms`` (``float64``).
    """
    from pyspark.sql import functions as F

    read_ts = (events.filter((F.col("kind") == "querynode.read") & F.col("error").isNull() & F.col("ts").isNotNull())
               .groupBy(*KEYS_REQUEST).agg(F.min("ts").alias("read_ts")))
    physical = F.shiftright("read_ts", LOGICAL_BITS)
    rows = (_requests(events).filter(F.col("answer_t_ms").isNotNull() & F.col("begin_ts").isNotNull())
            .join(read_ts, KEYS_REQUEST, "inner")
            .select(*KEYS_LEVEL, F.col("answer_seq").alias("seq"),
                    (F.shiftright("begin_ts", LOGICAL_BITS) - physical).alias("staleness_ms"),
                    (F.col("answer_t_ms") - (physical - F.lit(SIM_EPOCH_MS)).cast("double"))
                    .alias("true_staleness_ms")))
    rows, by_begin = _spark_ranked(rows, KEYS_LEVEL, "staleness_ms")
    rows, by_truth = _spark_ranked(rows, KEYS_LEVEL, "true_staleness_ms")
    return (rows.groupBy(*KEYS_LEVEL)
            .agg(F.count(F.lit(1)).alias("reads"), *by_begin, F.max("staleness_ms").alias("max_staleness_ms"),
                 *by_truth, F.max("true_staleness_ms").alias("max_true_staleness_ms"))
            .select(*READ_STALENESS_COLUMNS))


@pandas_analysis
def read_staleness_pd(frame: pd.DataFrame) -> pd.DataFrame:
    """The pandas twin of :func:`read_staleness` (same columns and numbers), sorted."""
    shards = frame[(frame["kind"] == "querynode.read") & frame["error"].isna() & frame["ts"].notna()]
    read_ts = shards.groupby(KEYS_REQUEST, sort=False)["ts"].min().rename("read_ts").reset_index()
    reqs = _requests_pd(frame)
    rows = reqs[reqs["answer_t_ms"].notna() & reqs["begin_ts"].notna()].merge(read_ts, on=KEYS_REQUEST)
    # Int64 throughout: hybrid timestamps are above 2**53, a float would round them
    physical = rows["read_ts"].astype("Int64") // _ONE_PHYSICAL_MS
    rows = rows.assign(seq=rows["answer_seq"],
                       staleness_ms=(rows["begin_ts"].astype("Int64") // _ONE_PHYSICAL_MS - physical).astype("Int64"),
                       true_staleness_ms=rows["answer_t_ms"].astype("float64")
                       - (physical - SIM_EPOCH_MS).astype("float64"))
    out = (rows.groupby(KEYS_LEVEL, sort=False)
           .agg(reads=("seq", "size"), max_staleness_ms=("staleness_ms", "max"),
                max_true_staleness_ms=("true_staleness_ms", "max"))
           .reset_index())
    out = with_percentiles(out, rows, KEYS_LEVEL, "staleness_ms", READ_PERCENTILES)
    out = with_percentiles(out, rows, KEYS_LEVEL, "true_staleness_ms", READ_PERCENTILES)
    for c in ("reads", "p50_staleness_ms", "p95_staleness_ms", "p99_staleness_ms", "max_staleness_ms"):
        out[c] = out[c].astype("Int64")
    for c in ("p50_true_staleness_ms", "p95_true_staleness_ms", "p99_true_staleness_ms", "max_true_staleness_ms"):
        out[c] = out[c].astype("float64")
    as_strings(out, *KEYS_LEVEL)
    return sorted_by(out, KEYS_LEVEL, READ_STALENESS_COLUMNS)


# --- tsafe lag -----------------------------------------------------------------------------------

@spark_analysis
def tsafe_lag(events):
    """Per run and vchannel: how far the QueryNode's tsafe trails true time (Spark).

    Over ``querynode.tsafe`` rows (tsafe published after a pack), ``lag_ms`` is true time when tsafe moved minus
    the physical part of the new tsafe, ``t_ms - ((ts >> 18) - SIM_EPOCH_MS)``: how stale a read that does not
    wait (Bounded, Eventually) would be right after it. A tsafe is the time tick that closed the pack, so this is
    that tick's own lag when rootcoord wrote it (:func:`~milvus_edu.mechanisms.timetick.analysis.tick_lag`, set
    by how old the round's values were) plus its delivery to the QueryNode, a millisecond or so: not a whole
    time-tick interval (159 ms on seed-example seed 1, with ticks every 200 ms). ``updates``, and p50 / p95
    (nearest rank) / max of ``lag_ms``. Between two updates tsafe stands still while time runs, so its lag grows
    until the next update: ``max_lag_before_update_ms`` is the largest lag just before an update, true time of the
    update minus the physical part of the tsafe before it (the previous ``querynode.tsafe`` of the vchannel, or its
    ``querynode.watch`` start tsafe, by ``seq``): the peak of the saw-tooth, one interval above ``lag_ms`` in a calm
    run, which a stall of the time ticks shows and ``lag_ms`` does not. The first update after the watch counts
    too, and in a calm run it is the peak (up to two intervals plus a lag: the first pack ends at the tick after
    the first one at or above the watch's start). (The lag after the last update, until the run ends, is not
    counted.)
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    vch = Window.partitionBy(*KEYS_VCHANNEL)

    def true_ms(ts: str):
        return F.col("t_ms") - (F.shiftright(ts, LOGICAL_BITS) - F.lit(SIM_EPOCH_MS)).cast("double")

    rows = (events.filter(F.col("kind").isin("querynode.watch", "querynode.tsafe") & F.col("vchannel").isNotNull()
                          & F.col("ts").isNotNull())
            .select(*KEYS_VCHANNEL, "seq", "t_ms", "ts", "kind")
            .withColumn("prev_ts", F.lag("ts").over(vch.orderBy("seq")))
            .filter(F.col("kind") == "querynode.tsafe")
            .withColumn("lag_ms", true_ms("ts"))
            .withColumn("before_ms", true_ms("prev_ts"))
            .withColumn("rank", F.row_number().over(vch.orderBy("lag_ms", "seq")))
            .withColumn("n", F.count(F.lit(1)).over(vch)))
    pick = {p: F.max(F.when(F.col("rank") == F.expr(f"(n * {p} + 99) div 100"), F.col("lag_ms"))) for p in PERCENTILES}
    return (rows.groupBy(*KEYS_VCHANNEL)
            .agg(F.count(F.lit(1)).alias("updates"), pick[50].alias("p50_lag_ms"), pick[95].alias("p95_lag_ms"),
                 F.max("lag_ms").alias("max_lag_ms"), F.max("before_ms").alias("max_lag_before_update_ms"))
            .select(*TSAFE_LAG_COLUMNS))


@pandas_analysis
def tsafe_lag_pd(frame: pd.DataFrame) -> pd.DataFrame:
    """The pandas twin of :func:`tsafe_lag` (same columns and numbers), sorted."""
    rows = frame[frame["kind"].isin(["querynode.watch", "querynode.tsafe"]) & frame["vchannel"].notna()
                 & frame["ts"].notna()]
    rows = rows[KEYS_VCHANNEL + ["seq", "t_ms", "ts", "kind"]].sort_values(KEYS_VCHANNEL + ["seq"], kind="stable")
    rows = rows.assign(ts=rows["ts"].astype("Int64"))
    rows["prev_ts"] = rows.groupby(KEYS_VCHANNEL, sort=False)["ts"].shift(1)
    rows = rows[rows["kind"] == "querynode.tsafe"].copy()

    def true_ms(ts: pd.Series) -> pd.Series:
        physical = ts.astype("Int64") // _ONE_PHYSICAL_MS
        return rows["t_ms"].astype("float64") - (physical - SIM_EPOCH_MS).astype("float64")

    rows["lag_ms"] = true_ms(rows["ts"])
    rows["before_ms"] = true_ms(rows["prev_ts"])
    out = (rows.groupby(KEYS_VCHANNEL, sort=False)
           .agg(updates=("seq", "size"), max_lag_ms=("lag_ms", "max"), max_lag_before_update_ms=("before_ms", "max"))
           .reset_index())
    out = with_percentiles(out, rows, KEYS_VCHANNEL, "lag_ms")
    out["updates"] = out["updates"].astype("Int64")
    for c in ("p50_lag_ms", "p95_lag_ms", "max_lag_ms", "max_lag_before_update_ms"):
        out[c] = out[c].astype("float64")
    as_strings(out, *KEYS_VCHANNEL)
    return sorted_by(out, KEYS_VCHANNEL, TSAFE_LAG_COLUMNS)


#: Each query analysis by name: ``(spark_fn, pandas_fn)``.
ANALYSES = {
    "read_waits": (read_waits, read_waits_pd),
    "read_staleness": (read_staleness, read_staleness_pd),
    "tsafe_lag": (tsafe_lag, tsafe_lag_pd),
}
