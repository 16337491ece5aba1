"""TSO invariants, checked on the run log alone.

1. **Global monotonicity** - every batch that rootcoord hands out (``rootcoord.alloc_timestamp``, in
   log order) starts strictly after the end of every earlier batch, across failovers.
2. **Per-client monotonicity** - the timestamps each client receives strictly increase.
3. **Window** - every allocation's physical part is below the window end saved in the KV
   (``physical < saved``, the invariant stated in ``internal/tso/tso.go``).

A violation is explained as "Let ... Then ... because ..." naming the events involved (by ``seq``).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ..tsoutil import format_ts


@dataclass(frozen=True)
class Violation:
    """One broken invariant, with the events that show it."""

    invariant: str
    seqs: tuple[int, ...]
    explanation: str

    def to_dict(self) -> dict:
        """A JSON-ready dict."""
        return {"invariant": self.invariant, "seqs": list(self.seqs), "explanation": self.explanation}


def _ok(frame: pd.DataFrame, kind: str) -> pd.DataFrame:
    rows = frame[frame["kind"] == kind]
    return rows[rows["error"].isna() & rows["ts"].notna()]


def check_tso(events: pd.DataFrame, limit: int = 20) -> list[Violation]:
    """All TSO violations in a run (at most ``limit`` per invariant)."""
    out: list[Violation] = []
    allocs = _ok(events, "rootcoord.alloc_timestamp")
    prev = None
    n = 0
    for row in allocs.itertuples(index=False):
        first, last = int(row.ts), int(row.ts) + int(row.count) - 1
        if prev is not None and first <= prev[1] and n < limit:
            n += 1
            out.append(Violation(
                "global-monotonic", (prev[2], int(row.seq)),
                f"Let event {prev[2]} be {prev[3]} handing out up to {format_ts(prev[1])}, and event {row.seq} "
                f"be {row.node} handing out from {format_ts(first)} later. Then a later timestamp is not greater "
                f"than an earlier one, because {row.node}'s window did not start past everything already handed out.",
            ))
        if prev is None or last > prev[1]:
            prev = (first, last, int(row.seq), row.node)
    for client, rows in _ok(events, "client.recv").groupby("node", sort=True):
        last_ts, last_seq, m = None, None, 0
        for row in rows.itertuples(index=False):
            if last_ts is not None and int(row.ts) <= last_ts and m < limit:
                m += 1
                out.append(Violation(
                    "client-monotonic", (last_seq, int(row.seq)),
                    f"Let events {last_seq} and {row.seq} be answers to {client}. Then {client} received "
                    f"{format_ts(int(row.ts))} after {format_ts(last_ts)}, because the second answer came from "
                    f"{row.peer}, whose timestamps were not above the first's.",
                ))
            last_ts, last_seq = int(row.ts), int(row.seq)
    tso_allocs = _ok(events, "tso.alloc")
    bad = tso_allocs[tso_allocs["window_end_ms"].notna() & (tso_allocs["physical_ms"] >= tso_allocs["window_end_ms"])]
    for row in bad.head(limit).itertuples(index=False):
        out.append(Violation(
            "window", (int(row.seq),),
            f"Let event {row.seq} be {row.node} allocating on physical {row.physical_ms} ms. Then it allocated "
            f"at or past the saved window end {row.window_end_ms} ms, because the window was not re-saved "
            f"before the physical part reached it; a failover now could resume below these timestamps.",
        ))
    return out
