"""The TimeTick mechanism's part of the stepper's state panel, and the events worth a filmstrip picture.

:class:`TimeTickPanel` keeps, for every position ``i`` of the log, the state *after* event ``i``:

* per pchannel: the last time tick written to it (value, simulated time) and how many DML messages
  were written after it; how many messages so far arrived out of timestamp order or below a tick;
* per proxy: its last report to rootcoord (default and the pchannels it listed), its pending tasks per
  pchannel (``proxy.enqueue`` minus ``proxy.finish`` rows since it last started) and the last
  pchannel statistics it recorded (``min_ts``, null when no task is left), whether it is killed or
  its report loop is stalled;
* rootcoord: its timetick sync's sessions and what its last ``rootcoord.timetick_update`` said
  (whom it is still waiting for);
* the last pack a dispatcher handed out (``mq.pack``) and the messages it delivered (the ``mq.consume``
  rows logged just before it), each with the event that wrote it; a message of the pack's interval written
  after the pack (which only a broken watermark allows) is counted as missed.

Everything is computed in one vectorised pass over the events' own columns (forward-filled positions
and running counts, a few integer arrays per pchannel and proxy), so :meth:`TimeTickPanel.state` is
O(pchannels x proxies); no model logic is re-run. :func:`dml_messages` is shared with the lanes
(:mod:`milvus_edu.mechanisms.timetick.lanes`); the column readers every lesson's views share are in
:mod:`milvus_edu.viz.columns`.
"""

from __future__ import annotations

import html

import numpy as np
import pandas as pd

from ...narrate import detail_dict, ts_text
from ...registry import Mark
from ...viz.columns import ints, natural, short_channel, texts, time_ticks
from .kinds import DML_TYPES

#: ``msg_type`` values of DML messages (everything else in a pchannel is control: time ticks).
#: A proxy whose last report is at least this old (ms) is shown as silent (it reports every 200 ms).
SILENT_MS = 1000.0
#: Up to this many pictures (the filmstrip keeps the first four steps).
FILM_PICTURES = 4
#: Two pictures closer than this fraction of the run's simulated time are one too many.
FILM_APART = 0.03
#: The panel names up to this many messages of the last pack (six made its last row run past the panel's foot in
#: JupyterLab at 1280 x 800: the row is the panel's last, and the panel is as tall as the screen leaves it).
PACK_SHOWN = 4
#: The "last ticks" table's cells (its header says what each column is; the cell padding keeps the columns apart).
_TICK_CELL = "padding: 0 6px 0 0"
_TICK_HEAD = (f"<tr style='color: #666'><td style='{_TICK_CELL}'></td>"
              f"<td style='{_TICK_CELL}' title='the last time tick written to the pchannel'>tick</td>"
              f"<td style='{_TICK_CELL}' title='when it was written (s)'>at (s)</td>"
              "<td style='text-align: right' title='DML messages written to the pchannel after it'>after</td></tr>")


def pchannels_of(frame: pd.DataFrame) -> list[str]:
    """The pchannels a run wrote to or queued tasks for, in natural order."""
    kinds = frame["kind"].astype(str)
    mask = (kinds.isin(["mq.produce", "proxy.enqueue", "proxy.finish", "mq.pack"]).to_numpy()
            & frame["channel"].notna().to_numpy())
    return sorted({str(c) for c in frame.loc[mask, "channel"]}, key=natural)


def proxies_of(frame: pd.DataFrame) -> list[str]:
    """The proxies (nodes of ``proxy.*`` events), in natural order."""
    mask = frame["kind"].astype(str).str.startswith("proxy.").to_numpy()
    return sorted({str(n) for n in frame.loc[mask, "node"]}, key=natural)


def dml_messages(frame: pd.DataFrame) -> pd.DataFrame:
    """Every DML message written to a pchannel, with how it relates to what the pchannel already holds.

    Columns: ``pos`` (row position), ``t_ms``, ``channel``, ``vchannel``, ``node`` (the writer),
    ``end_ts`` (``int64``); ``highest`` (the highest ``end_ts`` written to the pchannel before it, -1 for
    the first); ``out_of_order`` (``end_ts < highest``: a younger message is already in the pchannel);
    ``tick`` (the highest time tick written to the pchannel before it, -1 before the first tick) and
    ``below_tick`` (``end_ts <= tick``: the watermark promise is broken, which only the
    ``allocate_outside_enqueue_lock`` bug switch makes happen).
    """
    kinds = frame["kind"].astype(str).to_numpy()
    mtype = texts(frame, "msg_type")
    channel = texts(frame, "channel")
    end, has_end = ints(frame, "end_ts")
    ts, _ = ints(frame, "ts")
    mask = (kinds == "mq.produce") & np.isin(mtype, DML_TYPES)
    pos = np.flatnonzero(mask)
    end_ts = np.where(has_end[pos], end[pos], ts[pos])
    ch = channel[pos]
    highest = np.full(len(pos), -1, dtype=np.int64)
    tick_before = np.full(len(pos), -1, dtype=np.int64)
    ticks = time_ticks(frame)
    for c in np.unique(ch):
        sel = np.flatnonzero(ch == c)
        e = end_ts[sel]
        if len(e) > 1:
            highest[sel[1:]] = np.maximum.accumulate(e)[:-1]
        tk = ticks[ticks["channel"] == c]
        if len(tk):
            tpos = tk["pos"].to_numpy()
            tval = np.maximum.accumulate(tk["tick_ts"].to_numpy(dtype=np.int64))
            k = np.searchsorted(tpos, pos[sel], side="left") - 1
            tick_before[sel] = np.where(k >= 0, tval[np.maximum(k, 0)], -1)
    return pd.DataFrame({
        "pos": pos,
        "t_ms": frame["t_ms"].to_numpy(dtype=float, na_value=np.nan)[pos],
        "channel": ch,
        "vchannel": texts(frame, "vchannel")[pos],
        "node": texts(frame, "node")[pos],
        "end_ts": end_ts,
        "highest": highest,
        "out_of_order": (highest >= 0) & (end_ts < highest),
        "tick": tick_before,
        "below_tick": (tick_before >= 0) & (end_ts <= tick_before),
    })


def _last_pos(mask: np.ndarray) -> np.ndarray:
    """For every position, the last position at or before it where ``mask`` holds (-1 before the first)."""
    return np.maximum.accumulate(np.where(mask, np.arange(len(mask), dtype=np.int32), np.int32(-1)))


def _running(mask: np.ndarray) -> np.ndarray:
    return np.cumsum(mask, dtype=np.int32)


class TimeTickPanel:
    """Per-event TimeTick state of one run log (see the module docstring); lookups by position are cheap."""

    def __init__(self, index):
        self.index = index
        self._precompute()

    def _precompute(self) -> None:
        frame = self.index.frame
        kinds = frame["kind"].astype(str).to_numpy()
        node = texts(frame, "node")
        channel = texts(frame, "channel")
        self.pchannels = pchannels_of(frame)
        self.proxies = proxies_of(frame)
        self._ts, _ = ints(frame, "ts")
        self._min_ts, self._has_min = ints(frame, "min_ts")
        self._tick_ts, _ = ints(frame, "tick_ts")
        msgs = dml_messages(frame)
        n = len(frame)
        flags = {name: np.zeros(n, dtype=bool) for name in ("dml", "out_of_order", "below_tick")}
        flags["dml"][msgs["pos"].to_numpy()] = True
        flags["out_of_order"][msgs["pos"].to_numpy()] = msgs["out_of_order"].to_numpy()
        flags["below_tick"][msgs["pos"].to_numpy()] = msgs["below_tick"].to_numpy()
        is_tick = np.zeros(n, dtype=bool)
        is_tick[time_ticks(frame)["pos"].to_numpy()] = True
        # Per pchannel: last tick position, running counts of DML messages, out-of-order ones, broken promises.
        self._chan: dict[str, dict[str, np.ndarray]] = {}
        for c in self.pchannels:
            on = channel == c
            self._chan[c] = {
                "tick": _last_pos(is_tick & on),
                "dml": _running(flags["dml"] & on),
                "out_of_order": _running(flags["out_of_order"] & on),
                "below_tick": _running(flags["below_tick"] & on),
            }
        # Per proxy: last report, last (re)start, kills, stalls; per pchannel enqueues, finishes, statistics.
        t_ms = self.index.t_ms
        self._proxy: dict[str, dict] = {}
        for p in self.proxies:
            mine = node == p
            killed = mine & (kinds == "fault.kill")
            restarted = mine & (kinds == "fault.restart")
            stall = mine & (kinds == "fault.stall")
            stall_until = np.full(n, np.nan)
            for i in np.flatnonzero(stall):
                stall_until[i] = t_ms[i] + float(detail_dict(frame["detail"].iat[i]).get("duration_ms", 0.0))
            enq = mine & (kinds == "proxy.enqueue")
            fin = mine & (kinds == "proxy.finish")
            self._proxy[p] = {
                "report": _last_pos(mine & (kinds == "proxy.report")),
                "start": _last_pos(killed | restarted),
                "kill": _last_pos(killed),
                "stall": _last_pos(stall),
                "stall_until": stall_until,
                "channels": {c: {"enqueued": _running(enq & (channel == c)), "finished": _running(fin & (channel == c)),
                                 "stats": _last_pos((enq | fin) & (channel == c))} for c in self.pchannels},
            }
        # Rootcoord: its last timetick_update, and its sessions (a multiset: a restarted proxy keeps its name).
        self._update = _last_pos(kinds == "rootcoord.timetick_update")
        change = np.flatnonzero(np.isin(kinds, ["rootcoord.session_add", "rootcoord.session_del"]))
        peers = texts(frame, "peer")
        sessions: dict[str, int] = {}
        self._sessions: list[tuple[str, ...]] = []
        for i in change:
            p = peers[i]
            sessions[p] = sessions.get(p, 0) + (1 if kinds[i] == "rootcoord.session_add" else -1)
            if sessions[p] <= 0:
                del sessions[p]
            self._sessions.append(tuple(q for q in sorted(sessions, key=natural) for _ in range(sessions[q])))
        self._session_change = np.searchsorted(change, np.arange(n), side="right").astype(np.int32) - 1
        # Packs: the last one at every position; per vchannel its DML messages sorted by timestamp.
        self._pack = _last_pos(kinds == "mq.pack")
        self._has_packs = bool((kinds == "mq.pack").any())
        self._begin, _ = ints(frame, "begin_ts")
        self._end, _ = ints(frame, "end_ts")
        self._vchannel = texts(frame, "vchannel")
        msg_id, _ = ints(frame, "msg_id")
        self._msg_id = msg_id
        self._ts_col, _ = ints(frame, "ts")
        self._consume = kinds == "mq.consume"
        produced = msgs["pos"].to_numpy()
        self._written = {(channel[p], int(msg_id[p])): int(p) for p in produced}
        self._by_vchannel: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for v, rows in msgs.groupby("vchannel"):
            order = np.argsort(rows["end_ts"].to_numpy(), kind="stable")
            self._by_vchannel[str(v)] = (rows["end_ts"].to_numpy()[order], rows["pos"].to_numpy()[order])

    # -------------------------------------------------------------------------------------- state

    def _pchannel_state(self, c: str, i: int) -> dict:
        a = self._chan[c]
        k = int(a["tick"][i])
        dml = int(a["dml"][i])
        return {
            "pchannel": c,
            "last_tick": int(self._tick_ts[k]) if k >= 0 else None,
            "last_tick_text": ts_text(self._tick_ts[k]) if k >= 0 else None,
            "last_tick_t_ms": float(self.index.t_ms[k]) if k >= 0 else None,
            "last_tick_index": k if k >= 0 else None,
            "dml_after_tick": dml - (int(a["dml"][k]) if k >= 0 else 0),
            "dml_total": dml,
            "out_of_order": int(a["out_of_order"][i]),
            "below_tick": int(a["below_tick"][i]),
        }

    def _proxy_state(self, p: str, i: int) -> dict:
        a = self._proxy[p]
        t_now = float(self.index.t_ms[i])
        r, s, kill = int(a["report"][i]), int(a["start"][i]), int(a["kill"][i])
        report = None
        if r >= 0:
            channels = detail_dict(self.index.cols["detail"][r]).get("channels", {})
            report = {
                "default": int(self._ts[r]),
                "default_text": ts_text(self._ts[r]),
                "channels": {str(ch): int(v) for ch, v in sorted(channels.items(), key=lambda kv: natural(kv[0]))},
                "t_ms": float(self.index.t_ms[r]),
                "index": r,
                "age_ms": t_now - float(self.index.t_ms[r]),
            }
        pending, min_ts = {}, {}
        for c, ca in a["channels"].items():
            enq, fin = int(ca["enqueued"][i]), int(ca["finished"][i])
            if s >= 0:  # a (re)start begins with an empty queue: count from there
                enq -= int(ca["enqueued"][s])
                fin -= int(ca["finished"][s])
            pending[c] = max(enq - fin, 0)
            k = int(ca["stats"][i])
            min_ts[c] = int(self._min_ts[k]) if k > s and self._has_min[k] else None
        st = int(a["stall"][i])
        until = float(a["stall_until"][st]) if st >= 0 else None
        return {
            "proxy": p,
            "last_report": report,
            "pending": pending,
            "min_ts": min_ts,
            "killed": kill >= 0 and kill == s,
            "stalled_until_ms": until if until is not None and t_now < until else None,
        }

    def _rootcoord_state(self, i: int) -> dict:
        u = int(self._update[i])
        k = int(self._session_change[i])
        out = {"sessions": list(self._sessions[k]) if k >= 0 else [], "waiting_for": None, "sent": None,
               "last_update_peer": None, "last_update_t_ms": None, "last_update_error": None}
        if u >= 0:
            d = detail_dict(self.index.cols["detail"][u])
            out.update({
                "waiting_for": [str(w) for w in d.get("waiting_for", [])],
                "sent": bool(d.get("sent", False)),
                "last_update_peer": self.index.cols["peer"][u],
                "last_update_t_ms": float(self.index.t_ms[u]),
                "last_update_error": self.index.cols["error"][u],
            })
        return out

    def pack_messages(self, k: int) -> tuple[list[dict], int]:
        """The messages the pack at position ``k`` (an ``mq.pack`` row) delivered, in the order delivered: the
        ``mq.consume`` rows the consumer logged just before it, each with ``msg_id``, ``end_ts``, ``index`` (the
        position of the ``mq.produce`` row that wrote it, ``None`` if not in the log) and ``late`` (at or below
        the pack's ``begin_ts``: written below a tick already sent); and how many messages of the pack's interval
        were written after the pack (missed: only a broken watermark makes either happen)."""
        ch = self.index.cols["channel"][k]
        held = []
        j = k - 1
        while j >= 0 and self._consume[j] and self._vchannel[j] == self._vchannel[k]:
            held.append({"index": self._written.get((ch, int(self._msg_id[j]))), "msg_id": int(self._msg_id[j]),
                         "end_ts": int(self._ts_col[j]), "late": bool(self._ts_col[j] <= self._begin[k])})
            j -= 1
        held.reverse()
        ts, pos = self._by_vchannel.get(str(self._vchannel[k]), (np.zeros(0, np.int64), np.zeros(0, np.int64)))
        a = int(np.searchsorted(ts, self._begin[k], side="right"))
        b = int(np.searchsorted(ts, self._end[k], side="right"))
        return held, int((pos[a:b] > k).sum())

    def _pack_state(self, i: int) -> dict | None:
        k = int(self._pack[i])
        if k < 0:
            return None
        held, missed = self.pack_messages(k)
        return {"index": k, "vchannel": str(self._vchannel[k]), "begin_ts": int(self._begin[k]),
                "end_ts": int(self._end[k]), "count": self.index.cols["count"][k], "messages": held, "missed": missed,
                "t_ms": float(self.index.t_ms[k])}

    def state(self, i: int) -> dict:
        """The TimeTick keys of the stepper's ``state()`` at position ``i``: ``pchannels`` (one dict per
        pchannel), ``proxies`` (one dict per proxy), ``rootcoord`` (sessions, whom it waits for) and
        ``last_pack`` (the last ``mq.pack`` at or before ``i`` with its ``messages``; ``None`` before the first)."""
        return {
            "pchannels": [self._pchannel_state(c, i) for c in self.pchannels],
            "proxies": [self._proxy_state(p, i) for p in self.proxies],
            "rootcoord": self._rootcoord_state(i),
            "last_pack": self._pack_state(i),
        }

    # -------------------------------------------------------------------------------------- rows

    @staticmethod
    def _pchannel_row(c: dict) -> str:
        """One pchannel's row of the "last ticks" table: its name, last tick, when it was written, and how many DML
        messages were written after it. One line in the panel's narrowest width (the panel beside the lanes in
        JupyterLab at 1280 x 800): as a sentence ("dml_0 tick ... at 0.459 s; 0 messages after it") it took two."""
        esc = html.escape
        cell = f"<td style='{_TICK_CELL}'>"
        name = f"{cell}<b>{esc(short_channel(c['pchannel']))}</b></td>"
        if c["last_tick"] is None:
            tick = f"{cell}no tick yet</td>{cell}</td>"
        else:
            tick = f"{cell}<code>{esc(c['last_tick_text'])}</code></td>{cell}{c['last_tick_t_ms'] / 1000:.3f}</td>"
        return f"<tr>{name}{tick}<td style='text-align: right'>{c['dml_after_tick']:,}</td></tr>"

    @classmethod
    def _ticks_html(cls, pchannels: list[dict]) -> str:
        """The "last ticks" row: a table of the pchannels (:meth:`_pchannel_row`), then those with messages that came
        below a tick."""
        if not pchannels:
            return "<i>no pchannels</i>"
        text = f"<table>{_TICK_HEAD}{''.join(cls._pchannel_row(c) for c in pchannels)}</table>"
        below = ", ".join(f"{html.escape(short_channel(c['pchannel']))} {c['below_tick']:,}"
                          for c in pchannels if c["below_tick"])
        if below:
            text += f"<span style='color:#b3261e'>below a tick: {below}</span>"
        return text

    @staticmethod
    def _proxy_line(p: dict, every: list[str] | None = None) -> str:
        """A proxy's line; a report that lists ``every`` pchannel of the run (more than one) says "all N" instead of
        naming them (a line shorter in the narrow panel)."""
        esc = html.escape
        text = f"<b>{esc(p['proxy'])}</b> "
        r = p["last_report"]
        if r is None:
            text += "no report yet"
        else:
            if every and len(every) > 1 and sorted(r["channels"]) == sorted(every):
                listed = f"all {len(every)}"
            else:
                listed = ", ".join(esc(short_channel(ch)) for ch in r["channels"]) or "none"
            text += (f"reported <code>{esc(r['default_text'])}</code> at {r['t_ms'] / 1000:.3f} s "
                     f"(pchannels listed: {listed})")
            if r["age_ms"] >= SILENT_MS:
                text += f" <span style='color:#b3261e'>silent for {r['age_ms'] / 1000:.1f} s</span>"
        # what is wrong with the proxy stays beside its report, before its tasks' line
        if p["killed"]:
            text += " <span style='color:#a33'>(killed)</span>"
        elif p["stalled_until_ms"] is not None:
            text += (f" <span style='color:#a33'>(report loop stalled until "
                     f"{p['stalled_until_ms'] / 1000:.3f} s)</span>")
        pending = ", ".join(f"{esc(short_channel(c))} {k}" for c, k in p["pending"].items())
        if pending:
            text += f"<br>&nbsp;&nbsp;pending tasks: {pending}"
        return text

    @staticmethod
    def _rootcoord_line(r: dict) -> str:
        esc = html.escape
        counts: dict[str, int] = {}
        for name in r["sessions"]:
            counts[name] = counts.get(name, 0) + 1
        # A restarted proxy registers a new session under its old name while the old one still counts.
        sessions = ", ".join(esc(name) + (f" (&times;{k})" if k > 1 else "") for name, k in counts.items()) or "none"
        if r["waiting_for"] is None:
            return f"sessions {sessions}; no report taken yet"
        if r["last_update_error"]:
            state = f"<span style='color:#b3261e'>rejected {esc(str(r['last_update_peer']))}: " \
                    f"{esc(str(r['last_update_error']))}</span>"
        elif r["waiting_for"]:
            state = f"<b>waiting for {esc(', '.join(r['waiting_for']))}</b>"
        elif r["sent"]:
            state = "every session reported: ticks sent"
        else:
            state = "not waiting"
        return f"{state} (last from {esc(str(r['last_update_peer']))} at {r['last_update_t_ms'] / 1000:.3f} s); " \
               f"sessions {sessions}"

    @staticmethod
    def _pack_line(p: dict | None) -> str:
        if p is None:
            return "<i>no pack yet</i>"
        esc = html.escape
        n = len(p["messages"])
        text = (f"event {p['index'] + 1:,} at {p['t_ms'] / 1000:.3f} s: <b>{esc(short_channel(p['vchannel']))}</b> "
                f"(<code>{esc(ts_text(p['begin_ts']))}</code>, <code>{esc(ts_text(p['end_ts']))}</code>], "
                f"{n:,} message{'s' if n != 1 else ''}")
        if n:
            shown = ", ".join(f"#{m['msg_id']} <code>{esc(ts_text(m['end_ts']))}</code>"
                              + (f" (event {m['index'] + 1:,})" if m["index"] is not None else "")
                              + (" <span style='color:#b3261e'>below its interval</span>" if m["late"] else "")
                              for m in p["messages"][:PACK_SHOWN])
            text += f": {shown}" + (f" &hellip; and {n - PACK_SHOWN:,} more" if n > PACK_SHOWN else "")
            late = sum(m["late"] for m in p["messages"])
            if late:
                text += f" <span style='color:#b3261e'>&middot; {late:,} below its interval</span>"
        if p["missed"]:
            text += (f" <span style='color:#b3261e'>&middot; {p['missed']:,} of its interval written after it "
                     f"(missed)</span>")
        return text

    def rows(self, s: dict) -> list[tuple[str, str]]:
        """The panel's TimeTick rows as ``(label, html)`` for the state ``s`` at the cursor (``last pack`` only
        in a run whose dispatchers log their packs)."""
        rows = [
            ("last ticks", self._ticks_html(s["pchannels"])),
            ("proxies", "<br>".join(self._proxy_line(p, self.pchannels) for p in s["proxies"]) or "<i>no proxies</i>"),
            ("rootcoord", self._rootcoord_line(s["rootcoord"])),
        ]
        if self._has_packs:
            rows.append(("last pack", self._pack_line(s.get("last_pack"))))
        return rows


# ------------------------------------------------------------------------------------------ film


def film_steps(index) -> list[int]:
    """Up to four events worth a picture, in log order. Candidates, the first kept first: the first DML
    message written below a tick (bug switch), the first tick written after a fault (the watermark
    resuming after a stall or a dead session), the first round of ticks above a DML message (every
    pchannel has one), the first pack with messages, the most out-of-order message; a candidate
    within :data:`FILM_APART` of the run from one kept is dropped."""
    frame = index.frame
    msgs = dml_messages(frame)
    ticks = time_ticks(frame)
    picks: list[int] = []
    below = msgs.loc[msgs["below_tick"], "pos"]
    if len(below):
        picks.append(int(below.iloc[0]))
    faults = frame.index[frame["kind"].astype(str).isin(["fault.stall", "fault.kill"]).to_numpy()]
    if len(faults):
        after = ticks.loc[ticks["pos"] > faults[0], "pos"]
        picks.append(int(after.iloc[0]) if len(after) else int(faults[0]))
    if len(msgs) and len(ticks):
        first = int(msgs["pos"].iloc[0])
        later = ticks[ticks["pos"] > first].groupby("channel")["pos"].min()
        if len(later):
            picks.append(int(later.max()))
    kinds = frame["kind"].astype(str).to_numpy()
    count, has = ints(frame, "count")
    packs = np.flatnonzero((kinds == "mq.pack") & has & (count > 0))
    if len(packs):
        picks.append(int(packs[0]))
    ooo = msgs[msgs["out_of_order"]]
    if len(ooo):
        gap = (ooo["highest"] - ooo["end_ts"]).to_numpy()
        picks.append(int(ooo["pos"].iloc[int(np.argmax(gap))]))
    # A picture within a few percent of the run from one already kept would look the same.
    t = index.t_ms
    near = FILM_APART * (float(np.nanmax(t)) - float(np.nanmin(t)))
    out: list[int] = []
    for p in picks:
        if len(out) < FILM_PICTURES and all(abs(t[p] - t[q]) > near for q in out):
            out.append(p)
    return sorted(out)


def _stall_label(row, detail):
    return f"{row['node']} report loop stalls {float(detail.get('duration_ms', 0)) / 1000:g} s"


#: How the events lane marks the TimeTick faults and session changes (kinds no other mechanism marks).
MARKS = {
    "fault.stall": Mark("#8c564b", "-", _stall_label),
    "fault.restart": Mark("#2ca02c", "-", lambda row, d: f"{row['node']} restarts"),
    "rootcoord.session_del": Mark("0.45", ":", lambda row, d: "a proxy session expires"),
}
