"""The run log: schema, recorder, sinks and readers. See :mod:`milvus_edu.events.schema`."""

from .io import RunLogError, check_schema_version, load_run, rows_to_frame, schema_version_of, table_to_frame
from .recorder import NULL_RECORDER, JsonlSink, MemorySink, ParquetSink, Recorder
from .schema import EVENT_KINDS, FIELD_NAMES, FIELDS, SCHEMA_VERSION, SIM_EPOCH_MS, Field, Kind, arrow_schema, pandas_dtypes

__all__ = [
    "EVENT_KINDS", "SIM_EPOCH_MS", "FIELDS", "FIELD_NAMES", "SCHEMA_VERSION", "Field", "Kind", "arrow_schema", "pandas_dtypes",
    "Recorder", "NULL_RECORDER", "MemorySink", "ParquetSink", "JsonlSink", "load_run", "rows_to_frame", "table_to_frame", "RunLogError",
    "schema_version_of", "check_schema_version",
]
