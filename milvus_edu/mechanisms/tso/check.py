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

from itertools import compress
from operator import ge

import pandas as pd

from ...narrate import ts_text
from ...check.violation import Read, StreamingChecker, Violation, batch_columns, column


INVARIANTS = ("global-monotonic", "client-monotonic", "window")
_KINDS = frozenset({"rootcoord.alloc_timestamp", "client.recv", "tso.alloc"})

# What the fast path (TSOChecker.write_batch) reads of each kind; the codes it dispatches on.
_ALLOC, _RECV, _WINDOW = range(3)
_READS = {
    "rootcoord.alloc_timestamp": Read(_ALLOC, ("node", "ts", "error", "count"), ints=("ts", "count")),
    "client.recv": Read(_RECV, ("node", "ts", "error", "peer"), ints=("ts",)),
    "tso.alloc": Read(_WINDOW, ("node", "ts", "error", "physical_ms", "window_end_ms"),
                      ints=("ts", "physical_ms", "window_end_ms")),
}


def _past_window(layout, values: list[tuple]) -> list[tuple]:
    """The ``tso.alloc`` tuples that may break the window (physical part at or past the saved end), found in C;
    :meth:`TSOChecker.write` adds nothing for the others."""
    if "window_end_ms" not in layout.positions:
        return []
    physical, end = column(layout, values, "physical_ms"), column(layout, values, "window_end_ms")
    if None in physical or None in end:
        return values  # let the loop judge each (as write does)
    return list(compress(values, map(ge, physical, end)))


class TSOChecker(StreamingChecker):
    """Streaming check of the three TSO invariants; keeps at most ``limit`` violations per invariant."""

    invariants = INVARIANTS
    #: The only kinds it reads (the recorder hands it no others).
    kinds = _KINDS
    #: What passing means, in one sentence (the CLI's report).
    promise = "every timestamp handed out is strictly greater than every earlier one, and none passed the saved window"
    chances = {
        "global-monotonic": "a batch handed out after an earlier one",
        "client-monotonic": "a client's second timestamp",
        "window": "an allocation with a saved window end",
    }

    def __init__(self, limit: int = 20):
        super().__init__(limit)
        self._high: tuple[int, int, str] | None = None  # (last ts handed out, its seq, node)
        self._client_last: dict[str, tuple[int, int]] = {}

    def write(self, row: dict) -> None:
        """Check one run-log row, as the recorder gives it (None for a null; :meth:`check_frame` reads a DataFrame)."""
        kind = row["kind"]
        if kind not in _KINDS:
            return
        ts = row.get("ts")
        if ts is None or row.get("error") is not None:
            return
        seq, node, ts = int(row["seq"]), row["node"], int(ts)
        if kind == "rootcoord.alloc_timestamp":
            self._handed_out(seq, node, ts, int(row["count"]))
        elif kind == "client.recv":
            prev = self._client_last.get(node)
            if prev is not None:
                self.tried["client-monotonic"] += 1
                if ts <= prev[0]:
                    self._client_back(seq, node, ts, prev, row.get("peer"))
            self._client_last[node] = (ts, seq)
        elif (end := row.get("window_end_ms")) is not None:
            self.tried["window"] += 1
            if int(row["physical_ms"]) >= int(end):
                self._window_passed(seq, node, int(row["physical_ms"]), int(row["window_end_ms"]))

    def write_batch(self, batch) -> None:
        """The recorder's fast path: what :meth:`write` does with each row of ``batch`` (a ``RowBatch``) of
        :attr:`kinds`, in ``seq`` order, reading the columns it needs straight from the batch's tuples (and
        only the ``tso.alloc`` rows that may break the window).

        It mirrors :meth:`write` branch by branch; ``tests/test_checker_fast.py`` proves both give the same
        violations and counts on real runs.
        """
        client_last = self._client_last
        for seq, code, columns in batch_columns(batch, _READS, {"tso.alloc": self._windows}):
            if code == _ALLOC:
                node, ts, error, count = columns
                if ts is not None and error is None:
                    self._handed_out(seq, node, ts, count)
            elif code == _RECV:
                node, ts, error, peer = columns
                if ts is not None and error is None:
                    prev = client_last.get(node)
                    if prev is not None:
                        self.tried["client-monotonic"] += 1
                        if ts <= prev[0]:
                            self._client_back(seq, node, ts, prev, peer)
                    client_last[node] = (ts, seq)
            elif code == _WINDOW:
                node, ts, error, physical, end = columns
                if ts is not None and error is None and end is not None and physical >= end:
                    self._window_passed(seq, node, physical, end)
            else:  # ROW: a layout whose values are not all ints where write converts them
                self.write(columns)

    def _windows(self, layout, values: list[tuple]) -> list[tuple]:
        """:func:`_past_window`, counting first the allocations ``write`` checks against a window (its chances)."""
        if "window_end_ms" in layout.positions:
            checked = zip(column(layout, values, "ts"), column(layout, values, "error"),
                          column(layout, values, "window_end_ms"))
            self.tried["window"] += sum(1 for ts, error, end in checked
                                        if ts is not None and error is None and end is not None)
        return _past_window(layout, values)

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
                  f"Let event {seq + 1:,} be {node} allocating on physical {physical} ms. Then it "
                  f"allocated at or past the saved window end {end} ms, because the "
                  f"window was not re-saved before the physical part reached it; a failover now could resume "
                  f"below these timestamps.")


def check_tso(events: pd.DataFrame, limit: int = 20) -> list[Violation]:
    """All TSO violations in a run (at most ``limit`` per invariant)."""
    return TSOChecker(limit).check_frame(events)
