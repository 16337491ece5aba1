"""The recorder every component emits through, and the sinks that keep what it records.

Components receive a :class:`Recorder` (or the :data:`NULL_RECORDER`) and call
``recorder.emit(kind, node, **columns)``. The recorder stamps the run id, the next sequence number
and the simulated time, checks the kind against the schema and hands a row to its sinks. A row is a
dict with every column of :data:`~milvus_edu.events.FIELD_NAMES` in schema order, ``None`` where the
event does not fill the column.

Sinks:

* :class:`MemorySink` keeps rows in a list (notebooks, tests);
* :class:`ParquetSink` streams rows to a Parquet file in row groups, so memory stays bounded by one
  group however long the run is;
* :class:`JsonlSink` writes one JSON object per line (:func:`json_line`), for reading by eye and ``grep``.

A sink has ``write(row)`` and ``close()``; it may declare ``kinds`` (a set) to be given only rows of
those kinds. Every sink gets the same dict, so no sink may change it. The file sinks also have a fast
path, ``write_batch(batch)``: the recorder buffers their rows in a :class:`RowBatch` of
:data:`BATCH_ROWS` rows and they encode it a column at a time, which is several times faster than
encoding row by row and gives the same bytes (``tests/test_recorder_fast.py`` checks it on real runs).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from json.encoder import c_make_encoder, encode_basestring_ascii
from operator import itemgetter
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .schema import FIELD_NAMES, arrow_schema, validate_kind


def _encoder(sort_keys: bool, item_separator: str) -> Callable[[object], str]:
    """``json.JSONEncoder(sort_keys=sort_keys, separators=(item_separator, ":")).encode``, set up once.

    ``JSONEncoder.encode`` builds a new C encoder for every value, which costs more than encoding a
    small dict; this builds it once (where Python has the C encoder) and gives the same text.
    """
    encoder = json.JSONEncoder(sort_keys=sort_keys, separators=(item_separator, ":"))
    if c_make_encoder is None:
        return encoder.encode
    markers: dict = {}  # for check_circular: empty between calls, unless an encoding failed midway
    encode_once = c_make_encoder(markers, encoder.default, encode_basestring_ascii, None, ":", item_separator,
                                 sort_keys, False, True)

    def encode(value) -> str:
        try:
            return "".join(encode_once(value, 0))
        except BaseException:
            markers.clear()
            raise

    return encode


#: ``detail`` given as a dict is stored as this JSON text: sorted keys, no spaces.
encode_detail = _encoder(sort_keys=True, item_separator=",")
_encode_json = _encoder(sort_keys=False, item_separator=",")
#: A JSON array with one value per line. No value holds a raw newline (strings are escaped to ASCII),
#: so cutting the array at its newlines gives the values back, unless a value is an array or an
#: object of several items (then there are more newlines than values).
_encode_column = _encoder(sort_keys=False, item_separator="\n")

_SCHEMA = arrow_schema()
#: A row with every column null, in schema order: each row starts as a copy of it.
_EMPTY_ROW = dict.fromkeys(FIELD_NAMES)
#: The columns the recorder stamps on every row.
_STAMPED = ("run_id", "seq", "t_ms", "node", "kind")
#: Rows the recorder buffers for the file sinks, and the default Parquet row group.
BATCH_ROWS = 8192


def json_line(row: dict) -> str:
    """One line of ``events.jsonl`` (without the newline): columns in schema order, nulls omitted,
    separators ``,`` and ``:``. This is the format's definition; :meth:`RowBatch.json_lines` is its fast form."""
    return _encode_json({name: row[name] for name in FIELD_NAMES if row[name] is not None})


def arrow_table(rows: list[dict], schema: pa.Schema) -> pa.Table:
    """Rows as an Arrow table of ``schema`` (the run-log schema, maybe with more metadata)."""
    return pa.table({name: [row[name] for row in rows] for name in FIELD_NAMES}, schema=schema)


class Layout:
    """One kind of event as one call site emits it: the kind and the names of the columns it passes.

    The recorder validates a layout once and buffers rows by layout, so it knows which columns a
    group of rows may fill (:attr:`columns`, schema order) without looking at the rows.
    """

    __slots__ = ("kind", "columns", "has_detail", "template", "writers", "pending")

    def __init__(self, kind: str, names: Iterable[str]):
        given = set(names) | set(_STAMPED)
        self.kind = kind
        self.columns: tuple[str, ...] = tuple(name for name in FIELD_NAMES if name in given)
        self.has_detail = "detail" in given
        #: Each row of this layout starts as a copy of it: every column null but ``kind``.
        self.template = {**_EMPTY_ROW, "kind": kind}
        #: ``write`` of every row sink that wants this kind (set by the recorder).
        self.writers: tuple[Callable[[dict], None], ...] = ()
        #: This layout's rows in the recorder's current batch.
        self.pending: list[dict] = []


class RowBatch:
    """Consecutive rows of a run, grouped by :class:`Layout`, for the file sinks to encode in bulk.

    Every row of a group has the same possible columns, so a group is read a column at a time, and
    only its own columns are read: :meth:`table` (Arrow, for Parquet) and :meth:`json_lines` work on
    those columns and put the groups' rows back in ``seq`` order.
    """

    def __init__(self, groups: dict[Layout, list[dict]], first_seq: int, size: int):
        self.groups = groups
        self.first_seq = first_seq
        self.size = size
        self._columns: list[dict[str, tuple]] | None = None
        self._table: pa.Table | None = None

    def rows(self) -> list[dict]:
        """The rows in ``seq`` order."""
        ordered: list[dict] = [{}] * self.size
        for rows in self.groups.values():
            for row in rows:
                ordered[row["seq"] - self.first_seq] = row
        return ordered

    def _group_columns(self) -> list[dict[str, tuple]]:
        """For each group, its columns: name -> the values of its rows (computed once)."""
        if self._columns is None:
            self._columns = [dict(zip(layout.columns, zip(*map(itemgetter(*layout.columns), rows))))
                             for layout, rows in self.groups.items()]
        return self._columns

    def table(self) -> pa.Table:
        """``arrow_table(self.rows(), arrow_schema())``, computed a group at a time (and once)."""
        if self._table is None:
            groups = self._group_columns()
            order = pc.sort_indices(pa.concat_arrays([pa.array(group["seq"], pa.int64()) for group in groups]))
            arrays = []
            for field in _SCHEMA:
                if not any(field.name in group for group in groups):
                    arrays.append(pa.nulls(self.size, field.type))
                    continue
                parts = [pa.array(group[field.name], field.type) if field.name in group
                         else pa.nulls(len(group["seq"]), field.type) for group in groups]
                arrays.append(pa.concat_arrays(parts).take(order))
            self._table = pa.Table.from_arrays(arrays, schema=_SCHEMA)
        return self._table

    def json_lines(self) -> str:
        """``"".join(json_line(row) + "\\n" for row in self.rows())``, computed a group at a time."""
        groups = self._group_columns()
        times = float_texts([t for group in groups for t in group["t_ms"]])
        ordered = [""] * self.size
        start = 0
        for rows, columns in zip(self.groups.values(), groups):
            seqs = columns["seq"]
            lines = _group_json_lines(rows, columns, times[start:start + len(seqs)])
            start += len(seqs)
            for seq, line in zip(seqs, lines):
                ordered[seq - self.first_seq] = line
        return "".join(ordered)


def _group_json_lines(rows: list[dict], columns: dict[str, tuple], times: list[str]) -> list[str]:
    """``[json_line(row) + "\\n" for row in rows]`` for one group, given its columns (schema order)
    and the JSON texts of its ``t_ms`` values.

    Each column becomes a list of ``,"name":value`` pieces: one JSON array per column
    (:data:`_encode_column`, a value per line) cut at its newlines, with the pieces of nulls emptied;
    a text column holding one value throughout becomes one piece repeated. A line is the join of its
    row's pieces. Falls back to :func:`json_line` when a column cannot be cut or the line's first
    piece would be null in some rows.
    """
    n = len(rows)
    pieces: list[list[str]] = []
    for name, column in columns.items():
        nulls = column.count(None)
        if nulls == n:
            continue
        if nulls and not pieces:
            return [json_line(row) + "\n" for row in rows]
        key = ("," if pieces else "{") + _encode_json(name) + ":"
        if name == "t_ms":
            pieces.append(list(map(key.__add__, times)))
            continue
        if type(column[0]) is str and column.count(column[0]) == n:
            pieces.append([key + _encode_json(column[0])] * n)
            continue
        encoded = _encode_column(column)[1:-1]
        if encoded.count("\n") != n - 1:
            return [json_line(row) + "\n" for row in rows]
        keyed = ("\n" + encoded).replace("\n", "\n" + key)
        if nulls:
            keyed = keyed.replace("\n" + key + "null", "\n")
        pieces.append(keyed.split("\n")[1:])
    pieces.append(["}\n"] * n)
    return list(map("".join, zip(*pieces)))


#: Where Python writes a float in positional notation (``float.__repr__``): zero, and 1e-4 <= |x| < 1e16.
_POSITIONAL = (1e-4, 1e16)


def float_texts(values: list[float]) -> list[str]:
    """``[_encode_json(v) for v in values]`` for floats, computed mostly by Arrow.

    Formatting a float is the dearest step of writing JSON in Python. Arrow's cast to string gives
    the same shortest round-trip digits as Python but lays them out differently: no ``.0`` after a
    whole number, and an exponent in other places. So where Python writes positional notation,
    Arrow's text is kept if it is positional too (``.0`` added to a whole number); every other value
    is formatted by Python. ``tests/test_recorder_fast.py`` checks this against Python on many floats.
    """
    array = pa.array(values, pa.float64())
    arrow = pc.cast(array, pa.string())
    size = pc.abs(array)
    positional = pc.and_(pc.less(size, _POSITIONAL[1]),
                         pc.or_(pc.equal(size, 0.0), pc.greater_equal(size, _POSITIONAL[0])))
    fraction = pc.and_(positional, pc.match_substring_regex(arrow, r"\A-?[0-9]+\.[0-9]+\z"))
    whole = pc.and_(positional, pc.match_substring_regex(arrow, r"\A-?[0-9]+\z"))
    texts = pc.if_else(fraction, arrow, pc.if_else(whole, pc.binary_join_element_wise(arrow, ".0", ""), None))
    return [_encode_json(value) if text is None else text for value, text in zip(values, texts.to_pylist())]


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

    def __init__(self, path: str | os.PathLike, batch_rows: int = BATCH_ROWS, metadata: dict[str, str] | None = None):
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
        self._rows: list[dict] = []  # rows given one by one, not yet in a table
        self._tables: list[pa.Table] = []  # rows waiting for a full row group, oldest first
        self._waiting = 0  # rows in _tables

    def write(self, row: dict) -> None:
        """Buffer one row; write a row group when ``batch_rows`` rows wait."""
        self._rows.append(row)
        if len(self._rows) + self._waiting >= self._batch_rows:
            self._write_groups()

    def write_batch(self, batch: RowBatch) -> None:
        """Buffer a batch of rows (the recorder's fast path); write the row groups it completes."""
        self._park_rows()
        self._tables.append(batch.table().replace_schema_metadata(self._schema.metadata))
        self._waiting += batch.size
        if self._waiting >= self._batch_rows:
            self._write_groups()

    def _park_rows(self) -> None:
        if self._rows:
            self._tables.append(arrow_table(self._rows, self._schema))
            self._waiting += len(self._rows)
            self._rows = []

    def _write_groups(self, last: bool = False) -> None:
        self._park_rows()
        if not self._tables:
            return
        table = self._tables[0] if len(self._tables) == 1 else pa.concat_tables(self._tables).combine_chunks()
        start = 0
        while table.num_rows - start >= self._batch_rows or (last and start < table.num_rows):
            self._writer.write_table(table.slice(start, self._batch_rows))
            start += self._batch_rows
        rest = table.num_rows - start
        self._tables = [table.slice(start)] if rest else []
        self._waiting = rest

    def close(self) -> None:
        """Write the last row group and move the file into place."""
        self._write_groups(last=True)
        self._writer.close()
        os.replace(self._tmp, self.path)


class JsonlSink:
    """Writes one JSON object per line (:func:`json_line`): columns in schema order, nulls omitted."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self._tmp = self.path.with_name(self.path.name + ".partial")
        self._fh = open(self._tmp, "w", encoding="utf-8")

    def write(self, row: dict) -> None:
        """Write one line."""
        self._fh.write(json_line(row) + "\n")

    def write_batch(self, batch: RowBatch) -> None:
        """Write a batch of rows (the recorder's fast path), one line each."""
        self._fh.write(batch.json_lines())

    def close(self) -> None:
        """Flush and move the file into place."""
        self._fh.close()
        os.replace(self._tmp, self.path)


class Recorder:
    """Stamps and validates events and passes them to the sinks.

    ``now_ms`` returns the simulated time; in live mode it may be a wall clock relative to start.
    Each combination of kind and column names (a :class:`Layout`) is validated against the schema
    the first time it is emitted. Sinks with ``write_batch`` get rows in batches of ``batch_rows``
    (and the rest on :meth:`close`); the others get each row as it is emitted. Sinks may be added
    to :attr:`sinks` (append, ``+=``) while recording; a sink sees the rows emitted after it came.
    """

    def __init__(self, run_id: str, now_ms: Callable[[], float] = lambda: 0.0, sinks: Iterable = (),
                 batch_rows: int = BATCH_ROWS):
        if batch_rows <= 0:
            raise ValueError("batch_rows must be positive")
        self.run_id = run_id
        self.now_ms = now_ms
        self.sinks = list(sinks)
        self.seq = 0
        self.counts: dict[str, int] = {}
        self._layouts: dict[tuple[str, ...], Layout] = {}
        # The sinks list and its length when the sinks were last sorted into row and batch sinks.
        self._routed_for: tuple[list, int] = ([], 0)
        self._row_sinks: list = []
        self._batch_sinks: list = []
        self._batched = 0  # rows waiting in the layouts' pending lists
        self.batch_rows = batch_rows

    def emit(self, kind: str, node: str, **fields) -> dict:
        """Record one event and return the row."""
        key = (kind, *fields)
        layout = self._layouts.get(key)
        if layout is None:
            validate_kind(kind, fields)
            layout = self._layouts[key] = Layout(kind, fields)
            self._give_writers(layout)
        sinks, length = self._routed_for
        if self.sinks is not sinks or len(sinks) != length:
            self._route()
        if layout.has_detail and isinstance(fields["detail"], dict):
            fields["detail"] = encode_detail(fields["detail"])
        seq = self.seq
        row = layout.template.copy()
        row.update(fields)  # never "kind" or "node": they are emit's own arguments
        row["run_id"] = self.run_id
        row["seq"] = seq
        row["t_ms"] = float(self.now_ms())
        row["node"] = node
        self.seq = seq + 1
        self.counts[kind] = self.counts.get(kind, 0) + 1
        for write in layout.writers:
            write(row)
        if self._batch_sinks:
            layout.pending.append(row)
            self._batched += 1
            if self._batched >= self.batch_rows:
                self._flush()
        return row

    def _route(self) -> None:
        """Sort the sinks into batch sinks and row sinks (the sinks changed)."""
        batch_sinks = [s for s in self.sinks if hasattr(s, "write_batch")]
        if self._batched and batch_sinks != self._batch_sinks:
            self._flush()  # rows buffered so far go to the batch sinks there were when they were emitted
        self._batch_sinks = batch_sinks
        self._row_sinks = [s for s in self.sinks if not hasattr(s, "write_batch")]
        for layout in self._layouts.values():
            self._give_writers(layout)
        self._routed_for = (self.sinks, len(self.sinks))

    def _give_writers(self, layout: Layout) -> None:
        layout.writers = tuple(sink.write for sink in self._row_sinks
                               if getattr(sink, "kinds", None) is None or layout.kind in sink.kinds)

    def _flush(self) -> None:
        """Hand the buffered rows to the batch sinks as one :class:`RowBatch`."""
        groups = {layout: layout.pending for layout in self._layouts.values() if layout.pending}
        batch = RowBatch(groups, self.seq - self._batched, self._batched)
        for layout in groups:
            layout.pending = []
        self._batched = 0
        for sink in self._batch_sinks:
            sink.write_batch(batch)

    def close(self) -> None:
        """Hand over the last rows and close every sink."""
        if self._batched:
            self._flush()
        for sink in self.sinks:
            sink.close()


class _NullRecorder(Recorder):
    def emit(self, kind: str, node: str, **fields) -> dict:
        return {}


#: A recorder that drops everything (the default for components used on their own).
NULL_RECORDER: Recorder = _NullRecorder("null")
