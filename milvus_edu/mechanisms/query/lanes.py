"""The query mechanism's stepper lanes: one per shard delegator (vchannel) with its tsafe and the reads that
reached it, and one for the clients' reads and writes.

See :mod:`milvus_edu.viz.lanes` for the lane protocol (``setup`` once, ``update`` per step). Timestamps are drawn
by their physical part in seconds since the run start, on the same scale as the x axis (simulated seconds), as
the TimeTick and flush lanes draw them: tsafe that keeps up with time runs along the diagonal just under it, a
stalled tsafe is a flat line, and a read's guarantee above the line is how far tsafe still has to go.
"""

from __future__ import annotations

import matplotlib.colors as mcolors
import numpy as np
import pandas as pd
from matplotlib.collections import PolyCollection

from ...viz.columns import base_ms, ints, natural, short_channel, texts
from ...viz.lanes import CURSOR_ZORDER, NO_DATA, EventsLane, Lane, Track, cursor_dot, move_all, move_rings, num
from ...viz.tslanes import SECONDS, PageY, VChannelSlotLane, physical_s, vchannels_watched
from .levels import LEVEL_COLORS, UNKNOWN_LEVEL_COLOR, level_color

#: Vchannel lanes :func:`query_lanes` draws by default (every query scenario's collection has 2 shards).
VCHANNEL_LANES = 2
#: Columns of the legend the stepper puts above the lanes: its strip holds two rows, and a run shows at most twelve
#: entries (five marks of a read, the levels it uses, insert and delete).
LEGEND_COLUMNS = 6

#: The consistency levels in the order of the legend (their colours: :data:`~.levels.LEVEL_COLORS`).
LEVELS = ("Strong", "Session", "Bounded", "Eventually", "Customized")
_UNKNOWN = UNKNOWN_LEVEL_COLOR
_TSAFE = "#2ca02c"
_FAILED = "#d62728"
_WRITE = "0.2"
#: Guarantees further than this (s, at least) outside tsafe's range are drawn at the lane's edge (a guarantee of 1
#: for Eventually, or a Customized one a day ahead, would otherwise squash the lane).
MIN_MARGIN_S = 5.0
#: Axes fraction where an off-scale guarantee is drawn (bottom, top).
EDGE_Y = (0.04, 0.96)


def vchannels_of(events: pd.DataFrame) -> list[str]:
    """The vchannels the QueryNode served, in natural order."""
    return vchannels_watched(events, "querynode.watch")


def clients_of(events: pd.DataFrame) -> list[str]:
    """The clients that read or wrote, in natural order."""
    kinds = events["kind"].astype(str)
    mask = kinds.isin(["client.read_start", "client.read", "client.insert", "client.delete"]).to_numpy()
    return sorted({str(n) for n in events.loc[mask, "node"]}, key=natural)


def requests(events: pd.DataFrame) -> np.ndarray:
    """The ``request`` column as ``int64`` (-1 for nulls)."""
    req, has = ints(events, "request")
    return np.where(has, req, -1)


def _handle(ax, label, **style) -> None:
    ax.plot([], [], label=label, **style)


def _legend(ax) -> None:
    """The lane's legend (the stepper moves it above the lanes, in :data:`LEGEND_COLUMNS` columns)."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="upper left", ncol=LEGEND_COLUMNS, frameon=False)


def settled_levels(events: pd.DataFrame, level: np.ndarray, req: np.ndarray) -> dict[int, str]:
    """The level of every read by request: the one the proxy settled (``proxy.read``), else the one the SDK sent
    (a read sent at the collection's default level carries none until the proxy resolves it)."""
    kinds = events["kind"].astype(str).to_numpy()
    out = {int(req[i]): level[i] for i in np.flatnonzero(kinds == "client.read_start") if level[i]}
    out.update({int(req[i]): level[i] for i in np.flatnonzero(kinds == "proxy.read") if level[i]})
    return out


class DelegatorLane(VChannelSlotLane):
    """One shard delegator (vchannel) on the QueryNode: its tsafe and every read that reached it.

    Green: tsafe, a rising step line (every message up to it is applied). Each read is a dash at its guarantee
    timestamp, at the time it reached the delegator, in the colour of its consistency level; a read whose guarantee
    was above tsafe waited: a shaded box from its arrival to its answer, between tsafe on arrival and the
    guarantee, which tsafe has to climb through. A dot marks the answer at the MVCC read timestamp (the tsafe the
    wait returned); a red cross a read that failed (timeout, lag too large, delegator closed). A guarantee far off
    the lane's range (Eventually's 1, a Customized one a day ahead) is a triangle at the lane's bottom or top edge.
    At the cursor: a dot on tsafe, and the vchannel's name in the top-left corner drawn over the cursor line.

    ``slot`` picks the vchannel: the ``slot``-th of the run's served vchannels in natural order.
    """

    watch_kind = "querynode.watch"

    def draw(self, ax, events, v: str) -> None:
        self.vchannel = v
        kinds = events["kind"].astype(str).to_numpy()
        mine = texts(events, "vchannel") == v
        base = base_ms(events)
        t = num(events["t_ms"]) / 1000.0
        t_end = float(np.nanmax(t))
        ts, _ = ints(events, "ts")
        guarantee, has_g = ints(events, "guarantee_ts")
        tick, has_tick = ints(events, "tick_ts")
        req = requests(events)
        level = texts(events, "level")
        err = events["error"].notna().to_numpy()

        safe = np.flatnonzero(np.isin(kinds, ["querynode.watch", "querynode.tsafe"]) & mine)
        sx, sy = t[safe], physical_s(ts[safe], base)
        waits = np.flatnonzero((kinds == "querynode.wait") & mine)
        reads = np.flatnonzero((kinds == "querynode.read") & mine)
        wait_of = {int(req[i]): int(i) for i in waits}
        read_of = {int(req[i]): int(i) for i in reads}
        # one read per request: arrival (its wait, else its read), answer (its read; none while still waiting)
        order = sorted(set(wait_of) | set(read_of), key=lambda r: wait_of.get(r, read_of.get(r)))
        reads_here = []
        for r in order:
            arrive = wait_of.get(r, read_of.get(r))
            answer = read_of.get(r)
            reads_here.append((r, arrive, answer))

        lo, hi = (float(sy.min()), float(sy.max())) if len(sy) else (0.0, max(t_end, 1.0))
        lo, hi = min(lo, 0.0), max(hi, t_end)
        margin = max(MIN_MARGIN_S, 0.25 * (hi - lo))
        g_y = {}
        for r, arrive, _answer in reads_here:
            if has_g[arrive]:
                y = float(physical_s(guarantee[arrive:arrive + 1], base)[0])
                g_y[r] = y
        on_scale = [y for y in g_y.values() if lo - margin <= y <= hi + margin]
        all_y = [lo, hi] + on_scale
        y0, y1 = min(all_y), max(all_y)
        pad = (y1 - y0) * 0.06 or 0.5
        page = self.page_y = PageY(ax, (y0 - pad, y1 + pad))
        edge = ax.get_xaxis_transform()

        if len(sx):
            px, py = np.append(sx, max(t_end, sx[-1])), np.append(sy, sy[-1])
            page.add(px, py, step=True)
            ax.plot(px, py, drawstyle="steps-post", color=_TSAFE, lw=1.6, zorder=3, label="tsafe")
            self.tracks.append((Track(safe, sx, sy), cursor_dot(ax, _TSAFE, size=6)))

        boxes, box_colors = [], []
        dash = {"x": [], "y": [], "c": []}
        dots = {"x": [], "y": [], "c": []}
        failed = {"x": [], "y": []}
        edges = {"x": [], "y": [], "c": [], "m": []}
        for r, arrive, answer in reads_here:
            color = level_color(level[arrive] or (level[answer] if answer is not None else ""))
            x0 = t[arrive]
            gy = g_y.get(r)
            scaled = gy is not None and lo - margin <= gy <= hi + margin
            if scaled:
                dash["x"].append(x0)
                dash["y"].append(gy)
                dash["c"].append(color)
                page.add([x0], [gy])
            elif gy is not None:
                edges["x"].append(x0)
                edges["y"].append(EDGE_Y[1] if gy > hi else EDGE_Y[0])
                edges["m"].append("^" if gy > hi else "v")
                edges["c"].append(color)
            waited = arrive != answer
            x1 = t[answer] if answer is not None else t_end
            if waited and scaled and has_tick[arrive]:
                ty = float(physical_s(tick[arrive:arrive + 1], base)[0])
                boxes.append([(x0, ty), (x1, ty), (x1, gy), (x0, gy)])
                box_colors.append(color)
            if answer is None:
                continue
            if err[answer]:
                if scaled:
                    failed["x"].append(x1)
                    failed["y"].append(gy)
                else:
                    ax.plot([x1], [EDGE_Y[1] if (gy or 0) > hi else EDGE_Y[0]], transform=edge, ls="none",
                            marker="X", ms=8, mfc=_FAILED, mec="white", mew=0.5, zorder=6)
            else:
                ry = float(physical_s(ts[answer:answer + 1], base)[0])
                dots["x"].append(x1)
                dots["y"].append(ry)
                dots["c"].append(color)
        if boxes:
            ax.add_collection(PolyCollection(boxes, facecolors=[mcolors.to_rgba(c, 0.16) for c in box_colors],
                                             edgecolors=[mcolors.to_rgba(c, 0.55) for c in box_colors],
                                             linewidths=0.6, zorder=2))
            _handle(ax, "wait", ls="none", marker="s", ms=8, mfc=mcolors.to_rgba(_UNKNOWN, 0.2),
                    mec=mcolors.to_rgba(_UNKNOWN, 0.6))
        if dash["x"]:
            ax.scatter(dash["x"], dash["y"], c=dash["c"], marker="_", s=110, linewidths=2.2, zorder=5)
            _handle(ax, "guarantee", ls="none", marker="_", ms=10, mew=2.2, color="0.35")
        for m in ("^", "v"):
            sel = [k for k, mk in enumerate(edges["m"]) if mk == m]
            if sel:
                ax.scatter([edges["x"][k] for k in sel], [edges["y"][k] for k in sel], transform=edge,
                           c=[edges["c"][k] for k in sel], marker=m, s=22, linewidths=0, zorder=5, clip_on=False)
        if dots["x"]:
            ax.scatter(dots["x"], dots["y"], c=dots["c"], marker="o", s=22, edgecolors="black", linewidths=0.5,
                       zorder=6)
            _handle(ax, "answer", ls="none", marker="o", ms=5, mfc="0.6", mec="black", mew=0.5)
        if failed["x"]:
            ax.plot(failed["x"], failed["y"], ls="none", marker="X", ms=8, mfc=_FAILED, mec="white", mew=0.5,
                    zorder=6)
        if failed["x"] or any(err[a] for _r, _x, a in reads_here if a is not None):
            _handle(ax, "failed", ls="none", marker="X", ms=8, mfc=_FAILED, mec="white", mew=0.5)
        ax.yaxis.set_major_formatter(SECONDS)
        ax.set_ylabel(f"vch {self.slot}")
        # top left: tsafe only rises, so its line starts low on the left and ends high on the right (where the
        # cursor stands at the end of a run): the one corner it does not cross. The time cursor does cross it (at a
        # page's start), so the name is one of the cursor artists (update returns it): drawn after the cursor line
        # and its veil in the stepper and the browser, above them by zorder in the filmstrip, on an opaque box.
        self.label = ax.text(0.008, 0.94, short_channel(v), transform=ax.transAxes, ha="left", va="top",
                             fontsize="x-small", color="0.35", zorder=CURSOR_ZORDER + 1,
                             bbox={"boxstyle": "square,pad=0.15", "fc": "white", "ec": "none"})
        _legend(ax)

    def setup(self, ax, events):
        self.label = None  # a run without this vchannel draws no name
        super().setup(ax, events)

    def update(self, cursor_index, t_ms):
        dots = move_all(self.tracks, cursor_index)
        return dots + [self.label] if self.label is not None else dots


class ReadsLane(Lane):
    """The clients: a row per client, each read a bar from the moment it was sent (``client.read_start``) to its
    answer (``client.read``) in the colour of its consistency level, a red cross at the end of a failed one (a bar
    still open at the end of the run runs to the edge); writes (``client.insert`` / ``client.delete``) as ticks.
    At the cursor: a ring on each client's latest read or write."""

    name = "reads"
    height_ratio = 0.9
    #: Minimum bar width in pixels-ish: a fraction of the run, so a read answered at once still shows.
    MIN_WIDTH = 0.004
    #: Writes are ticks this far under their client's row (bars are 0.56 high).
    WRITE_DY = 0.42

    def setup(self, ax, events):
        self.dots = None
        self.tracks: list[Track] = []
        clients = clients_of(events)
        ax.set_ylabel(self.name)
        if not clients:
            ax.text(0.5, 0.5, "no client reads or writes in this run", transform=ax.transAxes, **NO_DATA)
            ax.set_yticks([])
            return
        kinds = events["kind"].astype(str).to_numpy()
        node = texts(events, "node")
        t = num(events["t_ms"]) / 1000.0
        t_end = float(np.nanmax(t))
        req = requests(events)
        level = texts(events, "level")
        err = events["error"].notna().to_numpy()
        starts = np.flatnonzero(kinds == "client.read_start")
        settled = settled_levels(events, level, req)
        ends = {int(req[i]): int(i) for i in np.flatnonzero(kinds == "client.read")}
        min_w = self.MIN_WIDTH * max(t_end, 1e-9)
        row = {c: k for k, c in enumerate(clients)}
        bars: dict[str, list] = {lv: [] for lv in LEVELS + ("other",)}
        failed_x, failed_y = [], []
        positions: dict[str, list[tuple[int, float, float]]] = {c: [] for c in clients}
        for i in starts:
            c = node[i]
            if c not in row:
                continue
            end = ends.get(int(req[i]))
            x0 = t[i]
            x1 = t[end] if end is not None else t_end
            lv = settled.get(int(req[i]), "")
            lv = lv if lv in LEVEL_COLORS else "other"
            y = row[c]
            bars[lv].append((x0, max(x1 - x0, min_w), y))
            positions[c].append((int(i), x0, y))
            if end is not None:
                positions[c].append((end, x1, y))
                if err[end]:
                    failed_x.append(x1)
                    failed_y.append(y)
        for lv, items in bars.items():
            color = LEVEL_COLORS.get(lv, _UNKNOWN)
            for x0, w, y in items:
                ax.broken_barh([(x0, w)], (y - 0.28, 0.56), facecolors=color, edgecolors="white", linewidths=0.6,
                               alpha=0.85, zorder=3)
        for lv in LEVELS:  # the levels this run uses, in a fixed order (their colours never change)
            if bars[lv]:
                _handle(ax, lv, ls="none", marker="s", ms=8, color=LEVEL_COLORS[lv])
        for k, (kind, marker, label) in enumerate((("client.insert", "|", "insert"), ("client.delete", "x", "delete"))):
            m = np.flatnonzero(kinds == kind)
            m = [i for i in m if node[i] in row]
            if m:
                ax.plot(t[m], [row[node[i]] + self.WRITE_DY for i in m], ls="none", marker=marker,
                        ms=7 if marker == "|" else 5, mew=1.4, color=_WRITE, zorder=4)
                for i in m:
                    positions[node[i]].append((int(i), t[i], row[node[i]] + self.WRITE_DY))
                _handle(ax, label, ls="none", marker=marker, ms=7 if marker == "|" else 5, mew=1.4, color=_WRITE)
        if failed_x:
            ax.plot(failed_x, failed_y, ls="none", marker="X", ms=8, mfc=_FAILED, mec="white", mew=0.5, zorder=5)
            _handle(ax, "failed", ls="none", marker="X", ms=8, mfc=_FAILED, mec="white", mew=0.5)
        for c in clients:
            pts = sorted(positions[c])
            self.tracks.append(Track([p for p, _, _ in pts], [x for _, x, _ in pts], [y for _, _, y in pts]))
        (self.dots,) = ax.plot([], [], ls="none", marker="o", ms=6.5, mfc="none", mec="black", mew=1.2, zorder=6)
        ax.set_yticks(range(len(clients)), clients)
        ax.tick_params(axis="y", labelsize="small")
        ax.set_ylim(len(clients) - 0.4, -0.6)
        _legend(ax)

    def update(self, cursor_index, t_ms):
        return () if self.dots is None else move_rings(self.dots, self.tracks, cursor_index)


class ReadsEventsLane(EventsLane):
    """The events lane, laid out for many marks.

    A read is marked when it is answered, so a run has many marks: there are four label rows instead of three, and
    a label that finds no free row on the page is left out (its line stays; the cursor's own label is always
    shown) instead of being drawn over another one.
    """

    height_ratio = 1.0
    rows = (0.86, 0.62, 0.38, 0.14)
    hide_crowded = True

    def update(self, cursor_index, t_ms):
        out = super().update(cursor_index, t_ms)
        box = self.current.get_bbox_patch()
        if box is not None:  # framed, so a label it half covers does not read as part of it
            box.set_edgecolor(self.current.get_color())
            box.set_linewidth(0.8)
        return out


def query_lanes(vchannels: int = VCHANNEL_LANES) -> list[Lane]:
    """The query chapter's lanes: ``vchannels`` delegator lanes, the clients' reads, and the events lane."""
    if vchannels < 1:
        raise ValueError(f"draw at least one vchannel lane, got vchannels={vchannels}")
    return [DelegatorLane(k) for k in range(vchannels)] + [ReadsLane(), ReadsEventsLane()]
