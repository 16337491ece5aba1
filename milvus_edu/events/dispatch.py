"""One way to read the run log: a sink declares, per event kind, what it does with an event; one
dispatcher feeds it rows or batches.

A checker or a summary subclasses :class:`Dispatch` and marks a method per kind with :func:`on`::

    class Packs(Dispatch):
        @on("mq.pack", columns=("vchannel", "end_ts"), ints=("end_ts",))
        def _pack(self, seq, vchannel, end_ts): ...

        @on("run.end")
        def _end(self, row): ...

A handler declared with ``columns`` is called as ``handler(seq, *values of those columns)`` (None for a
column the event does not fill); one declared without gets the row dict. :attr:`Dispatch.kinds` is the
set of kinds it declared, so the recorder hands it no others. :meth:`Dispatch.write` feeds one row dict
(a run-log DataFrame's rows, a notebook's); :meth:`Dispatch.write_batch` feeds a recorder's batch, reading
the declared columns straight from its buffered tuples (no row dict is built for a kind read by columns)
and calling the handlers in ``seq`` order. Both call the same handlers with the same values, so there is
one definition of what a sink does with an event (``tests/test_dispatch.py`` feeds real runs both ways).

A column listed in ``objects`` (the ``detail`` column, usually) reaches the handler as the JSON object its text
holds (:func:`~milvus_edu.events.schema.detail_object`: ``{}`` when there is none). From a batch it is decoded once
per distinct text, for every sink the batch is given to (:meth:`RowBatch.objects
<milvus_edu.events.recorder.RowBatch.objects>`): a run's details repeat (a 60-s query run logs 3,230 details that
its checkers and summaries read, 150 of them distinct): the checkers and summaries of that run read a batch a
third faster (8.6 ms to 5.9 ms for its 9,074 rows; TimeTick and flush runs as before). So the handlers of every
sink share one dict: a handler must not change it (``tests/test_dispatch.py`` checks that none does).

A column listed in ``ints`` is converted with ``int()`` in a row dict (a DataFrame's integers may come as
floats); a batch group whose values there are all ints already is read as it is, any other is read as row
dicts and converted the same way.

Speed: reading the declared columns from the batch's tuples, instead of handing each handler a row dict
(``batch.rows(kinds)``, the readable form), takes a quarter to a third off the sink process's CPU in the
TimeTick, flush and query families (``benchmarks/fast_path_gains.py``, ``dispatch-columns``: +38%, +41%, +22%
with the readable form); it is one of the fast paths listed in :mod:`milvus_edu.events.fast`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from itertools import chain, repeat
from operator import itemgetter
from typing import NamedTuple

from .schema import detail_object


class Handler(NamedTuple):
    """What a sink does with one kind: the method's name, the columns it takes (None: the row dict), the
    columns converted with ``int()``, and whether it folds whole columns (see :func:`on`)."""

    name: str
    columns: tuple[str, ...] | None
    ints: tuple[str, ...]
    fold: bool = False
    objects: tuple[str, ...] = ()


def on(*kinds: str, columns: tuple[str, ...] | None = None, ints: tuple[str, ...] = (),
       fold: bool = False, objects: tuple[str, ...] = ()) -> Callable:
    """Declare the decorated method as what its :class:`Dispatch` sink does with each event of ``kinds``.

    With ``columns`` it is called as ``method(seq, *values)``; without, as ``method(row)``. ``ints`` names
    columns (of ``columns``) a row dict's value is converted in with ``int()`` when it is not None; ``objects``
    names columns (of ``columns``) given as the JSON object their text holds, a dict shared with the other sinks
    and not to be changed (see the module's doc).

    With ``fold`` (and ``columns``) it is called as ``method(seqs, *value lists)`` with the events of its kinds
    in ``seq`` order, a batch's at once (one row's as lists of one). The sink promises that what a fold
    handler changes is read by no other handler of the sink and that it reads nothing they change (a count
    of its own kind), so when it runs among the other events does not matter: it loops over columns
    instead of being called once per event.
    """
    if not kinds:
        raise ValueError("on() needs at least one kind")
    if fold and columns is None:
        raise ValueError("a fold handler takes columns")
    for option, names in (("ints", ints), ("objects", objects)):
        if names and (columns is None or not set(names) <= set(columns)):
            raise ValueError(f"{option} {names} must be among the columns {columns}")
    if set(ints) & set(objects):
        raise ValueError(f"a column is either an int or an object, not both: {sorted(set(ints) & set(objects))}")
    for name in columns or ():
        if name in ("run_id", "kind", "seq"):
            raise ValueError(f"{name} is not a column a handler takes: the handler's kind and seq say it")

    def mark(method: Callable) -> Callable:
        method._on = (*getattr(method, "_on", ()), (kinds, columns, tuple(ints), fold, tuple(objects)))
        return method

    return mark


class Dispatch:
    """A sink that reads the run log through the handlers its class declares with :func:`on`.

    :attr:`handlers` (kind -> :class:`Handler`) and :attr:`kinds` are gathered from the class and its bases
    when the class is made; a subclass may declare a kind again to replace its base's handler.
    """

    #: Kind -> what the sink does with it (gathered from the :func:`on` declarations).
    handlers: Mapping[str, Handler] = {}
    #: The kinds the sink reads (the recorder hands it no others).
    kinds: frozenset[str] = frozenset()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        handlers: dict[str, Handler] = {}
        for klass in reversed(cls.__mro__):
            for name, value in vars(klass).items():
                for kinds, columns, ints, fold, objects in getattr(value, "_on", ()):
                    for kind in kinds:
                        handlers[kind] = Handler(name, columns, ints, fold, objects)
        cls.handlers = handlers
        cls.kinds = frozenset(handlers)

    def write(self, row: dict) -> None:
        """Hand one run-log row (a dict with every column, None for a null) to its kind's handler."""
        handler = self.handlers.get(row["kind"])
        if handler is None:
            return
        method = getattr(self, handler.name)
        if handler.columns is None:
            method(row)
            return
        ints, objects = handler.ints, handler.objects
        values = [_int(row.get(name)) if name in ints else detail_object(row.get(name)) if name in objects
                  else row.get(name) for name in handler.columns]
        if handler.fold:
            method([int(row["seq"])], *([value] for value in values))
        else:
            method(int(row["seq"]), *values)

    def write_batch(self, batch) -> None:
        """Hand every row of ``batch`` (a :class:`~milvus_edu.events.recorder.RowBatch`) of :attr:`kinds` to its
        handler, in ``seq`` order, reading declared columns from the buffered tuples."""
        parts = []
        folds: dict[Handler, list] = {}  # fold handler -> its groups, as (layout, tuples)
        for layout, values in batch.groups.items():
            handler = self.handlers.get(layout.kind)
            if handler is None or not values:
                continue
            method = getattr(self, handler.name)
            if handler.fold:
                folds.setdefault(handler, []).append((layout, values))
            elif handler.columns is None:
                parts.append(zip(map(_first, values), repeat(method), zip(batch.group_rows(layout))))
            elif handler.ints and not _plain_ints(layout, values, handler.ints):
                # the dicts convert the values ``write`` converts; then as write would call the handler
                parts.append(zip(map(_first, values), repeat(self.write), zip(batch.group_rows(layout))))
            elif handler.objects:  # each tuple extended with the padding None and its objects, then read
                objects = [batch.objects(layout, name) if name in layout.positions else repeat({})
                           for name in handler.objects]
                extended = map(tuple.__add__, values, zip(repeat(None), *objects))
                parts.append(zip(map(_first, values), repeat(method), map(_object_reader(layout, handler), extended)))
            else:
                parts.append(zip(map(_first, values), repeat(method), map(_reader(layout, handler.columns), values)))
        for handler, groups in folds.items():
            columns = _fold_columns(handler, groups)
            for name in handler.objects:  # few rows of a few kinds: decoded here, not shared
                k = 1 + handler.columns.index(name)
                columns[k] = list(map(detail_object, columns[k]))
            getattr(self, handler.name)(*columns)
        if not parts:
            return
        if len(parts) == 1:
            items = parts[0]
        else:
            items = list(chain.from_iterable(parts))
            items.sort(key=_first)  # each group is in seq order: one sort merges the runs
        for _, method, args in items:
            method(*args)

    def close(self) -> None:
        """Nothing to release (the sink protocol)."""


def _int(value):
    return None if value is None else int(value)


def _fold_columns(handler: Handler, groups: list[tuple]) -> list[list]:
    """The seqs and the declared columns of a fold handler's groups (``(layout, tuples)``), in ``seq`` order,
    converted as :meth:`Dispatch.write` converts them."""
    if len(groups) == 1:
        layout, values = groups[0]
        out = [list(map(_first, values))]
        for name in handler.columns:
            i = layout.positions.get(name)
            out.append([None] * len(values) if i is None else list(map(itemgetter(i), values)))
    else:  # several layouts of the kind: merge them by seq
        rows = sorted(chain.from_iterable(map(_reader(layout, handler.columns), values) for layout, values in groups),
                      key=_first)
        out = list(map(list, zip(*rows)))
    for k, name in enumerate(handler.columns, 1):
        if name in handler.ints and not _INT_OR_NONE.issuperset(map(type, out[k])):
            out[k] = list(map(_int, out[k]))
    return out


_first = itemgetter(0)  # a buffered tuple is (seq, t_ms, node, *values)
_INT_OR_NONE = frozenset({int, type(None)})
_readers: dict[tuple, Callable] = {}  # (layout names, columns) -> getter of (seq, *columns) from a tuple


class _Padded:
    """An ``itemgetter`` that reads a column the layout lacks as None (the tuple has no such position)."""

    __slots__ = ("getter", "missing")

    def __init__(self, where: list[int], missing: int):
        self.getter = itemgetter(*where)
        self.missing = missing

    def __call__(self, values: tuple) -> tuple:
        return self.getter((*values, None))


def _seq_only(values: tuple) -> tuple:
    return (values[0],)


def _reader(layout, columns: tuple[str, ...]) -> Callable[[tuple], tuple]:
    """A function of a buffered tuple of ``layout``: ``(seq, *the values of columns)``, None for a column the
    layout does not have (as in its row dict)."""
    key = (layout.names, columns)
    reader = _readers.get(key)
    if reader is None:
        missing = 3 + len(layout.names)  # the index of the padding None
        where = [0, *(layout.positions.get(name, missing) for name in columns)]
        if len(where) == 1:
            reader = _seq_only  # itemgetter of one index gives the value, not a tuple
        else:
            reader = _Padded(where, missing) if missing in where else itemgetter(*where)
        _readers[key] = reader
    return reader


def _object_reader(layout, handler: Handler) -> Callable[[tuple], tuple]:
    """A function of a buffered tuple of ``layout`` extended with ``(None, *the handler's objects)``:
    ``(seq, *the values of its columns)``, each object column read from the extension."""
    key = (layout.names, handler.columns, handler.objects)
    reader = _readers.get(key)
    if reader is None:
        missing = 3 + len(layout.names)  # the index of the padding None, then the objects
        at = {name: missing + 1 + j for j, name in enumerate(handler.objects)}
        reader = _readers[key] = itemgetter(0, *(at.get(name) or layout.positions.get(name, missing)
                                                 for name in handler.columns))
    return reader


def _plain_ints(layout, values: list[tuple], names: tuple[str, ...]) -> bool:
    """Whether every value of the columns ``names`` of a group is an int or None."""
    for name in names:
        i = layout.positions.get(name)
        if i is not None and not _INT_OR_NONE.issuperset(map(type, map(itemgetter(i), values))):
            return False
    return True
