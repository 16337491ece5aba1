"""A broken invariant, as every checker reports it."""

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
