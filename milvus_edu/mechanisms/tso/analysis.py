"""First TSO analyses over many runs, each in Spark and as a pandas twin with the same numbers.

Every Spark function takes the events DataFrame of :func:`~milvus_edu.analysis.load_events`
(schema :func:`~milvus_edu.analysis.spark_schema`) and returns a Spark DataFrame; its ``_pd`` twin
takes the pandas DataFrame of :func:`milvus_edu.events.load_run` (or several concatenated) and
returns the same columns with pandas dtypes ``Int64`` / ``float64`` / ``string`` / ``boolean``.
:func:`to_pandas` turns a Spark result into exactly those dtypes (64-bit integers stay exact), so
``to_pandas(f(events))`` and ``f_pd(frame)`` can be compared cell by cell.

Order inside a run is ``seq`` (the log's total order), never ``t_ms``: several events share a
simulated millisecond.

* :func:`allocations_per_window` -- how much each saved TSO window was used.
* :func:`kv_saves_per_second` -- how often each rootcoord writes the window to the KV.
* :func:`failover_gaps` -- for each kill, each client's last answer before and first after, and
  whether the timestamps kept increasing across the failover.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...analysis.frames import pandas_analysis, sorted_by, spark_analysis

KEYS_ALLOC = ["run_id", "node", "window"]
KEYS_SAVES = ["run_id", "node", "second"]
KEYS_GAPS = ["run_id", "kill_seq", "client"]

ALLOCATION_COLUMNS = ["run_id", "node", "window", "save_seq", "save_t_ms", "window_end_ms", "next_save_t_ms",
                      "allocations", "timestamps"]
SAVES_COLUMNS = ["run_id", "node", "second", "saves"]
GAP_COLUMNS = ["run_id", "killed_node", "kill_seq", "kill_t_ms", "client",
               "before_seq", "before_t_ms", "before_ts", "before_count",
               "after_seq", "after_t_ms", "after_ts", "after_count", "gap_ms", "increased"]


# --- TSO allocations per saved window ------------------------------------------------------------

@spark_analysis
def allocations_per_window(events):
    """Per run and rootcoord node, each saved window and how much it was used (Spark).

    A window starts at a ``tso.save`` of the node and lasts until its next ``tso.save`` (by
    ``seq``); ``allocations`` counts the node's ``tso.alloc`` events in between and ``timestamps``
    sums their ``count``. Windows nobody allocated from appear with 0. Columns:
    run_id, node, window (0, 1, ... per node), save_seq, save_t_ms, window_end_ms (saved),
    next_save_t_ms (null for the last), allocations, timestamps. Allocations before a node's first
    save (the model never makes any) would appear in a row whose window and save columns are null.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    by_node = Window.partitionBy("run_id", "node").orderBy("seq")
    saves = (events.filter(F.col("kind") == "tso.save")
             .select("run_id", "node", F.col("seq").alias("save_seq"), F.col("t_ms").alias("save_t_ms"),
                     "window_end_ms")
             .withColumn("window", (F.row_number().over(Window.partitionBy("run_id", "node").orderBy("save_seq")) - 1)
                         .cast("long"))
             .withColumn("next_save_t_ms",
                         F.lead("save_t_ms").over(Window.partitionBy("run_id", "node").orderBy("save_seq"))))
    current_save = F.last(F.when(F.col("kind") == "tso.save", F.col("seq")), ignorenulls=True).over(
        by_node.rowsBetween(Window.unboundedPreceding, Window.currentRow))
    allocs = (events.filter(F.col("kind").isin("tso.save", "tso.alloc"))
              .select("run_id", "node", "seq", "kind", "count")
              .withColumn("save_seq", current_save)
              .filter(F.col("kind") == "tso.alloc")
              .groupBy("run_id", "node", "save_seq")
              .agg(F.count(F.lit(1)).alias("allocations"), F.sum("count").alias("timestamps")))
    joined = saves.join(allocs, ["run_id", "node", "save_seq"], "full_outer")
    return joined.select(
        "run_id", "node", "window", "save_seq", "save_t_ms", "window_end_ms", "next_save_t_ms",
        F.coalesce(F.col("allocations"), F.lit(0)).cast("long").alias("allocations"),
        F.coalesce(F.col("timestamps"), F.lit(0)).cast("long").alias("timestamps"),
    )


@pandas_analysis
def allocations_per_window_pd(frame: pd.DataFrame) -> pd.DataFrame:
    """The pandas twin of :func:`allocations_per_window` (same columns and numbers), sorted."""
    ev = frame[frame["kind"].isin(["tso.save", "tso.alloc"])]
    ev = ev.sort_values(["run_id", "node", "seq"], kind="stable")
    saves = ev[ev["kind"] == "tso.save"][["run_id", "node", "seq", "t_ms", "window_end_ms"]]
    saves = saves.rename(columns={"seq": "save_seq", "t_ms": "save_t_ms"}).reset_index(drop=True)
    grp = saves.groupby(["run_id", "node"], sort=False)
    saves["window"] = grp.cumcount().astype("Int64")
    saves["next_save_t_ms"] = grp["save_t_ms"].shift(-1).astype("float64")
    marks = ev["seq"].where(ev["kind"] == "tso.save").astype("Int64")
    ev = ev.assign(save_seq=marks.groupby([ev["run_id"], ev["node"]], sort=False).ffill())
    allocs = ev[ev["kind"] == "tso.alloc"]
    agg = (allocs.groupby(["run_id", "node", "save_seq"], dropna=False, sort=False)
           .agg(allocations=("seq", "size"), timestamps=("count", "sum")).reset_index())
    out = saves.merge(agg, on=["run_id", "node", "save_seq"], how="outer")
    out["allocations"] = out["allocations"].fillna(0).astype("Int64")
    out["timestamps"] = out["timestamps"].fillna(0).astype("Int64")
    for c in ("window", "save_seq", "window_end_ms"):
        out[c] = out[c].astype("Int64")
    for c in ("save_t_ms", "next_save_t_ms"):
        out[c] = out[c].astype("float64")
    for c in ("run_id", "node"):
        out[c] = out[c].astype("string")
    return sorted_by(out, KEYS_ALLOC, ALLOCATION_COLUMNS)


# --- KV saves per simulated second ---------------------------------------------------------------

@spark_analysis
def kv_saves_per_second(events):
    """``tso.save`` events per run, node and whole simulated second ``floor(t_ms / 1000)`` (Spark).

    Columns: run_id, node, second, saves. Only seconds with at least one save appear.
    """
    from pyspark.sql import functions as F

    return (events.filter(F.col("kind") == "tso.save")
            .groupBy("run_id", "node", F.floor(F.col("t_ms") / 1000).cast("long").alias("second"))
            .agg(F.count(F.lit(1)).alias("saves"))
            .select(*SAVES_COLUMNS))


@pandas_analysis
def kv_saves_per_second_pd(frame: pd.DataFrame) -> pd.DataFrame:
    """The pandas twin of :func:`kv_saves_per_second`, sorted."""
    saves = frame[frame["kind"] == "tso.save"]
    second = pd.Series(np.floor(saves["t_ms"].to_numpy(dtype="float64") / 1000), index=saves.index).astype("int64")
    out = (saves.assign(second=second).groupby(["run_id", "node", "second"], sort=False)
           .size().rename("saves").reset_index())
    out["second"] = out["second"].astype("Int64")
    out["saves"] = out["saves"].astype("Int64")
    for c in ("run_id", "node"):
        out[c] = out[c].astype("string")
    return sorted_by(out, KEYS_SAVES, SAVES_COLUMNS)


# --- the allocation gap across a failover --------------------------------------------------------

@spark_analysis
def failover_gaps(events):
    """For each ``fault.kill`` and each client of its run, the gap in answers across the kill (Spark).

    A client is a node that emitted ``client.*`` events. ``before_*`` is its last ``client.recv``
    before the kill (by ``seq``), ``after_*`` its first after; ``*_ts`` is the first timestamp of
    the answered batch and ``*_count`` its size. ``gap_ms = after_t_ms - before_t_ms``.
    ``increased`` is true when the first timestamp after the failover is above every timestamp of
    the last batch before it (``after_ts > before_ts + before_count - 1``); null when either side
    is missing. Columns: run_id, killed_node, kill_seq, kill_t_ms, client, before_seq,
    before_t_ms, before_ts, before_count, after_seq, after_t_ms, after_ts, after_count, gap_ms,
    increased.
    """
    from pyspark.sql import functions as F

    kills = events.filter(F.col("kind") == "fault.kill").select(
        "run_id", F.col("node").alias("killed_node"), F.col("seq").alias("kill_seq"),
        F.col("t_ms").alias("kill_t_ms"))
    clients = events.filter(F.col("kind").startswith("client.")).select(
        "run_id", F.col("node").alias("client"), "seq", "kind", "t_ms", "ts", "count")
    recv = F.col("kind") == "client.recv"
    answer = F.struct("seq", "t_ms", "ts", "count")
    agg = (clients.join(kills, "run_id")
           .groupBy("run_id", "killed_node", "kill_seq", "kill_t_ms", "client")
           .agg(F.max(F.when(recv & (F.col("seq") < F.col("kill_seq")), answer)).alias("b"),
                F.min(F.when(recv & (F.col("seq") > F.col("kill_seq")), answer)).alias("a")))
    return agg.select(
        "run_id", "killed_node", "kill_seq", "kill_t_ms", "client",
        F.col("b.seq").alias("before_seq"), F.col("b.t_ms").alias("before_t_ms"),
        F.col("b.ts").alias("before_ts"), F.col("b.count").alias("before_count"),
        F.col("a.seq").alias("after_seq"), F.col("a.t_ms").alias("after_t_ms"),
        F.col("a.ts").alias("after_ts"), F.col("a.count").alias("after_count"),
        (F.col("a.t_ms") - F.col("b.t_ms")).alias("gap_ms"),
        (F.col("a.ts") > F.col("b.ts") + F.col("b.count") - 1).alias("increased"),
    )


@pandas_analysis
def failover_gaps_pd(frame: pd.DataFrame) -> pd.DataFrame:
    """The pandas twin of :func:`failover_gaps`, sorted."""
    kills = frame[frame["kind"] == "fault.kill"][["run_id", "node", "seq", "t_ms"]].rename(
        columns={"node": "killed_node", "seq": "kill_seq", "t_ms": "kill_t_ms"})
    clients = frame[frame["kind"].str.startswith("client.").fillna(False).astype(bool)]
    clients = clients[["run_id", "node", "seq", "kind", "t_ms", "ts", "count"]].rename(columns={"node": "client"})
    both = clients.merge(kills, on="run_id").sort_values("seq", kind="stable")
    keys = ["run_id", "killed_node", "kill_seq", "kill_t_ms", "client"]
    base = both[keys].drop_duplicates()
    recv = both[both["kind"] == "client.recv"]
    cols = ["seq", "t_ms", "ts", "count"]
    # rows are in seq order: the last row per key before the kill, the first after (whole rows,
    # unlike groupby().last(), which would take each column's last non-null value)
    before = recv[recv["seq"] < recv["kill_seq"]].drop_duplicates(keys, keep="last")[keys + cols]
    after = recv[recv["seq"] > recv["kill_seq"]].drop_duplicates(keys, keep="first")[keys + cols]
    out = (base.merge(before.rename(columns={c: f"before_{c}" for c in cols}), on=keys, how="left")
           .merge(after.rename(columns={c: f"after_{c}" for c in cols}), on=keys, how="left"))
    for c in ("kill_seq", "before_seq", "before_ts", "before_count", "after_seq", "after_ts", "after_count"):
        out[c] = out[c].astype("Int64")
    for c in ("kill_t_ms", "before_t_ms", "after_t_ms"):
        out[c] = out[c].astype("float64")
    for c in ("run_id", "killed_node", "client"):
        out[c] = out[c].astype("string")
    out["gap_ms"] = out["after_t_ms"] - out["before_t_ms"]
    out["increased"] = (out["after_ts"] > out["before_ts"] + out["before_count"] - 1).astype("boolean")
    return sorted_by(out, KEYS_GAPS, GAP_COLUMNS)
