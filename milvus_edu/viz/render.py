"""Drawing lanes off-screen: a blitting renderer for the stepper and a static filmstrip for the book.

Figures are plain :class:`matplotlib.figure.Figure` objects on their own
:class:`~matplotlib.backends.backend_agg.FigureCanvasAgg`; pyplot and the global backend are never
touched, so an inline notebook backend keeps working.

:class:`BlitRenderer` draws the static lanes once, caches the background
(``canvas.copy_from_bbox``), and on every step restores it, draws only the cursor artists
(``draw_artist``) and encodes the pixels as PNG. With ``window_s`` the x axis shows one page of that
many seconds around the cursor and the background is redrawn only when the cursor changes page.

:func:`filmstrip` lays the chosen steps out two panels a row, with fonts of at least 9 pt at 100 dpi.
Both move the lanes' legends out of the axes into one legend above the lanes (:func:`figure_legend`).
"""

from __future__ import annotations

import copy
import io
import textwrap

import matplotlib
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from PIL import Image

#: rcParams of the stepper's figure (deterministic SVG ids, fonts sized for a ~800 px wide widget).
RC = {
    "font.size": 8.5,
    "axes.titlesize": 8.5,
    "axes.labelsize": 8.5,
    "xtick.labelsize": 8,
    "ytick.labelsize": 8,
    "legend.fontsize": 8,
    "svg.hashsalt": "milvus-edu",
    "svg.fonttype": "path",
    "path.simplify": True,
}
#: rcParams of the static filmstrip: no text under 9 pt (lanes use ``"small"`` = 0.83 x font.size).
FILM_RC = {
    **RC,
    "font.size": 11,
    "axes.titlesize": 10,
    "axes.labelsize": 10.5,
    "xtick.labelsize": 9.5,
    "ytick.labelsize": 9.5,
    "legend.fontsize": 10,
}
_VEIL = dict(facecolor="white", edgecolor="none", alpha=0.62, zorder=5)


def x_limits(t_ms: np.ndarray) -> tuple[float, float]:
    """The whole run in seconds, with a small margin."""
    t = t_ms[~np.isnan(t_ms)] / 1000.0
    lo, hi = (float(t.min()), float(t.max())) if len(t) else (0.0, 1.0)
    pad = (hi - lo) * 0.01 or 0.5
    return lo - pad, hi + pad


def build_column(fig: Figure, spec, lanes, events, xlim, show_xlabel=True, ylabels=True):
    """Axes for ``lanes`` stacked in the gridspec slot ``spec`` (shared x), each lane set up once.

    Returns the axes and, per axes, the stepper-owned cursor artists ``(line, veil)``.
    """
    sub = spec.subgridspec(len(lanes), 1, height_ratios=[max(float(l.height_ratio), 0.05) for l in lanes],
                           hspace=0.12)
    axes = []
    for k in range(len(lanes)):
        ax = fig.add_subplot(sub[k, 0], sharex=axes[0] if axes else None)
        axes.append(ax)
    for ax, lane in zip(axes, lanes):
        lane.setup(ax, events)
        if not ylabels:
            ax.set_ylabel("")
    for ax in axes:
        ax.set_xlim(*xlim)
        ax.tick_params(labelbottom=False)
        ax.grid(True, axis="x", color="0.92", lw=0.6, zorder=0)
    axes[-1].tick_params(labelbottom=True)
    if show_xlabel:
        axes[-1].set_xlabel("simulated time (s)")
    fig.align_ylabels(axes)
    cursors = []
    for ax in axes:
        line = ax.axvline(xlim[0], color="#444444", lw=1.0, zorder=7)
        veil = Rectangle((xlim[1], 0), 0, 1, transform=ax.get_xaxis_transform(), **_VEIL)
        ax.add_patch(veil)
        cursors.append((line, veil))
    return axes, cursors


def take_legends(axes):
    """Remove the legends the lanes drew on ``axes`` and return ``(handles, labels, ncol)`` for one
    figure legend outside the axes (so no legend hides data or the cursor)."""
    handles, labels, ncol = [], [], 1
    for ax in axes:
        legend = ax.get_legend()
        if legend is None:
            continue
        shown = [t.get_text() for t in legend.get_texts()]
        for h, l in zip(*ax.get_legend_handles_labels()):
            if l in shown and l not in labels:
                handles.append(h)
                labels.append(l)
        ncol = max(ncol, int(getattr(legend, "_ncols", 1)))
        legend.remove()
    return handles, labels, ncol


def figure_legend(fig: Figure, axes, left: float, bottom: float):
    """Move the lanes' legends into one legend whose lower left corner is at figure fraction
    ``(left, bottom)``, above the top lane. Returns the legend, or ``None`` when no lane drew one."""
    handles, labels, ncol = take_legends(axes)
    if not handles:
        return None
    return fig.legend(handles, labels, loc="lower left", bbox_to_anchor=(left, bottom), ncol=ncol,
                      frameon=False, borderaxespad=0.0, handlelength=2.4, columnspacing=1.6)


def move_cursors(cursors, axes, t_s: float) -> list:
    """Put the time cursor at ``t_s`` and the veil over everything after it; return the artists."""
    out = []
    for (line, veil), ax in zip(cursors, axes):
        x1 = ax.get_xlim()[1]
        line.set_xdata([t_s, t_s])
        veil.set_x(t_s)
        veil.set_width(max(x1 - t_s, 0.0))
        out += [veil, line]
    return out


class BlitRenderer:
    """The stepper's figure: static lanes drawn once, cursor artists blitted per step, PNG out."""

    def __init__(self, index, lanes, figsize=(9.0, 6.6), dpi=90, window_s: float | None = None,
                 png_compress_level: int = 1):
        self.index = index
        self.lanes = lanes
        self.window_s = float(window_s) if window_s else None
        self.png_compress_level = png_compress_level
        self.full_xlim = x_limits(index.t_ms)
        with matplotlib.rc_context(RC):
            self.fig = Figure(figsize=figsize, dpi=dpi)
            self.canvas = FigureCanvasAgg(self.fig)
            w_in, h_in = self.fig.get_size_inches()
            box = dict(left=0.85 / w_in, right=1 - 0.12 / w_in, top=1 - 0.5 / h_in, bottom=0.45 / h_in)
            gs = self.fig.add_gridspec(1, 1, **box)
            self.axes, self.cursors = build_column(self.fig, gs[0, 0], lanes, index.frame, self.full_xlim)
            figure_legend(self.fig, self.axes, box["left"], box["top"] + 0.06 / h_in)
            # First update: learn which artists each lane moves and keep them out of the background.
            t0 = float(index.t_ms[0])
            for lane in lanes:
                for artist in lane.update(0, t0) or ():
                    artist.set_animated(True)
            for line, veil in self.cursors:
                line.set_animated(True)
                veil.set_animated(True)
        self.page = None
        self.background = None
        self.redraws = 0

    # The page (window_s) the cursor is on, and its x limits.
    def _page_for(self, t_s: float):
        if not self.window_s:
            return 0, self.full_xlim
        lo = self.full_xlim[0]
        page = int(max(t_s - lo, 0.0) // self.window_s)
        start = lo + page * self.window_s
        return page, (start, start + self.window_s)

    def _draw_background(self, xlim) -> None:
        with matplotlib.rc_context(RC):
            for ax in self.axes:
                ax.set_xlim(*xlim)
            self.canvas.draw()
        self.background = self.canvas.copy_from_bbox(self.fig.bbox)
        self.redraws += 1

    def render(self, cursor: int, t_ms: float) -> bytes:
        """PNG bytes of the figure with every cursor artist at event ``cursor``."""
        t_s = t_ms / 1000.0
        page, xlim = self._page_for(t_s)
        if self.background is None or page != self.page:
            self.page = page
            self._draw_background(xlim)
        self.canvas.restore_region(self.background)
        artists = move_cursors(self.cursors, self.axes, t_s)
        for lane in self.lanes:
            for artist in lane.update(cursor, t_ms) or ():
                if not artist.get_animated():
                    artist.set_animated(True)
                artists.append(artist)
        renderer = self.canvas.get_renderer()
        for artist in artists:
            if artist.get_visible():
                artist.draw(renderer)
        return self.encode()

    def encode(self) -> bytes:
        """The canvas pixels as PNG (RGB, fast zlib level)."""
        buf = self.canvas.buffer_rgba()
        h, w = int(buf.shape[0]), int(buf.shape[1])
        img = Image.frombuffer("RGBA", (w, h), buf, "raw", "RGBA", 0, 1).convert("RGB")
        out = io.BytesIO()
        img.save(out, format="PNG", compress_level=self.png_compress_level)
        return out.getvalue()

    @property
    def size_px(self) -> tuple[int, int]:
        w, h = self.canvas.get_width_height()
        return int(w), int(h)


def filmstrip(index, lane_templates, steps, caption, panel_in=6.3, lane_unit_in=0.9, dpi=100,
              columns=2, window_s: float | None = None) -> Figure:
    """A figure with one panel per step, ``columns`` panels a row: every lane (a fresh copy per
    panel) at that step, the step's ``caption(i)`` above it, one shared legend on top.

    ``window_s``: each panel shows that many seconds around its step (as the stepper's pages do)
    instead of the whole run.

    Sizes are in inches at ``dpi``, with :data:`FILM_RC` fonts (nothing under 9 pt), so the PNG reads
    at 100 %. Cursor artists are drawn normally (not animated), so the same figure saves to PNG and
    SVG.
    """
    n = len(steps)
    ncols = max(1, min(columns, n))
    nrows = -(-n // ncols)
    heights = sum(max(float(l.height_ratio), 0.05) for l in lane_templates)
    with matplotlib.rc_context(FILM_RC):
        cap_pt = float(matplotlib.rcParams["axes.titlesize"])
        wrap = max(20, int(panel_in * 72 / (cap_pt * 0.53)))
        texts = ["\n".join(textwrap.wrap(caption(i), width=wrap)) for i in steps]
        cap_in = max(t.count("\n") + 1 for t in texts) * cap_pt * 1.3 / 72 + 0.12
        lanes_in = lane_unit_in * heights
        left, right, gap_x = 0.95, 0.2, 0.85  # y labels; margin; tick labels of the next column
        legend_in, ticks_in, xlabel_in = 0.55, 0.32, 0.28
        width = left + ncols * panel_in + (ncols - 1) * gap_x + right
        height = legend_in + nrows * (cap_in + lanes_in + ticks_in) + xlabel_in + 0.08
        fig = Figure(figsize=(width, height), dpi=dpi)
        FigureCanvasAgg(fig)
        xlim = x_limits(index.t_ms)
        first_axes = None
        for k, i in enumerate(steps):
            row, col = divmod(k, ncols)
            x0 = left + col * (panel_in + gap_x)
            top = height - legend_in - row * (cap_in + lanes_in + ticks_in) - cap_in
            spec = fig.add_gridspec(1, 1, left=x0 / width, right=(x0 + panel_in) / width,
                                    top=top / height, bottom=(top - lanes_in) / height)[0, 0]
            lanes = [copy.deepcopy(l) for l in lane_templates]
            t_ms = float(index.t_ms[i])
            panel_xlim = xlim
            if window_s:
                lo = min(max(xlim[0], t_ms / 1000.0 - window_s / 2), max(xlim[0], xlim[1] - window_s))
                panel_xlim = (lo, lo + window_s)
            axes, cursors = build_column(fig, spec, lanes, index.frame, panel_xlim, show_xlabel=(k + ncols >= n),
                                         ylabels=(col == 0))
            move_cursors(cursors, axes, t_ms / 1000.0)
            for lane in lanes:
                lane.update(i, t_ms)
            axes[0].set_title(texts[k], loc="left", fontsize=cap_pt, pad=5)
            if first_axes is None:
                first_axes = axes
            else:
                take_legends(axes)  # one legend for the whole strip
        figure_legend(fig, first_axes, left / width, 1 - (legend_in - 0.1) / height)
    return fig
