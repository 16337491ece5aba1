"""TimeTick analyses over many runs, each in Spark and as a pandas twin with the same numbers.

Like :mod:`milvus_edu.mechanisms.tso.analysis`: every Spark function takes the events DataFrame of
:func:`~milvus_edu.analysis.load_events` and returns a Spark DataFrame; its ``_pd`` twin takes the
pandas DataFrame of :func:`milvus_edu.events.load_run` (or several concatenated) and returns the same
columns, sorted by the keys, with dtypes ``Int64`` / ``float64`` / ``string``;
``to_pandas(f(events))`` equals ``f_pd(frame)`` cell by cell (means are sums of floats, which Spark
adds in partition order: they agree to the last few bits, not bit for bit). Only run-log columns are
read; nothing of the model is run again. Order inside a channel is ``seq``, never ``t_ms``.

* :func:`tick_lag` -- how far each pchannel's time ticks trail true time when rootcoord writes them,
  and the longest silence between two ticks.
* :func:`produce_reorder` -- how many DML messages reach a pchannel below a timestamp already
  written there, and by how much (ms and messages).
* :func:`pack_sizes` -- how many messages each tt-aligned pack hands a vchannel's consumer.

:data:`ANALYSES` maps each name to its ``(spark_fn, pandas_fn)`` pair.
"""

from __future__ import annotations

import bisect

import numpy as np
import pandas as pd

from ...analysis.frames import PERCENTILES, as_strings, pandas_analysis, sorted_by, spark_analysis, with_percentiles
from ...events.schema import SIM_EPOCH_MS
from ...tsoutil import LOGICAL_BITS
from .kinds import DML_TYPES

KEYS_CHANNEL = ["run_id", "channel"]
KEYS_PACK = ["run_id", "channel", "vchannel"]

TICK_LAG_COLUMNS = ["run_id", "channel", "ticks", "min_lag_ms", "mean_lag_ms", "p50_lag_ms", "p95_lag_ms",
                    "max_lag_ms", "max_gap_ms"]
REORDER_COLUMNS = ["run_id", "channel", "messages", "out_of_order", "share_out_of_order", "max_distance_ms",
                   "mean_distance_ms", "max_distance_msgs", "mean_distance_msgs"]
PACK_COLUMNS = ["run_id", "channel", "vchannel", "packs", "messages", "mean_per_pack", "max_per_pack",
                "empty_packs"]

_ONE_PHYSICAL_MS = 1 << LOGICAL_BITS


# --- tick lag ------------------------------------------------------------------------------------

@spark_analysis
def tick_lag(events):
    """Per run and pchannel, how far the time ticks rootcoord writes trail true time (Spark).

    Over the TimeTick messages (``kind == "mq.produce"``, ``msg_type == "TimeTick"``), each tick's
    lag is true time when it is written minus the physical part of the watermark it carries:
    ``lag_ms = (SIM_EPOCH_MS + t_ms) - (tick_ts >> 18)``, computed as
    ``t_ms - ((tick_ts >> 18) - SIM_EPOCH_MS)`` (the same number without adding a float to the
    13-digit epoch, so no precision is lost and both engines round alike).
    A consumer can use nothing younger than the tick, so the lag is how stale the freshest usable
    data is at the moment the tick appears: the age of the round's values (rootcoord's DDL minimum,
    which counts for every pchannel, is taken ``sync_ts_phase_ms`` before it is sent, so no tick is
    fresher than that; each proxy's value is as old as its last ticker run), the wait for every
    session's report, and a proxy's oldest unfinished task holding its value back. Columns: run_id,
    channel, ticks (count), min_lag_ms, mean_lag_ms, p50_lag_ms, p95_lag_ms, max_lag_ms,
    max_gap_ms. A percentile is nearest-rank: the
    ``ceil(p * ticks / 100)``-th smallest lag (1-based), always one of the lags. ``max_gap_ms`` is
    the longest stretch of simulated time (``t_ms``) between two consecutive ticks of the channel
    (by ``seq``); null when the channel has a single tick.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    channel = Window.partitionBy(*KEYS_CHANNEL)
    lag_ms = F.col("t_ms") - (F.shiftright("tick_ts", LOGICAL_BITS) - F.lit(SIM_EPOCH_MS)).cast("double")
    ticks = (events.filter((F.col("kind") == "mq.produce") & (F.col("msg_type") == "TimeTick"))
             .select(*KEYS_CHANNEL, "seq", "t_ms", lag_ms.alias("lag_ms"))
             .withColumn("gap_ms", F.col("t_ms") - F.lag("t_ms").over(channel.orderBy("seq")))
             .withColumn("rank", F.row_number().over(channel.orderBy("lag_ms", "seq")))
             .withColumn("n", F.count(F.lit(1)).over(channel)))
    pick = {p: F.max(F.when(F.col("rank") == F.expr(f"(n * {p} + 99) div 100"), F.col("lag_ms")))
            for p in PERCENTILES}
    return (ticks.groupBy(*KEYS_CHANNEL)
            .agg(F.count(F.lit(1)).alias("ticks"), F.min("lag_ms").alias("min_lag_ms"),
                 F.avg("lag_ms").alias("mean_lag_ms"), pick[50].alias("p50_lag_ms"), pick[95].alias("p95_lag_ms"),
                 F.max("lag_ms").alias("max_lag_ms"), F.max("gap_ms").alias("max_gap_ms"))
            .select(*TICK_LAG_COLUMNS))


@pandas_analysis
def tick_lag_pd(frame: pd.DataFrame) -> pd.DataFrame:
    """The pandas twin of :func:`tick_lag` (same columns and numbers), sorted."""
    ticks = frame[(frame["kind"] == "mq.produce") & (frame["msg_type"] == "TimeTick")]
    ticks = ticks[KEYS_CHANNEL + ["seq", "t_ms", "tick_ts"]].sort_values(KEYS_CHANNEL + ["seq"], kind="stable")
    physical = (ticks["tick_ts"].astype("int64") // _ONE_PHYSICAL_MS) - SIM_EPOCH_MS
    ticks = ticks.assign(lag_ms=ticks["t_ms"].astype("float64") - physical.astype("float64"))
    ticks["gap_ms"] = ticks.groupby(KEYS_CHANNEL, sort=False)["t_ms"].diff()
    out = (ticks.groupby(KEYS_CHANNEL, sort=False)
           .agg(ticks=("seq", "size"), min_lag_ms=("lag_ms", "min"), mean_lag_ms=("lag_ms", "mean"),
                max_lag_ms=("lag_ms", "max"), max_gap_ms=("gap_ms", "max"))
           .reset_index())
    out = with_percentiles(out, ticks, KEYS_CHANNEL, "lag_ms")
    out["ticks"] = out["ticks"].astype("Int64")
    for c in ("min_lag_ms", "mean_lag_ms", "p50_lag_ms", "p95_lag_ms", "max_lag_ms", "max_gap_ms"):
        out[c] = out[c].astype("float64")
    as_strings(out, *KEYS_CHANNEL)
    return sorted_by(out, KEYS_CHANNEL, TICK_LAG_COLUMNS)


# --- DML messages written out of timestamp order -------------------------------------------------

@spark_analysis
def produce_reorder(events):
    """Per run and pchannel, how far DML messages arrive out of timestamp order (Spark).

    Over the DML messages produced (``kind == "mq.produce"``, ``msg_type`` Insert or Delete), in
    ``seq`` order per channel: a message is *out of order* when its ``end_ts`` is below the largest
    ``end_ts`` written earlier on the channel (``max_before``; equal is in order). Its distance in
    ms is ``(max_before >> 18) - (end_ts >> 18)`` (0 when in order, and possibly 0 for a message
    out of order within the same physical ms); its distance in messages is the exact number of
    earlier messages on the channel with a larger ``end_ts``. Columns: run_id, channel, messages,
    out_of_order, share_out_of_order (out_of_order / messages), max_distance_ms (0 when none),
    mean_distance_ms (over the out-of-order messages only; null when none), max_distance_msgs,
    mean_distance_msgs (likewise).

    The count in messages uses window functions only: the channel's messages split into blocks at
    every position p where the first p+1 messages (by seq) are exactly the p+1 smallest by
    ``(end_ts, seq)``; a larger earlier message is always in the same block, so each message counts
    the larger ones among the earlier messages of its block. The work is the sum of squared block
    lengths (blocks of at most ~80 messages in the TimeTick scenarios).
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    channel = Window.partitionBy(*KEYS_CHANNEL)
    by_seq = channel.orderBy("seq")
    earlier = by_seq.rowsBetween(Window.unboundedPreceding, -1)
    so_far = by_seq.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    msgs = (events.filter((F.col("kind") == "mq.produce") & F.col("msg_type").isin(*DML_TYPES))
            .select(*KEYS_CHANNEL, "seq", "end_ts")
            .withColumn("pos", F.row_number().over(by_seq) - 1)
            .withColumn("rank", F.row_number().over(channel.orderBy("end_ts", "seq")) - 1)
            .withColumn("max_before", F.max("end_ts").over(earlier))
            .withColumn("closes", (F.max("rank").over(so_far) == F.col("pos")).cast("long"))
            .withColumn("block", F.coalesce(F.sum("closes").over(earlier), F.lit(0))))
    in_block = Window.partitionBy(*KEYS_CHANNEL, "block").orderBy("seq").rowsBetween(Window.unboundedPreceding, -1)
    late = F.col("end_ts") < F.coalesce(F.col("max_before"), F.col("end_ts"))
    msgs = (msgs
            .withColumn("late", late)
            .withColumn("distance_ms", F.when(late, F.shiftright("max_before", LOGICAL_BITS)
                                              - F.shiftright("end_ts", LOGICAL_BITS)).otherwise(F.lit(0)))
            .withColumn("distance_msgs", F.size(F.filter(F.collect_list("end_ts").over(in_block),
                                                         lambda ts: ts > F.col("end_ts"))).cast("long")))
    return (msgs.groupBy(*KEYS_CHANNEL)
            .agg(F.count(F.lit(1)).alias("messages"), F.sum(F.col("late").cast("long")).alias("out_of_order"),
                 F.max("distance_ms").alias("max_distance_ms"),
                 F.avg(F.when(F.col("late"), F.col("distance_ms"))).alias("mean_distance_ms"),
                 F.max("distance_msgs").alias("max_distance_msgs"),
                 F.avg(F.when(F.col("late"), F.col("distance_msgs"))).alias("mean_distance_msgs"))
            .withColumn("share_out_of_order", F.col("out_of_order") / F.col("messages"))
            .select(*REORDER_COLUMNS))


def _larger_before(end_ts: np.ndarray) -> np.ndarray:
    """For each value, how many earlier values are strictly larger (a sorted list of those seen)."""
    seen: list[int] = []
    out = np.zeros(len(end_ts), dtype="int64")
    for i, ts in enumerate(end_ts.tolist()):
        out[i] = len(seen) - bisect.bisect_right(seen, ts)
        bisect.insort(seen, ts)
    return out


@pandas_analysis
def produce_reorder_pd(frame: pd.DataFrame) -> pd.DataFrame:
    """The pandas twin of :func:`produce_reorder`, sorted; it counts the larger earlier messages
    directly (a sorted list per channel) instead of by blocks."""
    msgs = frame[(frame["kind"] == "mq.produce") & frame["msg_type"].isin(DML_TYPES)]
    msgs = msgs[KEYS_CHANNEL + ["seq", "end_ts"]].sort_values(KEYS_CHANNEL + ["seq"], kind="stable")
    # Int64 throughout: a shift to float64 would round hybrid timestamps (above 2**53)
    msgs = msgs.assign(end_ts=msgs["end_ts"].astype("Int64")).reset_index(drop=True)
    grp = msgs.groupby(KEYS_CHANNEL, sort=False)["end_ts"]
    max_before = grp.cummax().groupby([msgs["run_id"], msgs["channel"]], sort=False).shift(1)
    late = (msgs["end_ts"] < max_before).fillna(False).astype(bool)
    behind = max_before // _ONE_PHYSICAL_MS - msgs["end_ts"] // _ONE_PHYSICAL_MS
    msgs["late"] = late
    msgs["distance_ms"] = behind.where(late, 0).astype("int64")
    msgs["distance_msgs"] = grp.transform(lambda s: _larger_before(s.to_numpy(dtype="int64"))).astype("int64")
    msgs["late_ms"] = msgs["distance_ms"].where(late).astype("float64")
    msgs["late_msgs"] = msgs["distance_msgs"].where(late).astype("float64")
    out = (msgs.groupby(KEYS_CHANNEL, sort=False)
           .agg(messages=("seq", "size"), out_of_order=("late", "sum"), max_distance_ms=("distance_ms", "max"),
                mean_distance_ms=("late_ms", "mean"), max_distance_msgs=("distance_msgs", "max"),
                mean_distance_msgs=("late_msgs", "mean"))
           .reset_index())
    for c in ("messages", "out_of_order", "max_distance_ms", "max_distance_msgs"):
        out[c] = out[c].astype("Int64")
    out["share_out_of_order"] = out["out_of_order"].astype("float64") / out["messages"].astype("float64")
    for c in ("mean_distance_ms", "mean_distance_msgs"):
        out[c] = out[c].astype("float64")
    as_strings(out, *KEYS_CHANNEL)
    return sorted_by(out, KEYS_CHANNEL, REORDER_COLUMNS)


# --- pack sizes ----------------------------------------------------------------------------------

@spark_analysis
def pack_sizes(events):
    """Per run, pchannel and vchannel, the tt-aligned packs its consumer received (Spark).

    Over ``mq.pack`` rows (one per pack a dispatcher hands a vchannel, empty ones included): packs,
    messages (sum of ``count``), mean_per_pack, max_per_pack, empty_packs (packs with no message:
    a tick that closed a span in which nothing was written to this vchannel).
    """
    from pyspark.sql import functions as F

    return (events.filter(F.col("kind") == "mq.pack")
            .groupBy(*KEYS_PACK)
            .agg(F.count(F.lit(1)).alias("packs"), F.sum("count").alias("messages"),
                 F.avg("count").alias("mean_per_pack"), F.max("count").alias("max_per_pack"),
                 F.sum((F.col("count") == 0).cast("long")).alias("empty_packs"))
            .select(*PACK_COLUMNS))


@pandas_analysis
def pack_sizes_pd(frame: pd.DataFrame) -> pd.DataFrame:
    """The pandas twin of :func:`pack_sizes`, sorted."""
    packs = frame[frame["kind"] == "mq.pack"]
    packs = packs.assign(size=packs["count"].astype("int64"))
    packs = packs.assign(empty=(packs["size"] == 0).astype("int64"))
    out = (packs.groupby(KEYS_PACK, sort=False)
           .agg(packs=("seq", "size"), messages=("size", "sum"), mean_per_pack=("size", "mean"),
                max_per_pack=("size", "max"), empty_packs=("empty", "sum"))
           .reset_index())
    for c in ("packs", "messages", "max_per_pack", "empty_packs"):
        out[c] = out[c].astype("Int64")
    out["mean_per_pack"] = out["mean_per_pack"].astype("float64")
    as_strings(out, *KEYS_PACK)
    return sorted_by(out, KEYS_PACK, PACK_COLUMNS)


#: Each TimeTick analysis by name: ``(spark_fn, pandas_fn)``.
ANALYSES = {
    "tick_lag": (tick_lag, tick_lag_pd),
    "produce_reorder": (produce_reorder, produce_reorder_pd),
    "pack_sizes": (pack_sizes, pack_sizes_pd),
}
