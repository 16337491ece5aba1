"""The TimeTick mechanism's views: stepper lanes, state panel and filmstrip steps, on real runs."""

from __future__ import annotations

import html
import json
import re

import matplotlib
import numpy as np
import pandas as pd
import pytest

import milvus_edu
import milvus_edu.mechanisms.timetick.lanes as lanes_module
from milvus_edu.mechanisms.timetick.lanes import PackLane, PChannelLane, ProxyLane, timetick_lanes
from milvus_edu.mechanisms.timetick.panel import MARKS, PACK_SHOWN, TimeTickPanel, dml_messages, film_steps
from milvus_edu.viz import TimelineStepper
from milvus_edu.viz.columns import base_ms, time_ticks
from milvus_edu.viz.data import RunIndex
from milvus_edu.viz.lanes import CORE_MARKS, EventsLane
from milvus_edu.viz.tslanes import physical_s

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
SWITCH = "allocate_outside_enqueue_lock"


@pytest.fixture(scope="module")
def basics() -> pd.DataFrame:
    return milvus_edu.simulate("timetick-basics", seed=1, duration_s=1.5).events


@pytest.fixture(scope="module")
def stall() -> pd.DataFrame:
    return milvus_edu.simulate("timetick-proxy-stall", seed=1, duration_s=6.5).events


@pytest.fixture(scope="module")
def unlocked() -> pd.DataFrame:
    return milvus_edu.simulate("timetick-unlocked-enqueue", seed=1, duration_s=1.0, switches=[SWITCH]).events


@pytest.fixture(scope="module")
def basics_stepper(basics) -> TimelineStepper:
    return TimelineStepper(basics, lanes=timetick_lanes())


@pytest.fixture(scope="module")
def basics_panel(basics) -> TimeTickPanel:
    return TimeTickPanel(RunIndex(basics))


@pytest.fixture(scope="module")
def stall_panel(stall) -> TimeTickPanel:
    return TimeTickPanel(RunIndex(stall))


def _lanes(st, cls) -> list:
    return [lane for lane in st.lanes if isinstance(lane, cls)]


def _is(events, kind, **cols) -> np.ndarray:
    mask = (events["kind"] == kind).to_numpy()
    for name, value in cols.items():
        mask &= (events[name] == value).fillna(False).to_numpy()
    return mask


def _positions(events, kind, **cols) -> list[int]:
    return [int(i) for i in np.flatnonzero(_is(events, kind, **cols))]


def _reference_flags(events: pd.DataFrame) -> tuple[int, int]:
    """Out-of-order and below-a-tick DML messages, counted row by row the plain way."""
    highest: dict[str, int] = {}
    tick: dict[str, int] = {}
    out_of_order = below = 0
    for row in events[events["kind"] == "mq.produce"].itertuples():
        if row.msg_type == "TimeTick":
            tick[row.channel] = max(tick.get(row.channel, 0), int(row.tick_ts))
            continue
        ts = int(row.end_ts)
        if row.channel in highest and ts < highest[row.channel]:
            out_of_order += 1
        highest[row.channel] = max(highest.get(row.channel, ts), ts)
        if row.channel in tick and ts <= tick[row.channel]:
            below += 1
    return out_of_order, below


# ------------------------------------------------------------------------------------ lanes


def test_stepper_builds_with_timetick_lanes(basics_stepper, basics):
    st = basics_stepper
    names = [lane.name for lane in st.lanes]
    assert names == ["pchannel 0", "pchannel 1", "pchannel 2", "pchannel 3", "reports", "packs", "events"]
    assert isinstance(st.lanes[-1], EventsLane)
    assert st.png.startswith(PNG_MAGIC) and len(st) == len(basics)
    chans = [lane.channel for lane in _lanes(st, PChannelLane)]
    assert chans == [f"by-dev-rootcoord-dml_{k}" for k in range(4)]
    assert [ax.get_ylabel() for ax in st._renderer.axes[:4]] == [f"dml_{k}" for k in range(4)]


@pytest.mark.slow
def test_cursor_artists_follow_the_latest_tick_and_message_of_each_pchannel(basics_stepper, basics):
    st = basics_stepper
    lane = _lanes(st, PChannelLane)[2]
    ch = lane.channel
    base = base_ms(basics)
    ticks = _positions(basics, "mq.produce", channel=ch, msg_type="TimeTick")
    dml = _positions(basics, "mq.produce", channel=ch, msg_type="Insert")
    (msg_track, ring), (tick_track, diamond) = lane.tracks
    i = ticks[3]
    st.goto(i)
    assert diamond.get_visible() and diamond.get_animated()
    x, y = diamond.get_data()
    assert x[0] == pytest.approx(basics["t_ms"].iloc[i] / 1000.0)
    assert y[0] == pytest.approx(physical_s(np.array([int(basics["tick_ts"].iloc[i])]), base)[0])
    last_msg = max(p for p in dml if p <= i)
    assert ring.get_data()[0][0] == pytest.approx(basics["t_ms"].iloc[last_msg] / 1000.0)
    nxt = min(p for p in dml if p > i)
    st.goto(nxt)
    assert ring.get_data()[0][0] == pytest.approx(basics["t_ms"].iloc[nxt] / 1000.0)
    assert diamond.get_data()[0][0] == pytest.approx(basics["t_ms"].iloc[i] / 1000.0)  # same tick still
    # Stepping moves the proxy dots to each proxy's last report and returns the same artists every time.
    proxy = _lanes(st, ProxyLane)[0]
    first = proxy.update(nxt, float(basics["t_ms"].iloc[nxt]))
    again = proxy.update(nxt + 1, float(basics["t_ms"].iloc[nxt + 1]))
    assert [id(a) for a in first] == [id(a) for a in again]
    report = max(_positions(basics, "proxy.report", node="proxy-1"))
    st.goto(report)
    (track, dot) = proxy.tracks[0]
    assert dot.get_data()[0][0] == pytest.approx(basics["t_ms"].iloc[report] / 1000.0)
    st.goto(0)
    assert not ring.get_visible() and not diamond.get_visible() and not dot.get_visible()


def test_pack_lane_rings_the_latest_pack_of_every_vchannel(basics_stepper, basics):
    st = basics_stepper
    lane = _lanes(st, PackLane)[0]
    packs = basics[basics["kind"] == "mq.pack"]
    assert len(lane.tracks) == packs["vchannel"].nunique() == 6
    i = int(packs.index[len(packs) // 2])
    st.goto(i)
    xs = sorted(lane.dots.get_data()[0])
    upto = packs.loc[:i]
    expected = sorted(upto.groupby("vchannel")["t_ms"].last() / 1000.0)
    assert xs == pytest.approx(expected)


def test_out_of_order_messages_are_coloured_apart(basics_stepper, basics):
    ooo, below = _reference_flags(basics)
    assert ooo > 100 and below == 0
    late, in_order = 0, 0
    ooo_rgba = matplotlib.colors.to_rgba(lanes_module._OUT_OF_ORDER)
    for lane in _lanes(basics_stepper, PChannelLane):
        for dots in lane.page_y.ax.collections:
            colors = dots.get_facecolors()
            if len(colors) != 1 or not len(dots.get_offsets()):
                continue
            if np.allclose(colors[0], ooo_rgba):
                late += len(dots.get_offsets())
                assert dots.get_sizes()[0] > lanes_module.DML_SIZE  # bigger than a message dot, and a triangle
            elif np.allclose(colors[0], matplotlib.colors.to_rgba(lanes_module._DML)):
                in_order += len(dots.get_offsets())
                assert dots.get_sizes()[0] >= 9  # at least 3 pt across: visible on a page
    dml = int(((basics["kind"] == "mq.produce") & (basics["msg_type"] != "TimeTick")).sum())
    assert late == ooo and in_order > 0 and late + in_order == dml  # every message drawn, each in one colour
    labels = {t.get_text() for t in basics_stepper._renderer.fig.legends[0].get_texts()}
    assert {"DML message", "out of order", "time tick", "proxy-1 report", "proxy-2 report"} <= labels
    assert "below a tick!" not in labels  # no watermark violation without the bug switch


def test_watermark_violations_are_red_crosses_with_the_bug_switch(unlocked):
    _ooo, below = _reference_flags(unlocked)
    assert below > 0
    st = TimelineStepper(unlocked, lanes=timetick_lanes())
    crosses = [line for lane in _lanes(st, PChannelLane) for line in lane.page_y.ax.get_lines()
               if line.get_label() == "below a tick!"]
    assert sum(len(line.get_xdata()) for line in crosses) == below
    assert all(line.get_markerfacecolor() == "#d62728" for line in crosses)
    legend = {t.get_text() for t in st._renderer.fig.legends[0].get_texts()}
    assert "below a tick!" in legend


def test_legend_sits_above_the_lanes_and_inside_the_figure(basics_stepper):
    fig = basics_stepper._renderer.fig
    renderer = fig.canvas.get_renderer()
    box = fig.legends[0].get_window_extent(renderer)
    assert box.y1 <= fig.bbox.height + 1  # nothing cut off at the top
    assert box.x1 <= fig.bbox.width + 1  # nor at the right: nine labels in five columns were 730 px in 612
    for ax in basics_stepper._renderer.axes:
        assert not box.overlaps(ax.get_window_extent(renderer))
    rows = {round(t.get_window_extent(renderer).y0) for t in fig.legends[0].get_texts()}
    assert 2 <= len(rows) <= 3  # fewer columns, so more rows, and the lanes made room for them


@pytest.mark.slow
def test_paged_view_fits_timestamps_to_the_page(basics):
    full = TimelineStepper(basics, lanes=timetick_lanes())
    paged = TimelineStepper(basics, lanes=timetick_lanes(), window_s=0.3)
    i = _positions(basics, "mq.produce", msg_type="TimeTick")[-1]
    full.goto(i)
    paged.goto(i)
    lo, hi = _lanes(paged, PChannelLane)[0].page_y.ax.get_ylim()
    flo, fhi = _lanes(full, PChannelLane)[0].page_y.ax.get_ylim()
    assert hi - lo < (fhi - flo) / 2  # a page's range, not the run's (the tick carried in from the left included)
    t = basics["t_ms"].iloc[i] / 1000.0
    assert lo < t < hi + 0.1  # the page's timestamps are near its simulated time


@pytest.mark.slow
def test_silent_proxy_is_named_during_a_stall(stall):
    st = TimelineStepper(stall, lanes=timetick_lanes())
    lane = _lanes(st, ProxyLane)[0]
    during = int(np.searchsorted(stall["t_ms"].to_numpy(dtype=float), 5_000.0))
    st.goto(during)
    assert lane.silent.get_visible()
    assert lane.silent.get_text().startswith("proxy-2 silent for ")
    assert "proxy-1" not in lane.silent.get_text()
    st.goto(int(np.searchsorted(stall["t_ms"].to_numpy(dtype=float), 2_500.0)))
    assert not lane.silent.get_visible()


def test_missing_pchannel_slot_and_bad_counts(basics):
    st = TimelineStepper(basics, lanes=timetick_lanes(pchannels=5))
    fifth = _lanes(st, PChannelLane)[4]
    assert fifth.tracks == []
    assert any("no pchannel #4" in t.get_text() for t in st._renderer.axes[4].texts)
    with pytest.raises(ValueError, match="at least one pchannel lane"):
        timetick_lanes(pchannels=0)
    with pytest.raises(ValueError, match="counts from 0"):
        PChannelLane(-1)


def test_lanes_on_a_log_without_timetick_events_say_so():
    ev = milvus_edu.simulate("tso-basics", seed=1, duration_s=2).events
    st = TimelineStepper(ev, lanes=timetick_lanes())
    texts = [t.get_text() for ax in st._renderer.axes for t in ax.texts]
    assert "no proxies in this run" in texts and "no packs consumed in this run" in texts
    assert st.step_forward() == 1 and st.png.startswith(PNG_MAGIC)


@pytest.mark.slow
def test_events_lane_marks_the_stall(stall):
    st = TimelineStepper(stall, lanes=timetick_lanes()[:-1] + [EventsLane(marks={**CORE_MARKS, **MARKS})])
    events = st.lanes[-1]
    assert events.labels == ["proxy-2 report loop stalls 3 s"]


# ------------------------------------------------------------------------------------ panel


def test_panel_last_tick_per_pchannel_is_the_last_produced_tick(basics_panel, basics):
    ticks = basics[(basics["kind"] == "mq.produce") & (basics["msg_type"] == "TimeTick")]
    dml = basics[(basics["kind"] == "mq.produce") & (basics["msg_type"] != "TimeTick")]
    first_tick = int(ticks.index[0])
    for i in (0, first_tick - 1, first_tick, first_tick + 1, 3000, 7777, int(ticks.index[-1]), len(basics) - 1):
        s = basics_panel.state(i)
        assert [c["pchannel"] for c in s["pchannels"]] == [f"by-dev-rootcoord-dml_{k}" for k in range(4)]
        for c in s["pchannels"]:
            mine = ticks[(ticks["channel"] == c["pchannel"]) & (ticks.index <= i)]
            written = dml[(dml["channel"] == c["pchannel"]) & (dml.index <= i)]
            if len(mine) == 0:
                assert c["last_tick"] is None and c["dml_after_tick"] == len(written)
                continue
            last = mine.iloc[-1]
            assert c["last_tick"] == int(last["tick_ts"]) and c["last_tick_index"] == int(mine.index[-1])
            assert c["last_tick_t_ms"] == pytest.approx(float(last["t_ms"]))
            assert c["dml_after_tick"] == int((written.index > mine.index[-1]).sum())
            assert c["dml_total"] == len(written) and c["below_tick"] == 0


def test_panel_proxies_last_report_pending_tasks_and_min_ts(basics_panel, basics):
    for i in (40, 2500, 9000, len(basics) - 1):
        upto = basics.iloc[: i + 1]
        for p in basics_panel.state(i)["proxies"]:
            reports = upto[(upto["kind"] == "proxy.report") & (upto["node"] == p["proxy"])]
            if reports.empty:  # early on, a proxy's report loop (on its own phase) may not have ticked yet
                assert p["last_report"] is None
            else:
                r = reports.iloc[-1]
                assert p["last_report"]["default"] == int(r["ts"])
                assert p["last_report"]["channels"] == {k: int(v)
                                                        for k, v in json.loads(r["detail"])["channels"].items()}
            for ch, pending in p["pending"].items():
                rows = upto[(upto["node"] == p["proxy"]) & (upto["channel"] == ch)]
                enq = int((rows["kind"] == "proxy.enqueue").sum())
                fin = int((rows["kind"] == "proxy.finish").sum())
                assert pending == enq - fin
                stats = rows[rows["kind"].isin(["proxy.enqueue", "proxy.finish"])]
                want = stats["min_ts"].iloc[-1] if len(stats) else pd.NA
                assert p["min_ts"][ch] == (None if pd.isna(want) else int(want))
                assert (pending == 0) == (p["min_ts"][ch] is None)  # statistics are empty exactly when idle
            assert not p["killed"] and p["stalled_until_ms"] is None


def test_panel_rootcoord_waits_for_the_stalled_proxy(stall_panel, stall):
    stall_at = _positions(stall, "fault.stall")[0]
    updates = [i for i in _positions(stall, "rootcoord.timetick_update") if i > stall_at]
    waiting = [i for i in updates if json.loads(stall["detail"].iloc[i])["waiting_for"] == ["proxy-2"]]
    assert waiting
    i = waiting[0]
    s = stall_panel.state(i)
    assert s["rootcoord"]["waiting_for"] == ["proxy-2"] and s["rootcoord"]["sent"] is False
    assert s["rootcoord"]["sessions"] == ["proxy-1", "proxy-2"]
    p2 = next(p for p in s["proxies"] if p["proxy"] == "proxy-2")
    assert p2["stalled_until_ms"] == pytest.approx(6_000.0)
    text = "".join(v for _k, v in stall_panel.rows(s))
    assert "<b>waiting for proxy-2</b>" in text and "report loop stalled until 6.000 s" in text
    late = int(np.searchsorted(stall["t_ms"].to_numpy(dtype=float), 5_500.0))
    p2 = next(p for p in stall_panel.state(late)["proxies"] if p["proxy"] == "proxy-2")
    assert p2["last_report"]["age_ms"] > 2_000
    assert "silent for" in "".join(v for _k, v in stall_panel.rows(stall_panel.state(late)))
    # what is wrong with proxy-2 stands beside its report, before its pending tasks' line
    line = stall_panel._proxy_line(p2, stall_panel.pchannels)
    assert "pending tasks" in line and line.index("stalled until") < line.index("<br>") < line.index("pending tasks")
    # Ticks stopped: every pchannel's last tick is from before the stall, with messages piling up after it.
    for c in stall_panel.state(late)["pchannels"]:
        assert c["last_tick_t_ms"] < 3_000.0 < 5_500.0 and c["dml_after_tick"] > 500


def test_panel_follows_a_proxy_kill_and_restart():
    ev = milvus_edu.simulate("timetick-proxy-restart", seed=1, duration_s=6).events
    panel = TimeTickPanel(RunIndex(ev))
    t = ev["t_ms"].to_numpy(dtype=float)
    kill, restart = _positions(ev, "fault.kill")[0], _positions(ev, "fault.restart")[0]
    before = next(p for p in panel.state(kill - 1)["proxies"] if p["proxy"] == "proxy-2")
    dead = next(p for p in panel.state(kill)["proxies"] if p["proxy"] == "proxy-2")
    assert not before["killed"] and sum(before["pending"].values()) > 0
    assert dead["killed"] and set(dead["pending"].values()) == {0}  # its queue died with it
    assert all(v is None for v in dead["min_ts"].values())
    s = panel.state(int(np.searchsorted(t, 5_500.0)))
    p2 = next(p for p in s["proxies"] if p["proxy"] == "proxy-2")
    assert not p2["killed"] and p2["last_report"]["t_ms"] > t[restart]
    # The old session still counts (until its lease expires), so rootcoord waits for "proxy-2" twice.
    assert s["rootcoord"]["sessions"] == ["proxy-1", "proxy-2", "proxy-2"]
    assert "proxy-2 (&times;2)" in panel.rows(s)[2][1]
    assert kill in film_steps(RunIndex(ev))  # no tick after the kill in 6 s: the kill itself


def test_panel_plugs_into_the_run_index():
    """The registry's protocol: ``panel(index)``, ``film_steps(index)``; the stepper merges ``state(i)``."""
    from milvus_edu.registry import Mechanism

    ev = milvus_edu.simulate("timetick-basics", seed=2, duration_s=0.6).events
    mech = Mechanism(name="timetick-view", title="TimeTick views", panel=TimeTickPanel, film_steps=film_steps)
    ix = RunIndex(ev, mechanisms=(mech,))
    i = _positions(ev, "mq.produce", msg_type="TimeTick")[0]
    s = ix.state(i)
    assert s["kind"] == "mq.produce" and s["index"] == i
    assert {"pchannels", "proxies", "rootcoord", "last_pack"} <= set(s)
    assert [label for label, _html in ix.panel_rows(s)] == ["last ticks", "proxies", "rootcoord", "last pack"]
    assert ix.film_steps() == film_steps(ix)


def test_panel_counts_messages_below_a_tick(unlocked):
    panel = TimeTickPanel(RunIndex(unlocked))
    _ooo, below = _reference_flags(unlocked)
    s = panel.state(len(unlocked) - 1)
    assert sum(c["below_tick"] for c in s["pchannels"]) == below
    assert "below a tick" in panel.rows(s)[0][1]


def test_panel_rows_escape_text(basics):
    odd = basics.copy()
    odd["node"] = odd["node"].replace({"proxy-1": "proxy<&>"})
    panel = TimeTickPanel(RunIndex(odd))
    rows = dict(panel.rows(panel.state(len(odd) - 1)))
    assert "proxy&lt;&amp;&gt;" in rows["proxies"] and "proxy<&>" not in rows["proxies"]
    assert set(rows) == {"last ticks", "proxies", "rootcoord", "last pack"}
    assert html.unescape(rows["last ticks"]).count("dml_") == 4


def test_shared_message_table_matches_the_events(basics):
    msgs = dml_messages(basics)
    ticks = time_ticks(basics)
    produce = basics[basics["kind"] == "mq.produce"]
    assert len(msgs) + len(ticks) == len(produce)
    assert (msgs["end_ts"].to_numpy() == produce.loc[msgs["pos"], "end_ts"].to_numpy(dtype=np.int64)).all()
    assert set(ticks["min_from"]) <= {"proxy-1", "proxy-2", "ddl"}
    ooo, _below = _reference_flags(basics)
    assert int(msgs["out_of_order"].sum()) == ooo


# ------------------------------------------------------------------------------------ film


def test_film_steps_pick_the_story(basics, stall, unlocked):
    ix = RunIndex(basics)
    steps = film_steps(ix)
    kinds = [ix.kinds[i] for i in steps]
    assert steps == sorted(steps) and 1 <= len(steps) <= 4
    assert "mq.produce" in kinds
    msgs = dml_messages(basics)
    worst = msgs.loc[(msgs["highest"] - msgs["end_ts"]).where(msgs["out_of_order"], -1).idxmax(), "pos"]
    assert int(worst) in steps
    sx = RunIndex(stall)
    s_steps = film_steps(sx)
    stall_at = _positions(stall, "fault.stall")[0]
    resumed = next(i for i in _positions(stall, "mq.produce", msg_type="TimeTick") if i > stall_at)
    assert resumed in s_steps and sx.t_ms[resumed] > 6_000.0
    ux = RunIndex(unlocked)
    first_below = int(dml_messages(unlocked).query("below_tick")["pos"].iloc[0])
    assert first_below in film_steps(ux)


@pytest.mark.slow
def test_to_static_writes_png_and_svg(tmp_path, basics_stepper):
    steps = film_steps(basics_stepper.index)
    paths = basics_stepper.to_static(tmp_path / "timetick", steps=steps)
    assert [p.name for p in paths] == ["timetick.png", "timetick.svg"]
    png, svg = (p.read_bytes() for p in paths)
    assert png.startswith(PNG_MAGIC) and len(png) > 10_000
    assert b"<svg" in svg[:2000] and b"</svg>" in svg[-100:]
    again = basics_stepper.to_static(tmp_path / "again", steps=steps)
    assert again[0].read_bytes() == png  # deterministic


# ------------------------------------------------------------------------------------ size


@pytest.mark.slow
def test_a_hundred_thousand_event_run_sets_up_and_steps():
    ev = milvus_edu.simulate("timetick-basics", seed=1, duration_s=9).events
    assert len(ev) >= 100_000
    st = TimelineStepper(ev, lanes=timetick_lanes())
    last = st.goto(len(ev) - 1)
    assert st.png.startswith(PNG_MAGIC)
    panel = TimeTickPanel(st.index)
    s = panel.state(last)
    assert sum(c["dml_total"] for c in s["pchannels"]) == int(
        ((ev["kind"] == "mq.produce") & (ev["msg_type"] == "Insert")).sum())


def test_panel_names_the_messages_of_the_last_pack(basics_panel, basics):
    """Every pack's messages are the consumer's mq.consume rows, each traced to the event that wrote it: as many as
    the pack's count, all inside its interval, and nothing of the interval missed."""
    kinds = basics["kind"].to_numpy()
    produce = {(r.channel, int(r.msg_id)): int(r.seq) for r in basics[kinds == "mq.produce"].itertuples()
               if r.msg_type in ("Insert", "Delete")}
    packs = np.flatnonzero(kinds == "mq.pack")
    for k in packs:
        held, missed = basics_panel.pack_messages(int(k))
        row = basics.iloc[k]
        assert len(held) == int(row["count"]) and missed == 0
        for m in held:
            assert int(row["begin_ts"]) < m["end_ts"] <= int(row["end_ts"]) and not m["late"]
            assert m["index"] == produce[(row["channel"], m["msg_id"])] < k
    first = int(next(k for k in packs if basics["count"].iloc[k] > 0))
    s = basics_panel.state(first)
    assert s["last_pack"]["index"] == first
    line = dict(basics_panel.rows(s))["last pack"]
    m = s["last_pack"]["messages"][0]
    assert f"#{m['msg_id']}" in line and f"event {m['index'] + 1:,}" in line and "more" in line
    assert basics_panel.state(int(packs[0]) - 1)["last_pack"] is None


#: The width (px) of the stepper panel's value column in JupyterLab 4 at 1280 x 800 with the file browser open, lab 2's
#: stepper (panel 336 px, its key column 68 px), measured with the browser tests' chromium; its fonts are DejaVu: the
#: panel's text at 12.5 px, ``<code>`` at 13 px. Matplotlib measures the same fonts about 2 % wider.
PANEL_VALUE_PX = 259
TICK_CELL_GAP_PX = 6


def _text_px(text: str, bold: bool = False, mono: bool = False) -> float:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.font_manager import FontProperties

    font = FontProperties(family="DejaVu Sans Mono" if mono else "DejaVu Sans", weight="bold" if bold else "normal",
                          size=13 if mono else 12.5)
    return FigureCanvasAgg(Figure(dpi=72)).get_renderer().get_text_width_height_descent(text, font, ismath=False)[0]


def _table_px(table_html: str) -> float:
    """The width of an HTML table of one line per row: its columns' widest cells, with the gaps between them."""
    widest: dict[int, float] = {}
    for row in re.findall(r"<tr[^>]*>(.*?)</tr>", table_html, re.S):
        for k, cell in enumerate(re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)):
            text = html.unescape(re.sub(r"<[^>]+>", "", cell))
            px = _text_px(text, bold="<b>" in cell, mono="<code>" in cell)
            widest[k] = max(widest.get(k, 0.0), px)
    return sum(widest.values()) + TICK_CELL_GAP_PX * (len(widest) - 1)


def test_the_last_ticks_take_one_line_a_pchannel_in_the_panels_width(basics, basics_panel):
    """Lab 2's panel ran past its foot in JupyterLab at 1280 x 800, its last row ("last pack") cut off: each pchannel's
    tick took two lines as a sentence. As a table (name, tick, when, messages after it) each takes one line: the
    table fits the width the panel gives its values, at every event of the run."""
    sentence = "dml_0 tick 00:00:00.250+44 at 0.459 s; 0 messages after it"  # the old line, measured the same way
    assert _text_px(sentence) > PANEL_VALUE_PX
    widths = []
    for i in list(range(0, len(basics), 997)) + [len(basics) - 1]:
        ticks = dict(basics_panel.rows(basics_panel.state(i)))["last ticks"]
        (table,) = re.findall(r"<table>.*?</table>", ticks, re.S)
        assert table.count("<tr") == 1 + len(basics_panel.pchannels)  # a head, then one row a pchannel
        assert "<br>" not in table
        widths.append(_table_px(table))
    assert max(widths) <= PANEL_VALUE_PX, max(widths)


def test_the_panel_rows_above_the_last_pack_are_short_and_it_names_four_messages(basics, basics_panel):
    """What else keeps the last row in the panel: a proxy's report that lists every pchannel says "all 4", and the last
    pack names four of its messages (six made the row run past the panel's foot)."""
    s = basics_panel.state(len(basics) - 1)
    rows = dict(basics_panel.rows(s))
    assert rows["proxies"].count("(pchannels listed: all 4)") == 2 and "dml_0, dml_1" not in rows["proxies"]
    assert PACK_SHOWN == 4
    pack = s["last_pack"]
    assert len(pack["messages"]) > PACK_SHOWN
    assert rows["last pack"].count(" #") == PACK_SHOWN  # "#id <code>ts</code> (event n)" each, after ": " or ", "
    assert f"and {len(pack['messages']) - PACK_SHOWN:,} more" in rows["last pack"]


def test_panel_shows_a_pack_missing_a_message_with_the_bug_switch(unlocked):
    """With the bug switch a message comes below a tick: the pack of its interval missed it and a later pack
    delivers it below its own interval; the panel says so."""
    panel = TimeTickPanel(RunIndex(unlocked))
    packs = np.flatnonzero(unlocked["kind"].to_numpy() == "mq.pack")
    results = [panel.pack_messages(int(k)) for k in packs]
    missed = sum(m for _h, m in results)
    late = sum(x["late"] for h, _m in results for x in h)
    _ooo, below = _reference_flags(unlocked)
    assert missed >= late > 0 and late <= below  # a late message near the end of the run is not delivered yet
    k = int(next(k for k, (h, m) in zip(packs, results) if m))
    assert "missed" in dict(panel.rows(panel.state(k)))["last pack"]
