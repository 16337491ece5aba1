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
those kinds. Every sink gets the same dict, so no sink may change it. A sink may also have a fast
path, ``write_batch(batch)``: the recorder then buffers its rows in a :class:`RowBatch` of
:data:`BATCH_ROWS` rows, as tuples (no dict is built for a row no row sink wants). The file sinks encode a batch with
Arrow a column at a time: the Parquet table, and from it the JSON lines; the checkers and
summaries read the columns their handlers declare (:mod:`milvus_edu.events.dispatch`). This is many times faster than encoding row by
row and gives the same bytes (``tests/test_recorder_fast.py`` checks it on real runs); the encoding is
one of the fast paths kept, with their measured gains, in :mod:`milvus_edu.events.fast`.
"""

from __future__ import annotations

import json
import os
import weakref
from collections.abc import Callable, Collection, Iterable
from json.encoder import c_make_encoder, encode_basestring_ascii
from operator import itemgetter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from . import fast
from .schema import FIELD_NAMES, arrow_schema, detail_object, validate_kind


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

#: A row with every column null, in schema order: each row starts as a copy of it.
_EMPTY_ROW = dict.fromkeys(FIELD_NAMES)
#: The columns the recorder stamps on every row.
_STAMPED = ("run_id", "seq", "t_ms", "node", "kind")
#: The recorder buffers a row as the tuple ``(seq, t_ms, node, *the values emit was given)``.
_SEQ, _T_MS, _NODE, _GIVEN = 0, 1, 2, 3
#: Rows the recorder buffers for the batch sinks, and the default Parquet row group.
BATCH_ROWS = 8192
#: The value types emit passes on as they are; others (numpy scalars) become Python ones (:func:`_plain`).
_PLAIN = frozenset({int, float, str, bool, type(None), dict})


def _plain(value):
    """A numpy scalar as the Python value it holds (what Arrow would store anyway); anything else as is.

    So every buffered value is a plain Python one, which the sink process's pipe (``marshal``) carries
    unchanged: marshal would write a numpy scalar as its raw bytes."""
    return value.item() if isinstance(value, np.generic) else value


def json_line(row: dict) -> str:
    """One line of ``events.jsonl`` (without the newline): columns in schema order, nulls omitted,
    separators ``,`` and ``:``. This is the format's definition; :meth:`RowBatch.json_bytes` is its fast form."""
    return _encode_json({name: row[name] for name in FIELD_NAMES if row[name] is not None})


def arrow_table(rows: list[dict], schema: pa.Schema) -> pa.Table:
    """Rows as an Arrow table of ``schema`` (the run-log schema, maybe with more metadata)."""
    return pa.table({name: [row[name] for row in rows] for name in FIELD_NAMES}, schema=schema)


class Layout:
    """One kind of event as one call site emits it: the kind and the names of the columns it passes.

    The recorder validates a layout once and buffers rows by layout, so it knows which columns a
    group of rows may fill (:attr:`columns`, schema order) and where each sits in a buffered row
    tuple (:attr:`positions`) without looking at the rows.
    """

    __slots__ = ("kind", "names", "columns", "positions", "has_detail", "template", "writers", "fast", "pending",
                 "pending_rows", "count")

    def __init__(self, kind: str, names: Iterable[str]):
        names = tuple(names)
        given = set(names) | set(_STAMPED)
        self.kind = kind
        #: The column names as emit passed them (the values of a buffered tuple follow this order).
        self.names = names
        self.columns: tuple[str, ...] = tuple(name for name in FIELD_NAMES if name in given)
        # A stamped column passed to emit as well keeps its stamp (setdefault), as in the row dict.
        where = {"seq": _SEQ, "t_ms": _T_MS, "node": _NODE}
        for i, name in enumerate(names):
            where.setdefault(name, _GIVEN + i)
        #: Column name -> index in the buffered tuple, for every column but ``run_id`` and ``kind``.
        self.positions: dict[str, int] = {name: where[name] for name in self.columns if name not in ("run_id", "kind")}
        self.has_detail = "detail" in given
        #: Each row of this layout starts as a copy of it: every column null but ``kind``.
        self.template = {**_EMPTY_ROW, "kind": kind}
        #: ``write`` of every row sink that wants this kind (set by the recorder).
        self.writers: tuple[Callable[[dict], None], ...] = ()
        #: No row sink wants this kind and some batch sink listens: a bound emitter may just buffer the tuple.
        self.fast = False
        #: This layout's rows in the recorder's current batch, as tuples.
        self.pending: list[tuple] = []
        #: The dicts built for the row sinks of those rows, when there are row sinks.
        self.pending_rows: list[dict] = []
        #: Rows emitted with this layout.
        self.count = 0

    def row(self, values: tuple, run_id: str | None) -> dict:
        """The row dict of a buffered tuple."""
        row = self.template.copy()
        row["run_id"] = run_id
        for name, i in self.positions.items():
            row[name] = values[i]
        return row


class RowBatch:
    """Consecutive rows of a run, grouped by :class:`Layout`, for the file sinks to encode in bulk.

    Every row of a group has the same possible columns, so a group is read a column at a time (one
    ``zip`` of its tuples) and only its own columns are read. :meth:`table` turns each group's
    columns into Arrow arrays and puts the rows back in ``seq`` order; :meth:`json_bytes` writes the
    JSON lines from that table with Arrow's string kernels. Values Arrow does not infer as their
    column's type (never in a simulator run) make both fall back to the row-by-row definitions.
    """

    def __init__(self, groups: dict[Layout, list[tuple]], first_seq: int, size: int, run_id: str | None = None,
                 rows: dict[Layout, list[dict]] | None = None):
        self.groups = groups
        self.first_seq = first_seq
        self.size = size
        self.run_id = run_id
        self._table: pa.Table | None = None
        self._exact = True  # every value was inferred as its column's type, so the table holds it unchanged
        #: Row dicts of a group, built once: by the recorder for its row sinks, or here on demand.
        self._rows: dict[Layout, list[dict]] = dict(rows or {})
        self._objects: dict[tuple[Layout, str], list[dict]] = {}  # (layout, column) -> its decoded values
        self._decoded: dict[str | None, dict] = {None: {}}  # JSON text -> its object, for every column of the batch

    def rows(self, kinds: Collection[str] | None = None) -> list[dict]:
        """The rows in ``seq`` order; only those of ``kinds`` when it is given.

        A row's dict is built once, so every sink that asks for its kind gets the same dict.
        """
        ordered: list[dict | None] = [None] * self.size
        first = self.first_seq
        for layout, values in self.groups.items():
            if kinds is None or layout.kind in kinds:
                for value, row in zip(values, self.group_rows(layout)):
                    ordered[value[_SEQ] - first] = row
        return ordered if kinds is None else [row for row in ordered if row is not None]

    def group_rows(self, layout: Layout) -> list[dict]:
        """The row dicts of one layout's rows, in the group's order (built once, shared with :meth:`rows`)."""
        rows = self._rows.get(layout)
        if rows is None:
            run_id = self.run_id
            rows = self._rows[layout] = [layout.row(value, run_id) for value in self.groups[layout]]
        return rows

    def objects(self, layout: Layout, name: str) -> list[dict]:
        """The values of one layout's column ``name`` (a JSON text column such as ``detail``) as the objects they
        hold (:func:`~milvus_edu.events.schema.detail_object`), in the group's order: each distinct text decoded
        once per batch, and every caller given the same dicts (which it must not change)."""
        key = (layout, name)
        objects = self._objects.get(key)
        if objects is None:
            texts = list(map(itemgetter(layout.positions[name]), self.groups[layout]))
            decoded = self._decoded
            for text in set(texts).difference(decoded):
                decoded[text] = detail_object(text)
            objects = self._objects[key] = list(map(decoded.__getitem__, texts))
        return objects

    def table(self) -> pa.Table:
        """``arrow_table(self.rows(), arrow_schema())``, computed a group at a time (and once) by
        :func:`.fast.batch_table` (a fast path: see :mod:`milvus_edu.events.fast`)."""
        if self._table is None:
            self._table, self._exact = fast.batch_table(self.groups, self.size, self.run_id)
        return self._table

    def json_bytes(self) -> memoryview | bytes:
        """``"".join(json_line(row) + "\\n" for row in self.rows())`` as ASCII bytes, computed by Arrow from
        :meth:`table` (:func:`.fast.json_bytes`, a fast path: see :mod:`milvus_edu.events.fast`), or row by
        row when a value is not of its column's type (never in a simulator run)."""
        try:
            table = self.table()
        except (pa.ArrowException, OverflowError, TypeError, ValueError):
            table = None  # a value Arrow cannot hold in its column: the JSON line still writes it
        if table is None or not self._exact:
            return "".join(json_line(row) + "\n" for row in self.rows()).encode("ascii")
        return fast.json_bytes(table)

    def json_lines(self) -> str:
        """``"".join(json_line(row) + "\\n" for row in self.rows())`` (:meth:`json_bytes` as text)."""
        return bytes(self.json_bytes()).decode("ascii")


class MemorySink:
    """Keeps every row in :attr:`rows`."""

    def __init__(self):
        self.rows: list[dict] = []

    def write(self, row: dict) -> None:
        """Append one row."""
        self.rows.append(row)

    def close(self) -> None:
        """Nothing to release."""


class KeptBatches:
    """The run log kept in memory as the recorder's batches (``simulate(keep_events=True)``): its rows as
    dicts (:meth:`rows`) or as one Arrow table (:meth:`table`), each built when first asked.

    A fast path (listed in :mod:`.fast`); its readable form is :class:`MemorySink`, which takes a dict per
    row. A row sink keeps the recorder off its batches for every kind (each event becomes a dict as it
    is emitted), and the run's DataFrame is then built from those dicts; kept as batches, the rows stay
    tuples until someone reads them and the DataFrame comes from the batches' Arrow tables.
    ``benchmarks/fast_path_gains.py --paths kept-batches`` measures the gain; ``tests/test_recorder_fast.py``
    holds both forms to the same rows and frame.
    """

    def __init__(self):
        self._batches: list[RowBatch] = []
        self._rows: list[dict] | None = None
        self._table: pa.Table | None = None

    def write_batch(self, batch: RowBatch) -> None:
        """Keep one batch (the recorder hands them over in ``seq`` order)."""
        self._batches.append(batch)
        self._rows = self._table = None

    def rows(self) -> list[dict]:
        """Every row as a dict, in ``seq`` order (built once; the caller must not change them)."""
        if self._rows is None:
            self._rows = [row for batch in self._batches for row in batch.rows()]
        return self._rows

    def table(self) -> pa.Table:
        """Every row as one table of :func:`~.schema.arrow_schema`, in ``seq`` order (built once):
        ``arrow_table(self.rows(), arrow_schema())``, from each batch's own table (:meth:`RowBatch.table`)."""
        if self._table is None:
            tables = [batch.table() for batch in self._batches]
            self._table = pa.concat_tables(tables) if tables else arrow_schema().empty_table()
        return self._table

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
        self._fh = open(self._tmp, "wb")  # the lines are ASCII: non-ASCII characters are escaped

    def write(self, row: dict) -> None:
        """Write one line."""
        self._fh.write((json_line(row) + "\n").encode("ascii"))

    def write_batch(self, batch: RowBatch) -> None:
        """Write a batch of rows (the recorder's fast path), one line each."""
        self._fh.write(batch.json_bytes())

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

    :meth:`emit` runs for every event of a run, so it does the least it can: a row dict is built only
    when some row sink wants the kind; the batch sinks get the row as a tuple.
    """

    def __init__(self, run_id: str, now_ms: Callable[[], float] = lambda: 0.0, sinks: Iterable = (),
                 batch_rows: int = BATCH_ROWS):
        if batch_rows <= 0:
            raise ValueError("batch_rows must be positive")
        self.run_id = run_id
        self.now_ms = now_ms
        self.sinks = list(sinks)
        self.seq = 0
        self._layouts: dict[tuple[str, ...], Layout] = {}
        # The sinks list and its length when the sinks were last sorted into row and batch sinks.
        self._routed_list: list = []
        self._routed_len = 0
        self._row_sinks: list = []
        self._batch_sinks: list = []
        self._batched = 0  # rows waiting in the layouts' pending lists
        self.batch_rows = batch_rows

    def emit(self, kind: str, node: str, **fields) -> None:
        """Record one event (it returns nothing: a row dict is built only for the row sinks that want one)."""
        layout = self._layouts.get((kind, *fields))
        if layout is None:
            validate_kind(kind, fields)
            layout = self._layouts[(kind, *fields)] = Layout(kind, fields)
            self._give_writers(layout)
        if self.sinks is not self._routed_list or len(self.sinks) != self._routed_len:
            self._route()
        if not _PLAIN.issuperset(map(type, fields.values())):
            fields = {name: _plain(value) for name, value in fields.items()}
        if layout.has_detail and isinstance(fields["detail"], dict):
            fields["detail"] = encode_detail(fields["detail"])
        seq = self.seq
        # never "kind" or "node" among the fields: they are emit's own arguments
        values = (seq, float(self.now_ms()), node, *fields.values())
        self.seq = seq + 1
        layout.count += 1
        if layout.writers:
            row = layout.row(values, self.run_id)
            for write in layout.writers:
                write(row)
            if self._batch_sinks:
                layout.pending_rows.append(row)
        if self._batch_sinks:
            layout.pending.append(values)
            self._batched += 1
            if self._batched >= self.batch_rows:
                self._flush()

    def emitter(self, kind: str, *names: str) -> Callable[..., None]:
        """A faster :meth:`emit` for one call site that always passes the same columns.

        ``emit_enqueue = recorder.emitter("proxy.enqueue", "ts", "channel")`` validates the layout
        once; then ``emit_enqueue(node, ts, ch)`` records exactly what
        ``recorder.emit("proxy.enqueue", node, ts=ts, channel=ch)`` records (same row, same
        ``seq``), without building a keyword dict and looking the layout up on every call. When a
        row sink wants the kind (it needs a dict anyway) or no batch sink listens, it calls
        :meth:`emit` itself. ``tests/test_recorder_fast.py`` checks that both give the same rows.

        ``emit_enqueue.rows(node, [(ts, ch), ...])`` records several events of the same node at the
        same moment, one per tuple in order, as that many calls would (a DML task logs one row per
        pchannel).

        For speed, the values are buffered as given: pass plain Python values (int, float, str, None,
        and a dict for ``detail``), not numpy scalars, which :meth:`emit` converts.

        Speed (a fast path, listed in :mod:`milvus_edu.events.fast`): calling :meth:`emit` instead (the
        readable form) costs the simulating process 42% more CPU in a TimeTick run, 12% in a flush run and 2%
        in a query run (``benchmarks/fast_path_gains.py``, ``bound-emitters``).
        """
        key = (kind, *names)
        if len(set(names)) != len(names):
            raise ValueError(f"a column is named twice in {names}")
        layout = self._layouts.get(key)
        if layout is None:
            validate_kind(kind, dict.fromkeys(names))
            layout = self._layouts[key] = Layout(kind, names)
            self._give_writers(layout)
        detail_at = names.index("detail") if "detail" in names else -1
        emit, width = self.emit, len(names)

        def emit_fast(node: str, *values) -> None:
            if not (layout.fast and self.sinks is self._routed_list and len(self.sinks) == self._routed_len
                    and len(values) == width):
                if len(values) != width:
                    raise TypeError(f"{kind} takes {width} values ({', '.join(names)}), got {len(values)}")
                self._route_if_changed()
                if not layout.fast:
                    emit(kind, node, **dict(zip(names, values)))
                    return
            if detail_at >= 0 and isinstance(values[detail_at], dict):
                values = (*values[:detail_at], encode_detail(values[detail_at]), *values[detail_at + 1:])
            seq = self.seq
            layout.pending.append((seq, float(self.now_ms()), node, *values))
            self.seq = seq + 1
            layout.count += 1
            self._batched += 1
            if self._batched >= self.batch_rows:
                self._flush()

        # emit_rows is reached as emit_fast.rows: it refers back weakly, so that the two make no reference cycle
        # and a finished run's recorder is freed as soon as its components are (Simulation.close)
        one_by_one = weakref.ref(emit_fast)

        def emit_rows(node: str, rows: Iterable[tuple]) -> None:
            if (detail_at >= 0 or not (layout.fast and self.sinks is self._routed_list
                                       and len(self.sinks) == self._routed_len)):
                emit_one = one_by_one()
                for values in rows:
                    emit_one(node, *values)
                return
            first = seq = self.seq
            now = float(self.now_ms())
            pending = layout.pending
            try:
                for values in rows:
                    if len(values) != width:
                        raise TypeError(f"{kind} takes {width} values ({', '.join(names)}), got {len(values)}")
                    pending.append((seq, now, node, *values))
                    seq += 1
            finally:  # the rows buffered so far stay recorded, as with single calls, whatever went wrong
                self.seq = seq
                layout.count += seq - first
                self._batched += seq - first
            if self._batched >= self.batch_rows:
                self._flush()

        emit_fast.rows = emit_rows
        return emit_fast

    @property
    def counts(self) -> dict[str, int]:
        """Events recorded so far per kind (kinds in the order they first came)."""
        counts: dict[str, int] = {}
        for layout in self._layouts.values():
            if layout.count:
                counts[layout.kind] = counts.get(layout.kind, 0) + layout.count
        return counts

    def _route_if_changed(self) -> None:
        if self.sinks is not self._routed_list or len(self.sinks) != self._routed_len:
            self._route()

    def _route(self) -> None:
        """Sort the sinks into batch sinks and row sinks (the sinks changed)."""
        batch_sinks = [s for s in self.sinks if hasattr(s, "write_batch")]
        if self._batched and batch_sinks != self._batch_sinks:
            self._flush()  # rows buffered so far go to the batch sinks there were when they were emitted
        self._batch_sinks = batch_sinks
        self._row_sinks = [s for s in self.sinks if not hasattr(s, "write_batch")]
        for layout in self._layouts.values():
            self._give_writers(layout)
        self._routed_list = self.sinks
        self._routed_len = len(self.sinks)

    def _give_writers(self, layout: Layout) -> None:
        layout.writers = tuple(sink.write for sink in self._row_sinks
                               if getattr(sink, "kinds", None) is None or layout.kind in sink.kinds)
        layout.fast = not layout.writers and bool(self._batch_sinks)

    def _flush(self) -> None:
        """Hand the buffered rows to the batch sinks as one :class:`RowBatch`."""
        groups = {layout: layout.pending for layout in self._layouts.values() if layout.pending}
        # the row sinks' dicts, where every row of a group has one (the batch builds the others)
        rows = {layout: layout.pending_rows for layout in groups if len(layout.pending_rows) == len(layout.pending)}
        batch = RowBatch(groups, self.seq - self._batched, self._batched, self.run_id, rows)
        for layout in groups:
            layout.pending = []
            layout.pending_rows = []
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
    """The recorder that drops everything: one shared by every component built without a recorder.

    It stamps no row, so it keeps no clock: a :class:`~milvus_edu.sim.kernel.Simulation` built on it sets
    ``now_ms`` to read its environment, and the shared recorder holding that would keep the environment,
    and through its pending processes the whole simulation, alive until the next one replaced it."""

    @property
    def now_ms(self) -> Callable[[], float]:
        return _no_time

    @now_ms.setter
    def now_ms(self, clock: Callable[[], float]) -> None:
        pass

    def emit(self, kind: str, node: str, **fields) -> None:
        pass

    def emitter(self, kind: str, *names: str) -> Callable[..., None]:
        validate_kind(kind, dict.fromkeys(names))
        return _drop


def _no_time() -> float:
    """The null recorder's clock (it stamps nothing)."""
    return 0.0


def _drop(node: str, *values) -> None:
    """What the null recorder's emitters do: nothing."""


def _drop_rows(node: str, rows) -> None:
    """What the null recorder's emitters do with several rows: nothing."""


_drop.rows = _drop_rows


#: A recorder that drops everything (the default for components used on their own).
NULL_RECORDER: Recorder = _NullRecorder("null")
