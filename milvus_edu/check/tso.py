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

from ..narrate import ts_text
from .violation import StreamingChecker, Violation


INVARIANTS = ("global-monotonic", "client-monotonic", "window")
_KINDS = frozenset({"rootcoord.alloc_timestamp", "client.recv", "tso.alloc"})


class TSOChecker(StreamingChecker):
    """Streaming check of the three TSO invariants; keeps at most ``limit`` violations per invariant."""

    invariants = INVARIANTS
    #: The only kinds it reads (the recorder hands it no others).
    kinds = _KINDS
    #: What passing means, in one sentence (the CLI's report).
    promise = "every timestamp handed out is strictly greater than every earlier one, and none passed the saved window"

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
            last = ts + int(row["count"]) - 1
            high = self._high
            if high is not None and ts <= high[0]:
                self._add("global-monotonic", (high[1], seq),
                          f"Let event {high[1] + 1:,} be {high[2]} handing out up to {ts_text(high[0])}, and event "
                          f"{seq + 1:,} be {node} handing out from {ts_text(ts)} later. Then a later timestamp is not "
                          f"greater than an earlier one, because {node}'s window did not start past everything "
                          f"already handed out.")
            if high is None or last > high[0]:
                self._high = (last, seq, node)
        elif kind == "client.recv":
            prev = self._client_last.get(node)
            if prev is not None and ts <= prev[0]:
                self._add("client-monotonic", (prev[1], seq),
                          f"Let events {prev[1] + 1:,} and {seq + 1:,} be answers to {node}. Then {node} received "
                          f"{ts_text(ts)} after {ts_text(prev[0])}, because the second answer came from "
                          f"{row.get('peer')}, whose timestamps were not above the first's.")
            self._client_last[node] = (ts, seq)
        elif (end := row.get("window_end_ms")) is not None and int(row["physical_ms"]) >= int(end):
            self._add("window", (seq,),
                      f"Let event {seq + 1:,} be {node} allocating on physical {int(row['physical_ms'])} ms. Then it "
                      f"allocated at or past the saved window end {int(row['window_end_ms'])} ms, because the "
                      f"window was not re-saved before the physical part reached it; a failover now could resume "
                      f"below these timestamps.")


def check_tso(events: pd.DataFrame, limit: int = 20) -> list[Violation]:
    """All TSO violations in a run (at most ``limit`` per invariant)."""
    return TSOChecker(limit).check_frame(events)
