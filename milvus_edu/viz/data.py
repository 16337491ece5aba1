"""The run log as the stepper sees it: one sorted frame and per-event state precomputed once.

:func:`as_frame` turns what a caller hands the stepper (a DataFrame, a run folder or file, a
:class:`~milvus_edu.sim.run.RunResult`, a list of row dicts) into one DataFrame in ``seq`` order whose
row positions are the stepper's cursor indices.

:class:`RunIndex` walks the log once and keeps, for every position ``i``, the state *after* event
``i``: which rootcoord holds the ACTIVE key, the window end last saved in etcd, the last timestamp
handed out, and every rootcoord's last known clock reading next to its TSO physical part.
:meth:`RunIndex.state` is then O(1). Everything comes from the events' own columns; no model logic is
re-run.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pandas as pd

from ..events import EVENT_KINDS, FIELD_NAMES, load_run, rows_to_frame
from ..narrate import describe, detail_dict, ts_text, wall_text

#: Columns a frame needs before the stepper can order and place its events.
REQUIRED_COLUMNS = ("seq", "t_ms", "node", "kind")
#: The session key that names the active rootcoord (used when a log does not say).
ACTIVE_KEY = "by-dev/meta/session/rootcoord"


def as_frame(events_or_path) -> pd.DataFrame:
    """The run log as a DataFrame in ``seq`` order with every schema column, positions 0..n-1.

    Accepts a DataFrame, a path (run folder, ``events.parquet`` or ``events.jsonl``, read with
    :func:`~milvus_edu.events.load_run`), anything with an ``events`` DataFrame attribute (a
    ``RunResult``) or a list of row dicts. Raises ``ValueError`` for a log with no events or without
    the columns ``seq``, ``t_ms``, ``node`` and ``kind``.
    """
    obj = events_or_path
    if isinstance(obj, pd.DataFrame):
        frame = obj
    elif isinstance(obj, (str, os.PathLike)):
        frame = load_run(Path(obj))
    elif isinstance(getattr(obj, "events", None), pd.DataFrame):
        frame = obj.events
    elif isinstance(obj, list) and all(isinstance(r, dict) for r in obj):
        frame = rows_to_frame(obj) if obj else pd.DataFrame(columns=list(FIELD_NAMES))
    else:
        raise TypeError(
            f"cannot read a run log from {type(obj).__name__}; pass a DataFrame, a run folder or "
            "events file path, a RunResult or a list of row dicts"
        )
    missing = [c for c in REQUIRED_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"not a run log: columns {missing} are missing (a run log has {list(FIELD_NAMES)})")
    if len(frame) == 0:
        raise ValueError(
            "the run log has no events, so there is nothing to step through; "
            "simulate a scenario first, e.g. milvus_edu.simulate('tso-failover', seed=1)"
        )
    frame = frame.copy()
    for name in FIELD_NAMES:
        if name not in frame.columns:
            frame[name] = pd.NA
    return frame.sort_values("seq", kind="stable").reset_index(drop=True)


def column(frame: pd.DataFrame, name: str) -> list:
    """A column as a Python list with ``None`` for nulls (fast O(1) access by position)."""
    return frame[name].to_numpy(dtype=object, na_value=None).tolist()


def clock_base_ms(frame: pd.DataFrame) -> int:
    """Run start on a wall clock: the first clock reading minus its simulated time (0 without one).

    Views plot physical parts and window ends relative to this, so ``0 s`` is "when the run began"
    on the clock of the first node that reported one.
    """
    clocks = frame["clock_ms"]
    has = clocks.notna().to_numpy()
    if not has.any():
        return 0
    i = int(np.argmax(has))
    return int(clocks.iloc[i]) - int(round(float(frame["t_ms"].iloc[i])))


hms = wall_text  # signed time since the run's time zero, as in the narration

#: Kinds whose ``physical_ms`` is the emitting rootcoord's TSO physical part after the event.
PHYSICAL_KINDS = frozenset(("tso.init", "tso.update", "tso.alloc", "tso.set", "tso.reset", "tso.alloc_retry"))


def gap_text(clock_ms, physical_ms) -> str:
    """How a clock reading compares with a TSO physical part, e.g. ``27.001 s behind its physical part``."""
    if physical_ms is None:
        return "no TSO physical part yet"
    d = int(clock_ms) - int(physical_ms)
    if d == 0:
        return f"equal to its physical part {wall_text(physical_ms)}"
    side = "behind" if d < 0 else "ahead of"
    return f"{abs(d) / 1000:.3f} s {side} its physical part {wall_text(physical_ms)}"


def clock_text(node, clock_ms, physical_ms) -> str:
    """``rootcoord-2 clock -00:00:15.000 (27.001 s behind its physical part 00:00:12.001)``."""
    return f"{node} clock {wall_text(clock_ms)} ({gap_text(clock_ms, physical_ms)})"


class RunIndex:
    """Per-event state of one run log, computed in one pass; every lookup by position is O(1)."""

    def __init__(self, frame: pd.DataFrame):
        self.frame = frame
        self.n = len(frame)
        self.cols = {name: column(frame, name) for name in FIELD_NAMES if name in frame.columns}
        self.t_ms = frame["t_ms"].to_numpy(dtype=float, na_value=np.nan)
        self.kinds: list[str] = [str(k) for k in self.cols["kind"]]
        self.base_ms = clock_base_ms(frame)
        self.run_id = next((r for r in self.cols.get("run_id", []) if r), "")

        positions: dict[str, list[int]] = {}
        for i, k in enumerate(self.kinds):
            positions.setdefault(k, []).append(i)
        self.kind_positions = {k: np.asarray(v, dtype=np.int64) for k, v in positions.items()}
        known = [k for k in EVENT_KINDS if k in positions]
        self.kinds_present: list[str] = known + sorted(k for k in positions if k not in EVENT_KINDS)

        self._precompute()

    def _precompute(self) -> None:
        c = self.cols
        active = None
        active_key = ACTIVE_KEY
        window_end = None
        last_ts = last_ts_node = None
        killed: tuple[str, ...] = ()
        self.active: list = [None] * self.n
        self.window_end_ms: list = [None] * self.n
        self.last_ts: list = [None] * self.n
        self.last_ts_node: list = [None] * self.n
        self.killed: list = [()] * self.n
        # Per node: (node, clock_ms, position of that reading, physical_ms or None), natural node order.
        # The tuple is rebuilt only when a reading or a physical part changes, else shared with i - 1.
        readings: dict[str, tuple] = {}
        physical: dict[str, int] = {}
        clocks: tuple = ()
        self.clocks: list = [()] * self.n
        clock_col, phys_col, node_col = c["clock_ms"], c["physical_ms"], c["node"]
        for i, kind in enumerate(self.kinds):
            node = node_col[i]
            changed = False
            if phys_col[i] is not None and kind in PHYSICAL_KINDS:
                physical[node] = int(phys_col[i])
                changed = node in readings
            if clock_col[i] is not None:
                readings[node] = (int(clock_col[i]), i)
                changed = True
            if changed:
                clocks = tuple((n, readings[n][0], readings[n][1], physical.get(n))
                               for n in sorted(readings, key=_natural))
            self.clocks[i] = clocks
            if kind == "session.active":
                active = c["active"][i] or c["node"][i]
                detail = detail_dict(c["detail"][i])
                active_key = detail.get("key", active_key)
                killed = tuple(k for k in killed if k != active)
            elif kind == "session.lost":
                detail = detail_dict(c["detail"][i])
                if detail.get("key") == active_key or (c["active"][i] is not None and c["active"][i] == active):
                    active = None
            elif kind == "tso.save":
                if c["window_end_ms"][i] is not None:
                    window_end = int(c["window_end_ms"][i])
            elif kind == "tso.alloc":
                if c["ts"][i] is not None:
                    last_ts, last_ts_node = int(c["ts"][i]), c["node"][i]
            elif kind == "fault.kill":
                if c["node"][i] not in killed:
                    killed = killed + (c["node"][i],)
            self.active[i] = active
            self.window_end_ms[i] = window_end
            self.last_ts[i] = last_ts
            self.last_ts_node[i] = last_ts_node
            self.killed[i] = killed

    def clock_info(self, i: int, reading: tuple) -> dict:
        """One entry of ``state()["clocks"]`` from a ``(node, clock_ms, position, physical_ms)`` tuple."""
        node, clock_ms, pos, physical_ms = reading
        return {
            "node": node,
            "clock_ms": clock_ms,
            "clock_text": wall_text(clock_ms),
            "physical_ms": physical_ms,
            "physical_text": wall_text(physical_ms) if physical_ms is not None else None,
            "clock_minus_physical_ms": clock_ms - physical_ms if physical_ms is not None else None,
            "read_index": pos,
            "read_t_ms": float(self.t_ms[pos]),
            "read_now": pos == i,
            "killed": node in self.killed[i],
            "text": clock_text(node, clock_ms, physical_ms),
        }

    def row(self, i: int) -> dict:
        """Event ``i`` as a dict of the schema's columns (``None`` for nulls)."""
        return {name: values[i] for name, values in self.cols.items()}

    def next_of_kind(self, kind: str, after: int) -> int | None:
        """Position of the first event of ``kind`` after position ``after``, or ``None``."""
        pos = self.kind_positions.get(kind)
        if pos is None:
            return None
        k = int(np.searchsorted(pos, after, side="right"))
        return int(pos[k]) if k < len(pos) else None

    def state(self, i: int) -> dict:
        """What the state panel shows at position ``i``: the state after event ``i``, and the event."""
        row = self.row(i)
        return {
            "index": i,
            "events": self.n,
            "seq": int(row["seq"]),
            "sim_time_ms": float(self.t_ms[i]),
            "kind": self.kinds[i],
            "node": row["node"],
            "active": self.active[i],
            "killed": list(self.killed[i]),
            "window_end_ms": self.window_end_ms[i],
            "last_ts": self.last_ts[i],
            "last_ts_text": ts_text(self.last_ts[i]) if self.last_ts[i] is not None else None,
            "last_ts_node": self.last_ts_node[i],
            "event": describe(row),
            "clock": next((self.clock_info(i, r) for r in self.clocks[i] if r[2] == i), None),
            "clocks": [self.clock_info(i, r) for r in self.clocks[i]],
        }


def _natural(name) -> list:
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", str(name))]

