"""A broken invariant, as every checker reports it, and the base of the streaming checkers.

Besides violations, a checker says what its run could not have shown: the invariants that never had a
chance to fail (:meth:`StreamingChecker.vacuous`), and the stalls it saw and explained as the expected
effect of a fault the scenario injected (:attr:`StreamingChecker.stalls`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..events.dispatch import Dispatch


@dataclass(frozen=True)
class Violation:
    """One broken invariant, with the events that show it (by ``seq``) and an explanation in words."""

    invariant: str
    seqs: tuple[int, ...]
    explanation: str

    def to_dict(self) -> dict:
        """A JSON-ready dict."""
        return {"invariant": self.invariant, "seqs": list(self.seqs), "explanation": self.explanation}


class StreamingChecker(Dispatch):
    """What every mechanism's checker shares: counting and keeping violations; it reads the log through
    the handlers it declares per kind (:mod:`milvus_edu.events.dispatch`).

    A subclass sets :attr:`invariants` (names, in report order) and :attr:`promises` (what passing
    means, a clause per invariant) and declares a handler per kind it reads (:func:`~milvus_edu.events.dispatch.on`),
    calling :meth:`_add` for each violation. To say which invariants a run tested, it names in :attr:`chances` what
    gives an invariant a chance to fail and counts each such event in :attr:`tried`
    (``self.tried[name] += 1`` where the invariant is checked): an invariant listed there and never
    tried is :meth:`vacuous`. An invariant not listed in :attr:`chances` is never reported vacuous.
    """

    invariants: tuple[str, ...] = ()
    #: Invariant -> what its passing means, a clause ("checkpoints never went back"): the CLI's report of a run that
    #: passed joins the clauses of the invariants the run tested, and of no other, so it never vouches for one that
    #: nothing in the run could have broken.
    promises: Mapping[str, str] = {}
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

    def check_frame(self, events) -> list[Violation]:
        """Run the checker over a run-log DataFrame (rows in ``seq`` order, nulls as None, as the recorder
        gives them), close it as a run closes its sinks (a checker may judge at close what needs the whole log),
        and return :meth:`result`."""
        return self.check_rows(frame_rows(events))

    def check_rows(self, rows: Iterable[dict]) -> list[Violation]:
        """:meth:`check_frame` for rows already made by :func:`frame_rows`: several checkers of one log share
        them, as a run's row sinks share each row (no checker changes a row it is given)."""
        for row in rows:
            self.write(row)
        self.close()
        return self.result()

    def result(self) -> list[Violation]:
        """Violations grouped by invariant (in :attr:`invariants` order), in log order within each."""
        order = {name: i for i, name in enumerate(self.invariants)}
        return sorted(self.violations, key=lambda v: (order[v.invariant], v.seqs))


def frame_rows(events) -> list[dict]:
    """The rows of a run-log DataFrame in ``seq`` order as dicts, every null (None, NA, NaN) as None.

    Built from the columns' lists of Python values, not with ``to_dict("records")``, which boxes every cell again
    (the columns hold Python values once cast to ``object``): the same dicts, values and types, in a fifth of the
    time (a 57,000-event flush run: 0.33 CPU s against 1.6)."""
    frame = events.sort_values("seq", kind="stable")
    frame = frame.astype(object).where(frame.notna(), None)
    names = list(frame.columns)
    return [dict(zip(names, values)) for values in zip(*(frame[name].tolist() for name in names))]

