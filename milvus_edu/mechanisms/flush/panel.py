"""The flush mechanism's part of the stepper's state panel, the events worth a filmstrip picture, and marks.

:class:`FlushPanel` keeps, for every position ``i`` of the log, the state *after* event ``i``, rebuilt from
the run log's rows alone (no model code is run again):

* per vchannel (the DataNode's flowgraph and write buffer): which DataNode watches it, the consumed position
  (the end of the last pack the writeNode buffered or the ttNode checkpointed), the rows buffered per segment
  since that segment's last sync was cut, the segments whose sync is in flight, flushTs while it is set;
* the checkpoint updater: its pending task per vchannel (checkpoint ts, whether a flush waits on it) and the
  outcome of its last ``UpdateChannelCheckpoint`` RPC;
* DataCoord: the stored channel checkpoint per vchannel and each segment's state and row count.

Only the flush kinds change this state, so it is computed once by walking those rows (a few thousand in a
long run) and keeping a snapshot after each; :meth:`FlushPanel.state` finds the last snapshot at or before
``i`` by binary search. What the log does not say is not invented: a segment's buffered rows are the rows the
writeNode buffered since its last sync was cut (the log has no per-segment byte sizes), and a crash empties
everything of the crashed DataNode (its memory is gone; DataCoord's state stays).
"""

from __future__ import annotations

import html


from ...narrate import detail_dict, plural, ts_text
from ...registry import Mark
from ...viz.columns import natural, short_channel
from ...viz.data import Snapshots

#: Kinds that change the panel's state.
KINDS = ("datanode.watch", "datanode.buffer", "datanode.checkpoint", "datanode.sync", "datanode.sync_done",
         "datanode.cp_rpc", "datanode.flush_ts", "datanode.seal", "datacoord.save_binlog_paths",
         "datacoord.channel_cp", "datacoord.flush", "datacoord.segment_state", "datacoord.reassign",
         "fault.kill", "fault.restart")
#: Up to this many filmstrip pictures.
FILM_PICTURES = 4


def _empty() -> dict:
    return {"vchannels": {}, "updater": {"tasks": {}, "last_rpc": None}, "segments": {}, "down": []}


def _vchannel(state: dict, vch: str) -> dict:
    return state["vchannels"].setdefault(vch, {"node": None, "consumed": None, "buffered": {}, "syncing": [],
                                               "flush_ts": None, "stored": None})


class FlushPanel:
    """Per-event flush state of one run log (see the module docstring); lookups by position are cheap."""

    def __init__(self, index):
        self.index = index
        self._snapshots = Snapshots(index, KINDS, ("node", "peer", "vchannel", "segment", "ts", "tick_ts", "end_ts", "count", "error", "t_ms"), _empty, self._apply)

    @staticmethod
    def _apply(state: dict, kind: str, row: dict, d: dict) -> None:
        node, vch = row["node"], row["vchannel"]
        if kind == "datanode.watch":
            v = _vchannel(state, vch)
            v.update(node=node, consumed=row["ts"], buffered={}, syncing=[], flush_ts=None)
            state["down"] = [n for n in state["down"] if n != node]
        elif kind == "datanode.buffer":
            v = _vchannel(state, vch)
            v["consumed"] = row["end_ts"]
            for seg, rows in (d.get("segments") or {}).items():
                v["buffered"][str(seg)] = v["buffered"].get(str(seg), 0) + int(rows)
            if d.get("deletes"):
                v["buffered"]["deletes"] = v["buffered"].get("deletes", 0) + int(d["deletes"])
        elif kind == "datanode.checkpoint":
            v = _vchannel(state, vch)
            if row["tick_ts"] is not None and (v["consumed"] is None or row["tick_ts"] > v["consumed"]):
                v["consumed"] = row["tick_ts"]
            old = state["updater"]["tasks"].get(vch)
            flush = bool(d.get("flush")) or bool(old and old["flush"])
            state["updater"]["tasks"][vch] = {"ts": row["ts"], "flush": flush}
        elif kind == "datanode.sync":
            v = _vchannel(state, vch)
            seg = str(row["segment"])
            v["buffered"].pop(seg, None)
            if d.get("level") == "L0":
                v["buffered"].pop("deletes", None)
            v["syncing"].append(seg)
        elif kind == "datanode.sync_done":
            v = _vchannel(state, vch)
            seg = str(row["segment"])
            if seg in v["syncing"]:
                v["syncing"].remove(seg)
        elif kind == "datanode.cp_rpc":
            sent = d.get("positions") or {}
            state["updater"]["last_rpc"] = {"ok": row["error"] is None, "t_ms": row["t_ms"], "error": row["error"],
                                            "channels": sorted(sent, key=natural)}
            if row["error"] is None:
                tasks = state["updater"]["tasks"]
                for ch, ts in sent.items():
                    if ch in tasks and tasks[ch]["ts"] is not None and ts is not None and tasks[ch]["ts"] <= ts:
                        del tasks[ch]
        elif kind == "datanode.flush_ts":
            _vchannel(state, vch)["flush_ts"] = row["ts"] if d.get("set") else None
        elif kind == "datacoord.save_binlog_paths" and row["error"] is None and row["segment"] is not None:
            state["segments"][str(row["segment"])] = {"state": str(d.get("state", "?")), "rows": row["count"],
                                                      "vchannel": vch}
        elif kind == "datacoord.segment_state" and row["error"] is None and row["segment"] is not None:
            seg = state["segments"].setdefault(str(row["segment"]), {"state": "?", "rows": row["count"],
                                                                     "vchannel": vch})
            seg["state"] = str(d.get("state", seg["state"]))
            if row["count"] is not None:
                seg["rows"] = row["count"]
        elif kind == "datacoord.flush":
            for s in d.get("sealed") or []:
                seg = state["segments"].setdefault(str(s), {"state": "Growing", "rows": 0, "vchannel": None})
                if seg["state"] in ("Growing", "?"):
                    seg["state"] = "Sealed"
        elif kind == "datacoord.channel_cp" and row["error"] is None and d.get("saved"):
            _vchannel(state, vch)["stored"] = row["ts"]
        elif kind == "fault.kill" and str(node).startswith("datanode"):
            if node not in state["down"]:
                state["down"].append(node)
            for name, v in state["vchannels"].items():
                if v["node"] == node:
                    v.update(buffered={}, syncing=[], flush_ts=None)
                    state["updater"]["tasks"].pop(name, None)
        elif kind == "datacoord.reassign":
            for ch in d.get("channels") or []:
                _vchannel(state, ch)["node"] = row["peer"]

    # -------------------------------------------------------------------------------------- state

    def state(self, i: int) -> dict:
        """The flush keys of the stepper's ``state()`` at position ``i``: ``vchannels`` (one dict per vchannel:
        ``node``, ``consumed``, ``buffered`` rows per segment, ``syncing`` segments, ``flush_ts``, ``stored``
        checkpoint), ``updater`` (``tasks`` per vchannel, ``last_rpc``), ``segments`` (DataCoord's state and rows
        per segment id) and ``datanodes_down``."""
        s = self._snapshots.at(i)
        return {
            "vchannels": [{"vchannel": name, **v} for name, v in sorted(s["vchannels"].items(),
                                                                        key=lambda kv: natural(kv[0]))],
            "updater": s["updater"],
            "segments": s["segments"],
            "datanodes_down": list(s["down"]),
        }

    # -------------------------------------------------------------------------------------- rows

    @staticmethod
    def _ts(value) -> str:
        return "none" if value is None else f"<code>{html.escape(ts_text(value))}</code>"

    def _vchannel_line(self, v: dict) -> str:
        esc = html.escape
        text = (f"<b>{esc(short_channel(v['vchannel']))}</b> ({esc(str(v['node']))}) consumed {self._ts(v['consumed'])}; "
                f"stored checkpoint {self._ts(v['stored'])}")
        if v["flush_ts"] is not None:
            text += f"; <b>flushTs {self._ts(v['flush_ts'])}</b>"
        return text

    @staticmethod
    def _buffer_line(v: dict) -> str:
        esc = html.escape
        parts = [f"seg {esc(k)}: {plural(n, 'row')}" if k != "deletes" else plural(n, "delete")
                 for k, n in sorted(v["buffered"].items())]
        text = f"<b>{esc(short_channel(v['vchannel']))}</b> " + (", ".join(parts) or "empty")
        if v["syncing"]:
            text += f"; <span style='color:#b35900'>syncing {esc(', '.join(v['syncing']))}</span>"
        return text

    def _updater_line(self, u: dict) -> str:
        esc = html.escape
        tasks = ", ".join(f"{esc(short_channel(ch))} {self._ts(t['ts'])}" + (" (flush)" if t["flush"] else "")
                          for ch, t in sorted(u["tasks"].items(), key=lambda kv: natural(kv[0]))) or "no task"
        rpc = u["last_rpc"]
        if rpc is None:
            last = "no RPC yet"
        elif rpc["ok"]:
            last = f"last RPC ok at {rpc['t_ms'] / 1000:.3f} s"
        else:
            last = f"<span style='color:#b3261e'>last RPC failed at {rpc['t_ms'] / 1000:.3f} s: {esc(str(rpc['error']))}</span>"
        return f"{tasks}; {last}"

    @staticmethod
    def _segments_line(segments: dict) -> str:
        esc = html.escape
        parts = [f"{esc(seg)} {esc(info['state'])}" + (f" {info['rows']:,} rows" if info.get("rows") else "")
                 for seg, info in sorted(segments.items(), key=lambda kv: int(kv[0]) if kv[0].isdigit() else 0)]
        return ", ".join(parts) or "no segment recorded yet"

    def rows(self, s: dict) -> list[tuple[str, str]]:
        """The panel's flush rows as ``(label, html)`` for the state ``s`` at the cursor."""
        rows = [
            ("vchannels", "<br>".join(self._vchannel_line(v) for v in s["vchannels"]) or "<i>not watched yet</i>"),
            ("write buffer", "<br>".join(self._buffer_line(v) for v in s["vchannels"]) or "<i>empty</i>"),
            ("cp updater", self._updater_line(s["updater"])),
            ("DataCoord", self._segments_line(s["segments"])),
        ]
        if s["datanodes_down"]:
            rows.insert(0, ("down", "<span style='color:#b3261e'>"
                                    + html.escape(", ".join(s["datanodes_down"])) + "</span>"))
        return rows


# ------------------------------------------------------------------------------------------ film


def film_steps(index) -> list[int]:
    """Up to four events worth a picture, in log order, the first found kept first: the first stored checkpoint
    exactly equal to a flushTs that is set (the flush stays open: the reset needs a checkpoint strictly past it),
    the first flushTs set, the first flushTs cleared, the first DataNode crash, the first watch after it, the first
    insert filtered on replay, the first failed checkpoint RPC, the first sync."""
    cols, pos = index.cols, index.kind_positions
    picks: list[int] = []
    flush_ts: dict[str, int] = {}
    merged = sorted(int(p) for k in ("datanode.flush_ts", "datacoord.channel_cp") for p in pos.get(k, ()))
    for i in merged:
        d = detail_dict(cols["detail"][i])
        vch = cols["vchannel"][i]
        if index.kinds[i] == "datanode.flush_ts":
            if d.get("set"):
                flush_ts[vch] = cols["ts"][i]
            else:
                flush_ts.pop(vch, None)
        elif d.get("saved") and vch in flush_ts and cols["ts"][i] == flush_ts[vch]:
            picks.append(i)
            break

    def first(kind: str, where=lambda i: True, after: int = -1) -> None:
        for p in pos.get(kind, ()):
            if p > after and where(int(p)):
                picks.append(int(p))
                return

    first("datanode.flush_ts", lambda i: bool(detail_dict(cols["detail"][i]).get("set")))
    first("datanode.flush_ts", lambda i: not detail_dict(cols["detail"][i]).get("set"))
    kills = [int(p) for p in pos.get("fault.kill", ()) if str(cols["node"][int(p)]).startswith("datanode")]
    if kills:
        picks.append(kills[0])
        first("datanode.watch", after=kills[0])
        first("datanode.filter", after=kills[0])
    first("datanode.cp_rpc", lambda i: cols["error"][i] is not None)
    first("datanode.sync")
    out: list[int] = []
    for p in picks:
        if len(out) < FILM_PICTURES and p not in out:
            out.append(p)
    return sorted(out)


def _cp_rpc_label(row, detail):
    return "checkpoint RPC fails" if row.get("error") else None


def _client_flush_label(row, detail):
    if row.get("error"):
        return "flush() fails"
    return "flush() done" if detail.get("flushed") else "flush() called"


#: How the events lane marks the flush mechanism's moments (kinds no other mechanism marks). flushTs is not marked
#: here: the vchannel lanes draw it, and one mark per vchannel would crowd the lane.
MARKS = {
    "datanode.cp_rpc": Mark("#d62728", ":", _cp_rpc_label),
    "client.flush": Mark("#1f77b4", "-", _client_flush_label),
    "datacoord.reassign": Mark("#2ca02c", "-", lambda row, d: f"channels to {row['peer']}"),
}
