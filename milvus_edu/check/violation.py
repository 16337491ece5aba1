"""A broken invariant, as every checker reports it, the base of the streaming checkers, and the column
reader their fast paths share (:func:`batch_columns`).

Besides violations, a checker says what its run could not have shown: the invariants that never had a
chance to fail (:meth:`StreamingChecker.vacuous`), and the stalls it saw and explained as the expected
effect of a fault the scenario injected (:attr:`StreamingChecker.stalls`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from itertools import chain, repeat
from json import loads as _loads
from operator import add, itemgetter
from typing import NamedTuple

from ..narrate import detail_dict


@dataclass(frozen=True)
class Violation:
    """One broken invariant, with the events that show it (by ``seq``) and an explanation in words."""

    invariant: str
    seqs: tuple[int, ...]
    explanation: str

    def to_dict(self) -> dict:
        """A JSON-ready dict."""
        return {"invariant": self.invariant, "seqs": list(self.seqs), "explanation": self.explanation}


class StreamingChecker:
    """What every mechanism's checker shares: counting and keeping violations, and the sink protocol.

    A subclass sets :attr:`invariants` (names, in report order) and :attr:`promise` (what passing
    means, in one sentence) and implements ``write(row)``, calling :meth:`_add` for each violation;
    it may set :attr:`kinds`. To say which invariants a run tested, it names in :attr:`chances` what
    gives an invariant a chance to fail and counts each such event in :attr:`tried`
    (``self.tried[name] += 1`` where the invariant is checked): an invariant listed there and never
    tried is :meth:`vacuous`. An invariant not listed in :attr:`chances` is never reported vacuous. The recorder feeds it by batch (:meth:`write_batch`). ``write`` is the
    readable definition; a subclass may give ``write_batch`` a fast path that reads the batch's tuples
    (:func:`batch_columns`) and must leave it in exactly the state ``write`` of each row would
    (``tests/test_checker_fast.py`` compares them).
    """

    invariants: tuple[str, ...] = ()
    promise: str = ""
    #: The kinds ``write`` reads (None: all); the recorder hands the checker no others.
    kinds: frozenset[str] | None = None
    #: Invariant -> what gives it a chance to fail, in words ("a Session read was answered"); only the
    #: invariants listed here are counted in :attr:`tried` and may be reported :meth:`vacuous`.
    chances: Mapping[str, str] = {}
    #: The invariants that promise progress (liveness), not safety: a run whose parameters or options stop
    #: progress breaks only these, and the CLI reports that as what the run shows, not as a model bug.
    progress: frozenset[str] = frozenset()

    def __init__(self, limit: int = 20):
        self.limit = limit
        self.violations: list[Violation] = []
        self.counts = {name: 0 for name in self.invariants}
        #: Invariant (of :attr:`chances`) -> events of this run that gave it a chance to fail.
        self.tried = {name: 0 for name in self.chances}
        #: Stalls seen and explained as the expected effect of an injected fault (not violations):
        #: JSON-ready dicts with at least ``what``, ``from_ms``, ``to_ms`` (None: still stalled at the end)
        #: and ``explanation``.
        self.stalls: list[dict] = []

    def configure(self, config) -> None:
        """Take the run's :class:`~milvus_edu.config.Config` (the bounds of progress checks come from its
        Milvus parameters). A checker made without it uses Milvus's defaults; the base needs nothing."""

    def vacuous(self) -> list[str]:
        """The invariants of :attr:`chances` that nothing in this run gave a chance to fail, in
        :attr:`invariants` order: passing them shows nothing."""
        return [name for name in self.invariants if name in self.tried and not self.tried[name]]

    def _add(self, invariant: str, seqs: tuple[int, ...], text: str) -> None:
        """Count a violation; keep it while fewer than ``limit`` of its invariant are kept."""
        if self.counts[invariant] < self.limit:
            self.violations.append(Violation(invariant, seqs, text))
        self.counts[invariant] += 1

    def write_batch(self, batch) -> None:
        """The recorder's fast path: the subclass's ``write`` of each row of ``batch`` (a ``RowBatch``) of
        :attr:`kinds`, in order (a subclass may do the same faster)."""
        for row in batch.rows(self.kinds):
            self.write(row)

    def close(self) -> None:
        """Nothing to release (the sink protocol)."""

    def check_frame(self, events) -> list[Violation]:
        """Run the checker over a run-log DataFrame (rows in ``seq`` order, nulls as None, as the recorder
        gives them) and return :meth:`result`."""
        for row in frame_rows(events):
            self.write(row)
        return self.result()

    def result(self) -> list[Violation]:
        """Violations grouped by invariant (in :attr:`invariants` order), in log order within each."""
        order = {name: i for i, name in enumerate(self.invariants)}
        return sorted(self.violations, key=lambda v: (order[v.invariant], v.seqs))


class Read(NamedTuple):
    """How a fast ``write_batch`` reads the rows of one kind (see :func:`batch_columns`)."""

    #: What the items of this kind carry as their code (a small int the loop dispatches on).
    code: int
    #: The columns to read, in this order: one name gives the value itself, several a tuple. None: the
    #: items carry the row dicts (code :data:`ROW`), for a kind too rare to be worth reading by columns.
    columns: tuple[str, ...] | None = None
    #: Columns the readable ``write`` converts with ``int()``: a layout is read from its tuples only when
    #: every value of these columns in the batch is an ``int`` or None (so ``int()`` would change nothing).
    ints: tuple[str, ...] = ()


#: The code of an item that carries the row dict instead of columns, for ``write``: its kind is read as rows
#: (``Read(ROW)``), or its layout's values in this batch are not all plain ints where ``write`` converts them.
ROW = -1

_first = itemgetter(0)  # a buffered tuple is (seq, t_ms, node, *values)
_PAD = (None,)  # appended to a tuple whose layout lacks a column that is read: the column reads None
_INT_OR_NONE = frozenset({int, type(None)})
_readers: dict[tuple, tuple] = {}  # (layout names, columns) -> (getter, pad?)


def _reader(layout, columns: tuple[str, ...]):
    """An ``itemgetter`` of ``columns`` from the tuples of ``layout``, and whether they need :data:`_PAD`."""
    key = (layout.names, columns)
    reader = _readers.get(key)
    if reader is None:
        missing = 3 + len(layout.names)  # the index of the padding None
        for name in columns:
            if name in ("run_id", "kind"):
                raise ValueError(f"{name} is not in a buffered row: the batch and the item's code say it")
        where = [layout.positions.get(name, missing) for name in columns]
        reader = _readers[key] = (itemgetter(*where), missing in where)
    return reader


def _plain_ints(layout, values: list[tuple], names: tuple[str, ...]) -> bool:
    """Whether every value of the columns ``names`` of a group is an int or None."""
    for name in names:
        i = layout.positions.get(name)
        if i is not None and not _INT_OR_NONE.issuperset(map(type, map(itemgetter(i), values))):
            return False
    return True


def batch_columns(batch, reads: Mapping[str, Read],
                  keep: Mapping[str, Callable[[object, list[tuple]], list[tuple]]] | None = None) -> list[tuple]:
    """The rows of ``batch`` (a ``RowBatch``) whose kind is in ``reads``, in ``seq`` order, as
    ``(seq, code, columns)``: the kind's :attr:`Read.code` and the values of its :attr:`Read.columns`
    (None for a column the row's layout does not have, as in its row dict).

    This is what a fast ``write_batch`` loops over instead of :meth:`RowBatch.rows`: the columns are taken
    from the buffered tuples by ``itemgetter`` and the kinds' groups are merged by one sort (each group is
    already in ``seq`` order), all in C, and no row dict is built. Two things differ from a row dict, and
    the caller handles them: ``detail`` is the value as emitted (a flat dict, a JSON text or None; read it
    with :func:`detail_of`), and a value is not converted. A kind read as rows (``Read(ROW)``), and a group
    whose :attr:`Read.ints` columns hold something other than ints, come as ``(seq, ROW, row dict)`` items
    (the dicts :meth:`RowBatch.rows` gives), for ``write``.

    ``keep`` may name, for a kind, a function ``(layout, tuples) -> tuples`` that drops the buffered tuples
    of a group (already checked for :attr:`Read.ints`) which the caller knows ``write`` would ignore; it
    returns the others, in order.
    """
    parts = []
    for layout, values in batch.groups.items():
        read = reads.get(layout.kind)
        if read is None or not values:
            continue
        if read.columns is None or (read.ints and not _plain_ints(layout, values, read.ints)):
            rows = batch.group_rows(layout)  # the dicts rows() gives (built once per batch)
            parts.append(list(zip(map(_first, values), repeat(ROW), rows)))
            continue
        if keep is not None and layout.kind in keep:
            values = keep[layout.kind](layout, values)
            if not values:
                continue
        getter, pad = _reader(layout, read.columns)
        parts.append(list(zip(map(_first, values), repeat(read.code),
                              map(getter, map(add, values, repeat(_PAD)) if pad else values))))
    if len(parts) == 1:
        return parts[0]
    merged = list(chain.from_iterable(parts))
    merged.sort()  # by seq (unique, so the rest of an item is never compared); merges the groups' runs
    return merged


def column(layout, values: list[tuple], name: str) -> list:
    """The values of column ``name`` in the buffered tuples ``values`` of ``layout`` (None if it lacks the column)."""
    i = layout.positions.get(name)
    return [None] * len(values) if i is None else list(map(itemgetter(i), values))


def detail_of(raw) -> dict:
    """``detail_dict`` of the text a row dict holds for the emitted ``detail`` value ``raw``.

    The recorder keeps a ``detail`` dict in a batch only when it is flat (it encodes any other at once), and
    encodes it as JSON with sorted keys (``encode_detail``), which reads back as the same items in sorted key
    order; a text is kept as it is (and parsed here as ``detail_dict`` does). ``tests/test_checker_fast.py``
    checks both on random dicts.
    """
    kind = type(raw)
    if kind is str:
        if not raw:
            return {}
        try:
            parsed = _loads(raw)
        except ValueError:
            return {}
        return parsed if type(parsed) is dict else {}
    if kind is dict:
        return dict(sorted(raw.items())) if raw else {}
    return detail_dict(raw)


def frame_rows(events) -> list[dict]:
    """The rows of a run-log DataFrame in ``seq`` order as dicts, every null (None, NA, NaN) as None."""
    frame = events.sort_values("seq", kind="stable")
    frame = frame.astype(object).where(frame.notna(), None)
    return frame.to_dict("records")
