"""The TSO's part of the stepper's state panel, and the events worth a filmstrip picture.

:class:`TSOPanel` reads the log once (vectorised: a run may hold a million events) and can give,
for every position ``i`` in O(1), the state *after* event ``i``: which rootcoord holds the ACTIVE key, the window end last saved in etcd, the last timestamp
handed out, and every rootcoord's last known clock reading next to its TSO physical part. Everything
comes from the events' own columns; no model logic is re-run.
"""

from __future__ import annotations

import html
import re

import numpy as np

from ...events.schema import SIM_EPOCH_MS
from ...narrate import detail_dict, ts_text, wall_text
from ...registry import Mark

#: The session key that names the active rootcoord (used when a log does not say).
ACTIVE_KEY = "by-dev/meta/session/rootcoord"
#: Kinds whose ``physical_ms`` is the emitting rootcoord's TSO physical part after the event.
PHYSICAL_KINDS = frozenset(("tso.init", "tso.update", "tso.alloc", "tso.set", "tso.reset", "tso.alloc_retry"))
_FAR_MS = 1000  # a clock this far (ms) from its TSO physical part is shown in red


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


def _natural(name) -> list:
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", str(name))]


def _ints(values: list) -> tuple[np.ndarray, np.ndarray]:
    """A column (list with ``None`` for nulls) as ``int64`` values (0 for nulls) and a presence mask."""
    has = np.fromiter((v is not None for v in values), dtype=bool, count=len(values))
    out = np.zeros(len(values), dtype=np.int64)
    if has.any():
        out[has] = np.asarray([int(v) for v, h in zip(values, has) if h], dtype=np.int64)
    return out, has


def _last_pos(mask: np.ndarray) -> np.ndarray:
    """For every position, the last position at or before it where ``mask`` holds (-1 before the first)."""
    return np.maximum.accumulate(np.where(mask, np.arange(len(mask), dtype=np.int64), np.int64(-1)))


class TSOPanel:
    """Per-event TSO state of one run log (see the module docstring); lookups by position are O(1)."""

    def __init__(self, index):
        self.index = index
        self._precompute()

    def _precompute(self) -> None:
        # Vectorised over the log (a run may hold a million events): per position, the position of
        # the latest event that set each value; the few session events are walked one by one.
        ix = self.index
        c = ix.cols
        kinds = np.asarray(ix.kinds, dtype=object)
        node = np.asarray([str(x) for x in c["node"]], dtype=object)
        clock, has_clock = _ints(c["clock_ms"])
        phys, has_phys = _ints(c["physical_ms"])
        self._clock, self._phys = clock, phys
        is_phys = np.isin(kinds, list(PHYSICAL_KINDS)) & has_phys
        readers = sorted({str(x) for x in node[has_clock]}, key=_natural)
        self._readings = {m: _last_pos(has_clock & (node == m)) for m in readers}
        self._physical = {m: _last_pos(is_phys & (node == m)) for m in readers}
        end, has_end = _ints(c["window_end_ms"])
        self._window_end = end
        self._save = _last_pos((kinds == "tso.save") & has_end)
        ts, has_ts = _ints(c["ts"])
        self._ts = ts
        self._alloc = _last_pos((kinds == "tso.alloc") & has_ts)
        self._node = node
        # Who holds the ACTIVE key and who was killed change only at these few events.
        active, active_key, killed = None, ACTIVE_KEY, ()
        changes, values = [], []
        for i in np.flatnonzero(np.isin(kinds, ["session.active", "session.lost", "fault.kill", "session.exit"])):
            kind = kinds[i]
            if kind == "session.active":
                active = c["active"][i] or c["node"][i]
                active_key = detail_dict(c["detail"][i]).get("key", active_key)
                killed = tuple(k for k in killed if k != active)
            elif kind == "session.lost":
                detail = detail_dict(c["detail"][i])
                if detail.get("key") == active_key or (c["active"][i] is not None and c["active"][i] == active):
                    active = None
            elif c["node"][i] not in killed:
                killed = killed + (c["node"][i],)
            changes.append(int(i))
            values.append((active, killed))
        self._changes = np.asarray(changes, dtype=np.int64)
        self._values = values

    def _session(self, i: int) -> tuple:
        k = int(np.searchsorted(self._changes, i, side="right")) - 1
        return self._values[k] if k >= 0 else (None, ())

    def _clocks(self, i: int) -> list[tuple]:
        """``(node, clock_ms, position of that reading, physical_ms or None)`` per node read by ``i``."""
        out = []
        for m, reads in self._readings.items():
            k = int(reads[i])
            if k >= 0:
                p = int(self._physical[m][i])
                out.append((m, int(self._clock[k]), k, int(self._phys[p]) if p >= 0 else None))
        return out

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
            "read_t_ms": float(self.index.t_ms[pos]),
            "read_now": pos == i,
            "killed": node in self._session(i)[1],
            "text": clock_text(node, clock_ms, physical_ms),
        }

    def state(self, i: int) -> dict:
        """The TSO keys of the stepper's ``state()`` at position ``i``."""
        active, killed = self._session(i)
        w, a = int(self._save[i]), int(self._alloc[i])
        last_ts = int(self._ts[a]) if a >= 0 else None
        clocks = self._clocks(i)
        return {
            "active": active,
            "killed": list(killed),
            "window_end_ms": int(self._window_end[w]) if w >= 0 else None,
            "last_ts": last_ts,
            "last_ts_text": ts_text(last_ts) if last_ts is not None else None,
            "last_ts_node": self._node[a] if a >= 0 else None,
            "clock": next((self.clock_info(i, r) for r in clocks if r[2] == i), None),
            "clocks": [self.clock_info(i, r) for r in clocks],
        }

    def _rel(self, ms) -> str:
        """`` (+15.001 s since run start)`` when the run's clocks do not start at the time zero, else ``""``."""
        if self.index.base_ms == SIM_EPOCH_MS:
            return ""
        return f" ({(int(ms) - self.index.base_ms) / 1000:+.3f} s since run start)"

    @staticmethod
    def _clock_line(c: dict) -> str:
        esc = html.escape
        gap = c["clock_minus_physical_ms"]
        far = gap is not None and abs(gap) >= _FAR_MS
        text = esc(c["text"])
        if far:
            text = f"<span style='color:#b3261e'>{text}</span>"
        if c["read_now"]:
            text = f"<b>{text}</b> &middot; <i>read at this event</i>"
        else:
            text += f" &middot; <span style='color:#666'>last read at {c['read_t_ms'] / 1000:.3f} s</span>"
        if c["killed"]:
            text += " <span style='color:#a33'>(killed)</span>"
        return text

    def rows(self, s: dict) -> list[tuple[str, str]]:
        """The panel's TSO rows as ``(label, html)`` for the state ``s`` at the cursor."""
        esc = html.escape
        active = s["active"]
        if active is None:
            active_txt = "<i>none</i> (the ACTIVE key is free)"
        else:
            active_txt = f"<b>{esc(active)}</b>"
            if active in s["killed"]:
                active_txt += " <span style='color:#a33'>(killed; its lease still holds the key)</span>"
        win = s["window_end_ms"]
        win_txt = f"{wall_text(win)}{self._rel(win)}" if win is not None else "<i>nothing saved yet</i>"
        ts_txt = (f"<code>{esc(s['last_ts_text'])}</code> by {esc(str(s['last_ts_node']))}"
                  if s["last_ts"] is not None else "<i>none yet</i>")
        return [
            ("active rootcoord", active_txt),
            ("saved window end", win_txt),
            ("last ts handed out", ts_txt),
            ("clocks", "<br>".join(self._clock_line(c) for c in s["clocks"]) or "<i>no clock reading yet</i>"),
        ]


def film_steps(index) -> list[int]:
    """Steps worth a picture: the first init, a window re-save, the fault, the new active's init, clock jumps,
    the first attempt GenerateTSO refused."""
    picks: list[int] = []
    first = index.next_of_kind
    init = first("tso.init", -1)
    if init is not None:
        picks.append(init)
        save = first("tso.save", init)
        if save is not None:
            picks.append(save)
    fault = first("fault.kill", -1)
    if fault is not None:
        picks.append(fault)
        new = first("session.active", fault)
        if new is not None:
            init2 = first("tso.init", new)
            picks.append(init2 if init2 is not None else new)
    jump = -1
    while (jump := first("fault.clock_jump", jump)) is not None:
        picks.append(jump)
    retry = first("tso.alloc_retry", -1)
    if retry is not None:
        picks.append(retry)
    return picks


def _active_key_label(row, detail):
    return "ACTIVE key expires" if detail.get("key", ACTIVE_KEY) == ACTIVE_KEY else None


#: How the events lane marks the TSO's session changes.
MARKS = {
    "session.active": Mark("#2ca02c", "-", lambda row, d: f"{row['node']} active"),
    "session.lost": Mark("0.45", ":", _active_key_label),
    "session.exit": Mark("#d62728", ":", lambda row, d: f"{row['node']} exits"),
}
