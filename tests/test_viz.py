"""The timeline stepper (milvus_edu.viz): cursor moves, state panel, lanes plug-in, static export."""

from __future__ import annotations

import ipywidgets as widgets
import numpy as np
import pandas as pd
import pytest

import milvus_edu
from milvus_edu.mechanisms.tso.lanes import tso_lanes
from milvus_edu.viz import Lane, TimelineStepper

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def failover_events() -> pd.DataFrame:
    return milvus_edu.simulate("tso-failover", seed=1).events


@pytest.fixture
def st(failover_events) -> TimelineStepper:
    return TimelineStepper(failover_events)


def test_a_closed_stepper_is_freed(failover_events):
    """Closing the widget lets the stepper, its figure and its run go: nothing of the package keeps a closed one
    (anywidget keeps every widget made from a file it watches, so the page's JavaScript is given as text)."""
    import gc
    import weakref

    stepper = TimelineStepper(failover_events)
    gone = weakref.ref(stepper)
    stepper.close()
    del stepper
    gc.collect()
    assert gone() is None


def _positions(events: pd.DataFrame, kind: str) -> list[int]:
    return [int(i) for i in events.index[events["kind"] == kind]]


def _ask(st: TimelineStepper, **want) -> tuple[dict, dict, list[bytes]]:
    """Send the stepper a request as the browser does; return the reply's header, its window (parsed)
    and its page pictures."""
    import json

    sent = []
    st.view.send = lambda content, buffers=None: sent.append((content, buffers))
    st._on_view_msg(st.view, {"type": "want", **want}, [])
    assert sent, "every request is answered"
    header, buffers = sent[0]
    assert header["type"] == "window" and header["req"] == want.get("req") and len(buffers) == 1
    win = json.loads(buffers[0])
    assert (win["start"], win["end"]) == (header["start"], header["end"])
    if not header["pictures_follow"]:
        assert len(sent) == 1
        return header, win, []
    assert len(sent) == 2, "the pictures the window's answer announced follow it, and nothing else"
    pictures, pngs = sent[1]
    assert pictures == {"type": "pictures", "req": want.get("req"), "pages": header["pictures_follow"]}
    assert len(pngs) == len(header["pictures_follow"])
    return header, win, pngs


# ------------------------------------------------------------------------------------ building


def test_builds_from_simulated_run(st, failover_events):
    assert st.cursor == 0
    assert len(st) == len(failover_events)
    assert [l.name for l in st.lanes] == [l.name for l in tso_lanes()]
    assert st.png.startswith(PNG_MAGIC)
    assert st.state()["kind"] == "run.start"


@pytest.mark.slow
def test_builds_from_run_folder_on_disk(tmp_path, failover_events):
    milvus_edu.simulate("tso-failover", seed=1, out_dir=tmp_path / "r")
    from_disk = TimelineStepper(tmp_path / "r")
    from_file = TimelineStepper(str(tmp_path / "r" / "events.jsonl"))
    in_memory = TimelineStepper(failover_events)
    assert len(from_disk) == len(from_file) == len(in_memory)
    for s in (from_disk, from_file, in_memory):
        s.jump_to_next("fault.kill")
    assert from_disk.state() == from_file.state() == in_memory.state()


def test_accepts_run_result():
    st = TimelineStepper(milvus_edu.simulate("tso-basics", seed=1, duration_s=2))
    assert st.state()["kind"] == "run.start"


# ------------------------------------------------------------------------------------ cursor


def test_step_forward_back_goto_change_state_and_panel(st):
    html0, state0 = st.panel_html, st.state()
    assert st.step_forward() == 1 and st.cursor == 1
    assert st.state() != state0 and st.state()["index"] == 1
    assert st.panel_html != html0
    assert "<b>event 2</b> of " in st.panel_html  # counted from 1 for people
    assert st.state()["event"] in st.panel_html.replace("&#x27;", "'")
    assert st.step_back() == 0 and st.panel_html == html0
    assert st.goto(500) == 500 and st.view.cursor == 500 and st.state()["seq"] == 500
    assert st.event_number == 501 and "<b>event 501</b> of " in st.panel_html


def test_jump_to_next(st, failover_events):
    saves = _positions(failover_events, "tso.save")
    assert st.jump_to_next("tso.save") == saves[0]
    assert st.jump_to_next("tso.save") == saves[1]
    assert st.state()["kind"] == "tso.save"
    assert st.state()["window_end_ms"] == int(failover_events["window_end_ms"].iloc[saves[1]])
    kill = _positions(failover_events, "fault.kill")[0]
    assert st.jump_to_next("fault.kill") == kill
    before = st.panel_html
    assert st.jump_to_next("fault.kill") is None  # only one kill
    assert st.cursor == kill and st.panel_html == before
    assert "no fault.kill" in st.view.message
    assert st.jump_to_next("no.such.kind") is None and st.cursor == kill


def test_bounds(st):
    assert st.step_back() == 0 and st.goto(-5) == 0
    last = len(st) - 1
    assert st.goto(10**9) == last
    assert st.step_forward() == last
    assert st.state()["kind"] == "run.end"
    assert st.jump_to_next("tso.alloc") is None


def test_second_session_active_names_rootcoord_2(st, failover_events):
    actives = _positions(failover_events, "session.active")
    assert len(actives) == 2
    st.goto(actives[0])
    assert st.state()["active"] == "rootcoord-1"
    st.goto(actives[1])
    s = st.state()
    assert s["active"] == "rootcoord-2" and s["node"] == "rootcoord-2"
    assert "rootcoord-1" in s["killed"]
    assert "active rootcoord</td><td><b>rootcoord-2</b>" in st.panel_html
    # Between the kill and the lease expiry the killed node still holds the key; then nobody does.
    st.goto(_positions(failover_events, "fault.kill")[0])
    assert st.state()["active"] == "rootcoord-1" and "killed" in st.panel_html
    st.goto(actives[1] - 1)
    assert st.state()["active"] is None


def test_last_ts_is_end_of_latest_alloc_batch(st, failover_events):
    alloc = _positions(failover_events, "tso.alloc")[3]
    st.goto(alloc + 1)
    assert st.state()["last_ts"] == int(failover_events["ts"].iloc[alloc])
    assert st.state()["last_ts_node"] == failover_events["node"].iloc[alloc]


# ------------------------------------------------------------------------------------ widgets


def test_widget_is_one_browser_side_view_with_the_run_sent_once(st, failover_events):
    """The controls run in the browser: it holds every event's time and kind, the background, and the
    panel and cursor drawing of a window of events around the cursor."""
    import json

    import numpy as np

    from milvus_edu.viz.frontend import StepperView

    view = st.widget
    assert isinstance(view, StepperView) and isinstance(view, widgets.DOMWidget)
    assert "milvus-edu-stepper" in view._dom_classes
    n = len(failover_events)
    assert view.n == n
    times = np.frombuffer(view.times, dtype="<f4")
    assert len(times) == n and np.allclose(times, failover_events["t_ms"].to_numpy(dtype=float) / 1000, atol=1e-3)
    codes = np.frombuffer(view.kind_codes, dtype="<u2")
    assert [view.kind_names[c] for c in codes] == list(failover_events["kind"].astype(str))
    assert set(view.kind_names) == set(failover_events["kind"].astype(str))
    assert view.backgrounds["0"].startswith(PNG_MAGIC)
    geo = view.geometry
    assert len(geo["axes"]) == len(st.lanes) and geo["width"] > 0 and geo["height"] > 0
    win = json.loads(view.window)
    assert win["start"] == 0 and win["end"] == min(n, view.margin)  # short: the browser asks for more at once
    assert "".join(win["frags"][k] for k in win["panel"][0]) == st.panel_html
    header, win, pngs = _ask(st, req=1, cursor=0, have=[0, view.margin], pages=["0"])
    assert win["start"] == 0 and win["end"] == min(n, 512) and pngs == []  # it holds the only page
    assert all(op[0] in "LTRC" for op in win["ops"])
    bundle = st._repr_mimebundle_()
    data = bundle[0] if isinstance(bundle, tuple) else bundle  # (data, metadata), as IPython accepts
    assert "application/vnd.jupyter.widget-view+json" in data


def test_front_end_cursor_moves_the_kernel_side_cursor_cheaply(st):
    view = st.widget
    window = view.window
    view.cursor = 42  # a click in the browser, synced to the kernel
    assert st.cursor == 42 and st.event_number == 43 and st.state()["number"] == 43
    assert view.window == window  # no work in the kernel for a step inside the window


def test_every_request_is_answered_for_the_cursor_it_names(st):
    """The browser's requests carry their own cursor: the kernel answers for it, not for its own cursor
    (whose update may still wait in the browser's queue), and answers a request even when the window
    is the one it sent before (a request left unanswered froze the panel for good)."""
    from milvus_edu.viz.stepper import QUICK_WINDOW, WINDOW_AFTER, WINDOW_BEFORE

    st.view.cursor = 42  # the kernel's cursor lags behind the browser's
    header, quick, _ = _ask(st, req=7, cursor=1500, have=[0, 48], pages=["0"])
    assert quick["start"] <= 1500 < quick["end"] and quick["end"] - quick["start"] == QUICK_WINDOW
    st.view.cursor = 1500
    assert "".join(quick["frags"][k] for k in quick["panel"][1500 - quick["start"]]) == st.panel_html
    # Near the short window's edge the browser asks again: the full window around the same cursor.
    _, full, _ = _ask(st, req=8, cursor=1500, have=[quick["start"], quick["end"]], pages=["0"])
    assert full["start"] == 1500 - WINDOW_BEFORE and full["end"] == 1500 + WINDOW_AFTER
    # The same request again (the browser re-asks after a silence): answered again, with the same window.
    again, full2, _ = _ask(st, req=9, cursor=1500, have=[quick["start"], quick["end"]], pages=["0"])
    assert full2 == full and again["req"] == 9
    # Playing forward: most of the window lies ahead of the cursor.
    _, ahead, _ = _ask(st, req=10, cursor=1500, have=[full["start"], full["end"]], pages=["0"], ahead=True)
    assert ahead["start"] >= 1500 - 16 and ahead["end"] - ahead["start"] == WINDOW_BEFORE + WINDOW_AFTER
    # A cursor out of the run or not a number: clamped, or the kernel's own cursor.
    _, last, _ = _ask(st, req=11, cursor=10**9, have=None, pages=[])
    assert last["end"] == len(st)
    _, own, _ = _ask(st, req=12, cursor="x", have=None, pages=["0"])
    assert own["start"] <= st.cursor < own["end"]


def test_jump_and_goto_move_the_browser_cursor(st, failover_events):
    st.widget.jump_kind = "session.active"
    j = st.jump_to_next("session.active")
    assert st.widget.cursor == j and st.state()["kind"] == "session.active"
    assert st.goto_event(1009) == 1008 and st.widget.cursor == 1008
    assert st.panel_html.count("<b>event 1,009</b> of ") == 1


def test_image_changes_with_cursor(st):
    first = st.png
    st.goto(800)
    assert st.png.startswith(PNG_MAGIC) and st.png != first


def test_paged_window(failover_events):
    import json

    st = TimelineStepper(failover_events, window_s=20)
    assert set(st.widget.backgrounds) == {"0"}
    st.goto(_positions(failover_events, "session.active")[1])
    win = json.loads(st.widget.window)
    pages = {str(p) for p in win["page"]}
    assert "3" in pages and set(st.widget.backgrounds) == pages  # 60 s is on the fourth page of 20 s
    redraws = st._renderer.redraws
    st.step_forward()
    assert st.png.startswith(PNG_MAGIC)
    st.step_forward()
    assert st._renderer.redraws <= redraws + 1  # same page: its background drawn at most once more
    # An answer brings the pictures of its window's pages that the browser lacks, and only those.
    header, win, pngs = _ask(st, req=1, cursor=st.cursor, have=None, pages=["0", "3"])
    pages = {str(p) for p in win["page"]}
    assert header["pictures_follow"] == sorted(pages - {"0", "3"}, key=int)
    assert pngs and all(p.startswith(PNG_MAGIC) for p in pngs)


# ------------------------------------------------------------------------------------ lanes


class RecordingLane(Lane):
    name = "recording"
    height_ratio = 0.5

    def __init__(self):
        self.setups = []
        self.updates = []

    def setup(self, ax, events):
        self.setups.append(len(events))
        (self.dot,) = ax.plot([], [], "o")

    def update(self, cursor_index, t_ms):
        self.updates.append((cursor_index, t_ms))
        self.dot.set_data([t_ms / 1000.0], [0.0])
        return (self.dot,)


def test_custom_lane_gets_setup_and_update(failover_events):
    lane = RecordingLane()
    st = TimelineStepper(failover_events, lanes=tso_lanes() + [lane])
    assert lane.setups == [len(failover_events)]
    assert lane.dot.get_animated()  # blitted, not part of the cached background
    st.goto(709)
    assert lane.updates[-1] == (709, float(failover_events["t_ms"].iloc[709]))
    st.step_forward()
    assert lane.updates[-1][0] == 710
    # The browser's window holds the lane's cursor drawing for every event around the cursor.
    import json
    win = json.loads(st.widget.window)
    assert {u[0] for u in lane.updates} >= set(range(win["start"], win["end"]))


def test_custom_lane_alone_and_in_static_export(tmp_path, failover_events):
    lane = RecordingLane()
    st = TimelineStepper(failover_events, lanes=[lane])
    paths = st.to_static(tmp_path / "only", steps=[0, 5])
    assert all(p.stat().st_size > 0 for p in paths)
    assert lane.setups == [len(failover_events)]  # exports draw on fresh copies


def test_lane_without_methods_is_rejected(failover_events):
    with pytest.raises(TypeError, match="setup"):
        TimelineStepper(failover_events, lanes=[object()])


# ------------------------------------------------------------------------------------ export


@pytest.mark.slow
def test_to_static_writes_png_and_svg(tmp_path, st):
    paths = st.to_static(tmp_path / "film")
    assert [p.name for p in paths] == ["film.png", "film.svg"]
    png, svg = (p.read_bytes() for p in paths)
    assert png.startswith(PNG_MAGIC) and len(png) > 1000
    assert b"<svg" in svg[:2000]
    assert st.interesting_steps() == sorted(st.interesting_steps())
    kinds = [st.index.kinds[i] for i in st.interesting_steps()]
    assert kinds == ["tso.init", "tso.save", "fault.kill", "tso.init"]
    again = st.to_static(tmp_path / "again.png", steps=st.interesting_steps())
    assert [p.name for p in again] == ["again.png", "again.svg"]
    assert again[0].read_bytes() == png and again[1].read_bytes() == svg  # deterministic pictures


# ------------------------------------------------------------------------------------ odd logs


def test_empty_log_is_a_clear_error(failover_events):
    with pytest.raises(ValueError, match="no events"):
        TimelineStepper(failover_events.iloc[0:0])
    with pytest.raises(ValueError, match="missing"):
        TimelineStepper(pd.DataFrame({"x": [1]}))
    with pytest.raises(TypeError):
        TimelineStepper(12)


def test_non_tso_log_gives_empty_but_working_view(tmp_path, failover_events):
    other = failover_events[failover_events["kind"].isin(["run.start", "run.end"])]
    other = pd.concat([other, other.assign(kind="datanode.flush", node="datanode-1", seq=other["seq"] + 1)])
    st = TimelineStepper(other)
    assert len(st) == 4
    assert st.state()["active"] is None and st.state()["last_ts"] is None
    assert "nothing saved yet" in st.panel_html
    assert st.step_forward() == 1
    assert "datanode-1: datanode.flush" in st.panel_html  # unknown kinds still narrate
    assert st.step_forward() == 2 and st.state()["kind"] == "run.end"
    assert st.jump_to_next("tso.alloc") is None
    assert "datanode.flush" in st.widget.kind_names
    paths = st.to_static(tmp_path / "empty")
    assert paths[0].read_bytes().startswith(PNG_MAGIC)


# ------------------------------------------------------------------------------------ clocks


def _panel_text(st) -> str:
    import html as _html
    import re as _re
    return _html.unescape(_re.sub(r"<[^>]+>", "", st.panel_html.replace("<br>", "\n")))


def test_panel_shows_rootcoord_2_clock_behind_its_physical_part_after_failover(st, failover_events):
    init2 = _positions(failover_events, "tso.init")[1]
    st.goto(init2)
    s = st.state()
    assert s["node"] == "rootcoord-2" and s["kind"] == "tso.init"
    row = failover_events.iloc[init2]
    c = s["clock"]
    assert c["node"] == "rootcoord-2" and c["read_now"] and c["read_index"] == init2
    assert c["clock_ms"] == int(row["clock_ms"]) and c["physical_ms"] == int(row["physical_ms"])
    # The lab's point: the physical part starts one guard past the saved window (12 s) while the
    # node's own clock reads 15 s before time zero, 27 s behind it.
    assert c["clock_minus_physical_ms"] == -27_001
    assert c["text"] == "rootcoord-2 clock -00:00:15.000 (27.001 s behind its physical part 00:00:12.001)"
    text = _panel_text(st)
    assert text.startswith(f"event {init2 + 1:,} of {len(failover_events):,}")
    assert "rootcoord-2 clock -00:00:15.000 (27.001 s behind its physical part 00:00:12.001)" in text
    assert "23:59:45" not in text  # signed wall-clock text (narrate.wall_text), never modulo a day
    # rootcoord-1's last reading (before it was killed) is still listed, from its last event.
    r1 = next(x for x in s["clocks"] if x["node"] == "rootcoord-1")
    assert r1["killed"] and not r1["read_now"] and r1["read_t_ms"] < 10_000
    assert abs(r1["clock_minus_physical_ms"]) < 100
    assert [x["node"] for x in s["clocks"]] == ["rootcoord-1", "rootcoord-2"]


def test_clock_readings_are_the_last_known_per_rootcoord(st, failover_events):
    """``clocks`` at any cursor = each node's latest clock_ms at or before it, next to its physical part."""
    clock = failover_events["clock_ms"]
    phys = failover_events["physical_ms"]
    kinds = failover_events["kind"].astype(str)
    state_kinds = ["tso.init", "tso.update", "tso.alloc", "tso.set", "tso.reset", "tso.alloc_retry"]
    for i in (0, 4, 5, 700, 709, 1007, 1008, 1009, 1500, len(failover_events) - 1):
        st.goto(i)
        got = {c["node"]: c for c in st.state()["clocks"]}
        upto = failover_events.iloc[: i + 1]
        has = upto[clock.iloc[: i + 1].notna()]
        assert set(got) == set(has["node"])
        for node, c in got.items():
            last = has[has["node"] == node].index[-1]
            assert c["read_index"] == last and c["clock_ms"] == int(clock.iloc[last])
            ph = upto[(upto["node"] == node) & kinds.iloc[: i + 1].isin(state_kinds) & phys.iloc[: i + 1].notna()]
            assert c["physical_ms"] == (int(ph["physical_ms"].iloc[-1]) if len(ph) else None)
        carries = pd.notna(clock.iloc[i])
        assert (st.state()["clock"] is not None) == bool(carries)
    st.goto(0)
    assert st.state()["clocks"] == [] and "no clock reading yet" in st.panel_html
    # Between rootcoord-2's save and its init it has a clock reading but no physical part yet.
    st.goto(_positions(failover_events, "tso.init")[1] - 1)
    assert "rootcoord-2 clock -00:00:15.000 (no TSO physical part yet)" in _panel_text(st)


def test_clock_jumps_show_clock_behind_then_ahead():
    ev = milvus_edu.simulate("tso-clock-skew", seed=1).events
    st = TimelineStepper(ev)
    back = st.jump_to_next("fault.clock_jump")
    c = st.state()["clock"]
    assert c["node"] == "rootcoord-1" and c["read_index"] == back
    assert c["clock_minus_physical_ms"] < -7_000 and "s behind its physical part" in c["text"]
    assert c["text"] in _panel_text(st)
    st.jump_to_next("fault.clock_jump")
    c = st.state()["clock"]
    assert c["clock_minus_physical_ms"] > 4_000 and "s ahead of its physical part" in c["text"]


# ------------------------------------------------------------------------------------ pictures


def _lane(st, cls_name):
    return next(l for l in st.lanes if type(l).__name__ == cls_name)


def _assert_labels_apart_and_inside(lane):
    renderer = lane.ax.figure.canvas.get_renderer()
    inside = lane.ax.get_window_extent(renderer)
    x0, x1 = lane.ax.get_xlim()
    texts = [t for t in lane.texts if x0 <= t.get_position()[0] <= x1]  # labels of lines on this page
    assert texts
    boxes = [t.get_window_extent(renderer) for t in texts]
    for t, b in zip(texts, boxes):
        assert inside.x0 - 1 <= b.x0 and b.x1 <= inside.x1 + 1, f"label {t.get_text()!r} leaves the lane"
    for a in range(len(boxes)):
        for b in range(a + 1, len(boxes)):
            assert not boxes[a].overlaps(boxes[b]), (texts[a].get_text(), texts[b].get_text())


@pytest.mark.parametrize("scenario", ["tso-failover", "tso-clock-skew"])
def test_events_lane_labels_do_not_overlap_or_leave_the_axes(scenario):
    st = TimelineStepper(milvus_edu.simulate(scenario, seed=1).events)
    lane = _lane(st, "EventsLane")
    assert lane.name == "events" and tso_lanes()[-1].name == "events"
    assert len(lane.texts) >= 3
    _assert_labels_apart_and_inside(lane)
    if scenario == "tso-clock-skew":  # in a narrow figure the +5,000 ms label must go left of its line
        narrow = TimelineStepper(milvus_edu.simulate(scenario, seed=1).events, figsize=(5.0, 5.0))
        nl = _lane(narrow, "EventsLane")
        k = next(k for k, label in enumerate(nl.labels) if "+5,000" in label)
        assert nl.texts[k].get_horizontalalignment() == "right"
        _assert_labels_apart_and_inside(nl)
    # The bold label of the latest marker sits exactly on its (non-overlapping) static label.
    st.jump_to_next("fault.clock_jump" if scenario == "tso-clock-skew" else "fault.kill")
    k = lane.track.at(st.cursor)
    assert lane.current.get_visible() and lane.current.get_position() == lane.texts[k].get_position()
    # Paged: labels are laid out again for each page (failover: key expiry and new active at 60 s).
    events = milvus_edu.simulate(scenario, seed=1).events
    paged = TimelineStepper(events, window_s=5)
    paged.goto(_positions(events, "fault.clock_jump" if scenario == "tso-clock-skew" else "session.active")[-1])
    _assert_labels_apart_and_inside(_lane(paged, "EventsLane"))


def test_legend_is_outside_the_lanes_and_clock_lines_are_visible(st):
    fig = st._renderer.fig
    assert all(ax.get_legend() is None for ax in st._renderer.axes)
    assert len(fig.legends) == 1
    renderer = fig.canvas.get_renderer()
    legend_box = fig.legends[0].get_window_extent(renderer)
    for ax in st._renderer.axes:
        assert not legend_box.overlaps(ax.get_window_extent(renderer))
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "rootcoord-2 clock" in labels and "saved window end" in labels
    line = next(l for l in st._renderer.axes[0].get_lines() if l.get_label() == "rootcoord-2 clock")
    assert line.get_linewidth() >= 1.8 and (line.get_alpha() is None or line.get_alpha() >= 0.9)


def test_physical_lane_labels_the_clock_gap_at_the_cursor(st, failover_events):
    lane = _lane(st, "PhysicalLane")
    st.goto(_positions(failover_events, "tso.init")[1])
    gaps = [gap for *_rest, gap in lane.clocks if gap.get_visible()]
    assert [g.get_text().strip() for g in gaps] == ["clock 27.0 s behind physical"]
    st.goto(_positions(failover_events, "tso.init")[0])
    assert not any(gap.get_visible() for *_rest, gap in lane.clocks)  # clock == physical: nothing to say


@pytest.mark.slow
def test_filmstrip_is_one_picture_a_row_with_readable_text_at_page_width(tmp_path, st):
    from matplotlib.text import Text
    from PIL import Image

    from milvus_edu.viz.render import filmstrip

    steps = st.interesting_steps()
    fig = filmstrip(st.index, st._lane_templates, steps, lambda i: f"event {i + 1}")
    texts = [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
    assert len(texts) > 40
    small = sorted({(t.get_fontsize(), t.get_text()) for t in texts if t.get_fontsize() < 9})
    assert not small, small[:5]
    assert fig.dpi >= 96
    tops = sorted({round(ax.get_position().y1, 3) for ax in fig.axes if ax.get_ylabel() == "physical (s)"})
    lefts = sorted({round(ax.get_position().x0, 3) for ax in fig.axes if "physical" in str(ax.get_ylabel())})
    assert len(tops) == len(steps) == 4 and len(lefts) == 1  # one picture a row, for a book page
    png, svg = st.to_static(tmp_path / "grid")
    w, h = Image.open(png).size
    assert w <= 690 and h > w  # a ~690 px book column shows it at 100 %: 9 pt text stays 9 pt
    two = st.to_static(tmp_path / "two", columns=2)
    assert Image.open(two[0]).size[0] > 1.5 * w
    assert png.stat().st_size < 400_000 and svg.stat().st_size < 2_000_000


def test_a_real_servers_clock_reads_as_its_utc_date_not_as_thousands_of_hours():
    """The model's clocks read as time since its zero (1 January 2026); a real Milvus server's clock, months
    away, reads as its date and time in UTC. The switch is :data:`narrate.RELATIVE_SPAN_MS` away, either side."""
    from milvus_edu.events import SIM_EPOCH_MS
    from milvus_edu.narrate import RELATIVE_SPAN_MS, ts_text, wall_text
    from milvus_edu.tsoutil import compose_ts

    assert wall_text(SIM_EPOCH_MS + 12_001) == "00:00:12.001"
    assert wall_text(SIM_EPOCH_MS + RELATIVE_SPAN_MS - 1) == "999:59:59.999"
    assert wall_text(SIM_EPOCH_MS + RELATIVE_SPAN_MS) == "2026-02-11 16:00:00.000"
    assert wall_text(SIM_EPOCH_MS - RELATIVE_SPAN_MS) == "2025-11-20 08:00:00.000"
    real_ms = 1_795_875_793_123  # a real server's clock on 28 November 2026
    assert ts_text(compose_ts(real_ms, 5)) == "2026-11-28 14:23:13.123+5"


@pytest.fixture(scope="module")
def timetick_stepper() -> TimelineStepper:
    """Lab 2's stepper: TimeTick's first second in pages of 0.4 s; its only marker (rootcoord-1 becoming active)
    is at 0 s."""
    return TimelineStepper(milvus_edu.simulate("timetick-basics", seed=1, duration_s=1).events, window_s=0.4)


def _texts_inside(ax) -> list[str]:
    """The texts ``ax`` shows, each checked to lie whole inside it (a text past its edge would be cut)."""
    renderer = ax.figure.canvas.get_renderer()
    inside = ax.get_window_extent(renderer)
    shown = []
    for t in ax.texts:
        if t.get_visible() and t.get_text().strip():
            b = t.get_window_extent(renderer)
            assert inside.x0 - 1 <= b.x0 and b.x1 <= inside.x1 + 1, f"{t.get_text()!r} is cut at the lane's edge"
            shown.append(t.get_text().strip())
    return shown


def test_a_marker_on_an_earlier_page_is_named_at_the_left_edge_not_cut(timetick_stepper):
    """Lab 2's filmstrip cut 'rootcoord-1 active' to '1 active' at its first panel's left edge: the marker's
    line was on an earlier page. Its label now stands whole at the edge, with an arrow and its time."""
    from milvus_edu.viz.render import filmstrip

    st = timetick_stepper
    i = int(np.searchsorted(st.index.t_ms, 258.0))
    fig = filmstrip(st.index, st._lane_templates, [i], st.film_caption, window_s=0.4)
    lane_ax = next(ax for ax in fig.axes if ax.get_ylabel() == "events")
    assert lane_ax.get_xlim()[0] > 0
    assert _texts_inside(lane_ax) == ["◀ rootcoord-1 active (0.000 s)"]
    st.goto(int(np.searchsorted(st.index.t_ms, 500.0)))  # a later page of the stepper, drawn from the same artists
    lane = _lane(st, "EventsLane")
    assert lane.ax.get_xlim()[0] > 0
    assert "◀ rootcoord-1 active (0.000 s)" in _texts_inside(lane.ax)
    st.goto(0)  # on the marker's own page the label is the plain one, at its line
    assert lane.current.get_text().strip() == "rootcoord-1 active"
    assert lane.current.get_position()[0] == 0.0


@pytest.mark.slow
def test_filmstrip_captions_fit_the_picture(timetick_stepper):
    """A caption is wrapped by its measured width: lab 2's long dotted channel names ran to the picture's last
    pixel column."""
    from matplotlib.text import Text

    from milvus_edu.viz.render import filmstrip

    st = timetick_stepper
    steps = st.interesting_steps()
    fig = filmstrip(st.index, st._lane_templates, steps, st.film_caption, window_s=0.4)
    renderer = fig.canvas.get_renderer()
    titles = [t for t in fig.findobj(Text) if t.get_text().startswith("event ")]
    assert len(titles) == len(steps)
    for title in titles:
        assert title.get_window_extent(renderer).x1 <= fig.bbox.width - 4, title.get_text()


def test_a_front_end_without_widgets_shows_what_the_stepper_is_and_what_to_do():
    # JupyterLab started from another environment showed only "<milvus_edu.viz.frontend.StepperView object at 0x...>"
    run = milvus_edu.simulate("tso-basics", duration_s=1)
    for shown, name, instead in ((TimelineStepper(run), "timeline stepper", '.to_static("film")'),
                                 (milvus_edu.explore(run), "explorer", "--perfetto")):
        data, _ = shown._repr_mimebundle_()
        assert "application/vnd.jupyter.widget-view+json" in data  # the widget itself, where widgets work
        text = data["text/plain"]
        assert text.startswith(f"milvus-edu's {name} ({len(run.events):,} events). If this line is all you see")
        assert 'pip install -e ".[all]"' in text and instead in text and "object at 0x" not in text
        shown.close()
