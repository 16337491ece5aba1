"""The recorder every component emits through, and the sinks that keep what it records.

Components receive a :class:`Recorder` (or the :data:`NULL_RECORDER`) and call
``recorder.emit(kind, node, **columns)``. The recorder stamps the run id, the next sequence number
and the simulated time, checks the kind against the schema and hands a full row to every sink.

Sinks:

* :class:`MemorySink` keeps rows in a list (notebooks, tests);
* :class:`ParquetSink` streams rows to a Parquet file in row groups, so memory stays bounded by one
  group however long the run is;
* :class:`JsonlSink` writes one JSON object per line, for reading by eye and ``grep``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from .schema import FIELD_NAMES, FIELDS, arrow_schema, validate_kind


class MemorySink:
    """Keeps every row in :attr:`rows`."""

    def __init__(self):
        self.rows: list[dict] = []

    def write(self, row: dict) -> None:
        """Append one row."""
        self.rows.append(row)

    def close(self) -> None:
        """Nothing to release."""


class ParquetSink:
    """Streams rows to ``path`` as Parquet, ``batch_rows`` rows per row group.

    The file is written under a temporary name and renamed on :meth:`close`, so a crashed run never
    leaves a truncated ``events.parquet`` behind.
    """

    def __init__(self, path: str | os.PathLike, batch_rows: int = 8192, metadata: dict[str, str] | None = None):
        if batch_rows <= 0:
            raise ValueError("batch_rows must be positive")
        self.path = Path(path)
        self._tmp = self.path.with_name(self.path.name + ".partial")
        schema = arrow_schema()
        if metadata:
            schema = schema.with_metadata({**schema.metadata, **{k.encode(): v.encode() for k, v in metadata.items()}})
        self._schema = schema
        self._writer = pq.ParquetWriter(self._tmp, schema, compression="zstd")
        self._batch_rows = batch_rows
        self._cols: dict[str, list] = {n: [] for n in FIELD_NAMES}
        self._n = 0

    def write(self, row: dict) -> None:
        """Buffer one row; flush a row group when the buffer is full."""
        for name in FIELD_NAMES:
            self._cols[name].append(row[name])
        self._n += 1
        if self._n >= self._batch_rows:
            self._flush()

    def _flush(self) -> None:
        if self._n:
            self._writer.write_table(pa.table(self._cols, schema=self._schema))
            self._cols = {n: [] for n in FIELD_NAMES}
            self._n = 0

    def close(self) -> None:
        """Write the last row group and move the file into place."""
        self._flush()
        self._writer.close()
        os.replace(self._tmp, self.path)


class JsonlSink:
    """Writes one JSON object per line, columns in schema order, nulls omitted."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self._tmp = self.path.with_name(self.path.name + ".partial")
        self._fh = open(self._tmp, "w", encoding="utf-8")

    def write(self, row: dict) -> None:
        """Write one line."""
        self._fh.write(json.dumps({k: row[k] for k in FIELD_NAMES if row[k] is not None}, separators=(",", ":")))
        self._fh.write("\n")

    def close(self) -> None:
        """Flush and move the file into place."""
        self._fh.close()
        os.replace(self._tmp, self.path)


class Recorder:
    """Stamps and validates events and passes them to the sinks.

    ``now_ms`` returns the simulated time; in live mode it may be a wall clock relative to start.
    """

    def __init__(self, run_id: str, now_ms: Callable[[], float] = lambda: 0.0, sinks: Iterable = ()):
        self.run_id = run_id
        self.now_ms = now_ms
        self.sinks = list(sinks)
        self.seq = 0
        self.counts: dict[str, int] = {}

    def emit(self, kind: str, node: str, **fields) -> dict:
        """Record one event and return the row."""
        validate_kind(kind, fields)
        detail = fields.get("detail")
        if isinstance(detail, dict):
            fields["detail"] = json.dumps(detail, sort_keys=True, separators=(",", ":"))
        row = {f.name: None for f in FIELDS}
        row.update(fields)
        row["run_id"] = self.run_id
        row["seq"] = self.seq
        row["t_ms"] = float(self.now_ms())
        row["node"] = node
        row["kind"] = kind
        self.seq += 1
        self.counts[kind] = self.counts.get(kind, 0) + 1
        for sink in self.sinks:
            sink.write(row)
        return row

    def close(self) -> None:
        """Close every sink."""
        for sink in self.sinks:
            sink.close()


class _NullRecorder(Recorder):
    def emit(self, kind: str, node: str, **fields) -> dict:
        return {}


#: A recorder that drops everything (the default for components used on their own).
NULL_RECORDER: Recorder = _NullRecorder("null")
