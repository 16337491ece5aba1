"""The TimeTick mechanism's stepper lanes: one per pchannel, the proxies' reports, the consumers' packs.

See :mod:`milvus_edu.viz.lanes` for the lane protocol (``setup`` once, ``update`` per step).

Timestamps are drawn by their physical part relative to the run start, in seconds (``(ts >> 18)``
minus the wall clock at simulated time 0), on the same scale as the x axis (simulated seconds): a
message written at 1.2 s with a timestamp allocated at 1.19 s sits just under the diagonal.
"""

from __future__ import annotations

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from ...narrate import detail_dict
from ...viz.columns import base_ms, ints, natural, short_channel, texts, time_ticks
from ...viz.lanes import (NO_DATA, EventsLane, Lane, Track, cursor_dot, move_all, move_rings, node_colors, num,
                          rasterize_if_big)
from ...viz.tslanes import SECONDS, PageY, physical_s
from .panel import SILENT_MS, dml_messages, pchannels_of, proxies_of

#: How many pchannel lanes :func:`timetick_lanes` draws by default (every TimeTick scenario has 4).
PCHANNEL_LANES = 4

#: Columns of the legend the stepper puts above the lanes (two rows for the ten or eleven entries).
LEGEND_COLUMNS = 6


#: Messages in timestamp order are grey dots; out-of-order ones are vermillion triangles (Okabe-Ito), so they differ
#: in shape and lightness as well as hue, and neither is the blue or orange of a proxy's report line.
_DML = "#8c8c8c"
_OUT_OF_ORDER = "#D55E00"
#: Marker areas (pt^2) of a message dot and of an out-of-order triangle: about 4 and 6 px across at the stepper's 90 dpi.
DML_SIZE = 10.0
OUT_OF_ORDER_SIZE = 24.0
_BROKEN = "#d62728"
_TICK = "#2ca02c"
_SILENT = "#b3261e"


def ts_limits(events: pd.DataFrame, base: int) -> tuple[float, float]:
    """A y range (s) holding every message, tick and report timestamp of the run."""
    kinds = events["kind"].astype(str).isin(["mq.produce", "proxy.report", "proxy.enqueue"]).to_numpy()
    ts, has = ints(events, "ts")
    y = physical_s(ts[kinds & has], base)
    if not len(y):
        return 0.0, 1.0
    lo, hi = min(float(y.min()), 0.0), float(y.max())
    pad = (hi - lo) * 0.04 or 0.5
    return lo - pad, hi + pad


def _legend(ax) -> None:
    """The lane's legend (the stepper moves it above the lanes), when the lane drew anything labelled."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="upper left", ncol=LEGEND_COLUMNS, frameon=False)


def _handle(ax, label, **style) -> None:
    """An empty line that only gives the legend a readable handle (the data is drawn with tiny marks)."""
    ax.plot([], [], label=label, **style)


class PChannelLane(Lane):
    """One pchannel: its DML messages, its time ticks as the watermark, broken promises in red.

    Each DML message is a grey dot at (simulated time written, physical part of its ``end_ts``);
    messages written below the highest timestamp already in the pchannel (out of order, which is
    fine) are vermillion triangles; a message at or below a time tick already written (the watermark promise broken,
    only with the ``allocate_outside_enqueue_lock`` bug switch) is a red cross. The time ticks are a
    rising green step line; the shade under it is what consumers may already have been handed. At the
    cursor: a green diamond on the latest tick and a ringed dot on the latest message.

    ``slot`` picks the pchannel: the ``slot``-th of the run's pchannels in natural order.
    """

    height_ratio = 1.0

    def __init__(self, slot: int = 0):
        if slot < 0:
            raise ValueError(f"a pchannel slot counts from 0, got {slot}")
        self.slot = int(slot)
        self.name = f"pchannel {self.slot}"

    def setup(self, ax, events):
        channels = pchannels_of(events)
        self.tracks: list[tuple[Track, Line2D]] = []
        if self.slot >= len(channels):
            ax.text(0.5, 0.5, f"this run has no pchannel #{self.slot}", transform=ax.transAxes, **NO_DATA)
            ax.set_yticks([])
            ax.set_ylabel(self.name)
            return
        c = channels[self.slot]
        self.channel = c
        base = base_ms(events)
        ylim = ts_limits(events, base)
        t_end = float(np.nanmax(num(events["t_ms"]))) / 1000.0
        msgs = dml_messages(events)
        msgs = msgs[msgs["channel"] == c]
        x = msgs["t_ms"].to_numpy() / 1000.0
        y = physical_s(msgs["end_ts"].to_numpy(), base)
        ooo = msgs["out_of_order"].to_numpy()
        broken = msgs["below_tick"].to_numpy()
        ticks = time_ticks(events)
        ticks = ticks[ticks["channel"] == c]
        tx = ticks["t_ms"].to_numpy() / 1000.0
        ty = physical_s(ticks["tick_ts"].to_numpy(), base)
        self.page_y = PageY(ax, ylim)
        self.page_y.add(x, y)
        if len(tx):
            sx, sy = np.append(tx, max(t_end, tx[-1])), np.append(ty, ty[-1])
            self.page_y.add(sx, sy, step=True)
            ax.fill_between(sx, sy, ylim[0], step="post", color=_TICK, alpha=0.13, lw=0, zorder=1)
            ax.plot(sx, sy, drawstyle="steps-post", color=_TICK, lw=1.6, zorder=3)
            _handle(ax, "time tick", color=_TICK, lw=1.6)
        # In-order messages first, the out-of-order ones on top: they are the ones a reader must wait for.
        ok = ~broken
        if ok.any():
            dots = ax.scatter(x[ok & ~ooo], y[ok & ~ooo], c=_DML, s=DML_SIZE, linewidths=0, zorder=2)
            rasterize_if_big(dots, int((ok & ~ooo).sum()))
            _handle(ax, "DML message", ls="none", marker="o", ms=5, mew=0, color=_DML)
            if (ooo & ok).any():
                late = ax.scatter(x[ok & ooo], y[ok & ooo], c=_OUT_OF_ORDER, marker="^", s=OUT_OF_ORDER_SIZE,
                                  linewidths=0, zorder=2.5)
                rasterize_if_big(late, int((ok & ooo).sum()))
                _handle(ax, "out of order", ls="none", marker="^", ms=6, mew=0, color=_OUT_OF_ORDER)
        if broken.any():
            ax.plot(x[broken], y[broken], ls="none", marker="X", ms=7, mfc=_BROKEN, mec="white", mew=0.5, zorder=5,
                    label="below a tick!")
        if len(msgs):
            (ring,) = ax.plot([], [], ls="none", marker="o", ms=6.5, mfc="none", mec="black", mew=1.3, zorder=6)
            self.tracks.append((Track(msgs["pos"].to_numpy(), x, y), ring))
        if len(tx):
            self.tracks.append((Track(ticks["pos"].to_numpy(), tx, ty), cursor_dot(ax, _TICK, size=7, marker="D")))
        if not len(msgs) and not len(tx):
            ax.text(0.5, 0.5, f"nothing written to {short_channel(c)}", transform=ax.transAxes, **NO_DATA)
        ax.yaxis.set_major_formatter(SECONDS)
        ax.set_ylabel(short_channel(c))
        _legend(ax)

    def update(self, cursor_index, t_ms):
        return move_all(self.tracks, cursor_index)


class ProxyLane(Lane):
    """What each proxy tells rootcoord, and the pchannel statistics behind it.

    Per proxy (one colour each): its reports as a step line of the default value (``proxy.report``
    ``ts``, what rootcoord uses for every pchannel the report does not list) with a short dash per
    listed pchannel value; thin lines are its pchannel statistics' ``min_ts`` after every enqueue and
    finish (broken where the pchannel has no task left). A proxy whose report loop stalls shows a flat
    step line while its statistics keep rising; a task that holds its pchannel's minimum shows as a
    flat thin line. At the cursor a dot marks each proxy's last report, and a proxy that has not
    reported for :data:`~.panel.SILENT_MS` or more is named in red with how long it has been silent.
    """

    name = "reports"
    height_ratio = 1.5

    def setup(self, ax, events):
        self.ax = ax
        proxies = proxies_of(events)
        colors = node_colors(proxies)
        base = base_ms(events)
        ylim = ts_limits(events, base)
        t_all = num(events["t_ms"])
        t_end = float(np.nanmax(t_all)) / 1000.0
        t_s = t_all / 1000.0
        kinds = events["kind"].astype(str).to_numpy()
        node = texts(events, "node")
        channel = texts(events, "channel")
        ts, has_ts = ints(events, "ts")
        min_ts, has_min = ints(events, "min_ts")
        details = events["detail"].to_numpy(dtype=object, na_value=None)
        is_report = (kinds == "proxy.report") & has_ts
        is_stats = np.isin(kinds, ["proxy.enqueue", "proxy.finish"])
        self.tracks: list[tuple[Track, Line2D]] = []
        self.names: list[str] = []
        stats_drawn = listed_drawn = False
        self.page_y = PageY(ax, ylim)
        for p in proxies:
            color = colors[p]
            st = is_stats & (node == p)
            for c in sorted(set(channel[st]), key=natural):
                m = st & (channel == c)
                y = np.where(has_min[m], physical_s(min_ts[m], base), np.nan)
                (line,) = ax.plot(t_s[m], y, drawstyle="steps-post", color=color, lw=0.7, alpha=0.5, zorder=2)
                self.page_y.add(t_s[m], y, step=True)
                rasterize_if_big(line, int(m.sum()))
                stats_drawn = True
            m = is_report & (node == p)
            if not m.any():
                continue
            pos = np.flatnonzero(m)
            x, y = t_s[m], physical_s(ts[m], base)
            sx, sy = np.append(x, max(t_end, x[-1])), np.append(y, y[-1])
            # Proxies usually report nearly the same values: each later line is thinner, so all show.
            ax.plot(sx, sy, drawstyle="steps-post", color=color, lw=max(2.8 - 0.9 * len(self.names), 1.0), zorder=4,
                    label=f"{p} report")
            self.page_y.add(sx, sy, step=True)
            ax.plot(x, y, ls="none", marker="o", ms=2.5, color=color, zorder=4)
            lx, ly = [], []
            for i in pos:
                for value in _channels(details[i]).values():
                    lx.append(t_s[i])
                    ly.append(physical_s(np.array([int(value)]), base)[0])
            if lx:
                ax.plot(lx, ly, ls="none", marker="_", ms=6, mew=1.2, color=color, alpha=0.8, zorder=3)
                listed_drawn = True
            self.tracks.append((Track(pos, x, y), cursor_dot(ax, color, size=7)))
            self.names.append(p)
        if listed_drawn:
            _handle(ax, "listed value", ls="none", marker="_", ms=8, mew=1.4, color="0.35")
        if stats_drawn:
            _handle(ax, "queue min_ts", color="0.35", lw=0.8, alpha=0.7)
        if not proxies:
            ax.text(0.5, 0.5, "no proxies in this run", transform=ax.transAxes, **NO_DATA)
        self.silent = ax.text(0.006, 0.93, "", transform=ax.transAxes, fontsize="small", color=_SILENT, va="top",
                              ha="left", zorder=7, bbox=dict(boxstyle="round,pad=0.15", fc="white", ec="none",
                                                            alpha=0.85))
        ax.yaxis.set_major_formatter(SECONDS)
        ax.set_ylabel(self.name)
        _legend(ax)

    def update(self, cursor_index, t_ms):
        out = move_all(self.tracks, cursor_index)
        quiet = []
        for name, (track, _dot) in zip(self.names, self.tracks):
            k = track.at(cursor_index)
            if k >= 0 and t_ms - track.x[k] * 1000.0 >= SILENT_MS:
                quiet.append(f"{name} silent for {(t_ms / 1000.0 - track.x[k]):.1f} s")
        self.silent.set_text("; ".join(quiet))
        self.silent.set_visible(bool(quiet))
        out.append(self.silent)
        return out


def _channels(raw) -> dict:
    """A report's per-pchannel values (``detail.channels``)."""
    return detail_dict(raw).get("channels", {}) or {}


class PackLane(Lane):
    """The tt-aligned packs consumers received: a row per pchannel, a short row per vchannel in it.

    Each ``mq.pack`` is a tick at the simulated time it was delivered, grey when empty and darker blue
    the more messages it holds; a stall shows as a gap followed by one dark tick. At the cursor a ring
    marks the latest pack of every vchannel.
    """

    name = "packs"
    height_ratio = 1.1
    #: Distance between two vchannels of one pchannel (a pchannel row is 1 high).
    spacing = 0.36

    def setup(self, ax, events):
        kinds = events["kind"].astype(str).to_numpy()
        is_pack = kinds == "mq.pack"
        channel = texts(events, "channel")
        vchannel = texts(events, "vchannel")
        count, has_count = ints(events, "count")
        t_s = num(events["t_ms"]) / 1000.0
        chans = sorted({c for c in channel[is_pack] if c}, key=natural)
        self.tracks: list[Track] = []
        if not chans:
            self.dots = None
            ax.set_yticks([])
            ax.text(0.5, 0.5, "no packs consumed in this run", transform=ax.transAxes, **NO_DATA)
            ax.set_ylabel(self.name)
            return
        blues = matplotlib.colormaps["Blues"]
        top = max(int(count[is_pack & has_count].max()), 1) if (is_pack & has_count).any() else 1
        xs, ys, colors = [], [], []
        for g, c in enumerate(chans):
            vs = sorted({v for v in vchannel[is_pack & (channel == c)]}, key=natural)
            for j, v in enumerate(vs):
                y = g + (j - (len(vs) - 1) / 2.0) * self.spacing
                m = is_pack & (channel == c) & (vchannel == v)
                k = np.where(has_count[m], count[m], 0)
                shade = 0.45 + 0.55 * np.log1p(k) / np.log1p(top)
                xs.append(t_s[m])
                ys.append(np.full(m.sum(), y))
                colors.append(np.where((k > 0)[:, None], blues(shade), matplotlib.colors.to_rgba("0.72")))
                self.tracks.append(Track(np.flatnonzero(m), t_s[m], np.full(m.sum(), y)))
        x, y, col = np.concatenate(xs), np.concatenate(ys), np.concatenate(colors)
        sc = ax.scatter(x, y, c=col, marker="|", s=30, linewidths=1.3, zorder=3)
        rasterize_if_big(sc, len(x))
        _handle(ax, "pack", ls="none", marker="|", ms=8, mew=1.6, color=blues(0.85))
        _handle(ax, "empty pack", ls="none", marker="|", ms=8, mew=1.6, color="0.72")
        ax.set_yticks(range(len(chans)), [short_channel(c) for c in chans])
        ax.set_ylim(len(chans) - 0.5, -0.5)
        (self.dots,) = ax.plot([], [], ls="none", marker="o", ms=6, mfc="none", mec="black", mew=1.1, zorder=6)
        ax.set_ylabel(self.name)
        _legend(ax)

    def update(self, cursor_index, t_ms):
        return () if self.dots is None else move_rings(self.dots, self.tracks, cursor_index)


def timetick_lanes(pchannels: int = PCHANNEL_LANES) -> list[Lane]:
    """The TimeTick chapter's lanes: ``pchannels`` pchannel lanes, proxy reports, packs, events."""
    if pchannels < 1:
        raise ValueError(f"draw at least one pchannel lane, got pchannels={pchannels}")
    return [PChannelLane(k) for k in range(pchannels)] + [ProxyLane(), PackLane(), EventsLane()]
