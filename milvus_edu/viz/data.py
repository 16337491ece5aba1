"""The run log as the stepper sees it: one sorted frame and per-event state precomputed once.

:func:`as_frame` turns what a caller hands the stepper (a DataFrame, a run folder or file, a
:class:`~milvus_edu.sim.run.RunResult`, a list of row dicts) into one DataFrame in ``seq`` order whose
row positions are the stepper's cursor indices.

:class:`RunIndex` holds the columns as lists and the positions of every kind, and asks the run's
mechanisms (:func:`run_mechanisms`) for their panels: each walks the log once and keeps, for every
position ``i``, its state *after* event ``i``, so :meth:`RunIndex.state` is O(1). Everything comes
from the events' own columns; no model logic is re-run.
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from ..events import EVENT_KINDS, FIELD_NAMES, load_run, rows_to_frame
from ..narrate import describe, detail_dict, wall_text
from ..registry import Mechanism, get_scenario, mechanisms_in, scenario_mechanisms

#: Columns a frame needs before the stepper can order and place its events.
REQUIRED_COLUMNS = ("seq", "t_ms", "node", "kind")


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
    # A shallow copy: the caller's frame is never changed, and a million-row log is not copied.
    frame = frame.copy(deep=False)
    for name in FIELD_NAMES:
        if name not in frame.columns:
            frame[name] = pd.NA
    if not frame["seq"].is_monotonic_increasing:
        frame = frame.sort_values("seq", kind="stable")
    if not isinstance(frame.index, pd.RangeIndex) or frame.index.start != 0 or frame.index.step != 1:
        frame = frame.reset_index(drop=True)
    return frame


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


def run_mechanisms(frame: pd.DataFrame) -> tuple[Mechanism, ...]:
    """The mechanisms a run log is about, its lesson's first.

    The scenario named by the log's ``run.start`` event decides when it is registered; otherwise
    (a log from elsewhere, or without ``run.start``) every registered mechanism that owns a kind in it.
    """
    starts = frame.index[frame["kind"].astype(str) == "run.start"]
    if len(starts):
        scenario = detail_dict(frame.at[starts[0], "detail"]).get("scenario")
        try:
            return scenario_mechanisms(get_scenario(scenario))
        except ValueError:
            pass
    return mechanisms_in(frame["kind"].astype(str).unique())


class RunIndex:
    """Per-event state of one run log, computed in one pass; every lookup by position is O(1)."""

    def __init__(self, frame: pd.DataFrame, mechanisms: tuple[Mechanism, ...] | None = None):
        self.frame = frame
        self.n = len(frame)
        #: Columns as lists by name, made on first use (a million-row log has two dozen columns).
        self.cols = _Columns(frame)
        self.t_ms = frame["t_ms"].to_numpy(dtype=float, na_value=np.nan)
        self.kinds: list[str] = [str(k) for k in self.cols["kind"]]
        self.base_ms = clock_base_ms(frame)
        self.run_id = next((r for r in self.cols.get("run_id", []) if r), "")

        codes, names = pd.factorize(np.asarray(self.kinds, dtype=object))
        order = np.argsort(codes, kind="stable")
        bounds = np.searchsorted(codes[order], np.arange(len(names) + 1))
        positions = {str(k): order[bounds[c]:bounds[c + 1]].astype(np.int64) for c, k in enumerate(names)}
        self.kind_positions = positions
        known = [k for k in EVENT_KINDS if k in positions]
        self.kinds_present: list[str] = known + sorted(k for k in positions if k not in EVENT_KINDS)
        #: The mechanisms this view is about (the lesson's first); their panels fill the state panel.
        self.mechanisms = run_mechanisms(frame) if mechanisms is None else tuple(mechanisms)
        self.panels = [m.panel(self) for m in self.mechanisms[:1] if m.panel is not None]

    def row(self, i: int) -> dict:
        """Event ``i`` as a dict of the schema's columns (``None`` for nulls)."""
        # From the cached column lists: a pandas row lookup costs half a millisecond, too slow for the
        # hundreds of panels a stepper window builds at once.
        cols = self.cols
        return {name: cols[name][i] for name in cols.names}

    def next_of_kind(self, kind: str, after: int) -> int | None:
        """Position of the first event of ``kind`` after position ``after``, or ``None``."""
        pos = self.kind_positions.get(kind)
        if pos is None:
            return None
        k = int(np.searchsorted(pos, after, side="right"))
        return int(pos[k]) if k < len(pos) else None

    def state(self, i: int) -> dict:
        """What the state panel shows at position ``i``: the event, and each panel's state after it."""
        row = self.row(i)
        out = {
            "index": i,
            "events": self.n,
            "seq": int(row["seq"]),
            "sim_time_ms": float(self.t_ms[i]),
            "kind": self.kinds[i],
            "node": row["node"],
            "event": describe(row),
        }
        for panel in self.panels:
            out.update(panel.state(i))
        return out

    def panel_rows(self, state: dict) -> list[tuple[str, str]]:
        """Every panel's ``(label, html)`` rows for ``state`` (from :meth:`state`)."""
        return [r for panel in self.panels for r in panel.rows(state)]

    def film_steps(self) -> list[int]:
        """Events worth a filmstrip picture, from the lesson's mechanism."""
        m = self.mechanisms[0] if self.mechanisms else None
        return list(m.film_steps(self)) if m is not None and m.film_steps is not None else []


class _Columns(dict):
    """``name -> column(frame, name)``, each made when first asked for."""

    def __init__(self, frame: pd.DataFrame):
        super().__init__()
        self.frame = frame
        self.names = [name for name in FIELD_NAMES if name in frame.columns]

    def __missing__(self, name: str) -> list:
        if name not in self.names:
            raise KeyError(name)
        values = self[name] = column(self.frame, name)
        return values

    def get(self, name: str, default=None):
        """The column ``name`` as a list, or ``default`` when the log has no such column."""
        return self[name] if name in self.names else default


def _natural(name) -> list:
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", str(name))]



class Snapshots:
    """A panel's state after each event of ``kinds``, replayed once so that a step is a lookup.

    ``apply(state, kind, row, detail)`` updates ``state`` (a fresh ``empty()``) for one event; ``row`` holds the
    event's ``columns`` and ``detail`` its parsed ``detail``. :meth:`at` gives the state at stepper position ``i``
    (``empty()`` before the first such event).
    """

    def __init__(self, index, kinds: Iterable[str], columns: Iterable[str], empty: Callable[[], dict],
                 apply: Callable[[dict, str, dict, dict], None]):
        cols, kind_at, columns = index.cols, index.kinds, tuple(columns)
        positions = sorted(int(p) for k in kinds for p in index.kind_positions.get(k, ()))
        self._empty = empty
        self._pos = np.asarray(positions, dtype=np.int64)
        self._snaps: list[dict] = []
        state = empty()
        for i in positions:
            apply(state, kind_at[i], {name: cols[name][i] for name in columns}, detail_dict(cols["detail"][i]))
            self._snaps.append(copy.deepcopy(state))

    def at(self, i: int) -> dict:
        """The state after the last event of ``kinds`` at or before position ``i``."""
        k = int(np.searchsorted(self._pos, i, side="right")) - 1
        return self._snaps[k] if k >= 0 else self._empty()
