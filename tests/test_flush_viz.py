"""The flush mechanism's views: the state panel says what the run log says, the filmstrip picks the strict-`>`
moment, the lanes draw, and the registry hands them to the stepper."""

from __future__ import annotations

import json

import pytest

import milvus_edu
from milvus_edu.mechanisms.flush.lanes import VChannelLane, WriteBufferLane, flush_lanes
from milvus_edu.mechanisms.flush.panel import FlushPanel, film_steps
from milvus_edu.viz import TimelineStepper

SMALL = {"inserts_per_s": 40.0, "deletes_per_s": 2.0, "workload_s": 14.0}


@pytest.fixture(scope="module")
def boundary():
    run = milvus_edu.simulate("flush-ts-boundary", seed=1, options={"workload_s": 14.0}, duration_s=25.0)
    return run, TimelineStepper(run.events)


@pytest.fixture(scope="module")
def crash():
    run = milvus_edu.simulate("datanode-crash-recovery", seed=2,
                              options={**SMALL, "crash_at_s": 13.0, "restart_after_s": 1.0}, duration_s=30.0)
    return run, TimelineStepper(run.events)


def _positions(ev, kind, **where):
    mask = ev.kind == kind
    for col, value in where.items():
        mask &= ev[col] == value
    return list(ev.index[mask])


def _vch(state, name):
    return next(v for v in state["vchannels"] if v["vchannel"] == name)


def test_the_stepper_uses_the_flush_lanes_and_panel(boundary):
    _, st = boundary
    names = [type(lane).__name__ for lane in st.lanes]
    assert names == ["VChannelLane", "VChannelLane", "WriteBufferLane", "EventsLane"]
    assert isinstance(st.index.panels[0], FlushPanel)
    labels = [label for label, _ in st.index.panel_rows(st.index.state(len(st.index.frame) - 1))]
    assert labels == ["vchannels", "write buffer", "cp updater", "DataCoord"]


def test_flush_ts_shows_from_its_setting_until_a_stored_checkpoint_past_it_clears_it(boundary):
    run, st = boundary
    ev = run.events
    v = "by-dev-rootcoord-dml_0_100v0"
    sets = [i for i in _positions(ev, "datanode.flush_ts", vchannel=v) if '"set":true' in ev.detail[i]]
    clears = [i for i in _positions(ev, "datanode.flush_ts", vchannel=v) if '"set":false' in ev.detail[i]]
    assert sets and clears
    assert _vch(st.index.state(sets[0] - 1), v)["flush_ts"] is None
    assert _vch(st.index.state(sets[0]), v)["flush_ts"] == int(ev.ts[sets[0]])
    last_set = max(i for i in sets if i < clears[-1])
    assert _vch(st.index.state(clears[-1] - 1), v)["flush_ts"] == int(ev.ts[last_set])
    assert _vch(st.index.state(clears[-1]), v)["flush_ts"] is None


def test_the_stored_checkpoint_is_the_last_one_datacoord_saved(boundary):
    run, st = boundary
    ev = run.events
    for v in ("by-dev-rootcoord-dml_0_100v0", "by-dev-rootcoord-dml_1_100v1"):
        saved = [i for i in _positions(ev, "datacoord.channel_cp", vchannel=v) if '"saved":true' in ev.detail[i]]
        ignored = [i for i in _positions(ev, "datacoord.channel_cp", vchannel=v) if '"saved":false' in ev.detail[i]]
        assert saved and ignored
        for i in saved[-3:] + ignored[-3:]:
            last = max(j for j in saved if j <= i)
            assert _vch(st.index.state(i), v)["stored"] == int(ev.ts[last])


def test_a_segment_is_listed_as_syncing_between_its_sync_and_its_sync_done(boundary):
    run, st = boundary
    ev = run.events
    sync = _positions(ev, "datanode.sync")[0]
    seg, v = str(int(ev.segment[sync])), ev.vchannel[sync]
    done = next(i for i in _positions(ev, "datanode.sync_done") if i > sync and int(ev.segment[i]) == int(seg))
    assert seg in _vch(st.index.state(sync), v)["syncing"]
    assert seg not in _vch(st.index.state(sync), v)["buffered"]
    assert seg not in _vch(st.index.state(done), v)["syncing"]


def test_buffered_rows_add_up_the_packs_since_the_segment_was_last_synced(boundary):
    run, st = boundary
    ev = run.events
    sync = _positions(ev, "datanode.sync")[0]
    seg, v = str(int(ev.segment[sync])), ev.vchannel[sync]
    rows = sum(json.loads(ev.detail[i])["segments"].get(seg, 0) for i in _positions(ev, "datanode.buffer", vchannel=v)
               if i < sync)
    assert rows == int(ev["count"][sync]) > 0
    assert _vch(st.index.state(sync - 1), v)["buffered"][seg] == rows


def test_the_filmstrip_shows_the_checkpoint_equal_to_flush_ts(boundary):
    run, st = boundary
    ev = run.events
    steps = film_steps(st.index)
    assert 1 <= len(steps) <= 4 and steps == sorted(steps)
    equal = [i for i in steps if ev.kind[i] == "datacoord.channel_cp"]
    assert equal, [ev.kind[i] for i in steps]
    state = st.index.state(equal[0])
    v = _vch(state, ev.vchannel[equal[0]])
    assert v["stored"] == v["flush_ts"] == int(ev.ts[equal[0]])  # equal, so the flush stays open


def test_a_crash_empties_the_nodes_memory_and_a_watch_brings_it_back(crash):
    run, st = crash
    ev = run.events
    kill = _positions(ev, "fault.kill", node="datanode-1")[0]
    before, after = st.index.state(kill - 1), st.index.state(kill)
    assert any(v["buffered"] for v in before["vchannels"])
    assert after["datanodes_down"] == ["datanode-1"]
    assert all(not v["buffered"] and not v["syncing"] and v["flush_ts"] is None for v in after["vchannels"])
    assert not after["updater"]["tasks"]
    assert after["vchannels"][0]["stored"] == before["vchannels"][0]["stored"]  # DataCoord's state stays
    watch = next(i for i in _positions(ev, "datanode.watch") if i > kill)
    assert st.index.state(watch)["datanodes_down"] == []
    assert _vch(st.index.state(watch), ev.vchannel[watch])["consumed"] == int(ev.ts[watch])
    steps = film_steps(st.index)
    assert kill in steps and watch in steps


def test_datacoord_segment_states_follow_the_binlog_reports(crash):
    run, st = crash
    ev = run.events
    end = st.index.state(len(ev) - 1)["segments"]
    audited = {str(int(s)): int(c) for s, c in zip(ev[ev.kind == "storage.audit"].segment,
                                                     ev[ev.kind == "storage.audit"]["count"])}
    for seg, rows in audited.items():
        assert end[seg]["state"] == "Flushed"
        assert (end[seg]["rows"] or 0) == rows


@pytest.mark.slow
def test_lanes_draw_and_the_filmstrip_is_written(boundary, tmp_path):
    run, st = boundary
    paths = st.to_static(tmp_path / "film")
    png = [p for p in paths if str(p).endswith(".png")]
    assert png and png[0].stat().st_size > 20_000
    lane = VChannelLane(0)
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    lane.setup(ax, run.events)
    assert len(lane.tracks) == 2  # consumed position and stored checkpoint
    dots = lane.update(len(run.events) - 1, 0.0)
    assert all(d.get_visible() for d in dots)
    buf = WriteBufferLane()
    buf.setup(ax, run.events)
    assert len(buf.tracks) == 2
    plt.close(fig)
    with pytest.raises(ValueError, match="at least one vchannel"):
        flush_lanes(0)
    with pytest.raises(ValueError, match="counts from 0"):
        VChannelLane(-1)


def test_a_checkpoint_on_flush_ts_is_ringed_and_labelled(boundary):
    """At the lane's scale a checkpoint equal to flushTs draws on flushTs's pixel: the lane labels it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    run, _ = boundary
    fig, ax = plt.subplots()
    VChannelLane(0).setup(ax, run.events)
    labels = [t.get_text() for t in ax.texts]
    plt.close(fig)
    assert labels.count("checkpoint = flushTs") == 1  # once per flush: only the first flush sits on it
    assert "stored checkpoint at flushTs" in ax.get_legend_handles_labels()[1]


def test_the_stepper_legend_fits_the_figure(boundary):
    """Lab 3's stepper legend (eight labels; 'rows buffered, vch 1' last) was cut off at the right edge:
    the figure legend now takes as many columns as fit and lowers the lanes for its extra rows."""
    run, _ = boundary
    st = TimelineStepper(run.events, lanes=flush_lanes(), window_s=2.0)
    fig = st._renderer.fig
    renderer = fig.canvas.get_renderer()
    box = fig.legends[0].get_window_extent(renderer)
    assert box.x1 <= fig.bbox.width + 1 and box.y1 <= fig.bbox.height + 1
    assert "rows buffered, vch 1" in [t.get_text() for t in fig.legends[0].get_texts()]
    for ax in st._renderer.axes:
        assert not box.overlaps(ax.get_window_extent(renderer))
