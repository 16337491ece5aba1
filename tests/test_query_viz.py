"""The query mechanism's views: the state panel says what the run log says (tsafe, the reads waiting on each shard,
the last answer, the clients' writes), the filmstrip picks a read that waited and its answer, the lanes draw, and
the registry hands them to the stepper."""

from __future__ import annotations

import json

import matplotlib
import pytest

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.collections import PolyCollection  # noqa: E402

import milvus_edu  # noqa: E402
from milvus_edu.mechanisms.query.lanes import (DelegatorLane, ReadsLane, ReadsEventsLane, query_lanes,  # noqa: E402
                                               vchannels_of)
from milvus_edu.mechanisms.query.panel import QueryPanel, film_steps  # noqa: E402
from milvus_edu.viz.columns import short_channel  # noqa: E402
from milvus_edu.viz import TimelineStepper  # noqa: E402


@pytest.fixture(scope="module")
def seed():
    run = milvus_edu.simulate("seed-example", seed=1)
    return run, TimelineStepper(run.events)


@pytest.fixture(scope="module")
def stall():
    run = milvus_edu.simulate("tsafe-stall-proxy-restart", seed=1, duration_s=20.0)
    return run, TimelineStepper(run.events)


def _positions(ev, kind, **where):
    mask = ev.kind == kind
    for col, value in where.items():
        mask &= ev[col] == value
    return list(ev.index[mask])


def _vch(state, name):
    return next(v for v in state["vchannels"] if v["vchannel"] == name)


def _client(state, name):
    return next(c for c in state["clients"] if c["client"] == name)


def _error(ev, i):
    return None if ev.error.isna()[i] else str(ev.error[i])


def _pks(ev, i):
    return json.loads(ev.detail[i]).get("pks", [])


def _strong_reads(ev, client="Client2"):
    return [int(ev.request[i]) for i in _positions(ev, "client.read_start", node=client) if ev.level[i] == "Strong"]


def test_the_stepper_uses_the_query_lanes_and_panel(seed):
    _, st = seed
    names = [type(lane).__name__ for lane in st.lanes]
    assert names == ["DelegatorLane", "DelegatorLane", "ReadsLane", "ReadsEventsLane"]
    assert isinstance(st.index.panels[0], QueryPanel)
    labels = [label for label, _ in st.index.panel_rows(st.index.state(len(st.index.frame) - 1))]
    assert labels == ["tsafe", "waiting", "answered", "clients"]


def test_a_read_is_listed_as_waiting_on_a_shard_from_its_wait_to_its_answer(seed):
    run, st = seed
    ev = run.events
    req = _strong_reads(ev)[1]
    start = _positions(ev, "client.read_start", request=req)[0]
    for wait in _positions(ev, "querynode.wait", request=req):
        v = ev.vchannel[wait]
        read = _positions(ev, "querynode.read", request=req, vchannel=v)[0]
        assert wait < read
        assert req not in [r["request"] for r in _vch(st.index.state(wait - 1), v)["in_flight"]]
        for i in (wait, read - 1):
            waiting = _vch(st.index.state(i), v)["in_flight"]
            assert [r["request"] for r in waiting] == [req]
            r = waiting[0]
            assert (r["client"], r["level"]) == ("Client2", "Strong")
            assert r["guarantee_ts"] == int(ev.guarantee_ts[wait]) > r["tick_ts"] == int(ev.tick_ts[wait])
            assert r["since_ms"] == pytest.approx(float(ev.t_ms[wait]))
        assert _vch(st.index.state(read), v)["in_flight"] == []
    # the client has it in flight from its read_start to its answer, with the proxy's guarantee once settled
    answer = _positions(ev, "client.read", request=req)[0]
    assert _client(st.index.state(start), "Client2")["in_flight"]["request"] == req
    assert _client(st.index.state(answer - 1), "Client2")["in_flight"]["guarantee_ts"] == int(ev.guarantee_ts[answer])
    assert _client(st.index.state(answer), "Client2")["in_flight"] is None
    st.goto(_positions(ev, "querynode.wait", request=req)[-1])
    assert "waiting since" in st.panel_html and f"#{req} Client2 Strong" in st.panel_html


def test_after_the_second_strong_read_its_shard_shows_a1_and_the_wait(seed):
    run, st = seed
    ev = run.events
    req = _strong_reads(ev)[1]
    answer = _positions(ev, "client.read", request=req)[0]
    assert _pks(ev, answer) == ["A1"]
    state = st.index.state(answer)
    lasts = {v["vchannel"]: v["last_read"] for v in state["vchannels"]}
    assert all(r["request"] == req and r["waited"] and r["waited_ms"] > 0 for r in lasts.values())
    holder = [v for v, r in lasts.items() if r["pks"]]
    assert len(holder) == 1 and lasts[holder[0]]["pks"] == ["A1"] and lasts[holder[0]]["count"] == 1
    read = _positions(ev, "querynode.read", request=req, vchannel=holder[0])[0]
    r = lasts[holder[0]]
    assert (r["read_ts"], r["tick_ts"], r["guarantee_ts"]) == (int(ev.ts[read]), int(ev.tick_ts[read]),
                                                               int(ev.guarantee_ts[read]))
    assert r["tick_ts"] < r["guarantee_ts"] <= r["read_ts"]
    assert _client(state, "Client2")["last_read"]["pks"] == ["A1"]
    # the panel quotes the QueryNode's own waited_ms; with the ticker phases a Strong wait is one interval plus
    # the tsafe lag (the DDL minimum's age at its send, the wait for the round, delivery): ~356 ms at seed 1
    waited_ms = json.loads(ev.detail[read])["waited_ms"]
    assert r["waited_ms"] == waited_ms == pytest.approx(ev.t_ms[read] - ev.t_ms[_positions(
        ev, "querynode.wait", request=req, vchannel=holder[0])[0]], abs=1e-6)
    st.goto(answer)
    html = st.panel_html
    assert "1 row (A1)" in html and f"waited {waited_ms:,.1f} ms" in html


def test_a_read_at_the_collections_default_level_says_so_while_in_flight():
    run = milvus_edu.simulate("insert-then-search", seed=1, duration_s=2.0)
    ev = run.events
    st = TimelineStepper(ev)
    start = ev[(ev.kind == "client.read_start") & ev.level.isna()].iloc[0]
    st.goto(int(start.seq))
    assert f"reading #{int(start.request)} default level for" in st.panel_html and " ? " not in st.panel_html


def test_tsafe_and_sealed_segments_follow_the_querynode_rows(seed):
    run, st = seed
    ev = run.events
    for v in vchannels_of(ev):
        watch = _positions(ev, "querynode.watch", vchannel=v)[0]
        assert _vch(st.index.state(watch), v)["tsafe"] == int(ev.ts[watch])
        for i in _positions(ev, "querynode.tsafe", vchannel=v)[::9]:
            assert _vch(st.index.state(i), v)["tsafe"] == int(ev.ts[i])
            assert _vch(st.index.state(i - 1), v)["tsafe"] < int(ev.ts[i])
    load = _positions(ev, "querynode.load")[0]
    v, seg = ev.vchannel[load], int(ev.segment[load])
    assert seg not in _vch(st.index.state(load - 1), v)["loaded"]
    assert _vch(st.index.state(load), v)["loaded"] == [seg]


def test_the_last_writes_of_each_client_with_their_timestamps(seed):
    run, st = seed
    ev = run.events
    writes = sorted(_positions(ev, "client.insert") + _positions(ev, "client.delete"))
    end = _client(st.index.state(len(ev) - 1), "Client1")["writes"]
    assert [(w["op"], w["pks"], w["ts"]) for w in end] == [
        (ev.kind[i].split(".")[1], _pks(ev, i), int(ev.ts[i])) for i in writes[-3:]]
    assert [w["op"] for w in end] == ["insert", "insert", "delete"]
    assert _client(st.index.state(writes[0] - 1), "Client1")["writes"] == []
    assert _client(st.index.state(len(ev) - 1), "Client2")["writes"] == []


def test_a_read_that_times_out_waiting_for_tsafe_shows_as_failed(stall):
    run, st = stall
    ev = run.events
    failed = [i for i in _positions(ev, "querynode.read") if _error(ev, i) == "context deadline exceeded"]
    assert failed
    i = failed[0]
    req, v = int(ev.request[i]), ev.vchannel[i]
    wait = _positions(ev, "querynode.wait", request=req, vchannel=v)[0]
    assert req in [r["request"] for r in _vch(st.index.state(i - 1), v)["in_flight"]]
    r = _vch(st.index.state(i), v)["last_read"]
    assert r["request"] == req and r["error"] == "context deadline exceeded" and r["count"] is None
    assert r["waited_ms"] > 4000 and r["tick_ts"] == int(ev.tick_ts[wait])
    answer = _positions(ev, "client.read", request=req)[0]
    assert _client(st.index.state(answer), "Client1")["last_read"]["error"] == "context deadline exceeded"
    st.goto(answer)
    assert "failed: context deadline exceeded" in st.panel_html
    # tsafe stood still while the read waited
    assert _vch(st.index.state(i), v)["tsafe"] == int(ev.tick_ts[wait])


def test_the_filmstrip_leads_with_a_read_that_waited_and_its_answer(seed, stall):
    run, st = seed
    ev = run.events
    steps = film_steps(st.index)
    assert 1 <= len(steps) <= 4 and steps == sorted(steps)
    kinds = [ev.kind[i] for i in steps]
    assert kinds[:2] == ["querynode.wait", "client.read"] and "querynode.load" in kinds
    assert ev.request[steps[0]] == ev.request[steps[1]] and _pks(ev, steps[1]) == ["A1"]
    assert st.interesting_steps() == steps
    run, st = stall
    ev = run.events
    steps = film_steps(st.index)
    timeouts = [i for i in steps if ev.kind[i] == "client.read" and _error(ev, i) == "context deadline exceeded"]
    assert timeouts, [ev.kind[i] for i in steps]


def test_the_lanes_draw_tsafe_the_waits_and_the_reads(seed, stall):
    for run, _ in (seed, stall):
        ev = run.events
        channels = vchannels_of(ev)
        assert len(channels) == 2
        fig, axes = plt.subplots(3, 1)
        try:
            for k, v in enumerate(channels):
                lane = DelegatorLane(k)
                lane.setup(axes[k], ev)
                assert lane.vchannel == v and axes[k].get_ylabel() == f"vch {k}"
                assert short_channel(v) in [t.get_text() for t in axes[k].texts]
                dot, label = lane.update(len(ev) - 1, 0.0)
                assert label.get_text() == short_channel(v)  # the name is drawn with the cursor, over it
                last = _positions(ev, "querynode.tsafe", vchannel=v)[-1]
                assert dot.get_visible() and dot.get_xdata()[0] == pytest.approx(ev.t_ms[last] / 1000.0)
                waited = {int(ev.request[i]) for i in _positions(ev, "querynode.wait", vchannel=v)}
                boxes = [c for c in axes[k].collections if isinstance(c, PolyCollection)]
                assert waited and len(boxes) == 1 and len(boxes[0].get_paths()) == len(waited)
                lo, hi = axes[k].get_ylim()
                assert lo > -60 and hi < ev.t_ms.max() / 1000.0 + 60  # off-scale guarantees do not stretch it
            reads = ReadsLane()
            reads.setup(axes[2], ev)
            clients = sorted({ev.node[i] for i in _positions(ev, "client.read_start")})
            assert [t.get_text() for t in axes[2].get_yticklabels()] == clients
            (rings,) = reads.update(len(ev) - 1, 0.0)
            assert len(rings.get_xdata()) == len(clients)
        finally:
            plt.close(fig)
    with pytest.raises(ValueError, match="at least one vchannel"):
        query_lanes(0)
    with pytest.raises(ValueError, match="counts from 0"):
        DelegatorLane(-1)



def test_the_time_cursor_never_crosses_a_delegators_name(seed):
    """The vchannel's name, boxed in the lane's top-left corner, is where the time cursor stands at a page's start.
    It is one of the lane's cursor artists, so it is drawn after the cursor line and its veil: in the stepper's
    picture, in the browser (its drawing operation comes after the cursor, with an opaque box) and, by its zorder,
    in the filmstrip. In the picture the cursor's column is dark below the box and light inside it."""
    import io

    import numpy as np
    from PIL import Image

    run, st = seed
    r = st._renderer
    k, lane = next((k, ln) for k, ln in enumerate(st.lanes) if isinstance(ln, DelegatorLane))
    ax, (line, _veil) = r.axes[k], r.cursors[k]
    label = lane.label
    assert label.get_text() == short_channel(lane.vchannel)
    assert label.get_zorder() > line.get_zorder() and label.get_animated()
    assert label.get_bbox_patch().get_facecolor()[3] == 1.0  # opaque: nothing under it shows through
    h = r.fig.bbox.height
    for i in range(len(run.events)):  # the first event whose cursor stands inside the name's box
        t_ms = float(r.index.t_ms[i])
        r.move_to(i)
        box = label.get_window_extent(r.canvas.get_renderer())
        x = ax.transData.transform((t_ms / 1000.0, 0))[0]
        if box.x0 + 3 < x < box.x1 - 3:
            break
    else:
        raise AssertionError("the cursor never stands on the delegator's name")
    ops = r.overlay(i)
    name_ops = [n for n, op in enumerate(ops) if op[0] == "T" and op[3] == label.get_text()]
    assert len(name_ops) == 1 and ops[name_ops[0]][9] == "#ffffffff"  # in the browser: opaque white, after the line
    pixels = np.asarray(Image.open(io.BytesIO(r.render(i, t_ms))).convert("L"), dtype=float)
    col = int(round(x))
    top, bottom = int(h - box.y1) + 2, int(h - box.y0) - 2
    inside = pixels[top:bottom, col - 1:col + 2].min(axis=1)
    below = pixels[bottom + 6:bottom + 20, col - 1:col + 2].min(axis=1)
    assert below.mean() < 128, "the cursor line is not where the test looks"
    assert (inside < 100).mean() < 0.5, "the cursor line is drawn across the name"


def test_a_guarantee_a_day_ahead_is_drawn_at_the_edge_not_on_the_scale():
    run = milvus_edu.simulate("lag-too-large", seed=1)
    ev = run.events
    fig, ax = plt.subplots()
    try:
        DelegatorLane(0).setup(ax, ev)
        lo, hi = ax.get_ylim()
        assert hi < 20  # seconds: the run is 8 s long, the refused guarantee is 25 h ahead
        failed = [ln for ln in ax.lines if ln.get_marker() == "X" and len(ln.get_xdata())]
        assert failed  # the refused read is marked
    finally:
        plt.close(fig)


def test_the_events_lane_labels_reads_with_their_request_and_keys(seed):
    run, st = seed
    lane = next(lane for lane in st.lanes if isinstance(lane, ReadsEventsLane))
    req = _strong_reads(run.events)[1]
    assert f"#{req} Strong: A1" in lane.labels
    assert "load seg 10000" in lane.labels
    assert lane.marks is None  # the registry's marks, wrapped only while drawing


@pytest.mark.slow
def test_the_filmstrip_is_written(seed, stall, tmp_path):
    for name, (run, st) in (("seed", seed), ("stall", stall)):
        paths = st.to_static(tmp_path / name)
        png = [p for p in paths if str(p).endswith(".png")]
        assert png and png[0].stat().st_size > 20_000


def _every_level_steps():
    from milvus_edu.events import SIM_EPOCH_MS
    from milvus_edu.tsoutil import compose_ts

    steps = [{"at": 0.5, "client": "Client1", "op": "create_collection", "collection": "C0"},
             {"at": 1.0, "client": "Client1", "op": "insert", "collection": "C0", "data": [{"id": "A"}]},
             {"at": 1.1, "client": "Client1", "op": "delete", "collection": "C0", "ids": ["A"]},
             {"at": 1.2, "client": "Client2", "op": "query", "collection": "C0"},  # the default level: Bounded
             {"at": 1.2, "client": "Client3", "op": "query", "collection": "C0", "consistency_level": "Customized",
              "guarantee_timestamp": compose_ts(SIM_EPOCH_MS + 25 * 3600 * 1000, 0)}]
    steps += [{"at": 1.3, "client": "Client1", "op": "query", "collection": "C0", "consistency_level": level}
              for level in ("Strong", "Session", "Eventually")]
    return steps


@pytest.mark.slow
def test_the_legend_fits_above_the_lanes_in_three_rows_with_every_level():
    """The widest legend a run makes (every level, a failed read, an insert and a delete) is not cut off at the
    top or the right of the stepper's picture, and names only the levels the run used."""
    ev = milvus_edu.simulate("workload", seed=1, options={"steps": _every_level_steps()}).events
    st = TimelineStepper(ev, window_s=1.0)
    fig = st._renderer.fig
    renderer = fig.canvas.get_renderer()
    legend = fig.legends[0]
    box = legend.get_window_extent(renderer)
    assert box.y1 <= fig.bbox.height + 1 and box.x1 <= fig.bbox.width + 1 and box.x0 >= 0
    for ax in st._renderer.axes:
        assert not box.overlaps(ax.get_window_extent(renderer))
    # Three rows of four since the picture is shown at its own 504 px with 9.9 px text (two rows of six fitted
    # the 612 px picture shrunk to 87 %).
    assert len({round(t.get_window_extent(renderer).y0) for t in legend.get_texts()}) <= 3
    labels = [t.get_text() for t in legend.get_texts()]
    assert {"Strong", "Session", "Bounded", "Eventually", "Customized", "failed", "insert", "delete"} <= set(labels)
    seed_labels = [t.get_text() for t in TimelineStepper(milvus_edu.simulate("seed-example", seed=1).events)
                   ._renderer.fig.legends[0].get_texts()]
    assert "Strong" in seed_labels and not {"Session", "Bounded", "Eventually", "Customized"} & set(seed_labels)


def test_one_colour_per_level_in_every_picture():
    """The reads lane colours a read sent at the collection's default level as the level the proxy settled
    (Bounded), and the side-by-side picture uses the same colours as the lanes."""
    from matplotlib.colors import to_hex

    from milvus_edu.mechanisms.query.levels import LEVEL_COLORS, plot_side_by_side, side_by_side

    ev = milvus_edu.simulate("workload", seed=1, options={"steps": _every_level_steps()}).events
    fig, ax = plt.subplots()
    try:
        ReadsLane().setup(ax, ev)
        bars = {to_hex(c.get_facecolor()[0]) for c in ax.collections if len(c.get_paths())}
        assert to_hex(LEVEL_COLORS["Bounded"]) in bars and to_hex("#A0A0A0") not in bars
    finally:
        plt.close(fig)
    request = int(ev[(ev.kind == "client.read") & (ev.level == "Strong")].request.iloc[0])
    ax = plot_side_by_side(side_by_side(ev, request))
    try:
        got = [to_hex(p.get_facecolor()) for p in ax.patches]
        assert got == [to_hex(LEVEL_COLORS[lv]) for lv in ("Strong", "Session", "Bounded", "Eventually")]
    finally:
        plt.close(ax.figure)
