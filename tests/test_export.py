"""The Perfetto export: one run per mechanism, loaded back and checked against the Trace Event Format (the phases'
required keys, named processes and threads, numeric counters), and the slices and counters each mechanism declares."""

import json
import re
from numbers import Number

import pytest

import milvus_edu
from milvus_edu.cli import main
from milvus_edu.events.schema import EVENT_KINDS
from milvus_edu.export import Flow, export_perfetto, flow_pairs
from milvus_edu.registry import mechanisms

#: One short run per mechanism, long enough to hold the requests and watermarks its trace declares.
RUNS = {
    "tso": ("tso-failover", {"duration_s": 10}),
    "timetick": ("timetick-basics", {"duration_s": 1}),
    "flush": ("flush-manual", {"duration_s": 5, "options": {"workload_s": 1.0, "inserts_per_s": 50.0}}),
    "query": ("seed-example", {"duration_s": 4}),
}
#: Per mechanism: slice names (prefixes) and counter names (prefixes) its run must show.
EXPECT = {
    "tso": ({"AllocTimestamp"}, {"TSO physical (ms)", "TSO saved window end (ms)"}),
    "timetick": ({"DML task"}, {"time tick "}),
    "flush": ({"sync segment ", "flush"}, {"checkpoint "}),
    "query": ({"search ", "wait tsafe (read "}, {"tsafe "}),
}


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """mechanism -> (the run's events, the trace loaded back from the file export_perfetto wrote)."""
    out = {}
    for mech, (scenario, kwargs) in RUNS.items():
        folder = tmp_path_factory.mktemp(mech)
        result = milvus_edu.simulate(scenario, out_dir=folder / "run", **kwargs)
        n = export_perfetto(folder / "run", folder / "trace.json")
        trace = json.loads((folder / "trace.json").read_text())
        assert n == len(trace["traceEvents"])
        out[mech] = (result.events, trace)
    return out


def check_trace_event_format(trace: dict) -> None:
    """The structure the Trace Event Format asks of each phase this export writes."""
    assert set(trace) == {"traceEvents", "displayTimeUnit", "otherData"} and trace["displayTimeUnit"] == "ms"
    events = trace["traceEvents"]
    assert events
    process_names, thread_names = {}, {}
    for e in events:
        assert isinstance(e["name"], str) and e["name"]
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int)
        if e["ph"] == "M":
            assert e["name"] in ("process_name", "thread_name") and isinstance(e["args"]["name"], str)
            names = process_names if e["name"] == "process_name" else thread_names
            key = e["pid"] if e["name"] == "process_name" else (e["pid"], e["tid"])
            assert key not in names, f"{key} named twice"
            names[key] = e["args"]["name"]
            continue
        assert e["ph"] in ("X", "i", "C", "s", "f"), e
        assert isinstance(e["ts"], Number) and e["ts"] >= 0 and isinstance(e["cat"], str)
        assert isinstance(e["args"], dict)
        if e["ph"] in ("s", "f"):
            assert isinstance(e["id"], int) and (e["ph"] == "s" or e["bp"] == "e")
        elif e["ph"] == "X":
            assert isinstance(e["dur"], Number) and e["dur"] >= 0
        elif e["ph"] == "i":
            assert e["s"] == "t"
        else:
            assert e["args"] and all(isinstance(v, Number) and not isinstance(v, bool) for v in e["args"].values())
    used = [e for e in events if e["ph"] != "M"]
    assert {e["pid"] for e in used} <= set(process_names)
    assert {(e["pid"], e["tid"]) for e in used} <= set(thread_names)
    assert {pid for pid, _ in thread_names} <= set(process_names)
    assert [e["ts"] for e in used] == sorted(e["ts"] for e in used)
    assert len(set(process_names.values())) == len(process_names)  # one process per component
    starts = {e["id"]: e for e in used if e["ph"] == "s"}
    finishes = {e["id"]: e for e in used if e["ph"] == "f"}
    assert len(starts) == len([e for e in used if e["ph"] == "s"]), "a flow id starts twice"
    assert set(starts) == set(finishes), "every flow arrow has its start and its finish"
    assert all(starts[i]["ts"] <= finishes[i]["ts"] and starts[i]["name"] == finishes[i]["name"] for i in starts)


@pytest.mark.parametrize("mech", list(RUNS))
def test_export_follows_the_trace_event_format(exported, mech):
    events, trace = exported[mech]
    check_trace_event_format(trace)
    names = {e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "process_name"}
    assert names == set(events["node"])  # every component is a process, and only they are
    assert trace["otherData"]["run_id"] == events["run_id"].iloc[0]


@pytest.mark.parametrize("mech", list(RUNS))
def test_each_mechanism_contributes_its_slices_and_counters(exported, mech):
    _, trace = exported[mech]
    slices = {e["name"] for e in trace["traceEvents"] if e["ph"] == "X"}
    counters = {e["name"] for e in trace["traceEvents"] if e["ph"] == "C"}
    want_slices, want_counters = EXPECT[mech]
    for prefix in want_slices:
        assert any(s.startswith(prefix) for s in slices), (prefix, slices)
    for prefix in want_counters:
        assert any(c.startswith(prefix) for c in counters), (prefix, counters)


def test_slices_are_the_run_logs_requests(exported):
    events, trace = exported["tso"]
    calls = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["name"] == "AllocTimestamp"]
    assert len(calls) == int((events["kind"] == "client.request").sum())
    starts = sorted(round(t * 1000, 3) for t in events.loc[events["kind"] == "client.request", "t_ms"])
    assert sorted(e["ts"] for e in calls) == starts
    events, trace = exported["query"]
    reads = [e for e in trace["traceEvents"] if e["ph"] == "X" and re.fullmatch(r"(search|query) \d+", e["name"])]
    assert len(reads) == int((events["kind"] == "client.read_start").sum())
    done = events[events["kind"] == "client.read"].set_index("request")["t_ms"]
    for e in reads:
        request = int(e["name"].split()[-1])
        assert e["ts"] + e["dur"] == pytest.approx(done[request] * 1000, abs=1e-2)


def test_tsafe_counter_follows_the_run_log(exported):
    events, trace = exported["query"]
    tsafe = events[events["kind"] == "querynode.tsafe"]
    counted = [e for e in trace["traceEvents"] if e["ph"] == "C" and e["name"].startswith("tsafe ")]
    assert len(counted) == len(tsafe)
    assert max(e["args"]["value"] for e in counted) == max((int(ts) >> 18) - 1767225600000 for ts in tsafe["ts"])


#: Per mechanism: messages (flow names) its run must show, as (sender kind, receiver kind) pairs of the run log.
FLOWS = {
    "tso": {("client.request", "rootcoord.alloc_timestamp"), ("rootcoord.alloc_timestamp", "client.recv")},
    "timetick": {("proxy.report", "rootcoord.timetick_update"), ("rootcoord.alloc_timestamp", "proxy.tick")},
    "flush": {("mq.produce", "datanode.buffer")},
    "query": {("client.read_start", "proxy.read"), ("proxy.read", "querynode.wait"),
              ("querynode.read", "client.read"), ("mq.produce", "querynode.pack")},
}


@pytest.mark.parametrize("mech", list(RUNS))
def test_flows_join_each_receive_to_a_send_before_it(exported, mech):
    """The messages the mechanisms declare (Flow items): each pair's send comes before its receive in the run log,
    the pair is one the lessons name, it is drawn as one flow arrow, and a receive that names a request (a read's
    number) is joined to a send of the same request."""
    events, trace = exported[mech]
    pairs = flow_pairs(events)
    kinds = events["kind"].to_numpy()
    found = {(kinds[s], kinds[r]) for s, r, _ in pairs}
    assert FLOWS[mech] <= found, FLOWS[mech] - found
    assert all(s < r for s, r, _ in pairs)
    request = events["request"].to_numpy(dtype=object, na_value=None)
    assert all(request[s] == request[r] for s, r, n in pairs if n in ("read", "search", "result"))
    assert len([e for e in trace["traceEvents"] if e["ph"] == "s"]) == len(pairs)


def test_a_flow_direction_is_send_or_recv():
    with pytest.raises(ValueError, match="'send' or 'recv'"):
        Flow(("x",), "out")


def test_every_traced_kind_is_a_registered_kind():
    for m in mechanisms():
        assert set(m.trace) <= set(EVENT_KINDS), m.name


def test_export_is_deterministic_and_never_overwrites(tmp_path):
    milvus_edu.simulate("tso-basics", duration_s=1, out_dir=tmp_path / "run")
    export_perfetto(tmp_path / "run", tmp_path / "a.json")
    export_perfetto(tmp_path / "run", tmp_path / "b.json")
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    (tmp_path / "c.json").write_text("mine")
    with pytest.raises(milvus_edu.export.ExportError, match="--force"):
        export_perfetto(tmp_path / "run", tmp_path / "c.json")
    assert (tmp_path / "c.json").read_text() == "mine"
    export_perfetto(tmp_path / "run", tmp_path / "c.json", force=True)
    assert (tmp_path / "c.json").read_bytes() == (tmp_path / "a.json").read_bytes()


def test_cli_export(capsys, tmp_path):
    milvus_edu.simulate("tso-basics", duration_s=1, out_dir=tmp_path / "run")
    assert main(["export", str(tmp_path / "run"), "--perfetto", str(tmp_path / "t.json")]) == 0
    assert "trace events" in capsys.readouterr().out
    check_trace_event_format(json.loads((tmp_path / "t.json").read_text()))
    for args, says in ((["export", str(tmp_path / "nothing"), "--perfetto", str(tmp_path / "u.json")], ""),
                       (["export", str(tmp_path / "run"), "--perfetto", str(tmp_path / "t.json")], "--force")):
        assert main(args) == 2
        err = capsys.readouterr().err
        assert err.startswith("milvus-edu: error: ") and says in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "u.json").exists()
