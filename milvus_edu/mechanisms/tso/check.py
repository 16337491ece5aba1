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
from ...tsoutil import physical_time


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
        # (last ts handed out, its seq, node, (active, its seq) when that node was not the active, else None)
        self._high: tuple[int, int, str, tuple[str, int] | None] | None = None
        self._client_last: dict[str, tuple[int, int]] = {}
        self._active: tuple[str, int] | None = None  # the node that last became the active rootcoord, its seq
        # node -> (start physical ms, seq, the saved window end it found (ms, None: none), whether it loaded it)
        self._init: dict[str, tuple[int, int, int | None, bool]] = {}

    @on("session.active", columns=("node", "detail"), objects=("detail",))
    def _became_active(self, seq: int, node: str, detail) -> None:
        # only rootcoord's election decides who hands out timestamps (another role's active session does not)
        if str((detail or {}).get("key", "")).endswith("/rootcoord"):
            self._active = (node, seq)

    @on("tso.init", columns=("node", "physical_ms", "detail"), ints=("physical_ms",), objects=("detail",))
    def _started(self, seq: int, node: str, physical, detail) -> None:
        detail = detail or {}
        loaded = "ignored_window_end_ms" not in detail
        end = detail.get("loaded_window_end_ms" if loaded else "ignored_window_end_ms")
        self._init[node] = (physical, seq, None if end is None else int(end), loaded)

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
        deposed = self._active if self._active is not None and self._active[0] != node else None
        if high is not None:
            self.tried["global-monotonic"] += 1
        if high is not None and ts <= high[0]:
            self._add("global-monotonic", (high[1], seq),
                      f"Let event {high[1] + 1:,} be {high[2]} handing out up to {ts_text(high[0])}, and event "
                      f"{seq + 1:,} be {node} handing out from {ts_text(ts)} later. Then a later timestamp is not "
                      f"greater than an earlier one, because {self._why_back(node, high, deposed)}.")
        if high is None or last > high[0]:
            self._high = (last, seq, node, deposed)

    def _why_back(self, node: str, high, deposed) -> str:
        """Why ``node``'s batch is not above ``high``: a rootcoord that was no longer the active one handed out
        one of the two (Milvus's AllocTimestamp checks no lease), or ``node`` started below a saved window it
        did not load, or started past the saved window end that the earlier one had handed out past (it had not
        re-saved its window), or (what the log cannot tell apart further) its window started too low."""
        stale, stale_node = (deposed, node) if deposed is not None else (high[3], high[2])
        if stale is not None:
            return (f"{stale_node} was no longer the active rootcoord ({stale[0]} had become active at event "
                    f"{stale[1] + 1:,}) yet still handed out timestamps from the window it held: AllocTimestamp "
                    f"checks no lease and saveTimestamp no fencing, so two rootcoords served the same range")
        init = self._init.get(node)
        if init is not None and init[2] is not None and init[3] and physical_time(high[0]) >= init[2]:
            return (f"{high[2]} had handed out timestamps up to physical {wall_text(physical_time(high[0]))}, at or "
                    f"past the last window end saved in the KV ({wall_text(init[2])}): it had not re-saved its "
                    f"window; {node} loaded that end and started past it, at {wall_text(init[0])} (event "
                    f"{init[1] + 1:,}), as Milvus does")
        if init is not None and init[2] is not None and not init[3] and init[0] <= init[2]:
            return (f"{node} started its window at physical {wall_text(init[0])} (event {init[1] + 1:,}) without "
                    f"loading the saved window end {wall_text(init[2])}, which was above it and bounds everything "
                    f"handed out before")
        return f"{node}'s window did not start past everything already handed out"

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
