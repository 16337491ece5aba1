"""Clocks for driving components by hand.

Components take a ``now_ns()`` callable. The simulator passes a node's simulated clock, live mode
passes ``time.time_ns``; a unit test or a notebook passes a :class:`ManualClock` and moves it itself,
exactly as Milvus's Go tests step a component.
"""

from __future__ import annotations

T0 = 1_700_000_000_123_456_789  # a Unix instant in ns, deliberately not a whole millisecond


class ManualClock:
    """A clock whose reading (Unix ns) only changes when you say so."""

    def __init__(self, t: int = T0):
        self.t = int(t)

    def __call__(self) -> int:
        return self.t

    def advance(self, ns: int) -> None:
        """Move the clock by ``ns`` nanoseconds (negative goes back, like an NTP step)."""
        self.t += int(ns)

    def set(self, t: int) -> None:
        """Set the reading to ``t`` Unix nanoseconds."""
        self.t = int(t)
