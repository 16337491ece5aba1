"""Every consistency level side by side: one read of a run, evaluated as if it had been sent at each level.

For a read in a run log, and for each level, this works out from the log alone what Milvus would have done:

* the guarantee timestamp the level gives (Strong: the TSO's next answer, at least one past every timestamp the TSO
  had handed out when the read began; Session: the client's last acknowledged write to the collection, or 1;
  Bounded: the proxy's clock at the read minus ``common.gracefulTime``; Eventually: 1; Customized only when the
  read was Customized);
* on each shard, the tsafe when the read arrived, whether it would wait and for how long (until the first
  ``querynode.tsafe`` at or past the guarantee), and the read timestamp (the tsafe the wait returns);
* the rows the read returns at that timestamp (from the messages in the pchannels, as the checker computes them),
  and which rows it gains or loses against Strong.

The read actually sent is one of the rows (``actual``); the others are what-ifs on the same cluster history (a
what-if read does not change the run: it sends no message and takes no timestamp).
"""

from __future__ import annotations

import bisect
import pandas as pd

from .check import visible, visible_rows
from ...narrate import detail_dict
from ...querynode.expr import read_predicate
from ...tsoutil import add_physical_duration_on_ts, compose_ts

LEVELS = ("Strong", "Session", "Bounded", "Eventually")
GRACEFUL_TIME_MS = 5000

#: One colour per consistency level, for every picture of a read (the stepper's lanes, :func:`plot_side_by_side`,
#: the labs' figures): the Okabe-Ito colour-blind-safe palette, so no two levels differ only by red against green.
LEVEL_COLORS = {"Strong": "#0072B2", "Session": "#CC79A7", "Bounded": "#E69F00", "Eventually": "#666666",
                "Customized": "#56B4E9"}
#: The colour of a read whose level is not known (a failed read the proxy never saw).
UNKNOWN_LEVEL_COLOR = "#A0A0A0"


def level_color(level) -> str:
    """The colour of consistency level ``level`` in every picture (grey when unknown)."""
    return LEVEL_COLORS.get(str(level), UNKNOWN_LEVEL_COLOR)


def _int(v):
    return None if v is None or v is pd.NA or (isinstance(v, float) and pd.isna(v)) else int(v)


def reads(events: pd.DataFrame) -> pd.DataFrame:
    """Every answered or failed read of a run: request, client, label, level, guarantee, read ts, rows, error."""
    rows = events[events["kind"] == "client.read"]
    out = []
    for r in rows.itertuples(index=False):
        d = detail_dict(r.detail)
        out.append({"request": _int(r.request), "client": r.node, "label": d.get("label", ""), "op": d.get("op"),
                    "level": r.level if isinstance(r.level, str) else None, "guarantee_ts": _int(r.guarantee_ts),
                    "read_ts": _int(r.ts), "rows": d.get("pks"), "error": r.error if isinstance(r.error, str) else None,
                    "t_ms": float(r.t_ms)})
    return pd.DataFrame(out, columns=["request", "client", "label", "op", "level", "guarantee_ts", "read_ts", "rows",
                                      "error", "t_ms"])


class _History:
    """What the what-ifs need from a run log, indexed once."""

    def __init__(self, events: pd.DataFrame):
        ev = events
        self.tsafe: dict[str, tuple[list[float], list[int]]] = {}
        for r in ev[ev["kind"] == "querynode.tsafe"].itertuples(index=False):
            t, ts = self.tsafe.setdefault(r.vchannel, ([], []))
            t.append(float(r.t_ms))
            ts.append(int(r.ts))
        self.writes: dict[str, list[tuple[int, str, object]]] = {}
        #: (vchannel, pk, insert ts) -> the row's dynamic field, for a filter that reads one
        self.fields: dict[tuple[str, object, int], dict] = {}
        prod = ev[(ev["kind"] == "mq.produce") & ev["msg_type"].isin(["Insert", "Delete"])]
        for r in prod.itertuples(index=False):
            d = detail_dict(r.detail)
            pks = d.get("pks")
            if pks is not None:
                self.writes.setdefault(r.vchannel, []).extend((int(r.ts), r.msg_type, pk) for pk in pks)
                if d.get("fields") is not None:
                    self.fields.update(((r.vchannel, pk, int(r.ts)), f) for pk, f in zip(pks, d["fields"]))
        alloc = ev[ev["kind"] == "rootcoord.alloc_timestamp"]
        self.alloc_seq = list(alloc["seq"].astype(int))
        self.alloc_ts = list(alloc["ts"].astype("Int64").fillna(0).astype(int) + alloc["count"].fillna(1).astype(int) - 1)
        self.acks = ev[ev["kind"].isin(["client.insert", "client.delete"]) & ev["error"].isna()]

    def seen(self, vchannel: str, ts: int, pred) -> list:
        """The keys visible on ``vchannel`` at ``ts`` that ``pred`` accepts, each once (a read returns one row per
        key, however many times it was inserted), by key."""
        writes = self.writes.get(vchannel, ())
        if not pred.reads_fields:
            return sorted((pk for pk in visible(writes, ts) if pred(pk)), key=str)
        rows = visible_rows(writes, ts)
        return sorted({pk for pk, t in rows if pred(pk, self.fields.get((vchannel, pk, t)))}, key=str)

    def tsafe_at(self, vchannel: str, t_ms: float) -> int | None:
        t, ts = self.tsafe.get(vchannel, ([], []))
        i = bisect.bisect_right(t, t_ms)
        return ts[i - 1] if i else None

    def first_reaching(self, vchannel: str, after_ms: float, guarantee: int):
        t, ts = self.tsafe.get(vchannel, ([], []))
        for i in range(bisect.bisect_left(t, after_ms), len(t)):
            if ts[i] >= guarantee:
                return t[i], ts[i]
        return None

    def last_alloc_before(self, seq: int) -> int:
        i = bisect.bisect_left(self.alloc_seq, seq)
        return max(self.alloc_ts[:i], default=0)


def side_by_side(events: pd.DataFrame, request: int, history: _History | None = None) -> pd.DataFrame:
    """The read ``request`` of the run in ``events`` at every level: one row per level with ``guarantee_ts``,
    ``tsafe_on_arrival`` (smallest over shards), ``waits``, ``wait_ms`` (longest shard; None: still waiting when the
    run ended), ``read_ts`` (smallest shard), ``rows``, ``gained`` / ``lost`` against Strong, and ``actual`` (the
    level the read really used). ``ValueError`` when the run has no such read."""
    h = history or _History(events)
    ev = events
    mine = ev[ev["request"].astype("Int64") == request]
    proxy = mine[mine["kind"] == "proxy.read"]
    start = mine[mine["kind"] == "client.read_start"]
    shards = mine[mine["kind"] == "querynode.read"]
    if proxy.empty or start.empty or shards.empty:
        raise ValueError(f"read #{request} did not reach the QueryNode in this run; pick a request id from reads(events)")
    p = proxy.iloc[0]
    pd_ = detail_dict(p.detail)
    client, start_seq = start.iloc[0]["node"], int(start.iloc[0]["seq"])
    actual = p["level"]
    acks = h.acks[(h.acks["seq"] < start_seq) & (h.acks["node"] == client)]
    acks = acks[[(detail_dict(d).get("collection") == pd_.get("collection")) for d in acks["detail"]]]
    session = int(acks["ts"].max()) if not acks.empty else 1
    guarantees = {
        "Strong": int(p["guarantee_ts"]) if actual == "Strong" else h.last_alloc_before(int(p["seq"])) + 1,
        "Session": session,
        "Bounded": add_physical_duration_on_ts(compose_ts(int(p["clock_ms"]), 0), -GRACEFUL_TIME_MS * 1_000_000),
        "Eventually": 1,
    }
    levels = list(LEVELS)
    if actual == "Customized":
        guarantees["Customized"] = int(p["guarantee_ts"])
        levels.append("Customized")
    pred = read_predicate(pd_.get("filter", ""), pd_.get("ids"))
    arrivals = {}
    for s in shards.itertuples(index=False):
        waited = float(detail_dict(s.detail).get("waited_ms") or 0.0)
        arrivals[s.vchannel] = (float(s.t_ms) - waited, int(s.tick_ts))
    out = []
    for level in levels:
        g = guarantees[level]
        wait, read_ts, rows, waits, pending = 0.0, None, [], False, False
        for vch, (t_arr, tsafe) in sorted(arrivals.items()):
            if tsafe >= g:
                rts = tsafe
            else:
                waits = True
                hit = h.first_reaching(vch, t_arr, g)
                if hit is None:
                    pending = True
                    continue
                wait = max(wait, hit[0] - t_arr)
                rts = hit[1]
            read_ts = rts if read_ts is None else min(read_ts, rts)
            rows += h.seen(vch, rts, pred)
        out.append({"level": level, "guarantee_ts": g, "tsafe_on_arrival": min(t for _, t in arrivals.values()),
                    "waits": waits, "wait_ms": None if pending else round(wait, 3), "read_ts": None if pending else read_ts,
                    "rows": None if pending else sorted(rows, key=str), "actual": level == actual})
    frame = pd.DataFrame(out)
    strong = frame.loc[frame["level"] == "Strong", "rows"].iloc[0]
    frame["gained"] = [None if r is None or strong is None else sorted(set(r) - set(strong), key=str) for r in frame["rows"]]
    frame["lost"] = [None if r is None or strong is None else sorted(set(strong) - set(r), key=str) for r in frame["rows"]]
    return frame


def rows_at(events: pd.DataFrame, request: int, t_ms: float, history: _History | None = None) -> list:
    """The rows read ``request`` would return if it read every shard at the tsafe that shard had at simulated time
    ``t_ms`` (a what-if, like :func:`side_by_side`: it changes nothing in the run)."""
    h = history or _History(events)
    mine = events[events["request"].astype("Int64") == request]
    proxy = mine[mine["kind"] == "proxy.read"]
    shards = mine[mine["kind"] == "querynode.read"]
    if proxy.empty or shards.empty:
        raise ValueError(f"read #{request} did not reach the QueryNode in this run; pick a request id from reads(events)")
    d = detail_dict(proxy.iloc[0]["detail"])
    pred = read_predicate(d.get("filter", ""), d.get("ids"))
    rows = []
    for vch in sorted(set(shards["vchannel"])):
        ts = h.tsafe_at(vch, t_ms)
        rows += h.seen(vch, ts if ts is not None else 0, pred)
    return sorted(rows, key=str)


def every_read(events: pd.DataFrame) -> dict[int, pd.DataFrame]:
    """:func:`side_by_side` of every read that reached the QueryNode, by request id."""
    h = _History(events)
    done = events[events["kind"] == "querynode.read"]["request"].dropna().astype(int).unique()
    return {int(r): side_by_side(events, int(r), h) for r in sorted(done)}


def plot_side_by_side(frame: pd.DataFrame, title: str = "", ax=None):
    """A picture of :func:`side_by_side`: per level, the wait as a bar and the rows returned as its label."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(7.0, 0.55 * len(frame) + 1.0))
    y = list(range(len(frame)))[::-1]
    longest = max([w for w in frame["wait_ms"] if w is not None] + [1.0])
    for yi, r in zip(y, frame.itertuples(index=False)):
        w = r.wait_ms if r.wait_ms is not None else longest
        ax.barh(yi, w, color=level_color(r.level), alpha=0.85 if r.actual else 0.45,
                hatch=None if r.wait_ms is not None else "//")
        rows = "still waiting" if r.rows is None else (", ".join(str(p) for p in r.rows[:6]) or "(empty)")
        ax.text(w + longest * 0.02, yi, rows, va="center", fontsize=9)
    ax.set_yticks(y, [f"{lv}{' (sent)' if a else ''}" for lv, a in zip(frame["level"], frame["actual"])])
    ax.set_xlabel("wait for tsafe (ms)")
    ax.set_xlim(0, longest * 1.6)
    ax.set_title(title or "the same read at every consistency level", fontsize=10)
    ax.figure.tight_layout()
    return ax
