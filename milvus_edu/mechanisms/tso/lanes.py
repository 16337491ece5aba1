"""The TSO mechanism's stepper lanes: physical part and window, logical counter, client answers.

See :mod:`milvus_edu.viz.lanes` for the lane protocol (``setup`` once, ``update`` per step).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter

from ...viz.data import clock_base_ms
from ...viz.lanes import (NO_DATA, EventsLane, Lane, Track, compact, cursor_dot, move_all, move_dot, move_rings, natural,
                          node_colors, num, rasterize_if_big, renderer_of)

#: Kinds whose rows carry a rootcoord's TSO state (``physical_ms``/``logical`` after the event).
TSO_STATE_KINDS = ("tso.init", "tso.update", "tso.alloc", "tso.set", "tso.reset")


def rootcoord_nodes(events: pd.DataFrame) -> list[str]:
    """Nodes that ran a timestamp oracle or a coordinator session, in natural order."""
    kinds = events["kind"].astype(str)
    # Test the few distinct kinds, not every row (a run log may hold a million).
    wanted = [k for k in kinds.unique() if k.startswith(("tso.", "rootcoord."))
              or k in ("session.active", "session.standby", "session.register")]
    return sorted({str(n) for n in events.loc[kinds.isin(wanted), "node"].unique()}, key=natural)


def client_nodes(events: pd.DataFrame) -> list[str]:
    """Nodes that emitted ``client.*`` events, in natural order."""
    kinds = events["kind"].astype(str)
    mask = kinds.isin([k for k in kinds.unique() if k.startswith("client.")])
    return sorted({str(n) for n in events.loc[mask, "node"].unique()}, key=natural)


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
        t_s = num(events["t_ms"]) / 1000.0
        phys = num(events["physical_ms"])
        clock = num(events["clock_ms"])
        node = events["node"].astype(str).to_numpy()
        is_state = kinds.isin(TSO_STATE_KINDS).to_numpy() & ~np.isnan(phys)
        has_clock = ~np.isnan(clock)
        self.tracks: list[tuple[Track, Line2D]] = []
        self.clocks: list[tuple[Track, Track, Line2D, Line2D, object]] = []
        drawn = False
        for n in nodes:
            m = is_state & (node == n)
            cm = has_clock & (node == n)
            if not (m.any() or cm.any()):
                continue
            y = (phys[m] - self.base) / 1000.0
            phys_track = Track(np.flatnonzero(m), t_s[m], y)
            if m.any():
                ax.plot(t_s[m], y, drawstyle="steps-post", color=colors[n], lw=2.0, label=f"{n} physical")
                self.tracks.append((phys_track, cursor_dot(ax, colors[n])))
            if cm.any():
                cy = (clock[cm] - self.base) / 1000.0
                (line,) = ax.plot(t_s[cm], cy, ls=(0, (0.01, 1.4)), lw=2.2, color=colors[n], alpha=1.0,
                                  dash_capstyle="round", label=f"{n} clock")
                rasterize_if_big(line, int(cm.sum()))
                (cdot,) = ax.plot([], [], marker="o", ms=7, mfc="white", mec=colors[n], mew=1.8, ls="none",
                                  zorder=6)
                (bracket,) = ax.plot([], [], color=colors[n], lw=1.5, zorder=5)
                gap = ax.text(0, 0, "", color=colors[n], fontsize="small", va="center", zorder=7,
                              bbox=dict(boxstyle="round,pad=0.15", fc="white", ec="none", alpha=0.85))
                self.clocks.append((phys_track, Track(np.flatnonzero(cm), t_s[cm], cy), cdot, bracket, gap))
            drawn = True
        # Width in pixels of the widest gap label, to keep it inside the axes (measured once).
        self.gap_px = 0.0
        if self.clocks:
            probe = self.clocks[0][4]
            probe.set_text("  clock 999.9 s ahead of physical")
            renderer = renderer_of(ax.figure)
            self.gap_px = (probe.get_window_extent(renderer).width if renderer else
                           34 * 0.6 * probe.get_fontsize() * ax.figure.dpi / 72.0)
            probe.set_text("")
        saves = (kinds == "tso.save").to_numpy() & ~np.isnan(num(events["window_end_ms"]))
        self.window = None
        if saves.any():
            pos = np.flatnonzero(saves)
            y = (num(events["window_end_ms"])[saves] - self.base) / 1000.0
            x = t_s[saves]
            t_end = np.nanmax(t_s)
            ax.plot(np.append(x, t_end), np.append(y, y[-1]), drawstyle="steps-post", color="black", ls="--",
                    lw=1.2, label="saved window end")
            self.window = (Track(pos, x, y), cursor_dot(ax, "white", size=6, marker="D"))
            drawn = True
        if drawn:
            lo, hi = np.nanmin(t_s), np.nanmax(t_s)
            ax.plot([lo, hi], [lo, hi], color="0.6", lw=0.8, zorder=0, label="true time")
            ax.legend(loc="upper left", ncol=3, frameon=False, handlelength=2.2)
        else:
            ax.text(0.5, 0.5, "no TSO events in this run", transform=ax.transAxes, **NO_DATA)
        ax.set_ylabel(self.name)

    def update(self, cursor_index, t_ms):
        out = move_all(self.tracks, cursor_index)
        if self.clocks:
            x0, x1 = self.ax.get_xlim()
            px_per_s = self.ax.get_window_extent().width / ((x1 - x0) or 1.0)
        for phys_track, clock_track, cdot, bracket, gap in self.clocks:
            move_dot(cdot, clock_track, cursor_index)
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
            move_dot(self.window[1], self.window[0], cursor_index)
            out.append(self.window[1])
        return out


class LogicalLane(Lane):
    """The logical counter of each rootcoord: a step line (resets to 0 on tsLoop updates), a mark per
    allocation (``tso.alloc``) and a red cross per attempt GenerateTSO refused for overflow (``tso.alloc_retry``)."""

    name = "logical"
    height_ratio = 1.2

    def setup(self, ax, events):
        nodes = rootcoord_nodes(events)
        colors = node_colors(nodes)
        kinds = events["kind"].astype(str)
        t_s = num(events["t_ms"]) / 1000.0
        logical = num(events["logical"])
        node = events["node"].astype(str).to_numpy()
        is_state = kinds.isin(TSO_STATE_KINDS).to_numpy() & ~np.isnan(logical)
        is_alloc = (kinds == "tso.alloc").to_numpy() & ~np.isnan(logical)
        self.tracks: list[tuple[Track, Line2D]] = []
        for n in nodes:
            m = is_state & (node == n)
            if not m.any():
                continue
            ax.plot(t_s[m], logical[m], drawstyle="steps-post", color=colors[n], lw=0.8, alpha=0.7)
            a = is_alloc & (node == n)
            if a.any():
                (marks,) = ax.plot(t_s[a], logical[a], ls="none", marker=".", ms=3, color=colors[n], label=n)
                rasterize_if_big(marks, int(a.sum()))
            self.tracks.append((Track(np.flatnonzero(m), t_s[m], logical[m]), cursor_dot(ax, colors[n], size=6)))
        # GenerateTSO's refused attempts (logical overflow): the counter they pushed past maxLogical, as red crosses
        retry = (kinds == "tso.alloc_retry").to_numpy() & ~np.isnan(logical)
        if retry.any():
            (crosses,) = ax.plot(t_s[retry], logical[retry], ls="none", marker="x", ms=5, color="#d62728",
                                 label="refused: over maxLogical")
            rasterize_if_big(crosses, int(retry.sum()))
        if self.tracks:
            top = max(np.nanmax(logical[is_state]) if is_state.any() else 0,
                      np.nanmax(logical[retry]) if retry.any() else 0)
            if top > (1 << 16):
                ax.axhline(1 << 17, color="0.5", lw=0.8, ls="--")
                ax.text(0.995, (1 << 17), "maxLogical/2", transform=ax.get_yaxis_transform(), ha="right",
                        va="bottom", fontsize="small", color="0.4")
            if top >= (1 << 18):
                ax.axhline(1 << 18, color="#d62728", lw=0.8, ls="--")
                ax.text(0.995, (1 << 18), "maxLogical", transform=ax.get_yaxis_transform(), ha="right",
                        va="bottom", fontsize="small", color="#d62728")
            ax.set_ylim(bottom=0)
            ax.yaxis.set_major_formatter(FuncFormatter(compact))
        else:
            ax.text(0.5, 0.5, "no allocations in this run", transform=ax.transAxes, **NO_DATA)
        ax.set_ylabel(self.name)

    def update(self, cursor_index, t_ms):
        return move_all(self.tracks, cursor_index)


class ClientLane(Lane):
    """Answers per client: one row per client, a mark per ``client.recv`` coloured by the rootcoord
    that answered, a red cross per ``client.error``."""

    name = "clients"
    height_ratio = 1.0

    def setup(self, ax, events):
        clients = client_nodes(events)
        colors = node_colors(rootcoord_nodes(events))
        kinds = events["kind"].astype(str).to_numpy()
        t_s = num(events["t_ms"]) / 1000.0
        node = events["node"].astype(str).to_numpy()
        peer_codes, peer_names = pd.factorize(events["peer"])  # -1 for no peer
        self.tracks: list[Track] = []
        for row, c in enumerate(clients):
            recv = (kinds == "client.recv") & (node == c)
            # One marker line per answering rootcoord (drawn far faster than a scatter of a million points).
            for code in np.unique(peer_codes[recv]):
                m = recv & (peer_codes == code)
                color = colors.get(str(peer_names[code]), "0.4") if code >= 0 else "0.4"
                (marks,) = ax.plot(t_s[m], np.full(m.sum(), row), ls="none", marker="|", ms=6.3, mew=1.0, color=color)
                rasterize_if_big(marks, int(m.sum()))
            err = (kinds == "client.error") & (node == c)
            if err.any():
                ax.scatter(t_s[err], np.full(err.sum(), row), c="#d62728", marker="x", s=14, lw=0.8)
            self.tracks.append(Track(np.flatnonzero(recv), t_s[recv], np.full(recv.sum(), row)))
        if clients:
            ax.set_yticks(range(len(clients)), clients)
            ax.set_ylim(-0.6, len(clients) - 0.4)
            (self.dots,) = ax.plot([], [], ls="none", marker="o", ms=7, mfc="none", mec="black", mew=1.2, zorder=6)
        else:
            self.dots = None
            ax.set_yticks([])
            ax.text(0.5, 0.5, "no clients in this run", transform=ax.transAxes, **NO_DATA)
        ax.set_ylabel(self.name)

    def update(self, cursor_index, t_ms):
        return () if self.dots is None else move_rings(self.dots, self.tracks, cursor_index)


def tso_lanes() -> list[Lane]:
    """The TSO chapter's lanes: physical part and window, logical counter, client answers, events."""
    return [PhysicalLane(), LogicalLane(), ClientLane(), EventsLane()]
