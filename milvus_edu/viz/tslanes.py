"""Lanes on a timestamp axis: hybrid timestamps drawn by their physical part in seconds since the run start, on the
same scale as the x axis (simulated seconds), so a position that keeps up with time runs along the diagonal.

Shared by the lessons whose lanes draw timestamps (``milvus_edu/mechanisms/<lesson>/lanes.py``); the lane protocol
itself is :mod:`milvus_edu.viz.lanes`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.ticker import FuncFormatter

from ..tsoutil import LOGICAL_BITS
from .columns import natural
from .lanes import NO_DATA, Lane

#: Y tick labels of the timestamp lanes: the physical part in seconds since the run start.
SECONDS = FuncFormatter(lambda v, _pos=None: f"{v:g} s")


def physical_s(ts: np.ndarray, base: int) -> np.ndarray:
    """Physical parts of ``int64`` hybrid timestamps, in seconds since the run start ``base`` (ms)."""
    return ((np.asarray(ts, dtype=np.int64) >> LOGICAL_BITS) - base) / 1000.0


class PageY:
    """Keeps a timestamp lane's y range fitted to the page on show.

    With a paged stepper (``window_s``) a page of half a second would otherwise show its messages as a
    flat line in a y range of the whole run. Whenever the x limits change, the y range becomes that of
    the points on the page (a step line's value carried in from the left included), or ``full`` when
    the page shows the whole run.
    """

    def __init__(self, ax, full: tuple[float, float]):
        self.ax = ax
        self.full = full
        self.series: list[tuple[np.ndarray, np.ndarray, bool]] = []
        ax.set_ylim(*full)
        ax.callbacks.connect("xlim_changed", self.fit)

    def add(self, x, y, step: bool = False) -> None:
        """Points ``(x, y)`` in ascending ``x``; ``step``: a step line, whose last value before a page holds on it."""
        if len(x):
            self.series.append((np.asarray(x, dtype=float), np.asarray(y, dtype=float), step))

    def fit(self, _ax=None) -> None:
        """Set the y range for the current x limits."""
        x0, x1 = self.ax.get_xlim()
        lo, hi, whole = np.inf, -np.inf, True
        for x, y, step in self.series:
            a, b = int(np.searchsorted(x, x0, "left")), int(np.searchsorted(x, x1, "right"))
            whole = whole and a == 0 and b == len(x)
            if step and a > 0:
                a -= 1
            seg = y[a:b][np.isfinite(y[a:b])]
            if len(seg):
                lo, hi = min(lo, float(seg.min())), max(hi, float(seg.max()))
        if whole or not np.isfinite(lo):
            self.ax.set_ylim(*self.full)
            return
        pad = (hi - lo) * 0.08 or 0.02
        self.ax.set_ylim(lo - pad, hi + pad)


def vchannels_watched(events: pd.DataFrame, kind: str) -> list[str]:
    """The vchannels named by ``kind`` rows (a node's watch events), in natural order."""
    kinds = events["kind"].astype(str).to_numpy()
    return sorted({str(v) for v in events.loc[kinds == kind, "vchannel"].dropna()}, key=natural)


class VChannelSlotLane(Lane):
    """A lane about the ``slot``-th vchannel (natural order) of those the run's ``watch_kind`` rows name; a subclass
    draws it in ``draw(ax, events, vchannel)``. A run with fewer vchannels gets a note instead."""

    height_ratio = 1.2
    #: The kind of the rows naming the vchannels a node watches (set by each subclass).
    watch_kind: str

    def __init__(self, slot: int = 0):
        if slot < 0:
            raise ValueError(f"a vchannel slot counts from 0, got {slot}")
        self.slot = int(slot)
        self.name = f"vchannel {self.slot}"

    def setup(self, ax, events):
        self.tracks: list = []
        channels = vchannels_watched(events, self.watch_kind)
        ax.set_ylabel(self.name)
        if self.slot >= len(channels):
            ax.text(0.5, 0.5, f"this run has no vchannel #{self.slot}", transform=ax.transAxes, **NO_DATA)
            ax.set_yticks([])
            return
        self.draw(ax, events, channels[self.slot])
