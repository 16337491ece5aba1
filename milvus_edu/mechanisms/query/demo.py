"""``milvus-edu demo``: the seed's Client1/Client2 table, replayed, with every other level beside Strong."""

from __future__ import annotations

from ...narrate import detail_dict, ts_text
from .levels import LEVELS, _History, plot_side_by_side, reads, side_by_side

INTRO = (
    "milvus-edu demo: the seed's Client1/Client2 example on a simulated Milvus 2.5 cluster (scenario seed-example, "
    "seed 1)",
    "rootcoord (TSO + time ticks), 2 proxies, 2 pchannels, DataCoord, a DataNode and a QueryNode; one table unit "
    "(t2 - t0) is 100 ms.",
    "Client1 writes through proxy-1; Client2 searches through proxy-2 at Strong. Beside each Strong answer: what the "
    "same search would have returned at the other levels (worked out from the same run log).",
    "",
)


def _rows(rows) -> str:
    if rows is None:
        return "(still waiting)"
    return ", ".join(str(r) for r in rows) or "(empty)"


def _cell(r) -> str:
    wait = "" if not r.waits else (" after ?" if r.wait_ms is None else f" after {r.wait_ms:.0f} ms")
    return f"{_rows(r.rows)}{wait}"


def story(result) -> list[str]:
    """The table: each step of the workload in time order; for each read, Strong and the other levels."""
    events = result.events
    h = _History(events)
    answered = {int(r.request): r for r in reads(events).itertuples(index=False) if r.request is not None}
    lines = [f"{'time':<12}{'client':<9}{'call':<28}" + "".join(f"{lv:<22}" for lv in LEVELS)]
    for row in events[events["kind"].isin(["client.create_collection", "client.insert", "client.delete",
                                           "client.flush", "client.read"])].to_dict("records"):
        d = detail_dict(row["detail"])
        label = d.get("label") or f"{row['t_ms'] / 1000:.3f} s"
        kind = row["kind"]
        if kind == "client.read":
            req = int(row["request"])
            head = f"{label:<12}{row['node']:<9}{d.get('op', 'read') + ' ' + str(d.get('collection')):<28}"
            if row["error"] is not None:
                lines.append(head + f"failed: {row['error']}")
                continue
            frame = side_by_side(events, req, h)
            cells = []
            for lv in LEVELS:
                r = next(frame[frame["level"] == lv].itertuples(index=False))
                cells.append((_cell(r) + (" *" if r.actual else ""))[:21])
            lines.append(head + "".join(f"{c:<22}" for c in cells))
            del answered[req]
        elif kind == "client.create_collection":
            lines.append(f"{label:<12}{row['node']:<9}create_collection {d.get('collection')} (default level "
                         f"{row['level']}) at {ts_text(row['ts'])}")
        elif kind == "client.flush":
            if d.get("flushed"):
                lines.append(f"{'':<12}{row['node']:<9}flush done: the segments are Parquet binlogs, loaded sealed")
            else:
                lines.append(f"{label:<12}{row['node']:<9}flush {d.get('collection')}: flushTs {ts_text(row['ts'])}")
        else:
            what = "insert" if kind == "client.insert" else "delete"
            lines.append(f"{d.get('label', ''):<12}{row['node']:<9}{what} {', '.join(map(str, d.get('pks', [])))} -> "
                         f"acknowledged at {ts_text(row['ts'])}" if row["error"] is None
                         else f"{d.get('label', ''):<12}{row['node']:<9}{what} failed: {row['error']}")
    return lines + ["", "* = the level the read was sent with. Strong waits for the QueryNode's tsafe to pass a "
                       "fresh TSO timestamp, so it sees every write acknowledged before it; the others read at the "
                       "tsafe they find (about one time tick, 200 ms, behind), so a write made 200 ms earlier may be "
                       "missing."]


def outro(summary: dict) -> list[str]:
    """Where the rows went."""
    q = summary.get("query", {})
    return [f"after the flush, {q.get('sealed_segments_loaded', 0)} sealed segment(s) were loaded from the Parquet "
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

    paths = TimelineStepper(events).to_static(out / "timeline.png")
    if paths:
        lines.append(f"          {paths[0]} (the run's timeline, as the stepper draws it)")
    return lines
