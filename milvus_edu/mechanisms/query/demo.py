"""``milvus-edu demo``: the design documents' Client1/Client2 table, replayed, with every other level beside Strong."""

from __future__ import annotations

from ...narrate import detail_dict, plural, ts_text
from .levels import LEVELS, _History, plot_side_by_side, reads, rows_at, side_by_side
from ...client.workload import KIND_OF_OP, SEED_STEPS

INTRO = (
    "milvus-edu demo: the Client1/Client2 example of the design documents (guarantee-ts) on a simulated Milvus 2.5 "
    "cluster (scenario seed-example, seed 1)",
    "rootcoord (TSO + time ticks), 2 proxies, 2 pchannels, DataCoord, a DataNode and a QueryNode; one unit of the "
    "table's clock is 100 ms, from t0 = 0.5 s (t2 = 0.7 s, t4 = 0.9 s, ...).",
    "Client1 writes through proxy-1; Client2 searches through proxy-2 at Strong. Beside each Strong answer: what the "
    "same search would have returned at the other levels (worked out from the same run log).",
    "",
)

#: How far past Client2's last answer the demo's timeline goes (one time tick).
STORY_MARGIN_MS = 200.0
#: The files :func:`pictures` writes into the run folder (``timeline`` as the stepper's filmstrip, PNG and SVG).
PICTURES = ("levels.png", "timeline.png", "timeline.svg")
_SHOWN = ("client.create_collection", "client.insert", "client.delete", "client.flush", "client.read")


def step_labels(events, steps=SEED_STEPS) -> dict[int, str]:
    """The table's step (``t0``, ``t2``, ...) of every client call the run log shows, by ``seq``: each client runs
    its steps in order, so its n-th call of a kind is its n-th step of that kind (a flush logs twice: the
    label goes to the first row, the second says the flush is done)."""
    todo: dict[tuple[str, str], list[str]] = {}
    for step in steps:
        todo.setdefault((step["client"], KIND_OF_OP.get(step["op"], f"client.{step['op']}")), []).append(
            step.get("label", ""))
    out = {}
    for row in events[events["kind"].isin(_SHOWN)].itertuples(index=False):
        if row.kind == "client.flush" and detail_dict(row.detail).get("flushed"):
            continue
        queue = todo.get((row.node, row.kind))
        if queue:
            out[int(row.seq)] = queue.pop(0)
    return out


def _rows(rows) -> str:
    if rows is None:
        return "(still waiting)"
    return ", ".join(str(r) for r in rows) or "(empty)"


def _cell(r) -> str:
    wait = "" if not r.waits else (" after ?" if r.wait_ms is None else f" after {r.wait_ms:.0f} ms")
    return f"{_rows(r.rows)}{wait}"


def story(result) -> list[str]:
    """The table: each step of the workload in time order (its step in the design documents' table and the simulated
    time, in seconds, when the call returned); for each read, Strong and the other levels; then why the levels
    differ."""
    events = result.events
    h = _History(events)
    labels = step_labels(events)
    lines = [f"{'step':<12}{'returned':<10}{'client':<9}{'call':<28}" + "".join(f"{lv:<22}" for lv in LEVELS)]
    frames = {}
    shown = events[events["kind"].isin(_SHOWN)].to_dict("records")
    order = _returned_out_of_order(shown, labels)
    notes = [] if order is None else [
        f"Rows are in the order the calls returned: {order[0]}'s {order[1]}, sent before {order[2]}'s {order[3]}, "
        f"returned after it."]
    for row in shown:
        d = detail_dict(row["detail"])
        head = f"{labels.get(int(row['seq']), ''):<12}{row['t_ms'] / 1000:.3f} s   {row['node']:<9}"
        kind = row["kind"]
        if kind == "client.read":
            req = int(row["request"])
            head += f"{d.get('op', 'read') + ' ' + str(d.get('collection')):<28}"
            if row["error"] is not None:
                lines.append(head + f"failed: {row['error']}")
                continue
            frame = frames[req] = side_by_side(events, req, h)
            cells = []
            for lv in LEVELS:
                r = next(frame[frame["level"] == lv].itertuples(index=False))
                cells.append((_cell(r) + (" *" if r.actual else ""))[:21])
            lines.append(head + "".join(f"{c:<22}" for c in cells))
        elif kind == "client.create_collection":
            lines.append(head + f"create_collection {d.get('collection')} (default level {row['level']}) at "
                         f"{ts_text(row['ts'])}")
        elif kind == "client.flush":
            lines.append(head + ("flush done: the segments are Parquet binlogs, loaded sealed" if d.get("flushed")
                                 else f"flush {d.get('collection')}: flushTs {ts_text(row['ts'])}"))
        else:
            what = "insert" if kind == "client.insert" else "delete"
            lines.append(head + (f"{what} {', '.join(map(str, d.get('pks', [])))} -> acknowledged at "
                                 f"{ts_text(row['ts'])}" if row["error"] is None else f"{what} failed: {row['error']}"))
    return lines + ["", "* = the level the read was sent with. Strong waits for the QueryNode's tsafe to pass a "
                       "fresh TSO timestamp, so it sees every write acknowledged before it."] + notes + _why(events, h,
                                                                                                             frames)


def _call(row) -> str:
    """A client call's row as a word: search, insert, delete, flush, create_collection."""
    if row["kind"] == "client.read":
        return str(detail_dict(row["detail"]).get("op") or "read")
    return row["kind"].removeprefix("client.")


def _returned_out_of_order(rows, labels: dict[int, str]) -> tuple[str, str, str, str] | None:
    """The first two steps of the table (``t<n>`` labels) that returned in another order than they were sent, as
    ``(step sent first, its call, step that returned first, its call)``; None when every call returned in the order
    it was sent."""
    seen: list[tuple[int, str, str]] = []
    for row in rows:
        label = labels.get(int(row["seq"]), "")
        if not (label.startswith("t") and label[1:].isdigit()):
            continue
        n = int(label[1:])
        earlier = [(name, call) for m, name, call in seen if m > n]
        if earlier:
            return label, _call(row), earlier[0][0], earlier[0][1]
        seen.append((n, label, _call(row)))
    return None


def _why(events, h: _History, frames: dict) -> list[str]:
    """Why Session and the levels that do not wait answer as they do, from Client2's reads in the run."""
    mine = [r for r in reads(events).itertuples(index=False) if r.client == "Client2" and r.request in frames]
    if not mine:
        return []
    wrote = events[events["kind"].isin(["client.insert", "client.delete"]) & (events["node"] == "Client2")]
    out = [("Session: Client2 wrote nothing, so the SDK has no write of its own to wait for and sends guarantee 1, "
            "the same as Eventually: its Session column equals Eventually's." if wrote.empty else
            "Session waits only for Client2's own last write."),
           "Bounded (guarantee: the proxy's clock minus 5 s) and Eventually (guarantee 1) never wait: they read at the "
           "tsafe a read finds on arrival, the last time tick applied (ticks come every 200 ms), so what they "
           "return depends on where between two ticks the read lands:"]
    for r in mine:
        frame = frames[r.request]
        shard = events[(events["kind"] == "querynode.read") & (events["request"] == r.request)]
        arrival = min(float(t) - float(detail_dict(d).get("waited_ms") or 0.0) for t, d in zip(shard["t_ms"],
                                                                                               shard["detail"]))
        tsafe = int(frame["tsafe_on_arrival"].iloc[0])
        moved = [hit for hit in (h.first_reaching(v, arrival, tsafe + 1) for v in h.tsafe) if hit is not None]
        bounded = next(frame[frame["level"] == "Bounded"].itertuples(index=False))
        line = (f"  {r.label or '#' + str(r.request)}: it reached the shards at {arrival / 1000:.3f} s and found "
                f"tsafe {ts_text(tsafe)}: Bounded returns {_rows(bounded.rows)}")
        if len(moved) == len(h.tsafe):
            t_next = max(t for t, _ts in moved)
            later = _rows(rows_at(events, r.request, max(t_next, arrival), h))
            line += f"; landing after the next tick (applied at {t_next / 1000:.3f} s) it would return {later}"
        out.append(line + ".")
    return out


def outro(summary: dict) -> list[str]:
    """Where the rows went."""
    q = summary.get("query", {})
    return [f"after the flush, {plural(q.get('sealed_segments_loaded', 0), 'sealed segment')} {'was' if q.get('sealed_segments_loaded', 0) == 1 else 'were'} loaded from the Parquet "
            f"binlogs in the run folder (objects/a-bucket/files/insert_log/...), and the last search read from them."]


def pictures(result) -> list[str]:
    """``levels.png``: each of Client2's reads at every level; ``timeline.png``: the run in the stepper's lanes."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    events = result.events
    out = result.out_dir
    h = _History(events)
    mine = [r for r in reads(events).itertuples(index=False) if r.client == "Client2" and r.error is None]
    fig, axes = plt.subplots(len(mine), 1, figsize=(7.5, 2.2 * len(mine)), squeeze=False)
    for ax, r in zip(axes[:, 0], mine):
        plot_side_by_side(side_by_side(events, int(r.request), h), title=f"{r.label}: Client2's search #{r.request}",
                          ax=ax)
    fig.tight_layout()
    fig.savefig(out / "levels.png", dpi=100)
    plt.close(fig)
    lines = [f"pictures: {out / 'levels.png'} (every level side by side)"]
    from ...viz.stepper import TimelineStepper

    # The table's story is Client2's reads; the rest of the run (the flush and its binlogs) would squeeze it into a
    # corner of the time axis, so the timeline stops one time tick after Client2's last answer.
    end_ms = max(r.t_ms for r in mine) + STORY_MARGIN_MS if mine else float(events["t_ms"].max())
    story_events = events[events["t_ms"] <= end_ms]
    paths = TimelineStepper(story_events).to_static(out / "timeline.png")
    if paths:
        lines.append(f"          {paths[0]} (the table's part of the run, 0 to {end_ms / 1000:.1f} s, as the stepper "
                     f"draws it)")
        lines += [f"          {path} (the same, as SVG: sharp at any size)" for path in paths[1:]]
    return lines
