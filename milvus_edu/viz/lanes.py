"""Lanes: horizontal strips of the timeline, one mechanism each, registered by a list.

A lane is a small plug-in. The stepper gives every lane its own matplotlib ``Axes`` (all lanes share
the x axis: simulated time in **seconds**, ``t_ms / 1000``) and the run log as a DataFrame in ``seq``
order, whose row positions are the cursor indices:

* :meth:`Lane.setup` runs once: precompute arrays from the events and draw the static artists (they
  are drawn once into the cached background).
* :meth:`Lane.update` runs on every step: move the lane's cursor artists in place (``set_data``,
  ``set_xy``, ``set_visible``...) and return them. The stepper marks the returned artists animated
  (so they are left out of the cached background) and blits them. Return the *same* artists every
  time; create nothing here.

Lanes read events only, never live objects, and know nothing about each other. This module holds
the base class, the helpers lanes share and the :class:`EventsLane`; each mechanism brings its own
lanes (:attr:`milvus_edu.registry.Mechanism.lanes`), and a caller may mix them::

    TimelineStepper(run.events, lanes=my_mechanism.lanes() + [MyLane(), EventsLane()])

A lane must be deep-copyable before :meth:`~Lane.setup` (a plain Python object holding its options):
:meth:`TimelineStepper.to_static` draws each filmstrip panel with a fresh copy.

A legend a lane draws on its axes (``ax.legend(...)``) is moved out of the axes by the stepper and
the filmstrip into one legend above the lanes, so it never hides data or the cursor. Give text a
relative size (``fontsize="small"``) rather than points: the stepper and the filmstrip set their own
font sizes (:data:`~milvus_edu.viz.render.RC`, :data:`~milvus_edu.viz.render.FILM_RC`).
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from ..narrate import detail_dict
from ..registry import Mark, marks

__all__ = [
    "Lane", "EventsLane", "Track", "node_colors", "natural", "num", "compact", "cursor_dot", "move_dot", "move_all", "move_rings",
    "rasterize_if_big", "renderer_of", "NO_DATA", "CORE_MARKS", "CURSOR_ZORDER",
]

#: More points than this in one static collection are rasterised in SVG exports (keeps files small).
RASTERIZE_ABOVE = 3000

_PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22")
NO_DATA = dict(ha="center", va="center", color="0.55", fontsize="small", style="italic")
#: The zorder of the stepper's time cursor line (:func:`milvus_edu.viz.render.build_column`; its veil is under it). A
#: lane's label that the cursor must not cross is a cursor artist above it: returned by :meth:`Lane.update`, it is
#: drawn after the line in the stepper (and the browser), and over it by this zorder in the filmstrip.
CURSOR_ZORDER = 7


class Lane:
    """Base class of a timeline lane. Subclasses set :attr:`name`, :attr:`height_ratio` and override
    :meth:`setup` and :meth:`update`."""

    #: Shown as the lane's y label.
    name: str = "lane"
    #: Relative height of the lane in the figure.
    height_ratio: float = 1.0

    def setup(self, ax, events: pd.DataFrame) -> None:
        """Precompute from ``events`` and draw the static artists on ``ax`` (called once)."""

    def update(self, cursor_index: int, t_ms: float):
        """Move the cursor artists to event ``cursor_index`` (at ``t_ms``) and return them."""
        return ()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


# ----------------------------------------------------------------------------------------- helpers


def natural(name: str):
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", str(name))]


def node_colors(names) -> dict[str, str]:
    """A stable colour per node name (the same run always gets the same colours)."""
    return {n: _PALETTE[i % len(_PALETTE)] for i, n in enumerate(names)}


def num(series: pd.Series) -> np.ndarray:
    return series.to_numpy(dtype=float, na_value=np.nan)


class Track:
    """Points of one series with the cursor positions they belong to: which one is current?"""

    def __init__(self, positions, x, y):
        self.pos = np.asarray(positions, dtype=np.int64)
        self.x = np.asarray(x, dtype=float)
        self.y = np.asarray(y, dtype=float)

    def at(self, cursor: int) -> int:
        """Index of the last point at or before ``cursor``, or -1."""
        return int(np.searchsorted(self.pos, cursor, side="right")) - 1

    def __len__(self) -> int:
        return len(self.pos)


def compact(value, _pos=None) -> str:
    """Tick labels that stay narrow: 150000 -> 150k."""
    return f"{value / 1000:g}k" if abs(value) >= 10_000 else f"{value:g}"


def cursor_dot(ax, color, size=7, marker="o", **kw):
    (dot,) = ax.plot([], [], marker=marker, ms=size, mfc=color, mec="black", mew=0.8, ls="none", zorder=6, **kw)
    return dot


def _on_page(ax, x: float) -> bool:
    """Is ``x`` within the x limits ``ax`` shows? (A point on an earlier page of a paged view is not: a marker
    there would be drawn cut in half at the lane's left edge.)"""
    if ax is None:
        return True
    lo, hi = sorted(ax.get_xlim())
    return lo <= x <= hi


def move_dot(dot: Line2D, track: Track, cursor: int) -> None:
    """Put ``dot`` on ``track``'s point at ``cursor``; hidden when the track has none yet or it is off the page."""
    k = track.at(cursor)
    if k < 0 or not _on_page(dot.axes, track.x[k]):
        dot.set_visible(False)
    else:
        dot.set_data([track.x[k]], [track.y[k]])
        dot.set_visible(True)


def move_all(tracks, cursor: int) -> list:
    """Move every ``(track, dot)`` cursor dot to ``cursor``; return the dots (the artists to blit)."""
    for track, dot in tracks:
        move_dot(dot, track, cursor)
    return [dot for _, dot in tracks]


def move_rings(dots: Line2D, tracks, cursor: int) -> list:
    """Put one marker of ``dots`` on each track's point at ``cursor`` (tracks with none yet, or whose point is off
    the page, get none)."""
    xs, ys = [], []
    for track in tracks:
        k = track.at(cursor)
        if k >= 0 and _on_page(dots.axes, track.x[k]):
            xs.append(track.x[k])
            ys.append(track.y[k])
    dots.set_data(xs, ys)
    return [dots]


def rasterize_if_big(artist, n: int) -> None:
    if n > RASTERIZE_ABOVE:
        artist.set_rasterized(True)


# ------------------------------------------------------------------------------------------- lanes


#: Marks of the kinds every run may hold (faults); mechanisms register marks for their own kinds.
CORE_MARKS = {
    "fault.kill": Mark("#d62728", "-", lambda row, d: f"kill {row['node']}"),
    "fault.pause": Mark("#8c564b", "-", lambda row, d: f"{row['node']} pauses"),
    "fault.resume": Mark("#8c564b", ":", lambda row, d: f"{row['node']} resumes"),
    "fault.clock_jump": Mark("#ff7f0e", "-", lambda row, d: f"{row['node']} clock {d.get('delta_ms', 0):+,.0f} ms"),
}


class EventsLane(Lane):
    """Faults and the registered mechanisms' marked events as labelled vertical lines across every lane.

    Which kinds are marked, in which colour and with which label comes from :data:`CORE_MARKS` and
    the registry (:attr:`milvus_edu.registry.Mechanism.marks`; e.g. the TSO marks a rootcoord
    becoming active and the ACTIVE key expiring), or from ``marks`` when given. The most recent
    marker at the cursor is drawn in bold.

    Labels never overlap or leave the axes: whenever the x limits change (a new page, a filmstrip
    panel) they are laid out again, left to right, each in the first of :attr:`rows` where it fits;
    a label that would run past the right edge is put on the left of its line, and the label of a line
    off the page is hidden (not drawn cut at the page's edge). When the cursor's latest marker is on an
    earlier page, its bold label stands at the page's left edge behind a ``◀`` with the marker's time.
    """

    name = "events"
    height_ratio = 0.8
    #: Heights (axes fraction) of the label rows, top first.
    rows = (0.8, 0.5, 0.2)
    _GAP_PX = 6.0  # space between two labels on one row
    #: Hide a label that finds no free row on the page instead of overlapping another (the cursor's own label always
    #: shows): for lanes with many marks.
    hide_crowded = False

    def __init__(self, marks: dict[str, Mark] | None = None):
        self.marks = dict(marks) if marks is not None else None

    def setup(self, ax, events):
        self.ax = ax
        style = self.marks if self.marks is not None else {**CORE_MARKS, **marks()}
        kinds = events["kind"].astype(str).to_numpy()
        t_s = num(events["t_ms"]) / 1000.0
        marked = np.flatnonzero(np.isin(kinds, list(style)))
        part = events.iloc[marked]
        columns = {c: part[c].to_numpy(dtype=object, na_value=None) for c in part.columns}
        found = []  # (position, t_s, label, kind)
        for k, i in enumerate(marked):
            kind = kinds[i]
            row = {c: v[k] for c, v in columns.items()}  # the event's whole row, nulls as None
            label = style[kind].label(row, detail_dict(row.get("detail")))
            if label is not None:
                found.append((int(i), float(t_s[i]), label, kind))
        siblings = [a for a in ax.get_shared_x_axes().get_siblings(ax)] or [ax]
        self.labels: list[str] = []
        self.colors: list = []
        self.texts = []
        for _pos, x, label, kind in found:
            color, ls = style[kind].color, style[kind].linestyle
            for a in siblings:
                a.axvline(x, color=color, ls=ls, lw=1.0, alpha=0.85, zorder=1)
            self.texts.append(ax.text(x, self.rows[0], " " + label, transform=ax.get_xaxis_transform(),
                                      fontsize="small", color=color, va="center", ha="left", clip_on=True))
            self.labels.append(label)
            self.colors.append(color)
        self.track = Track([m[0] for m in found], [m[1] for m in found], [0.0] * len(found))
        self.row = [0] * len(found)
        self.ha = ["left"] * len(found)
        self.current = ax.text(0, 0, "", transform=ax.get_xaxis_transform(), fontsize="small", fontweight="bold",
                               va="center", ha="left", clip_on=True, zorder=7,
                               bbox=dict(boxstyle="square,pad=0.1", fc="white", ec="none"))
        # Widths in pixels of the bold (widest) form of every label, measured once.
        renderer = renderer_of(ax.figure)
        self.width_px = []
        for label in self.labels:
            self.current.set_text(" " + label + " ")
            self.width_px.append(self.current.get_window_extent(renderer).width if renderer else
                                 len(label) * 0.62 * self.current.get_fontsize() * ax.figure.dpi / 72.0)
        # ... and of what a label on an earlier page adds: the arrow before it and its time after it.
        self.current.set_text("◀  (000.000 s)")
        self.pinned_px = (self.current.get_window_extent(renderer).width if renderer else
                          14 * 0.62 * self.current.get_fontsize() * ax.figure.dpi / 72.0)
        self.current.set_visible(False)
        self.row_start_px = [np.inf] * len(self.rows)
        if not found:
            ax.text(0.5, 0.5, "no faults or failovers in this run", transform=ax.transAxes, **NO_DATA)
        ax.set_yticks([])
        ax.set_ylim(0, 1)
        ax.set_ylabel(self.name)
        ax.callbacks.connect("xlim_changed", self.layout)
        self.layout()

    def layout(self, _ax=None) -> None:
        """Place the labels for the current x limits: rows left to right, right-edge ones flipped left."""
        if not self.texts:
            return
        ax = self.ax
        x0, x1 = ax.get_xlim()
        width = ax.get_window_extent().width
        if x1 <= x0 or width <= 0:
            return
        scale = width / (x1 - x0)
        ends = [-np.inf] * len(self.rows)
        self.row_start_px = [np.inf] * len(self.rows)
        for k in np.argsort(self.track.x, kind="stable"):
            px, w = (self.track.x[k] - x0) * scale, self.width_px[k]
            if px + w > width - 2 and px - w >= 0:
                ha, start, end = "right", px - w, px
            else:
                ha, start, end = "left", px, px + w
            text = self.texts[k]
            if px < -0.5 or px > width + 0.5:  # its line is off this page: so is its label
                text.set_visible(False)
                continue
            free = [r for r, e in enumerate(ends) if e + self._GAP_PX <= start]
            # no room left for it: hidden (its line stays), not drawn over another
            text.set_visible(bool(free) or not self.hide_crowded)
            r = free[0] if free else int(np.argmin(ends))
            if free or not self.hide_crowded:
                ends[r] = max(ends[r], end)
                self.row_start_px[r] = min(self.row_start_px[r], start)
            self.row[k], self.ha[k] = r, ha
            text.set_horizontalalignment(ha)
            text.set_text(self._padded(k))
            text.set_y(self.rows[r])

    def _padded(self, k: int) -> str:
        return " " + self.labels[k] if self.ha[k] == "left" else self.labels[k] + " "

    def update(self, cursor_index, t_ms):
        k = self.track.at(cursor_index)
        if k < 0:
            self.current.set_visible(False)
            return (self.current,)
        x0 = self.ax.get_xlim()[0]
        if self.track.x[k] < x0:  # the marker is on an earlier page: say so at this page's left edge
            need = self.pinned_px + self.width_px[k] + self._GAP_PX
            clear = [r for r, s in enumerate(self.row_start_px) if s >= need]
            r = clear[0] if clear else int(np.argmax(self.row_start_px))
            self.current.set_position((x0, self.rows[r]))
            self.current.set_horizontalalignment("left")
            self.current.set_text(f"◀ {self.labels[k]} ({self.track.x[k]:.3f} s)")
        else:
            self.current.set_position((self.track.x[k], self.rows[self.row[k]]))
            self.current.set_horizontalalignment(self.ha[k])
            self.current.set_text(self._padded(k))
        self.current.set_color(self.colors[k])
        self.current.set_visible(True)
        return (self.current,)




def renderer_of(fig):
    canvas = getattr(fig, "canvas", None)
    get = getattr(canvas, "get_renderer", None)
    try:
        return get() if callable(get) else fig._getrenderer_of()
    except Exception:
        return None
