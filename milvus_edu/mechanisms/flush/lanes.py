"""The flush mechanism's stepper lanes: one per vchannel (time tick, consumed position, checkpoints, flushTs) and
one for the write buffer's rows.

See :mod:`milvus_edu.viz.lanes` for the lane protocol (``setup`` once, ``update`` per step). Timestamps are drawn
by their physical part in seconds since the run start, on the same scale as the x axis (simulated seconds), as
the TimeTick lanes draw them: a position that keeps up with time runs along the diagonal, and a checkpoint that
stays behind is a flat line under it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from ...narrate import detail_dict
from ...viz.columns import base_ms, ints, natural, short_channel, texts, time_ticks
from ...viz.lanes import NO_DATA, EventsLane, Lane, Track, cursor_dot, move_all, num
from ...viz.tslanes import SECONDS, PageY, VChannelSlotLane, physical_s, vchannels_watched

#: Vchannel lanes :func:`flush_lanes` draws by default (every flush scenario has 2).
VCHANNEL_LANES = 2

_TICK = "#2ca02c"
_CONSUMED = "#1f77b4"
_HANDED = "#ff7f0e"
_STORED = "#d62728"
_FLUSH = "#6a3d9a"
#: flushTs's dashes, rings and labels: above the lines, below the stepper's veil (zorder 5, milvus_edu.viz.render), so
#: that they fade after the cursor as everything else does (above it, a static frame showed a ring before it happened)
_FLUSH_Z = 4.8


def vchannels_of(events: pd.DataFrame) -> list[str]:
    """The vchannels a DataNode watched, in natural order."""
    return vchannels_watched(events, "datanode.watch")


def _rows_of(events: pd.DataFrame, vchannel: str):
    """``rows(kind)``: positions of ``kind`` rows of ``vchannel`` (the columns are converted once)."""
    kinds = events["kind"].astype(str).to_numpy()
    mine = texts(events, "vchannel") == vchannel
    return lambda kind: np.flatnonzero((kinds == kind) & mine)


def _step(ax, page: PageY, x, y, t_end: float, **style) -> None:
    if len(x):
        sx, sy = np.append(x, max(t_end, x[-1])), np.append(y, y[-1])
        page.add(sx, sy, step=True)
        ax.plot(sx, sy, drawstyle="steps-post", **style)


class VChannelLane(VChannelSlotLane):
    """One vchannel as the DataNode consumes it, with what DataCoord stored.

    Green: the time ticks written to its pchannel (what may be consumed). Blue: the consumed position (the end
    of each pack the writeNode buffered or the ttNode checkpointed). Orange dots: each checkpoint the ttNode
    handed to the updater. Red: the channel checkpoint DataCoord stored (the seek position a recovering node
    starts from). Purple dashes: flushTs, from when ``FlushChannels`` set it to when a stored checkpoint strictly
    past it cleared it (a bar) or a later flush replaced it. Purple rings: stored checkpoints on flushTs's
    millisecond, labelled with how they compare to it (``= flushTs``, ``= flushTs +1``). At the cursor: a dot on the consumed position and
    one on the stored checkpoint.

    ``slot`` picks the vchannel: the ``slot``-th of the run's watched vchannels in natural order.
    """

    watch_kind = "datanode.watch"

    def draw(self, ax, events, v: str) -> None:
        rows = _rows_of(events, v)
        base = base_ms(events)
        t = num(events["t_ms"]) / 1000.0
        t_end = float(np.nanmax(t))
        ts, _ = ints(events, "ts")
        end_ts, has_end = ints(events, "end_ts")
        tick_ts, has_tick = ints(events, "tick_ts")
        # consumed: buffered packs' ends and the packs the ttNode checkpointed, in log order, never back (a real
        # server's log gives a buffered pack no end: milvus_edu.real.logs)
        buf, cps = rows("datanode.buffer"), rows("datanode.checkpoint")
        cons_pos = np.sort(np.concatenate([buf[has_end[buf]], cps[has_tick[cps]]]))
        cons_val = np.where(np.isin(cons_pos, buf), end_ts[cons_pos], tick_ts[cons_pos])
        watches = rows("datanode.watch")
        ticks = time_ticks(events)
        pch = str(events.loc[events.index[watches[0]], "channel"]) if len(watches) else ""
        ticks = ticks[ticks["channel"] == pch]
        stored = [i for i in rows("datacoord.channel_cp")
                  if pd.isna(events["error"].iat[i]) and detail_dict(events["detail"].iat[i]).get("saved")]
        stored = np.asarray(stored, dtype=np.int64)
        all_y = [physical_s(x, base) for x in (cons_val, ticks["tick_ts"].to_numpy(), ts[stored]) if len(x)]
        ys = np.concatenate(all_y) if all_y else np.array([0.0, 1.0])
        lo, hi = float(np.nanmin(ys)), float(np.nanmax(ys))
        pad = (hi - lo) * 0.06 or 0.5
        page = self.page_y = PageY(ax, (lo - pad, hi + pad))
        _step(ax, page, ticks["t_ms"].to_numpy() / 1000.0, physical_s(ticks["tick_ts"].to_numpy(), base), t_end,
              color=_TICK, lw=1.0, alpha=0.7, label="time tick", zorder=2)
        cx, cy = t[cons_pos], physical_s(cons_val, base)
        _step(ax, page, cx, cy, t_end, color=_CONSUMED, lw=1.4, label="consumed", zorder=3)
        hx, hy = t[cps], physical_s(ts[cps], base)
        if len(cps):
            ax.plot(hx, hy, ls="none", marker="o", ms=3.5, color=_HANDED, label="checkpoint handed", zorder=4)
        sx, sy = t[stored], physical_s(ts[stored], base)
        _step(ax, page, sx, sy, t_end, color=_STORED, lw=2.0, label="stored checkpoint", zorder=5)
        spans = self._flush_ts(ax, events, rows("datanode.flush_ts"), base, t, ts, t_end)
        self._mark_at_flush_ts(ax, spans, sx, sy, ts[stored])
        if len(cons_pos):
            self.tracks.append((Track(cons_pos, cx, cy), cursor_dot(ax, _CONSUMED, size=6)))
        if len(stored):
            self.tracks.append((Track(stored, sx, sy), cursor_dot(ax, _STORED, size=6, marker="s")))
        ax.yaxis.set_major_formatter(SECONDS)
        ax.set_ylabel(f"vch {self.slot}")
        ax.text(0.995, 0.04, short_channel(v), transform=ax.transAxes, ha="right", va="bottom", fontsize="x-small",
                color="0.35")
        handles = ax.get_legend_handles_labels()[0]
        if handles:
            ax.legend(loc="upper left", ncol=5 if len(handles) <= 5 else 3, frameon=False)

    @staticmethod
    def _flush_ts(ax, events, rows, base, t, ts, t_end) -> list[tuple[float, float, int]]:
        """Draw each flushTs from set to cleared (or replaced); return the spans ``(from s, until s, flushTs)``."""
        start = None
        labelled = False
        spans = []

        def draw(until: float, cleared: bool) -> None:
            nonlocal labelled
            ax.plot([start[0], until], [start[1], start[1]], color=_FLUSH, ls="--", lw=1.8, zorder=_FLUSH_Z,
                    label=None if labelled else "flushTs (set → cleared)")
            if cleared:
                ax.plot([until], [start[1]], marker="|", ms=9, color=_FLUSH, zorder=_FLUSH_Z)
            labelled = True
            spans.append((start[0], until, start[2]))

        for i in rows:
            is_set = bool(detail_dict(events["detail"].iat[i]).get("set"))
            if start is not None:  # cleared, or replaced by a later flush's flushTs while still set
                draw(t[i], cleared=not is_set)
                start = None
            if is_set:
                start = (t[i], physical_s(ts[i:i + 1], base)[0], int(ts[i]))
        if start is not None:
            draw(t_end, cleared=False)
        return spans

    @staticmethod
    def _mark_at_flush_ts(ax, spans, sx, sy, stored_ts) -> None:
        """Ring every stored checkpoint that falls on the open flushTs's millisecond and say how it compares.

        At the lane's scale (tens of seconds) a checkpoint equal to flushTs and one a few logical steps past it
        draw the same pixel, yet ``NotifyCheckpointUpdated`` treats them differently (``>``): the label tells
        them apart, once per flush.
        """
        labelled = False
        for t0, t1, flush_ts in spans:
            said = False
            for x, y, cp in zip(sx, sy, stored_ts):
                if not t0 <= x <= t1 or int(cp) >> 18 != flush_ts >> 18:
                    continue
                ax.plot([x], [y], ls="none", marker="o", ms=11, mfc="none", mec=_FLUSH, mew=1.6, zorder=_FLUSH_Z,
                        label=None if labelled else "stored checkpoint at flushTs")
                labelled = True
                if not said:
                    delta = int(cp) - flush_ts
                    text = "checkpoint = flushTs" if delta == 0 else f"checkpoint = flushTs {delta:+d}"
                    # on the ring's left: with the cursor on the stored checkpoint the label is unveiled, and it
                    # is not cut off at the window's right edge
                    ax.annotate(text, (x, y), xytext=(-9, -16), textcoords="offset points", ha="right",
                                fontsize="small", fontweight="bold", color=_FLUSH, zorder=_FLUSH_Z)
                    said = True

    def update(self, cursor_index, t_ms):
        return move_all(self.tracks, cursor_index)


class WriteBufferLane(Lane):
    """Rows in each vchannel's write buffer (``vch k`` is the k-th vchannel lane): up with every buffered pack, down when a sync is cut (the rows go to
    the sync task), to zero when the DataNode crashes. A saw-tooth of full-buffer syncs; a drop to zero at a flush."""

    name = "buffer"
    height_ratio = 0.8

    def setup(self, ax, events):
        self.tracks: list[tuple[Track, Line2D]] = []
        kinds = events["kind"].astype(str).to_numpy()
        vch = texts(events, "vchannel")
        nodes = texts(events, "node")
        count, _ = ints(events, "count")
        t = num(events["t_ms"]) / 1000.0
        t_end = float(np.nanmax(t))
        owner: dict[str, str] = {}
        totals: dict[str, int] = {}
        series: dict[str, tuple[list, list, list]] = {}
        for i in np.flatnonzero(np.isin(kinds, ["datanode.watch", "datanode.buffer", "datanode.sync", "fault.kill"])):
            k = kinds[i]
            if k == "fault.kill":
                hit = [v for v, n in owner.items() if n == nodes[i]]
            else:
                v = vch[i]
                if k == "datanode.watch":
                    owner[v] = nodes[i]
                    totals[v] = 0
                elif k == "datanode.buffer":
                    totals[v] = totals.get(v, 0) + int(count[i])
                elif not detail_dict(events["detail"].iat[i]).get("level") == "L0":
                    totals[v] = max(0, totals.get(v, 0) - int(count[i]))
                hit = [v]
            for v in hit:
                if k == "fault.kill":
                    totals[v] = 0
                xs, ys, ps = series.setdefault(v, ([], [], []))
                xs.append(t[i])
                ys.append(totals[v])
                ps.append(i)
        if not series:
            ax.text(0.5, 0.5, "no write buffer in this run", transform=ax.transAxes, **NO_DATA)
            ax.set_yticks([])
            ax.set_ylabel(self.name)
            return
        colors = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd")
        shown = sorted(series, key=natural)
        for k, v in enumerate(shown):
            xs, ys, ps = series[v]
            x, y = np.append(xs, max(t_end, xs[-1])), np.append(ys, ys[-1])
            # evenly split rows draw the same line on every vchannel: each later one thinner, so all stay visible
            ax.plot(x, y, drawstyle="steps-post", color=colors[k % len(colors)], lw=1.3 + 1.4 * (len(shown) - 1 - k),
                    label=f"rows buffered, vch {k}")
            self.tracks.append((Track(ps, xs, ys), cursor_dot(ax, colors[k % len(colors)], size=5)))
        ax.set_ylim(bottom=0)
        ax.set_ylabel(self.name)
        ax.legend(loc="upper left", ncol=4, frameon=False)

    def update(self, cursor_index, t_ms):
        return move_all(self.tracks, cursor_index)


def flush_lanes(vchannels: int = VCHANNEL_LANES) -> list[Lane]:
    """The flush chapter's lanes: ``vchannels`` vchannel lanes, the write buffer's rows, and the events lane."""
    if vchannels < 1:
        raise ValueError(f"draw at least one vchannel lane, got vchannels={vchannels}")
    return [VChannelLane(k) for k in range(vchannels)] + [WriteBufferLane(), EventsLane()]
