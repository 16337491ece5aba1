"""Spark analysis of many run logs: session, loader, and what every lesson's analyses share.

pyspark is an optional extra (``pip install 'milvus-edu[spark]'``); this package imports without
it and imports pyspark only inside the functions that need it. Each lesson keeps its analyses in its
own folder (``milvus_edu/mechanisms/<lesson>/analysis.py``) and registers them
(:attr:`milvus_edu.registry.Mechanism.analyses`).

>>> from milvus_edu.analysis import spark_session, load_events
>>> from milvus_edu.mechanisms.tso.analysis import allocations_per_window
>>> spark = spark_session()                       # local[*], or $MILVUS_EDU_SPARK_MASTER
>>> loaded = load_events(spark, ["runs/*/", "other/events.jsonl"])
>>> loaded.malformed_count                        # lines set aside, see loaded.malformed
>>> allocations_per_window(loaded.events).show()
"""

from .frames import to_pandas
from .loader import (CORRUPT_COLUMN, MALFORMED_COLUMNS, EventPathError, LoadedEvents, load_events,
                     resolve_event_paths, spark_schema)
from .session import (ENV_CLASS_ARCHIVE, ENV_CONF, ENV_DRIVER_MEMORY, ENV_MASTER, SparkConfError,
                      SparkUnavailableError, check_spark_available, java_version, spark_conf, spark_session)

__all__ = [
    "spark_session", "spark_conf", "check_spark_available", "java_version", "SparkUnavailableError", "SparkConfError",
    "ENV_MASTER", "ENV_DRIVER_MEMORY", "ENV_CONF", "ENV_CLASS_ARCHIVE",
    "spark_schema", "load_events", "LoadedEvents", "resolve_event_paths", "EventPathError",
    "CORRUPT_COLUMN", "MALFORMED_COLUMNS", "to_pandas",
]
