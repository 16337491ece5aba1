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

Lanes read events only, never live objects, and know nothing about each other, so later mechanisms
(TimeTick, DataNode) add their own lanes to the list::

    TimelineStepper(run.events, lanes=tso_lanes() + [MyTimeTickLane()])

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
from matplotlib.ticker import FuncFormatter

from ..narrate import detail_dict
from .data import ACTIVE_KEY, clock_base_ms

__all__ = [
    "Lane", "PhysicalLane", "LogicalLane", "ClientLane", "EventsLane", "FailoverLane", "tso_lanes",
    "rootcoord_nodes", "client_nodes", "node_colors",
]

#: Kinds whose rows carry a rootcoord's TSO state (``physical_ms``/``logical`` after the event).
TSO_STATE_KINDS = ("tso.init", "tso.update", "tso.alloc", "tso.set", "tso.reset")
#: More points than this in one static collection are rasterised in SVG exports (keeps files small).
RASTERIZE_ABOVE = 3000

_PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22")
_NO_DATA = dict(ha="center", va="center", color="0.55", fontsize="small", style="italic")


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


def _natural(name: str):
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", str(name))]


def rootcoord_nodes(events: pd.DataFrame) -> list[str]:
    """Nodes that ran a timestamp oracle or a coordinator session, in natural order."""
    kinds = events["kind"].astype(str)
    mask = kinds.str.startswith("tso.") | kinds.str.startswith("rootcoord.") | kinds.isin(
        ["session.active", "session.standby", "session.register"])
    return sorted({str(n) for n in events.loc[mask, "node"]}, key=_natural)


def client_nodes(events: pd.DataFrame) -> list[str]:
    """Nodes that emitted ``client.*`` events, in natural order."""
    mask = events["kind"].astype(str).str.startswith("client.")
    return sorted({str(n) for n in events.loc[mask, "node"]}, key=_natural)


def node_colors(names) -> dict[str, str]:
    """A stable colour per node name (the same run always gets the same colours)."""
    return {n: _PALETTE[i % len(_PALETTE)] for i, n in enumerate(names)}


def _num(series: pd.Series) -> np.ndarray:
    return series.to_numpy(dtype=float, na_value=np.nan)


class _Track:
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


def _compact(value, _pos=None) -> str:
    """Tick labels that stay narrow: 150000 -> 150k."""
    return f"{value / 1000:g}k" if abs(value) >= 10_000 else f"{value:g}"


def _cursor_dot(ax, color, size=7, marker="o", **kw):
    (dot,) = ax.plot([], [], marker=marker, ms=size, mfc=color, mec="black", mew=0.8, ls="none", zorder=6, **kw)
    return dot


def _move(dot: Line2D, track: _Track, cursor: int) -> None:
    k = track.at(cursor)
    if k < 0:
        dot.set_visible(False)
    else:
        dot.set_data([track.x[k]], [track.y[k]])
        dot.set_visible(True)


def _move_all(tracks, cursor: int) -> list:
    """Move every ``(track, dot)`` cursor dot to ``cursor``; return the dots (the artists to blit)."""
    for track, dot in tracks:
        _move(dot, track, cursor)
    return [dot for _, dot in tracks]


def _rasterize_if_big(artist, n: int) -> None:
    if n > RASTERIZE_ABOVE:
        artist.set_rasterized(True)


# ------------------------------------------------------------------------------------------- lanes


class PhysicalLane(Lane):
    """Each rootcoord's physical part against simulated time, with the saved window end.

    Both are relative to the run start (see :func:`~milvus_edu.viz.data.clock_base_ms`). A thin grey
    diagonal is true time; dotted lines are each rootcoord's own clock readings (every event that
    carries ``clock_ms``), so a standby whose clock is far behind visibly starts *above* its clock, at
    the saved window. At the cursor a filled dot marks each rootcoord's physical part and a hollow dot
    its last clock reading; when the two are :attr:`gap_label_s` or more apart a bracket joins them and
    says by how much the clock is behind (or ahead).

    The legend is drawn on the axes; the stepper and the filmstrip move it out of the axes, above
    the lanes (see :func:`~milvus_edu.viz.render.take_legends`).
    """

    name = "physical (s)"
    height_ratio = 2.2
    #: Label the clock-to-physical gap at the cursor when it is at least this many seconds.
    gap_label_s = 1.0

    def setup(self, ax, events):
        self.ax = ax
        self.base = clock_base_ms(events)
        nodes = rootcoord_nodes(events)
        colors = node_colors(nodes)
        kinds = events["kind"].astype(str)
        t_s = _num(events["t_ms"]) / 1000.0
        phys = _num(events["physical_ms"])
        clock = _num(events["clock_ms"])
        node = events["node"].astype(str).to_numpy()
        is_state = kinds.isin(TSO_STATE_KINDS).to_numpy() & ~np.isnan(phys)
        has_clock = ~np.isnan(clock)
        self.tracks: list[tuple[_Track, Line2D]] = []
        self.clocks: list[tuple[_Track, _Track, Line2D, Line2D, object]] = []
        drawn = False
        for n in nodes:
            m = is_state & (node == n)
            cm = has_clock & (node == n)
            if not (m.any() or cm.any()):
                continue
            y = (phys[m] - self.base) / 1000.0
            phys_track = _Track(np.flatnonzero(m), t_s[m], y)
            if m.any():
                ax.plot(t_s[m], y, drawstyle="steps-post", color=colors[n], lw=2.0, label=f"{n} physical")
                self.tracks.append((phys_track, _cursor_dot(ax, colors[n])))
            if cm.any():
                cy = (clock[cm] - self.base) / 1000.0
                (line,) = ax.plot(t_s[cm], cy, ls=(0, (0.01, 1.4)), lw=2.2, color=colors[n], alpha=1.0,
                                  dash_capstyle="round", label=f"{n} clock")
                _rasterize_if_big(line, int(cm.sum()))
                (cdot,) = ax.plot([], [], marker="o", ms=7, mfc="white", mec=colors[n], mew=1.8, ls="none",
                                  zorder=6)
                (bracket,) = ax.plot([], [], color=colors[n], lw=1.5, zorder=5)
                gap = ax.text(0, 0, "", color=colors[n], fontsize="small", va="center", zorder=7,
                              bbox=dict(boxstyle="round,pad=0.15", fc="white", ec="none", alpha=0.85))
                self.clocks.append((phys_track, _Track(np.flatnonzero(cm), t_s[cm], cy), cdot, bracket, gap))
            drawn = True
        # Width in pixels of the widest gap label, to keep it inside the axes (measured once).
        self.gap_px = 0.0
        if self.clocks:
            probe = self.clocks[0][4]
            probe.set_text("  clock 999.9 s ahead of physical")
            renderer = _renderer(ax.figure)
            self.gap_px = (probe.get_window_extent(renderer).width if renderer else
                           34 * 0.6 * probe.get_fontsize() * ax.figure.dpi / 72.0)
            probe.set_text("")
        saves = (kinds == "tso.save").to_numpy() & ~np.isnan(_num(events["window_end_ms"]))
        self.window = None
        if saves.any():
            pos = np.flatnonzero(saves)
            y = (_num(events["window_end_ms"])[saves] - self.base) / 1000.0
            x = t_s[saves]
            t_end = np.nanmax(t_s)
            ax.plot(np.append(x, t_end), np.append(y, y[-1]), drawstyle="steps-post", color="black", ls="--",
                    lw=1.2, label="saved window end")
            self.window = (_Track(pos, x, y), _cursor_dot(ax, "white", size=6, marker="D"))
            drawn = True
        if drawn:
            lo, hi = np.nanmin(t_s), np.nanmax(t_s)
            ax.plot([lo, hi], [lo, hi], color="0.6", lw=0.8, zorder=0, label="true time")
            ax.legend(loc="upper left", ncol=3, frameon=False, handlelength=2.2)
        else:
            ax.text(0.5, 0.5, "no TSO events in this run", transform=ax.transAxes, **_NO_DATA)
        ax.set_ylabel(self.name)

    def update(self, cursor_index, t_ms):
        out = _move_all(self.tracks, cursor_index)
        if self.clocks:
            x0, x1 = self.ax.get_xlim()
            px_per_s = self.ax.get_window_extent().width / ((x1 - x0) or 1.0)
        for phys_track, clock_track, cdot, bracket, gap in self.clocks:
            _move(cdot, clock_track, cursor_index)
            kp, kc = phys_track.at(cursor_index), clock_track.at(cursor_index)
            labelled = False
            if kp >= 0 and kc >= 0:
                x, yc, yp = clock_track.x[kc], clock_track.y[kc], phys_track.y[kp]
                if abs(yc - yp) >= self.gap_label_s:
                    bracket.set_data([x, x], [yc, yp])
                    # Near the right edge: the label goes on the left of the bracket.
                    right = (x1 - x) * px_per_s < self.gap_px
                    gap.set_horizontalalignment("right" if right else "left")
                    gap.set_position((x, (yc + yp) / 2.0))
                    side = "behind" if yc < yp else "ahead of"
                    text = f"clock {abs(yc - yp):.1f} s {side} physical"
                    gap.set_text(f"{text}  " if right else f"  {text}")
                    labelled = True
            bracket.set_visible(labelled)
            gap.set_visible(labelled)
            out += [cdot, bracket, gap]
        if self.window is not None:
            _move(self.window[1], self.window[0], cursor_index)
            out.append(self.window[1])
        return out


class LogicalLane(Lane):
    """The logical counter of each rootcoord: a step line (resets to 0 on tsLoop updates) and a mark
    per allocation (``tso.alloc``)."""

    name = "logical"
    height_ratio = 1.2

    def setup(self, ax, events):
        nodes = rootcoord_nodes(events)
        colors = node_colors(nodes)
        kinds = events["kind"].astype(str)
        t_s = _num(events["t_ms"]) / 1000.0
        logical = _num(events["logical"])
        node = events["node"].astype(str).to_numpy()
        is_state = kinds.isin(TSO_STATE_KINDS).to_numpy() & ~np.isnan(logical)
        is_alloc = (kinds == "tso.alloc").to_numpy() & ~np.isnan(logical)
        self.tracks: list[tuple[_Track, Line2D]] = []
        for n in nodes:
            m = is_state & (node == n)
            if not m.any():
                continue
            ax.plot(t_s[m], logical[m], drawstyle="steps-post", color=colors[n], lw=0.8, alpha=0.7)
            a = is_alloc & (node == n)
            if a.any():
                (marks,) = ax.plot(t_s[a], logical[a], ls="none", marker=".", ms=3, color=colors[n], label=n)
                _rasterize_if_big(marks, int(a.sum()))
            self.tracks.append((_Track(np.flatnonzero(m), t_s[m], logical[m]), _cursor_dot(ax, colors[n], size=6)))
        if self.tracks:
            top = np.nanmax(logical[is_state]) if is_state.any() else 0
            if top > (1 << 16):
                ax.axhline(1 << 17, color="0.5", lw=0.8, ls="--")
                ax.text(0.995, (1 << 17), "maxLogical/2", transform=ax.get_yaxis_transform(), ha="right",
                        va="bottom", fontsize="small", color="0.4")
            ax.set_ylim(bottom=0)
            ax.yaxis.set_major_formatter(FuncFormatter(_compact))
        else:
            ax.text(0.5, 0.5, "no allocations in this run", transform=ax.transAxes, **_NO_DATA)
        ax.set_ylabel(self.name)

    def update(self, cursor_index, t_ms):
        return _move_all(self.tracks, cursor_index)


class ClientLane(Lane):
    """Answers per client: one row per client, a mark per ``client.recv`` coloured by the rootcoord
    that answered, a red cross per ``client.error``."""

    name = "clients"
    height_ratio = 1.0

    def setup(self, ax, events):
        clients = client_nodes(events)
        colors = node_colors(rootcoord_nodes(events))
        kinds = events["kind"].astype(str).to_numpy()
        t_s = _num(events["t_ms"]) / 1000.0
        node = events["node"].astype(str).to_numpy()
        peer = events["peer"].astype(object).where(events["peer"].notna(), "").astype(str).to_numpy()
        self.tracks: list[_Track] = []
        for row, c in enumerate(clients):
            recv = (kinds == "client.recv") & (node == c)
            if recv.any():
                cols = [colors.get(p, "0.4") for p in peer[recv]]
                sc = ax.scatter(t_s[recv], np.full(recv.sum(), row), c=cols, marker="|", s=40, lw=1.0)
                _rasterize_if_big(sc, int(recv.sum()))
            err = (kinds == "client.error") & (node == c)
            if err.any():
                ax.scatter(t_s[err], np.full(err.sum(), row), c="#d62728", marker="x", s=14, lw=0.8)
            self.tracks.append(_Track(np.flatnonzero(recv), t_s[recv], np.full(recv.sum(), row)))
        if clients:
            ax.set_yticks(range(len(clients)), clients)
            ax.set_ylim(-0.6, len(clients) - 0.4)
            (self.dots,) = ax.plot([], [], ls="none", marker="o", ms=7, mfc="none", mec="black", mew=1.2, zorder=6)
        else:
            self.dots = None
            ax.set_yticks([])
            ax.text(0.5, 0.5, "no clients in this run", transform=ax.transAxes, **_NO_DATA)
        ax.set_ylabel(self.name)

    def update(self, cursor_index, t_ms):
        if self.dots is None:
            return ()
        xs, ys = [], []
        for track in self.tracks:
            k = track.at(cursor_index)
            if k >= 0:
                xs.append(track.x[k])
                ys.append(track.y[k])
        self.dots.set_data(xs, ys)
        return (self.dots,)


class EventsLane(Lane):
    """Faults and session changes as labelled vertical lines across every lane of the column.

    ``fault.kill`` (red), ``session.active`` (green), ``fault.clock_jump`` (orange) and the loss of
    the ACTIVE key (grey, dotted). The most recent marker at the cursor is drawn in bold.

    Labels never overlap or leave the axes: whenever the x limits change (a new page, a filmstrip
    panel) they are laid out again, left to right, each in the first of :attr:`rows` where it fits;
    a label that would run past the right edge is put on the left of its line.
    """

    name = "events"
    height_ratio = 0.8
    #: Heights (axes fraction) of the label rows, top first.
    rows = (0.8, 0.5, 0.2)
    _STYLE = {
        "fault.kill": ("#d62728", "-"),
        "session.active": ("#2ca02c", "-"),
        "fault.clock_jump": ("#ff7f0e", "-"),
        "session.lost": ("0.45", ":"),
    }
    _GAP_PX = 6.0  # space between two labels on one row

    def setup(self, ax, events):
        self.ax = ax
        kinds = events["kind"].astype(str).to_numpy()
        t_s = _num(events["t_ms"]) / 1000.0
        nodes = events["node"].astype(str).to_numpy()
        details = events["detail"].to_numpy(dtype=object, na_value=None)
        marks = []  # (position, t_s, label, kind)
        for i in np.flatnonzero(np.isin(kinds, list(self._STYLE))):
            kind = kinds[i]
            detail = detail_dict(details[i])
            if kind == "fault.kill":
                label = f"kill {nodes[i]}"
            elif kind == "session.active":
                label = f"{nodes[i]} active"
            elif kind == "fault.clock_jump":
                label = f"{nodes[i]} clock {detail.get('delta_ms', 0):+,.0f} ms"
            else:
                if detail.get("key", ACTIVE_KEY) != ACTIVE_KEY:
                    continue
                label = "ACTIVE key expires"
            marks.append((int(i), float(t_s[i]), label, kind))
        siblings = [a for a in ax.get_shared_x_axes().get_siblings(ax)] or [ax]
        self.labels: list[str] = []
        self.colors: list = []
        self.texts = []
        for _pos, x, label, kind in marks:
            color, ls = self._STYLE[kind]
            for a in siblings:
                a.axvline(x, color=color, ls=ls, lw=1.0, alpha=0.85, zorder=1)
            self.texts.append(ax.text(x, self.rows[0], " " + label, transform=ax.get_xaxis_transform(),
                                      fontsize="small", color=color, va="center", ha="left", clip_on=True))
            self.labels.append(label)
            self.colors.append(color)
        self.track = _Track([m[0] for m in marks], [m[1] for m in marks], [0.0] * len(marks))
        self.row = [0] * len(marks)
        self.ha = ["left"] * len(marks)
        self.current = ax.text(0, 0, "", transform=ax.get_xaxis_transform(), fontsize="small", fontweight="bold",
                               va="center", ha="left", clip_on=True, zorder=7,
                               bbox=dict(boxstyle="square,pad=0.1", fc="white", ec="none"))
        # Widths in pixels of the bold (widest) form of every label, measured once.
        renderer = _renderer(ax.figure)
        self.width_px = []
        for label in self.labels:
            self.current.set_text(" " + label + " ")
            self.width_px.append(self.current.get_window_extent(renderer).width if renderer else
                                 len(label) * 0.62 * self.current.get_fontsize() * ax.figure.dpi / 72.0)
        self.current.set_visible(False)
        if not marks:
            ax.text(0.5, 0.5, "no faults or failovers in this run", transform=ax.transAxes, **_NO_DATA)
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
        for k in np.argsort(self.track.x, kind="stable"):
            px, w = (self.track.x[k] - x0) * scale, self.width_px[k]
            if px + w > width - 2 and px - w >= 0:
                ha, start, end = "right", px - w, px
            else:
                ha, start, end = "left", px, px + w
            if end < 0 or start > width:  # off this page
                continue
            free = [r for r, e in enumerate(ends) if e + self._GAP_PX <= start]
            r = free[0] if free else int(np.argmin(ends))
            ends[r] = max(ends[r], end)
            self.row[k], self.ha[k] = r, ha
            text = self.texts[k]
            text.set_horizontalalignment(ha)
            text.set_text(self._padded(k))
            text.set_y(self.rows[r])

    def _padded(self, k: int) -> str:
        return " " + self.labels[k] if self.ha[k] == "left" else self.labels[k] + " "

    def update(self, cursor_index, t_ms):
        k = self.track.at(cursor_index)
        if k < 0:
            self.current.set_visible(False)
        else:
            self.current.set_position((self.track.x[k], self.rows[self.row[k]]))
            self.current.set_horizontalalignment(self.ha[k])
            self.current.set_text(self._padded(k))
            self.current.set_color(self.colors[k])
            self.current.set_visible(True)
        return (self.current,)


#: The events lane's former name (it began as the failover lane).
FailoverLane = EventsLane


def _renderer(fig):
    canvas = getattr(fig, "canvas", None)
    get = getattr(canvas, "get_renderer", None)
    try:
        return get() if callable(get) else fig._get_renderer()
    except Exception:
        return None



def tso_lanes() -> list[Lane]:
    """The TSO chapter's lanes: physical part and window, logical counter, client answers, events."""
    return [PhysicalLane(), LogicalLane(), ClientLane(), EventsLane()]
