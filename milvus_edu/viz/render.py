"""Drawing lanes off-screen: a blitting renderer for the stepper and a static filmstrip for the book.

Figures are plain :class:`matplotlib.figure.Figure` objects on their own
:class:`~matplotlib.backends.backend_agg.FigureCanvasAgg`; pyplot and the global backend are never
touched, so an inline notebook backend keeps working.

:class:`BlitRenderer` draws the static lanes once, caches the background
(``canvas.copy_from_bbox``), and on every step restores it, draws only the cursor artists
(``draw_artist``) and encodes the pixels as PNG. With ``window_s`` the x axis shows one page of that
many seconds around the cursor and the background is redrawn only when the cursor changes page.

:func:`filmstrip` lays the chosen steps out one panel a row (a book page's width), with fonts of at
least 9 pt at 100 dpi. The browser side of the stepper replays the cursor artists from
:func:`artist_ops` over the background picture.
Both move the lanes' legends out of the axes into one legend above the lanes (:func:`figure_legend`).
"""

from __future__ import annotations

import copy
import io
import textwrap

import matplotlib
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import Collection
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle
from matplotlib.text import Text
from PIL import Image

from ..events.schema import detail_object
from .lanes import CURSOR_ZORDER

#: rcParams of the stepper's figure (deterministic SVG ids). The browser shows the picture at its own size
#: (stepper.css), so at 90 dpi a point is 1.25 screen pixels: no text under 9.9 px (lanes' ``"small"`` is
#: 0.83 x font.size = 7.9 pt; it was 7 pt, and the picture was shrunk to 87 %, about 7.7 px).
RC = {
    "font.size": 9.5,
    "axes.titlesize": 9.5,
    "axes.labelsize": 9.5,
    "xtick.labelsize": 8.5,
    "ytick.labelsize": 8.5,
    "legend.fontsize": 8.5,
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
_PAGE_CACHE = 64  # page pictures kept (PNG bytes); a paged run of many pages redraws the oldest again
_NO_LINE = ("None", "none", "", " ")


_HEX: dict = {}


def _hex(color) -> str | None:
    """A matplotlib colour as ``#rrggbbaa`` for a canvas, ``None`` for no colour (``"none"``)."""
    if color is None or (isinstance(color, str) and color.lower() == "none"):
        return None
    key = color if isinstance(color, str) else tuple(np.ravel(color).tolist())
    if key not in _HEX:
        rgba = matplotlib.colors.to_rgba(color)
        _HEX[key] = None if rgba[3] == 0 else matplotlib.colors.to_hex(rgba, keep_alpha=True)
    return _HEX[key]


def artist_ops(artists, height: float, dpi: float) -> list:
    """Cursor artists as drawing operations a browser canvas replays: pixel coordinates with the
    origin at the top left, sizes in pixels, colours as ``#rrggbbaa``.

    * ``["L", points, line, marker, clip]``: a :class:`~matplotlib.lines.Line2D`; ``line`` is
      ``[colour, width]`` or ``None``, ``marker`` ``[symbol, size, face, edge, edge width]`` or ``None``.
    * ``["T", x, y, text, colour, size, weight, ha, va, background, clip]``: a
      :class:`~matplotlib.text.Text` (``background``: its bbox's face colour or ``None``).
    * ``["R", x0, y0, x1, y1, face, clip]``: a :class:`~matplotlib.patches.Rectangle`.
    * ``["C", points, radius, faces, clip]``: the offsets of a collection (e.g. ``scatter``).

    ``clip`` is ``[x0, y0, x1, y1]`` (the artist's clip box) or ``None``. Invisible artists give nothing.
    """
    pt = dpi / 72.0
    ops = []

    def r(v):
        return round(float(v), 1)

    for a in artists:
        if not a.get_visible():
            continue
        clip = None
        box = a.get_clip_box() if a.get_clip_on() else None
        if box is not None:
            clip = [r(box.x0), r(height - box.y1), r(box.x1), r(height - box.y0)]
        if isinstance(a, Line2D):
            xs, ys = a.get_data()
            xy = a.get_transform().transform(np.column_stack([np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)]))
            pts = [[r(x), r(height - y)] for x, y in xy if np.isfinite(x) and np.isfinite(y)]
            if not pts:
                continue
            line = None
            if a.get_linestyle() not in _NO_LINE and len(pts) > 1:
                line = [_hex(a.get_color()), r(a.get_linewidth() * pt)]
            marker = None
            if str(a.get_marker()) not in _NO_LINE:
                face = None if a.get_fillstyle() == "none" else _hex(a.get_markerfacecolor())
                marker = [str(a.get_marker()), r(a.get_markersize() * pt), face, _hex(a.get_markeredgecolor()),
                          r(a.get_markeredgewidth() * pt)]
            shown = pts
            if marker is not None and clip is not None:
                # A marker whose point is off the artist's box (an earlier page's point, in a paged view) would be
                # drawn cut in half at the lane's edge: it is not drawn; its line, clipped there, still is.
                shown = [p for p in pts if clip[0] - 0.5 <= p[0] <= clip[2] + 0.5]
            if shown is pts or len(shown) == len(pts):
                ops.append(["L", pts, line, marker, clip])
            else:
                if line is not None:
                    ops.append(["L", pts, line, None, clip])
                if shown:
                    ops.append(["L", shown, None, marker, clip])
        elif isinstance(a, Text):
            text = a.get_text()
            if not text:
                continue
            x, y = a.get_transform().transform(a.get_unitless_position())
            patch = a.get_bbox_patch()
            ops.append(["T", r(x), r(height - y), text, _hex(a.get_color()), r(a.get_fontsize() * pt),
                        "bold" if a.get_fontweight() in ("bold", 700, "heavy") else "normal",
                        a.get_horizontalalignment(), a.get_verticalalignment(),
                        _hex(patch.get_facecolor()) if patch is not None else None, clip])
        elif isinstance(a, Rectangle):
            b = a.get_window_extent()
            ops.append(["R", r(b.x0), r(height - b.y1), r(b.x1), r(height - b.y0), _hex(a.get_facecolor()), clip])
        elif isinstance(a, Collection):
            offsets = a.get_offset_transform().transform(np.asarray(a.get_offsets(), dtype=float).reshape(-1, 2))
            sizes = a.get_sizes()
            radius = r(np.sqrt(sizes[0]) * pt / 2.0) if len(sizes) else 3.0
            faces = [_hex(c) for c in a.get_facecolors()] or [None]
            ops.append(["C", [[r(x), r(height - y)] for x, y in offsets], radius, faces, clip])
    return ops


def x_limits(t_ms: np.ndarray) -> tuple[float, float]:
    """The whole run in seconds, with a small margin."""
    t = t_ms[~np.isnan(t_ms)] / 1000.0
    lo, hi = (float(t.min()), float(t.max())) if len(t) else (0.0, 1.0)
    pad = (hi - lo) * 0.01 or 0.5
    return lo - pad, hi + pad


def time_axis_label(events) -> str:
    """The x axis's name: simulated time, or for a real server's run log (its ``run.start`` says ``real``) the
    wall-clock time since that run started."""
    starts = events.loc[events["kind"] == "run.start", "detail"] if "kind" in events.columns else ()
    if len(starts) and detail_object(starts.iloc[0]).get("real"):
        return "wall-clock time since the run started (s)"
    return "simulated time (s)"


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
        axes[-1].set_xlabel(time_axis_label(events))
    fig.align_ylabels(axes)
    cursors = []
    for ax in axes:
        line = ax.axvline(xlim[0], color="#444444", lw=1.0, zorder=CURSOR_ZORDER)
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
    # The lanes ask for a column count for their own axes; across the figure, fewer columns may be needed
    # for the longest labels to fit its width (lab 3's four vchannel labels were cut off at the right edge).
    renderer = fig.canvas.get_renderer()
    room = fig.bbox.width * (1.0 - left)
    for n in range(min(ncol, len(labels)), 0, -1):
        legend = fig.legend(handles, labels, loc="lower left", bbox_to_anchor=(left, bottom), ncol=n,
                            frameon=False, borderaxespad=0.0, handlelength=2.4, columnspacing=1.6)
        if n == 1 or legend.get_window_extent(renderer).width <= room:
            break
        legend.remove()
    over = (legend.get_window_extent(renderer).y1 - fig.bbox.height) / fig.bbox.height
    if over > 0:  # more rows than the space above the lanes: lower the lanes' tops to make room
        floor = min(ax.get_position().y0 for ax in axes)
        squeeze = (bottom - over - floor) / (bottom - floor)
        for ax in axes:
            p = ax.get_position()
            ax.set_position([p.x0, floor + (p.y0 - floor) * squeeze, p.width, p.height * squeeze])
        legend.set_bbox_to_anchor((left, bottom - over), transform=fig.transFigure)
    return legend


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
            # right: half of the last x tick label ("0.75", "80") stands past the lanes' right edge
            box = dict(left=0.85 / w_in, right=1 - 0.2 / w_in, top=1 - 0.5 / h_in, bottom=0.45 / h_in)
            gs = self.fig.add_gridspec(1, 1, **box)
            self.axes, self.cursors = build_column(self.fig, gs[0, 0], lanes, index.frame, self.full_xlim)
            # The legend uses the figure's whole width (over the y labels too): fewer rows above the lanes.
            figure_legend(self.fig, self.axes, 0.1 / w_in, box["top"] + 0.06 / h_in)
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
        self._page_png: dict[int, bytes] = {}

    # The page (window_s) the cursor is on, and its x limits.
    def _page_for(self, t_s: float):
        if not self.window_s:
            return 0, self.full_xlim
        lo = self.full_xlim[0]
        page = int(max(t_s - lo, 0.0) // self.window_s)
        start = lo + page * self.window_s
        return page, (start, start + self.window_s)

    def page_of(self, i: int) -> tuple[int, tuple[float, float]]:
        """The page event ``i`` is on and that page's x limits (page 0 is the whole run without ``window_s``)."""
        return self._page_for(float(self.index.t_ms[i]) / 1000.0)

    def _set_page(self, page: int, xlim) -> None:
        """Show page ``page``: set every lane's x limits (lanes re-fit on ``xlim_changed``)."""
        if page == self.page:
            return
        with matplotlib.rc_context(RC):
            for ax in self.axes:
                ax.set_xlim(*xlim)
        self.page = page
        self.background = None

    def _draw_background(self) -> None:
        with matplotlib.rc_context(RC):
            self.canvas.draw()
        self.background = self.canvas.copy_from_bbox(self.fig.bbox)
        self.redraws += 1
        if len(self._page_png) >= _PAGE_CACHE:
            self._page_png.pop(next(iter(self._page_png)))
        self._page_png[self.page] = self.encode()

    def background_png(self, page: int) -> bytes:
        """PNG of page ``page`` without any cursor artist (what the browser puts under its overlay)."""
        if page not in self._page_png:
            xlim = self._page_for(self.full_xlim[0] + page * (self.window_s or 0.0))[1]
            self._set_page(page, xlim)
            self._draw_background()
        return self._page_png[page]

    def render(self, cursor: int, t_ms: float) -> bytes:
        """PNG bytes of the figure with every cursor artist at event ``cursor``."""
        t_s = t_ms / 1000.0
        self._set_page(*self._page_for(t_s))
        if self.background is None:
            self._draw_background()
        self.canvas.restore_region(self.background)
        artists = move_cursors(self.cursors, self.axes, t_s)
        artists += self._lane_artists(cursor, t_ms)
        renderer = self.canvas.get_renderer()
        for artist in artists:
            if artist.get_visible():
                artist.draw(renderer)
        return self.encode()

    def _lane_artists(self, cursor: int, t_ms: float) -> list:
        out = []
        for lane in self.lanes:
            for artist in lane.update(cursor, t_ms) or ():
                if not artist.get_animated():
                    artist.set_animated(True)
                out.append(artist)
        return out

    def move_to(self, cursor: int) -> None:
        """Put every lane's cursor artists at event ``cursor`` on its page (what ``lane.update`` does),
        so the lanes' own state is that of the cursor."""
        t_ms = float(self.index.t_ms[cursor])
        self._set_page(*self._page_for(t_ms / 1000.0))
        self._lane_artists(cursor, t_ms)

    def overlay(self, cursor: int) -> list:
        """The lanes' cursor artists at event ``cursor`` as drawing operations for the browser
        (:func:`artist_ops`), on the page of that event."""
        t_ms = float(self.index.t_ms[cursor])
        self._set_page(*self._page_for(t_ms / 1000.0))
        return artist_ops(self._lane_artists(cursor, t_ms), self.fig.bbox.height, self.fig.dpi)

    def geometry(self) -> dict:
        """What the browser needs to draw the time cursor itself: picture size, each lane's box in
        pixels (top-left origin), the whole run's x limits and the page length (``None``: one page)."""
        h = self.fig.bbox.height
        boxes = []
        for ax in self.axes:
            b = ax.get_window_extent()
            boxes.append([round(b.x0, 1), round(h - b.y1, 1), round(b.x1, 1), round(h - b.y0, 1)])
        w, hh = self.size_px
        return {"width": w, "height": hh, "axes": boxes, "xlim": list(self.full_xlim), "window_s": self.window_s}

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


#: Width in inches of one filmstrip panel: with its y labels the figure is 6.85 in, 685 px at 100 dpi,
#: so a book page's ~690 px column shows it at full size and no text is under 9 pt there.
FILM_PANEL_IN = 5.7


def filmstrip(index, lane_templates, steps, caption, panel_in=FILM_PANEL_IN, lane_unit_in=0.9, dpi=100,
              columns=1, window_s: float | None = None) -> Figure:
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
        left, right, gap_x = 0.95, 0.2, 0.85  # y labels; margin; tick labels of the next column
        # A caption starts at its panel's left edge and may use the margin on its right, less a few pixels.
        texts = [_wrap_caption(caption(i), cap_pt, (panel_in + right - 0.05) * dpi, dpi) for i in steps]
        cap_in = max(t.count("\n") + 1 for t in texts) * cap_pt * 1.3 / 72 + 0.12
        lanes_in = lane_unit_in * heights
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
        _film_legend(fig, first_axes, legend_in)
    return fig


def _wrap_caption(text: str, size_pt: float, width_px: float, dpi: float) -> str:
    """``text`` wrapped at word breaks into lines no wider than ``width_px`` at ``size_pt`` (measured, not
    estimated from a mean letter width: a caption's dotted names and timestamps are wider than prose)."""
    renderer = FigureCanvasAgg(Figure(dpi=dpi)).get_renderer()
    font = FontProperties(size=size_pt)

    def fits(line: str) -> bool:
        return renderer.get_text_width_height_descent(line, font, ismath=False)[0] <= width_px

    wrap = max(20, int(width_px / dpi * 72 / (size_pt * 0.5)))
    lines = textwrap.wrap(text, width=wrap)
    while wrap > 20 and not all(fits(line) for line in lines):
        wrap -= 2
        lines = textwrap.wrap(text, width=wrap)
    return "\n".join(lines)


def _film_legend(fig: Figure, axes, legend_in: float) -> None:
    """The lanes' legends as one legend across the top of the filmstrip, in as many columns as fit its
    width; the figure grows at the top when the rows need more than ``legend_in`` inches."""
    handles, labels, ncol = take_legends(axes)
    if not handles:
        return
    size = float(matplotlib.rcParams["legend.fontsize"])
    width, height = fig.get_size_inches()
    col_in = (2.0 + 1.0 + 0.56 * max(len(l) for l in labels)) * size / 72.0  # handle, spacing, text
    ncol = max(1, min(ncol, len(labels), int((width - 0.2) // col_in)))
    need = -(-len(labels) // ncol) * size * 1.45 / 72.0 + 0.15
    if need > legend_in:
        grown = height + need - legend_in
        for ax in fig.axes:
            p = ax.get_position()
            ax.set_position([p.x0, p.y0 * height / grown, p.width, p.height * height / grown])
        fig.set_size_inches(width, grown)
        height = grown
    fig.legend(handles, labels, loc="upper left", bbox_to_anchor=(0.1 / width, 1 - 0.06 / height), ncol=ncol,
               frameon=False, borderaxespad=0.0, handlelength=2.0, columnspacing=1.0)
