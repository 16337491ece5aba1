"""The run log's fast paths: code written a second time for speed, each beside its readable form.

Writing the run folder costs about as much as simulating, and every event goes through the recorder,
so these pay for themselves in every run. Each gives exactly what its readable form gives (the tests
named below compare them on real runs and, with hypothesis, on any values); read the readable form to
learn what it does. ``benchmarks/fast_path_gains.py`` measures what each saves by putting the readable
form back for one run (issue 25 keeps a fast path only when it saves at least 5% of some family's run).
Gains measured with ``fast_path_gains.py --repeat 2`` (2026-11-25), TimeTick / flush / query runs:

* :func:`batch_table`, a recorder batch as an Arrow table a column at a time; readable form
  :func:`~milvus_edu.events.recorder.arrow_table` of the row dicts (``parquet-by-arrow``; the sink process
  spends 88% more CPU in a TimeTick run with the readable form). ``tests/test_recorder_fast.py``.
* :func:`json_bytes`, the JSON lines of that table written by Arrow's string kernels, with
  :func:`float_text_array` for the floats; readable form :func:`~milvus_edu.events.recorder.json_line` a row
  at a time (``jsonl-by-arrow``: the sink process spends 43% / 77% / 17% more). ``tests/test_recorder_fast.py``.
* :class:`~milvus_edu.events.recorder.KeptBatches` (in ``recorder.py``, beside its readable form), a run kept
  in memory (``simulate(keep_events=True)``, what notebooks and tests use) as the recorder's batches, its
  DataFrame built from their Arrow tables; readable form :class:`~milvus_edu.events.recorder.MemorySink`, a dict
  per row as it is emitted (``kept-batches``: a kept run whose DataFrame is read once costs 85% / 60% / 22% more
  CPU with the readable form, ``--repeat 2``, 2026-11-26). ``tests/test_recorder_fast.py``.

Two more fast paths of the run log stay where their callers look for them, as methods, with their
readable form beside them and their gain in their docs: :meth:`Recorder.emitter
<milvus_edu.events.recorder.Recorder.emitter>`, an emit bound to one call site (readable form
:meth:`~milvus_edu.events.recorder.Recorder.emit`; ``bound-emitters``: the simulating process spends
42% / 12% / 2% more), and :meth:`Dispatch.write_batch <milvus_edu.events.dispatch.Dispatch.write_batch>`
reading the declared columns from a batch's tuples (readable form: ``write`` of each row dict;
``dispatch-columns``: the sink process spends 38% / 41% / 22% more). ``tests/test_dispatch.py`` and
``tests/test_speed_fast_paths.py``.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .schema import arrow_schema

_SCHEMA = arrow_schema()
_INT_OR_NONE = frozenset({int, type(None)})
_INT64 = pa.int64()
#: The JSON text of one value as the run log writes it (``recorder.json_line``'s separators); used here
#: for column names and for the rare values Arrow does not format as Python does.
_encode_json = json.JSONEncoder(separators=(",", ":")).encode


def _typed(values: tuple, field: pa.Field) -> tuple[pa.Array, bool]:
    """A group's column as an Arrow array of the field's type, and whether every value was of that type."""
    if field.type == _INT64 and _INT_OR_NONE.issuperset(map(type, values)):
        # Most columns hold ints: checking the types and naming the Arrow type is several times
        # cheaper than letting Arrow infer it, and gives the same array.
        try:
            return pa.array(values, _INT64), True
        except (pa.ArrowException, OverflowError):
            pass  # an int beyond 64 bits: the general path notes it
    try:
        array = pa.array(values)
    except (pa.ArrowException, OverflowError, TypeError, ValueError):
        array = None
    if array is not None and array.type == field.type:
        return array, True
    if array is not None and array.type == pa.null():
        return pa.nulls(len(values), field.type), True
    return pa.array(values, field.type), False


def batch_table(groups: dict, size: int, run_id: str | None) -> tuple[pa.Table, bool]:
    """``arrow_table(batch.rows(), arrow_schema())`` of a :class:`~milvus_edu.events.recorder.RowBatch`'s
    ``groups`` (layout -> buffered tuples, ``size`` rows in all), computed a group at a time; and whether
    every value was inferred as its column's type (so the table holds it unchanged).

    Each group's columns become Arrow arrays (one ``zip`` of its tuples); the rows are put back in ``seq``
    order by one sort of the concatenated ``seq`` columns."""
    exact = True
    parts_of = []  # (layout, rows, column name -> Arrow array)
    for layout, values in groups.items():
        columns = list(zip(*values))
        arrays = {}
        for name, i in layout.positions.items():
            arrays[name], ok = _typed(columns[i], _SCHEMA.field(name))
            exact = exact and ok
        parts_of.append((layout, len(values), arrays))
    order = pc.sort_indices(pa.concat_arrays([arrays["seq"] for _, _, arrays in parts_of]))
    run_id_scalar = pa.scalar(run_id, pa.string())
    out = []
    for field in _SCHEMA:
        if field.name == "run_id":
            out.append(pa.repeat(run_id_scalar, size))
            continue
        parts = []
        for layout, n, arrays in parts_of:
            if field.name == "kind":
                parts.append(pa.repeat(pa.scalar(layout.kind, pa.string()), n))
            else:
                array = arrays.get(field.name)
                parts.append(array if array is not None else pa.nulls(n, field.type))
        if all(part.null_count == len(part) for part in parts):
            out.append(pa.nulls(size, field.type))
        else:
            out.append(pa.concat_arrays(parts).take(order))
    return pa.Table.from_arrays(out, schema=_SCHEMA), exact


def json_bytes(table: pa.Table) -> memoryview:
    """``"".join(json_line(row) + "\\n" for row in rows)`` as ASCII bytes, for the rows of a run-log
    ``table`` whose values are all of their columns' types (:func:`batch_table`'s ``exact``).

    Each column becomes the JSON text of its values prefixed with ``,"name":`` (null where the value is
    null); a line joins its row's pieces, skipping nulls, and its first ``,`` becomes ``{``.
    """
    pieces = []
    for field, column in zip(_SCHEMA, table.itercolumns()):
        if column.null_count == len(column):
            continue
        pieces.append(_json_pieces(column.combine_chunks(), "," + _encode_json(field.name) + ":"))
    lines = pc.binary_join_element_wise(*pieces, "}\n", "", null_handling="skip")
    lines = pc.binary_replace_slice(lines, 0, 1, "{")
    offsets = np.frombuffer(lines.buffers()[1], np.int32, len(lines) + 1, lines.offset * 4)
    return memoryview(lines.buffers()[2])[offsets[0]:offsets[-1]]


def _json_pieces(array: pa.Array, key: str) -> pa.Array:
    """``key`` + the JSON text of every value of a run-log column (int64, float64 or string); nulls stay null."""
    if array.type == pa.int64():
        return pc.binary_replace_slice(pc.cast(array, pa.string()), 0, 0, key)
    if array.type == pa.float64():  # t_ms: several events share a time, and formatting is the dear part
        encoded = pc.dictionary_encode(array)
        return pc.binary_replace_slice(float_text_array(encoded.dictionary), 0, 0, key).take(encoded.indices)
    return _string_pieces(array, key)


def _string_pieces(array: pa.Array, key: str) -> pa.Array:
    """``key`` + ``_encode_json`` of every string, computed once per distinct value (a column repeats
    a few names): Arrow escapes the printable-ASCII ones (only ``\\`` and ``"`` need it), Python the rest."""
    encoded = pc.dictionary_encode(array)
    values = encoded.dictionary
    escaped = pc.replace_substring(pc.replace_substring(values, "\\", "\\\\"), '"', '\\"')
    texts = pc.binary_join_element_wise(key + '"', escaped, '"', "")
    printable = pc.ascii_is_printable(values)  # false for "" too, which Python then writes as '""'
    if not pc.all(printable).as_py():
        texts = pa.array([text if ok else key + _encode_json(value)
                          for value, ok, text in zip(values.to_pylist(), printable.to_pylist(), texts.to_pylist())],
                         pa.string())
    return texts.take(encoded.indices)


#: A slice start past the end of any string: replacing there appends.
_END = 1 << 62
#: Where Python writes a float in positional notation (``float.__repr__``): zero, and 1e-4 <= |x| < 1e16.
_POSITIONAL = (1e-4, 1e16)


def float_text_array(array: pa.Array) -> pa.Array:
    """``_encode_json`` of every value of a float64 array (nulls stay null), computed mostly by Arrow.

    Formatting a float is the dearest step of writing JSON in Python. Arrow's cast to string gives
    the same shortest round-trip digits as Python but lays them out differently: no ``.0`` after a
    whole number, and an exponent in other places. So where Python writes positional notation,
    Arrow's text is kept if it is positional too (no ``e``; ``.0`` added to a whole number); every
    other value is formatted by Python. ``tests/test_recorder_fast.py`` checks this against Python
    on many floats.
    """
    arrow = pc.cast(array, pa.string())
    size = pc.abs(array)
    positional = pc.and_(pc.less(size, _POSITIONAL[1]),
                         pc.or_(pc.equal(size, 0.0), pc.greater_equal(size, _POSITIONAL[0])))
    plain = pc.and_(positional, pc.invert(pc.match_substring(arrow, "e")))
    whole = pc.invert(pc.match_substring(arrow, "."))
    texts = pc.if_else(whole, pc.binary_replace_slice(arrow, _END, _END, ".0"), arrow)
    if pc.all(plain).as_py() is not False:
        return texts
    texts = pc.if_else(plain, texts, None)
    return pa.array([_encode_json(value) if text is None and value is not None else text
                     for value, text in zip(array.to_pylist(), texts.to_pylist())], pa.string())


def float_texts(values: list[float]) -> list[str]:
    """``[_encode_json(v) for v in values]`` for floats (:func:`float_text_array` on a list)."""
    return float_text_array(pa.array(values, pa.float64())).to_pylist()
