"""A broken invariant, as every checker reports it, and the base of the streaming checkers."""

from __future__ import annotations

from dataclasses import dataclass


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
    it may set :attr:`kinds`. The recorder feeds it by batch (:meth:`write_batch`).
    """

    invariants: tuple[str, ...] = ()
    promise: str = ""
    #: The kinds ``write`` reads (None: all); the recorder hands the checker no others.
    kinds: frozenset[str] | None = None

    def __init__(self, limit: int = 20):
        self.limit = limit
        self.violations: list[Violation] = []
        self.counts = {name: 0 for name in self.invariants}

    def _add(self, invariant: str, seqs: tuple[int, ...], text: str) -> None:
        """Count a violation; keep it while fewer than ``limit`` of its invariant are kept."""
        if self.counts[invariant] < self.limit:
            self.violations.append(Violation(invariant, seqs, text))
        self.counts[invariant] += 1

    def write_batch(self, batch) -> None:
        """The recorder's fast path: the subclass's ``write`` of each row of ``batch`` (a ``RowBatch``) of
        :attr:`kinds`, in order."""
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


def frame_rows(events) -> list[dict]:
    """The rows of a run-log DataFrame in ``seq`` order as dicts, every null (None, NA, NaN) as None."""
    frame = events.sort_values("seq", kind="stable")
    frame = frame.astype(object).where(frame.notna(), None)
    return frame.to_dict("records")
