"""The timeline stepper (milvus_edu.viz): cursor moves, state panel, lanes plug-in, static export."""

from __future__ import annotations

import ipywidgets as widgets
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


def _positions(events: pd.DataFrame, kind: str) -> list[int]:
    return [int(i) for i in events.index[events["kind"] == kind]]


# ------------------------------------------------------------------------------------ building


def test_builds_from_simulated_run(st, failover_events):
    assert st.cursor == 0
    assert len(st) == len(failover_events)
    assert [l.name for l in st.lanes] == [l.name for l in tso_lanes()]
    assert st.png.startswith(PNG_MAGIC)
    assert st.state()["kind"] == "run.start"


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
    html0, state0 = st.state_html.value, st.state()
    assert st.step_forward() == 1 and st.cursor == 1
    assert st.state() != state0 and st.state()["index"] == 1
    assert st.state_html.value != html0
    assert "<b>event 2</b> of " in st.state_html.value  # counted from 1 for people
    assert st.state()["event"] in st.state_html.value.replace("&#x27;", "'")
    assert st.step_back() == 0 and st.state_html.value == html0
    assert st.goto(500) == 500 and st.slider.value == 500 and st.state()["seq"] == 500


def test_jump_to_next(st, failover_events):
    saves = _positions(failover_events, "tso.save")
    assert st.jump_to_next("tso.save") == saves[0]
    assert st.jump_to_next("tso.save") == saves[1]
    assert st.state()["kind"] == "tso.save"
    assert st.state()["window_end_ms"] == int(failover_events["window_end_ms"].iloc[saves[1]])
    kill = _positions(failover_events, "fault.kill")[0]
    assert st.jump_to_next("fault.kill") == kill
    before = st.state_html.value
    assert st.jump_to_next("fault.kill") is None  # only one kill
    assert st.cursor == kill and st.state_html.value == before
    assert "no fault.kill" in st.message.value
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
    assert "active rootcoord</td><td><b>rootcoord-2</b>" in st.state_html.value
    # Between the kill and the lease expiry the killed node still holds the key; then nobody does.
    st.goto(_positions(failover_events, "fault.kill")[0])
    assert st.state()["active"] == "rootcoord-1" and "killed" in st.state_html.value
    st.goto(actives[1] - 1)
    assert st.state()["active"] is None


def test_last_ts_is_end_of_latest_alloc_batch(st, failover_events):
    alloc = _positions(failover_events, "tso.alloc")[3]
    st.goto(alloc + 1)
    assert st.state()["last_ts"] == int(failover_events["ts"].iloc[alloc])
    assert st.state()["last_ts_node"] == failover_events["node"].iloc[alloc]


# ------------------------------------------------------------------------------------ widgets


def _find(widget, cls):
    out = [widget] if isinstance(widget, cls) else []
    for child in getattr(widget, "children", ()):
        out += _find(child, cls)
    return out


def test_widget_tree_and_controls(st, failover_events):
    root = st.widget
    assert isinstance(root, widgets.VBox) and "milvus-edu-stepper" in root._dom_classes
    buttons = {b.description: b for b in _find(root, widgets.Button)}
    fwd = buttons["Step ▶"]
    assert fwd.tooltip == "step forward" and buttons["◀ Step"].tooltip == "step back"
    panels = [h for h in _find(root, widgets.HTML) if "milvus-edu-state" in h._dom_classes]
    assert panels == [st.state_html]
    assert _find(root, widgets.Play) and _find(root, widgets.IntSlider) and _find(root, widgets.Image)
    assert st.slider.max == len(failover_events) - 1

    before = st.state_html.value
    fwd.click()
    assert st.cursor == 1 and st.state_html.value != before
    buttons["◀ Step"].click()
    assert st.cursor == 0
    st.slider.value = 42  # scrubbing
    assert st.cursor == 42 and st.play.value == 42
    st.play.value = 50  # a Play tick from the front end
    assert st.cursor == 50 and st.slider.value == 50
    st.kind_dropdown.value = "session.active"
    buttons["Jump ▶"].click()
    assert st.state()["kind"] == "session.active" and st.cursor > 50

    assert set(st.kind_dropdown.options) == set(failover_events["kind"].astype(str))
    st.speed.value = "100 events/s"
    assert st.play.interval * 10 <= 1000 * st.play.step + 1e-9
    bundle = st._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle


def test_image_changes_with_cursor(st):
    first = st.png
    st.goto(800)
    assert st.png.startswith(PNG_MAGIC) and st.png != first


def test_paged_window(failover_events):
    st = TimelineStepper(failover_events, window_s=20)
    redraws = st._renderer.redraws
    st.goto(_positions(failover_events, "session.active")[1])
    assert st._renderer.redraws == redraws + 1
    st.step_forward()
    assert st._renderer.redraws == redraws + 1  # same page: background reused


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
    n = len(lane.updates)
    st.goto(709)
    assert lane.updates[n:] == [(709, float(failover_events["t_ms"].iloc[709]))]
    st.step_forward()
    assert lane.updates[-1][0] == 710


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
    assert "nothing saved yet" in st.state_html.value
    assert st.step_forward() == 1
    assert "datanode-1: datanode.flush" in st.state_html.value  # unknown kinds still narrate
    assert st.step_forward() == 2 and st.state()["kind"] == "run.end"
    assert st.jump_to_next("tso.alloc") is None
    assert "datanode.flush" in st.kind_dropdown.options
    paths = st.to_static(tmp_path / "empty")
    assert paths[0].read_bytes().startswith(PNG_MAGIC)


# ------------------------------------------------------------------------------------ clocks


def _panel_text(st) -> str:
    import html as _html
    import re as _re
    return _html.unescape(_re.sub(r"<[^>]+>", "", st.state_html.value.replace("<br>", "\n")))


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
    assert st.state()["clocks"] == [] and "no clock reading yet" in st.state_html.value
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


def test_filmstrip_is_a_grid_with_readable_text(tmp_path, st):
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
    assert len(tops) == 2 and len(lefts) == 1  # 2 x 2: y labels on the left column only
    png, svg = st.to_static(tmp_path / "grid")
    w, h = Image.open(png).size
    assert w <= 1600 and h <= 1400 and w * 0.6 < h  # not a 2255 x 850 strip any more
    assert png.stat().st_size < 400_000 and svg.stat().st_size < 2_000_000
