"""The query mechanism's part of the stepper's state panel, and the events worth a filmstrip picture.

:class:`QueryPanel` keeps, for every position ``i`` of the log, the state *after* event ``i``, rebuilt from the
run log's query rows alone (no model code is run again):

* per vchannel (a shard delegator on the QueryNode): its tsafe, the reads waiting on it (from their
  ``querynode.wait`` to their ``querynode.read``: request, client, level, guarantee, tsafe on arrival, waiting
  since), the last read it answered or failed (level, guarantee, tsafe on arrival, MVCC read timestamp, wait, rows
  returned) and the sealed segments loaded into it;
* per client: its last writes (insert / delete, keys and timestamp), the read it has in flight (from
  ``client.read_start`` to ``client.read``) and its last answer.

Only the query kinds change this state, so it is computed once by walking those rows and keeping a snapshot after
each; :meth:`QueryPanel.state` finds the last snapshot at or before ``i`` by binary search. A read's client is the
node of its ``client.read_start`` (the QueryNode's rows carry only the ``request`` id).
"""

from __future__ import annotations

import html


from ...narrate import ts_text
from ...tsoutil import LOGICAL_BITS
from ...viz.columns import natural, short_channel
from ...viz.data import Snapshots

#: Kinds that change the panel's state.
KINDS = ("client.create_collection", "client.read_start", "client.read", "client.insert", "client.delete",
         "proxy.read", "querynode.watch", "querynode.tsafe", "querynode.wait", "querynode.read", "querynode.load")
#: Up to this many filmstrip pictures.
FILM_PICTURES = 4
#: Writes per client the panel keeps.
LAST_WRITES = 3
#: Keys shown of a read's answer or a write before "…".
SHOWN_KEYS = 6

_COLS = ("node", "peer", "vchannel", "segment", "ts", "tick_ts", "guarantee_ts", "request", "level", "count",
         "error", "t_ms")


def _empty() -> dict:
    return {"vchannels": {}, "clients": {}, "requests": {}}


def _vchannel(state: dict, vch: str) -> dict:
    return state["vchannels"].setdefault(vch, {"tsafe": None, "in_flight": {}, "last_read": None, "loaded": []})


def _client(state: dict, name: str) -> dict:
    return state["clients"].setdefault(name, {"writes": [], "in_flight": None, "last_read": None})


#: A read sent without a level (the collection's default) until the proxy settles it: said in words, not "?".
DEFAULT_LEVEL = "default level"


class QueryPanel:
    """Per-event query state of one run log (see the module docstring); lookups by position are cheap."""

    def __init__(self, index):
        self.index = index
        self._snapshots = Snapshots(index, KINDS, _COLS, _empty, self._apply)

    @staticmethod
    def _apply(state: dict, kind: str, row: dict, d: dict) -> None:
        vch, req = row["vchannel"], row["request"]
        known = state["requests"].get(req, {}) if req is not None else {}
        if kind == "querynode.watch":
            v = _vchannel(state, vch)
            v.update(tsafe=row["ts"], in_flight={})
        elif kind == "querynode.tsafe":
            _vchannel(state, vch)["tsafe"] = row["ts"]
        elif kind == "querynode.wait":
            _vchannel(state, vch)["in_flight"][req] = {
                "request": req, "client": known.get("client"), "level": row["level"] or known.get("level"),
                "guarantee_ts": row["guarantee_ts"], "tick_ts": row["tick_ts"], "since_ms": row["t_ms"]}
        elif kind == "querynode.read":
            v = _vchannel(state, vch)
            waiting = v["in_flight"].pop(req, None)
            pks = list(d.get("pks") or [])
            v["last_read"] = {
                "request": req, "client": known.get("client"), "level": row["level"] or known.get("level"),
                "guarantee_ts": row["guarantee_ts"], "tick_ts": row["tick_ts"], "read_ts": row["ts"],
                "waited_ms": float(d.get("waited_ms") or 0.0), "waited": waiting is not None,
                # no count and no keys (a real server's shard read: Milvus 2.3.5 logs no per-shard result): unknown
                "count": row["count"] if row["count"] is not None else (
                    len(pks) if row["error"] is None and "pks" in d else None),
                "pks": pks, "error": row["error"], "t_ms": row["t_ms"]}
        elif kind == "querynode.load":
            v = _vchannel(state, vch)
            if row["segment"] is not None and row["segment"] not in v["loaded"]:
                v["loaded"].append(row["segment"])
        elif kind == "client.read_start":
            name = row["node"]
            state["requests"][req] = {"client": name, "level": row["level"], "op": d.get("op")}
            _client(state, name)["in_flight"] = {"request": req, "level": row["level"], "op": d.get("op"),
                                                 "since_ms": row["t_ms"], "guarantee_ts": None}
        elif kind == "proxy.read":
            # the proxy settles the level and the guarantee every shard must reach
            info = state["requests"].setdefault(req, {"client": row["peer"], "level": None, "op": d.get("op")})
            info["level"] = row["level"] or info.get("level")
            c = state["clients"].get(info.get("client"))
            if c is not None and c["in_flight"] is not None and c["in_flight"]["request"] == req:
                c["in_flight"].update(level=info["level"], guarantee_ts=row["guarantee_ts"])
        elif kind == "client.read":
            c = _client(state, row["node"])
            if c["in_flight"] is not None and c["in_flight"]["request"] == req:
                c["in_flight"] = None
            pks = list(d.get("pks") or [])
            c["last_read"] = {"request": req, "level": row["level"] or known.get("level"), "op": d.get("op"),
                              "read_ts": row["ts"], "guarantee_ts": row["guarantee_ts"], "count": row["count"],
                              "pks": pks, "error": row["error"], "t_ms": row["t_ms"]}
        elif kind in ("client.insert", "client.delete"):
            c = _client(state, row["node"])
            c["writes"].append({"op": kind.split(".", 1)[1], "pks": list(d.get("pks") or []), "ts": row["ts"],
                                "returned_ts": d.get("returned_ts"), "error": row["error"], "t_ms": row["t_ms"]})
            del c["writes"][:-LAST_WRITES]
        elif kind == "client.create_collection":
            _client(state, row["node"])

    # -------------------------------------------------------------------------------------- state

    def state(self, i: int) -> dict:
        """The query keys of the stepper's ``state()`` at position ``i``: ``vchannels`` (one dict per vchannel:
        ``tsafe``, ``in_flight`` reads waiting on it in arrival order, ``last_read`` answered or failed,
        ``loaded`` sealed segments) and ``clients`` (one dict per client: its last ``writes``, the read
        ``in_flight``, its ``last_read`` answer)."""
        s = self._snapshots.at(i)
        return {
            "vchannels": [{"vchannel": name, "tsafe": v["tsafe"], "in_flight": list(v["in_flight"].values()),
                           "last_read": v["last_read"], "loaded": list(v["loaded"])}
                          for name, v in sorted(s["vchannels"].items(), key=lambda kv: natural(kv[0]))],
            "clients": [{"client": name, **c} for name, c in sorted(s["clients"].items(),
                                                                     key=lambda kv: natural(kv[0]))],
        }

    # -------------------------------------------------------------------------------------- rows

    @staticmethod
    def _ts(value) -> str:
        if value is None:
            return "none"
        if int(value) >> LOGICAL_BITS == 0:  # the SDK's and Eventually's small markers, not a time
            return f"<code>{int(value)}</code> (none)"
        return f"<code>{html.escape(ts_text(value))}</code>"

    @staticmethod
    def _keys(pks, count=None) -> str:
        shown = ", ".join(html.escape(str(p)) for p in pks[:SHOWN_KEYS]) + ("…" if len(pks) > SHOWN_KEYS else "")
        n = len(pks) if count is None else int(count)
        return f"{n} row{'s' if n != 1 else ''}" + (f" ({shown})" if shown else "")

    @staticmethod
    def _who(r: dict) -> str:
        client = f" {html.escape(str(r['client']))}" if r.get("client") else ""
        return f"#{r['request']}{client} {html.escape(str(r.get('level') or DEFAULT_LEVEL))}"

    def _tsafe_line(self, v: dict) -> str:
        text = f"<b>{html.escape(short_channel(v['vchannel']))}</b> tsafe {self._ts(v['tsafe'])}"
        if v["loaded"]:
            text += "; sealed " + html.escape(", ".join(str(s) for s in v["loaded"]))
        return text

    def _waiting_line(self, v: dict, now_ms: float) -> str:
        parts = [f"{self._who(r)}: guarantee {self._ts(r['guarantee_ts'])}, tsafe on arrival {self._ts(r['tick_ts'])}, "
                 f"waiting since {r['since_ms'] / 1000:.3f} s ({max(now_ms - r['since_ms'], 0.0):,.0f} ms)"
                 for r in v["in_flight"]]
        body = "; ".join(parts) if parts else "<i>none</i>"
        color = " style='color:#b35900'" if parts else ""
        return f"<b>{html.escape(short_channel(v['vchannel']))}</b> <span{color}>{body}</span>"

    def _answered_line(self, v: dict) -> str:
        r = v["last_read"]
        head = f"<b>{html.escape(short_channel(v['vchannel']))}</b> "
        if r is None:
            return head + "<i>none yet</i>"
        text = (f"{self._who(r)}: guarantee {self._ts(r['guarantee_ts'])}, tsafe on arrival {self._ts(r['tick_ts'])}, "
                f"waited {r['waited_ms']:,.1f} ms")
        if r["error"] is not None:
            return head + text + f"; <span style='color:#b3261e'>failed: {html.escape(str(r['error']))}</span>"
        # a real server's shard read: 2.3.5 logs no MVCC timestamp for a search and no per-shard rows
        read_at = "read timestamp not logged" if r["read_ts"] is None else f"read at {self._ts(r['read_ts'])}"
        rows = "rows not logged" if r["count"] is None else self._keys(r["pks"], r["count"])
        return head + text + f"; {read_at}, {rows}"

    def _write_ts(self, w: dict) -> str:
        if w["ts"] is None and w.get("returned_ts") == 0:  # Milvus 2.3.5's delete: pymilvus's Session table not moved
            return "returned timestamp 0 (Milvus 2.3.5 gives a delete none)"
        return f"at {self._ts(w['ts'])}"

    def _client_line(self, c: dict, now_ms: float) -> str:
        parts = []
        if c["writes"]:
            parts.append("wrote " + ", ".join(
                f"{w['op']} {html.escape(','.join(str(p) for p in w['pks'][:SHOWN_KEYS]))} {self._write_ts(w)}"
                + (" <span style='color:#b3261e'>failed</span>" if w["error"] is not None else "")
                for w in c["writes"]))
        f = c["in_flight"]
        if f is not None:
            parts.append(f"<span style='color:#b35900'>reading #{f['request']} {html.escape(str(f['level'] or DEFAULT_LEVEL))}"
                         f" for {max(now_ms - f['since_ms'], 0.0):,.0f} ms</span>")
        r = c["last_read"]
        if r is not None:
            if r["error"] is not None:
                parts.append(f"<span style='color:#b3261e'>read #{r['request']} failed: "
                             f"{html.escape(str(r['error']))}</span>")
            else:
                parts.append(f"read #{r['request']} {html.escape(str(r['level'] or DEFAULT_LEVEL))} got "
                             f"{self._keys(r['pks'], r['count'])}")
        return f"<b>{html.escape(str(c['client']))}</b> " + ("; ".join(parts) or "<i>nothing yet</i>")

    def rows(self, s: dict) -> list[tuple[str, str]]:
        """The panel's query rows as ``(label, html)`` for the state ``s`` at the cursor."""
        now = float(s.get("sim_time_ms", 0.0))
        return [
            ("tsafe", "<br>".join(self._tsafe_line(v) for v in s["vchannels"]) or "<i>not served yet</i>"),
            ("waiting", "<br>".join(self._waiting_line(v, now) for v in s["vchannels"]) or "<i>none</i>"),
            ("answered", "<br>".join(self._answered_line(v) for v in s["vchannels"]) or "<i>none yet</i>"),
            ("clients", "<br>".join(self._client_line(c, now) for c in s["clients"]) or "<i>none yet</i>"),
        ]


# ------------------------------------------------------------------------------------------ film


def film_steps(index) -> list[int]:
    """Up to four events worth a picture, in log order: a read that waited for tsafe, while it waits (its last
    shard's ``querynode.wait``) and when it is answered (its ``client.read``), preferring one that returned rows;
    the first failed read (one that failed waiting for tsafe before one refused earlier); the first sealed segment
    loaded; then the answer of the read that waited longest, then of other reads that waited."""
    cols, pos = index.cols, index.kind_positions
    kinds = index.kinds
    waits: dict[int, int] = {}
    for p in pos.get("querynode.wait", ()):
        waits[cols["request"][int(p)]] = int(p)  # the last shard to start waiting
    answers = {cols["request"][int(p)]: int(p) for p in pos.get("client.read", ())}
    waited = [r for r in sorted(waits, key=waits.get) if r in answers]
    good = [r for r in waited if cols["error"][answers[r]] is None and (cols["count"][answers[r]] or 0) > 0]
    picks: list[int] = []
    lead = (good or waited or [None])[0]
    if lead is not None:
        picks += [waits[lead], answers[lead]]
    failed = [int(p) for p in pos.get("client.read", ()) if cols["error"][int(p)] is not None]
    failed.sort(key=lambda p: (cols["request"][p] not in waits, p))  # a read that failed waiting for tsafe first
    if failed:
        picks.append(failed[0])
    loads = pos.get("querynode.load", ())
    if len(loads):
        picks.append(int(loads[0]))
    longest = sorted(waited, key=lambda r: (-(index.t_ms[answers[r]] - index.t_ms[waits[r]]), waits[r]))
    for r in longest[:1] + good[1:] + [r for r in waited if r not in good]:
        picks.append(answers[r])
    out: list[int] = []
    for p in picks:
        if len(out) < FILM_PICTURES and p not in out and kinds[p]:
            out.append(p)
    return sorted(out)
