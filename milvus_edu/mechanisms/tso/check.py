"""TSO invariants, checked on the run log alone.

1. **Global monotonicity** - every batch that rootcoord hands out (``rootcoord.alloc_timestamp``, in
   log order) starts strictly after the end of every earlier batch, across failovers.
2. **Per-client monotonicity** - the timestamps each client receives strictly increase.
3. **Window** - every allocation's physical part is below the window end saved in the KV
   (``physical < saved``, the invariant stated in ``internal/tso/tso.go``).

A violation is explained as "Let ... Then ... because ..." naming the events involved (by ``seq``).

:class:`TSOChecker` reads rows one at a time with state proportional to the number of clients, so
it can run as a recorder sink during a long simulation; :func:`check_tso` runs it over a DataFrame.
"""

from __future__ import annotations

import pandas as pd

from ...check.violation import StreamingChecker, Violation
from ...events.dispatch import on
from ...narrate import ts_text, wall_text


INVARIANTS = ("global-monotonic", "client-monotonic", "window")


class TSOChecker(StreamingChecker):
    """Streaming check of the three TSO invariants; keeps at most ``limit`` violations per invariant."""

    invariants = INVARIANTS
    promises = {
        "global-monotonic": "every timestamp handed out is strictly greater than every earlier one",
        "client-monotonic": "each client's timestamps increased",
        "window": "no timestamp passed the saved window",
    }
    chances = {
        "global-monotonic": "a batch handed out after an earlier one",
        "client-monotonic": "a client's second timestamp",
        "window": "an allocation with a saved window end",
    }

    def __init__(self, limit: int = 20):
        super().__init__(limit)
        self._high: tuple[int, int, str] | None = None  # (last ts handed out, its seq, node)
        self._client_last: dict[str, tuple[int, int]] = {}

    @on("rootcoord.alloc_timestamp", columns=("node", "ts", "error", "count"), ints=("ts", "count"))
    def _alloc(self, seq: int, node: str, ts, error, count) -> None:
        if ts is not None and error is None:
            self._handed_out(seq, node, ts, count)

    @on("client.recv", columns=("node", "ts", "error", "peer"), ints=("ts",))
    def _recv(self, seq: int, node: str, ts, error, peer) -> None:
        if ts is None or error is not None:
            return
        prev = self._client_last.get(node)
        if prev is not None:
            self.tried["client-monotonic"] += 1
            if ts <= prev[0]:
                self._client_back(seq, node, ts, prev, peer)
        self._client_last[node] = (ts, seq)

    @on("tso.alloc", columns=("node", "ts", "error", "physical_ms", "window_end_ms"),
        ints=("ts", "physical_ms", "window_end_ms"))
    def _window(self, seq: int, node: str, ts, error, physical, end) -> None:
        if ts is None or error is not None or end is None:
            return
        self.tried["window"] += 1
        if physical >= end:
            self._window_passed(seq, node, physical, end)

    def _handed_out(self, seq: int, node: str, ts: int, count: int) -> None:
        """A batch of ``count`` timestamps from ``ts`` handed out by rootcoord."""
        last = ts + count - 1
        high = self._high
        if high is not None:
            self.tried["global-monotonic"] += 1
        if high is not None and ts <= high[0]:
            self._add("global-monotonic", (high[1], seq),
                      f"Let event {high[1] + 1:,} be {high[2]} handing out up to {ts_text(high[0])}, and event "
                      f"{seq + 1:,} be {node} handing out from {ts_text(ts)} later. Then a later timestamp is not "
                      f"greater than an earlier one, because {node}'s window did not start past everything "
                      f"already handed out.")
        if high is None or last > high[0]:
            self._high = (last, seq, node)

    def _client_back(self, seq: int, node: str, ts: int, prev: tuple[int, int], peer) -> None:
        self._add("client-monotonic", (prev[1], seq),
                  f"Let events {prev[1] + 1:,} and {seq + 1:,} be answers to {node}. Then {node} received "
                  f"{ts_text(ts)} after {ts_text(prev[0])}, because the second answer came from "
                  f"{peer}, whose timestamps were not above the first's.")

    def _window_passed(self, seq: int, node: str, physical: int, end: int) -> None:
        self._add("window", (seq,),
                  f"Let event {seq + 1:,} be {node} allocating on physical {wall_text(physical)}. Then it "
                  f"allocated at or past the saved window end {wall_text(end)}, because the "
                  f"window was not re-saved before the physical part reached it; a failover now could resume "
                  f"below these timestamps.")


def check_tso(events: pd.DataFrame, limit: int = 20) -> list[Violation]:
    """All TSO violations in a run (at most ``limit`` per invariant)."""
    return TSOChecker(limit).check_frame(events)
