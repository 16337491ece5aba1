"""The timeline stepper (milvus_edu.viz): cursor moves, state panel, lanes plug-in, static export."""

from __future__ import annotations

import ipywidgets as widgets
import pandas as pd
import pytest

import milvus_edu
from milvus_edu.viz import Lane, TimelineStepper, tso_lanes

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
