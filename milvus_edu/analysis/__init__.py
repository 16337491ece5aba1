"""Spark analysis of many run logs: session, loader, analyses (each with a pandas twin).

pyspark is an optional extra (``pip install 'milvus-edu[spark]'``); this package imports without
it and imports pyspark only inside the functions that need it.

>>> from milvus_edu.analysis import spark_session, load_events, allocations_per_window
>>> spark = spark_session()                       # local[*], or $MILVUS_EDU_SPARK_MASTER
>>> loaded = load_events(spark, ["runs/*/", "other/events.jsonl"])
>>> loaded.malformed_count                        # lines set aside, see loaded.malformed
>>> allocations_per_window(loaded.events).show()
"""

from .loader import (CORRUPT_COLUMN, MALFORMED_COLUMNS, EventPathError, LoadedEvents, load_events,
                     resolve_event_paths, spark_schema)
from .session import (ENV_DRIVER_MEMORY, ENV_MASTER, SparkUnavailableError, check_spark_available, java_version,
                      spark_conf, spark_session)
from .tso import (ALLOCATION_COLUMNS, GAP_COLUMNS, SAVES_COLUMNS, allocations_per_window, allocations_per_window_pd,
                  failover_gaps, failover_gaps_pd, kv_saves_per_second, kv_saves_per_second_pd, to_pandas)
from .flush import ANALYSES as FLUSH_ANALYSES
from .flush import (BINLOG_COLUMNS, BINLOG_META_COLUMNS, CHECKPOINT_LAG_COLUMNS, FLUSH_LATENCY_COLUMNS,
                    SYNC_SIZES_COLUMNS, binlog_rows, binlog_rows_pd, binlog_vs_meta, binlog_vs_meta_pd, checkpoint_lag,
                    checkpoint_lag_pd, flush_latency, flush_latency_pd, sync_sizes, sync_sizes_pd)
from .query import ANALYSES as QUERY_ANALYSES
from .query import (READ_STALENESS_COLUMNS, READ_WAITS_COLUMNS, TSAFE_LAG_COLUMNS, read_staleness, read_staleness_pd,
                    read_waits, read_waits_pd, tsafe_lag, tsafe_lag_pd)
from .timetick import ANALYSES as TIMETICK_ANALYSES
from .timetick import (PACK_COLUMNS, REORDER_COLUMNS, TICK_LAG_COLUMNS, pack_sizes, pack_sizes_pd, produce_reorder,
                       produce_reorder_pd, tick_lag, tick_lag_pd)

__all__ = [
    "spark_session", "spark_conf", "check_spark_available", "java_version", "SparkUnavailableError",
    "ENV_MASTER", "ENV_DRIVER_MEMORY",
    "spark_schema", "load_events", "LoadedEvents", "resolve_event_paths", "EventPathError",
    "CORRUPT_COLUMN", "MALFORMED_COLUMNS",
    "allocations_per_window", "allocations_per_window_pd", "kv_saves_per_second", "kv_saves_per_second_pd",
    "failover_gaps", "failover_gaps_pd", "to_pandas", "ALLOCATION_COLUMNS", "SAVES_COLUMNS", "GAP_COLUMNS",
    "tick_lag", "tick_lag_pd", "produce_reorder", "produce_reorder_pd", "pack_sizes", "pack_sizes_pd",
    "TICK_LAG_COLUMNS", "REORDER_COLUMNS", "PACK_COLUMNS", "TIMETICK_ANALYSES",
    "checkpoint_lag", "checkpoint_lag_pd", "flush_latency", "flush_latency_pd", "sync_sizes", "sync_sizes_pd",
    "binlog_rows", "binlog_rows_pd", "binlog_vs_meta", "binlog_vs_meta_pd", "CHECKPOINT_LAG_COLUMNS",
    "FLUSH_LATENCY_COLUMNS", "SYNC_SIZES_COLUMNS", "BINLOG_COLUMNS", "BINLOG_META_COLUMNS", "FLUSH_ANALYSES",
    "read_waits", "read_waits_pd", "read_staleness", "read_staleness_pd", "tsafe_lag", "tsafe_lag_pd",
    "READ_WAITS_COLUMNS", "READ_STALENESS_COLUMNS", "TSAFE_LAG_COLUMNS", "QUERY_ANALYSES",
]
