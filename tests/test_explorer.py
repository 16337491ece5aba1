"""The explorer, headless: its payload matches the run log, messages pair each receive with an earlier send, the
causal past is closed under program order and messages, and jumps, filters, "Why?" and fork do what their buttons
say. Short runs (a few simulated seconds) shared per module; the browser side is tested in test_explorer_js.py and
test_explorer_browser.py."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import milvus_edu
from milvus_edu.explain import WhyError
from milvus_edu.explorer import Explorer, build_payload, causal_past
from milvus_edu.export import flow_pairs

SCENARIO = "tsafe-stall-proxy-restart"


@pytest.fixture(scope="module")
def run():
    """The stall scenario long enough for the kill (5 s), the restart (7 s) and Strong reads that time out."""
    return milvus_edu.simulate(SCENARIO, seed=1, duration_s=12)


@pytest.fixture(scope="module")
def explorer(run):
    return milvus_edu.explore(run)


@pytest.fixture(scope="module")
def payload(run):
    return build_payload(run.events)


def test_explore_is_the_public_door_and_returns_an_explorer(explorer):
    assert isinstance(explorer, Explorer) and "explore" in milvus_edu.__all__
    assert explorer.widget is explorer.view and explorer._repr_mimebundle_()


def test_a_closed_explorer_is_freed(run):
    """Closing the widget lets the explorer and what it holds of the run go (see test_viz's stepper test)."""
    import gc
    import weakref

    explorer = milvus_edu.explore(run)
    gone = weakref.ref(explorer)
    explorer.close()
    del explorer
    gc.collect()
    assert gone() is None


def test_payload_arrays_match_the_log(run, payload):
    events = run.events
    a, meta = payload.arrays, payload.meta
    n = len(events)
    assert meta["n"] == n and all(len(a[k]) == n for k in ("t", "lane", "node", "kind", "chan"))
    assert np.array_equal(a["t"], events["t_ms"].to_numpy(dtype=float))
    assert [meta["kinds"][k] for k in a["kind"]] == list(events["kind"])
    assert [meta["nodes"][k] for k in a["node"]] == list(events["node"])
    lanes = [meta["lane_full"][k] for k in a["lane"]]
    queue = events["kind"].str.startswith("mq.") & events["channel"].notna()
    assert lanes == [c if q else nd for c, q, nd in zip(events["channel"], queue, events["node"])]
    assert meta["lanes"].index("proxy-1") < meta["lanes"].index("rootcoord-1") < meta["lanes"].index("dml_0") \
        < meta["lanes"].index("querynode-1")  # lanes in the order a request travels
    data, packed = payload.pack()
    for name, (code, offset, length) in packed["layout"].items():
        assert offset % 8 == 0
        again = np.frombuffer(data, dtype=a[name].dtype, count=length, offset=offset)
        assert np.array_equal(again, a[name]), name


def test_watermark_tracks_are_the_trace_counters(run, payload):
    """Every counter of the Perfetto export is a point of a track, with its value, at its event."""
    from milvus_edu.export import perfetto_trace

    trace = perfetto_trace(run.events)
    counters = sorted((e["ts"], e["args"]["value"]) for e in trace["traceEvents"] if e["ph"] == "C")
    a, meta = payload.arrays, payload.meta
    points = sorted((round(float(a["t"][s]) * 1000.0, 3), v) for s, v in zip(a["cseq"], a["cval"]))
    assert points == counters
    names = {t["name"] for t in meta["tracks"]}
    assert {"TSO physical", "time tick dml_0", "tsafe dml_0_100v0"} <= names
    starts = meta["track_starts"]
    for k in range(len(meta["tracks"])):  # one track per (component, counter), its points in log order
        assert set(a["ctrack"][starts[k]:starts[k + 1]]) == {k}
        assert list(a["cseq"][starts[k]:starts[k + 1]]) == sorted(a["cseq"][starts[k]:starts[k + 1]])


def test_slices_are_the_requests(run, payload):
    a, meta = payload.arrays, payload.meta
    names = [meta["slice_names"][k] for k in a["sname"]]
    reads = run.events[run.events["kind"] == "client.read_start"]
    read_slices = [k for k, name in enumerate(names) if name.startswith("search ")]
    assert len(read_slices) == len(reads)
    assert sorted(int(a["sbegin"][k]) for k in read_slices) == list(reads["seq"])
    assert all(a["sbegin"][k] < a["send"][k] for k in range(len(names)))


def test_messages_pair_each_receive_with_an_earlier_send(run, payload):
    a = payload.arrays
    pairs = flow_pairs(run.events)
    assert [(s, r) for s, r, _ in pairs] == list(zip(a["fsend"].tolist(), a["frecv"].tolist()))
    assert all(s < r for s, r, _ in pairs) and list(a["frecv"]) == sorted(a["frecv"])
    kinds = run.events["kind"].to_numpy()
    found = {(kinds[s], kinds[r]) for s, r, _ in pairs}
    assert ("proxy.report", "rootcoord.timetick_update") in found
    assert ("mq.produce", "querynode.pack") in found and ("client.read_start", "proxy.read") in found


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_causal_past_holds_program_order_and_is_closed_under_messages(payload, data):
    a = payload.arrays
    n = len(a["t"])
    e = data.draw(st.integers(0, n - 1))
    past = causal_past(payload, e)
    assert past[e] and not past[e + 1:].any()
    node = a["node"]
    assert past[:e + 1][node[:e + 1] == node[e]].all()  # every earlier event of e's node
    for s, r in zip(a["fsend"], a["frecv"]):
        if past[r]:
            assert past[s]  # closed under message predecessors
    for i in np.flatnonzero(past):  # and under program order, for every event in it
        assert past[:i][node[:i] == node[i]].all()


@settings(max_examples=10, deadline=None)
@given(st.data())
def test_causal_past_is_the_smallest_such_set(payload, data):
    """The sweep finds exactly the closure: computed here the slow way, by adding predecessors until none is new."""
    a = payload.arrays
    node, fsend, frecv = a["node"], a["fsend"], a["frecv"]
    e = data.draw(st.integers(0, len(node) - 1))
    past = np.zeros(len(node), dtype=bool)
    past[:e + 1] = node[:e + 1] == node[e]
    while True:
        grown = past.copy()
        grown[fsend[past[frecv]]] = True
        for k in np.unique(node[grown]):
            mine = np.flatnonzero(node == k)
            grown[mine[mine <= np.flatnonzero(grown & (node == k)).max()]] = True
        if (grown == past).all():
            break
        past = grown
    assert (causal_past(payload, e) == past).all()


@settings(max_examples=10, deadline=None)
@given(st.data())
def test_state_names_each_lanes_last_event_at_or_before_the_cursor(explorer, data):
    a, lanes = explorer.payload.arrays, explorer.payload.meta["lanes"]
    i = explorer.goto(data.draw(st.integers(0, len(explorer) - 1)))
    expected = {}
    for k, lane in enumerate(lanes):
        mine = np.flatnonzero(a["lane"][:i + 1] == k)
        if len(mine):
            expected[lane] = int(mine[-1]) + 1
    assert {lane: c["number"] for lane, c in explorer.state()["components"].items()} == expected


def test_causal_past_of_a_stalled_read_reaches_back_to_its_client_and_the_stopped_tick(run, explorer):
    events = run.events
    end = events[(events["kind"] == "client.read") & (events["request"] == 6)].iloc[0]
    past = explorer.causal_past(int(end["seq"]))
    start = events[(events["kind"] == "client.read_start") & (events["request"] == 6)].iloc[0]
    assert past[int(start["seq"])]
    stall = explorer.stalls[0]["seq"]  # the last tick that moved dml_0 reached the querynode before the read
    assert past[stall]
    assert not past[events["node"].to_numpy() == "datanode-1"][-1]


def test_jumps_step_and_say_when_nothing_is_left(explorer):
    explorer.goto(0)
    assert explorer.step_forward() == 1 and explorer.step_back() == 0 and explorer.step_back() == 0
    kill = explorer.jump_to_next("fault.kill")
    assert explorer.events["kind"].iloc[kill] == "fault.kill"
    assert explorer.jump_to_next("fault.kill") is None and explorer.cursor == kill
    assert "no fault.kill after event" in explorer.view.message
    assert explorer.jump_to_previous("proxy.report") < kill
    explorer.goto(0)
    assert explorer.next_stall() == explorer.stalls[0]["seq"] == 727
    assert explorer.state()["kind"] == "mq.produce"
    assert explorer.next_violation() is None and explorer.view.message.startswith("no violation after")
    assert explorer.goto_event(10) == 9 and explorer.state()["number"] == 10


def test_state_reads_each_lanes_last_event_and_the_watermarks_at_the_cursor(explorer):
    explorer.goto(explorer.stalls[0]["seq"])
    s = explorer.state()
    assert s["components"]["dml_0"] == {"kind": "mq.produce", "number": 728, "t_ms": s["t_ms"]}
    tick = s["watermarks"]["time tick dml_0 @ rootcoord-1"]
    assert tick["value_ms"] == pytest.approx(4700.0) and tick["lag_ms"] == pytest.approx(s["t_ms"] - 4700.0)
    explorer.goto(0)
    assert explorer.state()["watermarks"]["tsafe dml_0_100v0 @ querynode-1"] is None


def test_filters_keep_lanes_kinds_and_channels(explorer):
    a, meta = explorer.payload.arrays, explorer.payload.meta
    shown = explorer.filter(lanes=["querynode-1", "dml_0"])
    assert shown.sum() == np.isin(a["lane"], [meta["lanes"].index("querynode-1"), meta["lanes"].index("dml_0")]).sum()
    assert explorer.view.hidden_lanes and "querynode-1" not in explorer.view.hidden_lanes
    shown = explorer.filter(kinds=["querynode.tsafe"], channel="dml_0")
    picked = explorer.events[shown]
    assert len(picked) and set(picked["kind"]) == {"querynode.tsafe"}
    assert picked["vchannel"].str.startswith("by-dev-rootcoord-dml_0_").all()
    assert explorer.filter().all()
    with pytest.raises(ValueError, match="no lane 'proxy-9'"):
        explorer.filter(lanes=["proxy-9"])
    with pytest.raises(ValueError, match="no channel"):
        explorer.filter(channel="dml_7")


def test_influenced_sets_the_anchor_and_returns_the_causal_past(explorer):
    explorer.goto(800)
    mask = explorer.influenced()
    assert explorer.view.anchor == 800 and np.array_equal(mask, explorer.causal_past(800))
    assert explorer.influenced(False) is None and explorer.view.anchor == -1


def test_why_at_a_timed_out_read_is_the_chain_of_that_read(run, explorer):
    events = run.events
    end = int(events[(events["kind"] == "client.read") & (events["request"] == 6)]["seq"].iloc[0])
    assert explorer.question_at(end) == {"read": 6}
    chain = explorer.why(end)
    assert chain.lines() == milvus_edu.why(run, read=6).lines()
    assert any("proxy-2" in link.text for link in chain.links)
    answer = explorer.answer({"type": "why", "seq": end, "req": 3})
    assert answer["req"] == 3 and [link["seq"] for link in answer["links"]] == [link.seq for link in chain.links]
    assert [link["joint"] for link in answer["links"]] == [link.joint for link in chain.links]  # the word the panel shows
    explorer.goto(chain.links[-1].seq)  # each link is an event the cursor can go to
    assert explorer.state()["number"] == chain.links[-1].seq + 1


def test_why_at_an_event_that_is_no_question_says_so_in_one_line(explorer):
    with pytest.raises(WhyError, match="is no read, flush or violation"):
        explorer.why(0)
    answer = explorer.answer({"type": "why", "seq": 0})
    assert "\n" not in answer["error"] and "event 1 " in answer["error"]


def test_details_of_an_event_and_of_a_request(explorer):
    d = explorer.answer({"type": "detail", "seq": 745})
    assert "event 746" in d["html"] and "fault.kill" in d["html"]
    reads = [k for k, i in enumerate(explorer.payload.arrays["sname"])
             if explorer.payload.meta["slice_names"][i] == "search 6"]
    s = explorer.slice_details(reads[0])
    assert s["process"] == "Client1" and s["args"]["level"] == "Strong" and s["duration_ms"] > 4000
    assert "search 6 on Client1" in explorer.answer({"type": "slice", "index": reads[0]})["html"]


def test_fork_at_the_cursor_shows_the_forked_run_and_its_first_difference(run, explorer, monkeypatch):
    explorer.goto(int(run.events[run.events["t_ms"] >= 3000]["seq"].iloc[0]))
    at = explorer.cursor
    sent = []
    monkeypatch.setattr(explorer.view, "send", sent.append)
    result = explorer.fork("kill", "proxy-1")
    # the browser's message row follows the forked run: its simulated seconds, up to the whole run
    progress = [(m["done_s"], m["total_s"]) for m in sent if m.get("type") == "progress"]
    assert progress and progress[-1][0] == progress[-1][1] == result.run.summary["duration_s"]
    assert [d for d, _ in progress] == sorted(d for d, _ in progress)
    assert result.first_difference is not None and result.first_difference >= at
    assert explorer.view.meta["which"] == "fork" and explorer.view.meta["first_difference"] == result.first_difference
    assert explorer.cursor == result.first_difference
    assert "fault.kill" in set(result.run.events["kind"].iloc[at:])
    assert explorer.state()["events"] == len(result.run.events)
    explorer.show("original")
    assert explorer.view.meta["which"] == "original" and len(explorer) == len(run.events)
    bad = explorer.answer({"type": "fork", "action": "explode", "node": "proxy-1", "seq": 0})
    assert bad["error"].startswith("a fork's action is one of kill")
    with pytest.raises(ValueError, match="there is no event"):
        explorer.fork("kill", "proxy-1", at=10**7)


def test_fork_here_can_turn_a_bug_switch_on_at_the_cursor(run, explorer):
    assert explorer.view.meta["fork_actions"][-1] == "switch"
    assert explorer.view.meta["fork_switches"] == milvus_edu.config.BugSwitches.names()  # none is on from the start
    at = int(run.events[run.events["t_ms"] >= 2000]["seq"].iloc[0])
    answer = explorer.answer({"type": "fork", "action": "switch", "switch": "skip_wait_tsafe", "node": "proxy-1",
                              "seq": at})
    assert "error" not in answer, answer
    forked = explorer.forked.run
    t_ms = float(run.events["t_ms"].iloc[at])
    flips = forked.events[forked.events["kind"] == "fault.switch"]
    assert list(flips["t_ms"]) == [t_ms] and forked.summary["switches_flipped"][0]["switch"] == "skip_wait_tsafe"
    assert explorer.view.meta["which"] == "fork" and "fork: switch skip_wait_tsafe on at" in explorer.view.meta["title"]
    # the run before the flip is the original's; the reads after it no longer wait
    assert answer["first_difference"] >= at
    counts = forked.summary["checks"]["violation_counts"]
    assert sum(counts.values()) > sum(run.summary["checks"]["violation_counts"].values())
    bad = explorer.answer({"type": "fork", "action": "switch", "switch": "no_such_switch", "node": "", "seq": at})
    assert bad["error"].startswith("unknown bug switch 'no_such_switch'")
    explorer.show("original")


def test_a_frame_alone_gets_its_checks_from_the_checkers_but_cannot_fork(run):
    ex = Explorer(run.events)
    assert [s["seq"] for s in ex.stalls] == [s["seq"] for s in milvus_edu.explore(run).stalls]
    # the same section the run's summary has (the run used the default parameters the checkers assume)
    assert ex.summary["checks"] == run.summary["checks"]
    assert ex.view.meta["can_fork"] is False
    with pytest.raises(ValueError, match="open the explorer on a run result or a run folder"):
        ex.fork("kill", "proxy-1")


def test_a_frame_of_a_broken_run_gets_the_violations_its_summary_has():
    """The query checker judges reads when it closes: a frame's checkers are closed too, so the explorer of a bare
    log reports the reads that skipped the tsafe wait, as the run did."""
    run = milvus_edu.simulate(SCENARIO, seed=1, duration_s=8, switches=["skip_wait_tsafe"])
    checks = Explorer(run.events).summary["checks"]
    assert checks == run.summary["checks"]
    assert checks["violation_counts"]["read-after-guarantee"] > 0


@pytest.mark.parametrize("span_s", [0, -1, float("nan"), float("inf"), "wide"])
def test_a_window_that_is_not_a_positive_number_of_seconds_is_refused_in_one_line(run, span_s):
    with pytest.raises(ValueError, match=r"^span_s must be a positive number of seconds .*, got ") as caught:
        Explorer(run.events, span_s=span_s)
    assert "\n" not in str(caught.value)


def test_a_run_folder_opens_with_its_summary(tmp_path):
    folder = tmp_path / "run"
    milvus_edu.simulate("tso-failover", seed=1, duration_s=3, out_dir=folder)
    ex = milvus_edu.explore(folder)
    assert ex.summary["run_id"] == "tso-failover-s1" and ex.view.meta["can_fork"] is True
    assert ("client.request", "rootcoord.alloc_timestamp") in {
        (ex.events["kind"].iloc[s], ex.events["kind"].iloc[r]) for s, r in
        zip(ex.payload.arrays["fsend"], ex.payload.arrays["frecv"])}


def test_violations_are_jumped_to_and_explained_with_the_checkers_chain():
    """A bug switch that lets reads skip the tsafe wait: the checkers report violations; Violation ▶ goes to the
    first one's event and "Why?" there is the violation's chain."""
    run = milvus_edu.simulate(SCENARIO, seed=1, duration_s=8, switches=["skip_wait_tsafe"])
    ex = milvus_edu.explore(run)
    first = run.summary["checks"]["violations"][0]
    assert ex.next_violation() == max(first["seqs"])
    assert ex.question_at() == {"violation": 1}
    assert ex.why().lines() == milvus_edu.why(run, violation=1).lines()
    assert ex.view.meta["violations"][0]["title"] == f"violation 1: {first['invariant']}"
    ex.goto(len(ex) - 1)
    assert ex.previous_violation() == max(run.summary["checks"]["violations"][-1]["seqs"])


def test_why_at_a_client_flush_asks_for_that_flush():
    run = milvus_edu.simulate("flush-manual", seed=1, duration_s=5, options={"workload_s": 1.0, "inserts_per_s": 50.0})
    ex = milvus_edu.explore(run)
    ex.jump_to_next("client.flush")  # the flush call
    done = ex.jump_to_next("client.flush")  # GetFlushState said flushed
    assert ex.question_at(done) == {"flush": 1}
    assert ex.why(done).lines() == milvus_edu.why(run, flush=1).lines()


def test_the_books_explorer_example_prints_what_the_page_shows(capsys):
    """book/explain.md's explorer section: its Python block, run, prints its text block."""
    from pathlib import Path

    page = (Path(__file__).resolve().parents[1] / "book" / "explain.md").read_text(encoding="utf-8")
    section = page.split("(explain-explorer)=\n", 1)[1]
    code = section.split("```python\n", 1)[1].split("\n```", 1)[0]
    shown = section.split("```text\n", 1)[1].split("\n```", 1)[0]
    exec(compile(code, "book/explain.md", "exec"), {})
    assert capsys.readouterr().out.rstrip("\n") == shown
