"""The model beside a real Milvus 2.3.5 (milvus_edu.real): the server's lifecycle, workloads on both, bad input.

One server serves the module (a module-scoped fixture: tests/conftest.py puts the module's tests on one xdist
worker); the lifecycle and bad-input tests start their own. Nothing here asserts a wall-clock time.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from milvus_edu.events import load_run
from milvus_edu.mechanisms.query.levels import reads
from milvus_edu.querynode.expr import parse_filter
from milvus_edu.real import RealMilvus, RealMilvusError
from milvus_edu.real.compare import REPORT_WIDTH, Comparison, compare, line_up, report
from milvus_edu.real.server import pid_alive, process_tree
from milvus_edu.real.workload import WorkloadError, key_types, read_filter, run_workload
from milvus_edu.client.workload import parse_steps

pytestmark = [pytest.mark.slow, pytest.mark.real]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """One real server for the module's workloads."""
    with RealMilvus(folder=tmp_path_factory.mktemp("real") / "server") as srv:
        yield srv


@pytest.fixture(scope="module")
def seed_compare(server, tmp_path_factory):
    """The seed example on the model and on the shared server, both run folders kept."""
    return compare(server=server, out_dir=tmp_path_factory.mktemp("seed"))


def _children() -> set[int]:
    import os

    return set(process_tree(os.getpid())) - {os.getpid()}


def test_server_starts_and_stops_cleanly(tmp_path):
    folder = tmp_path / "server"
    srv = RealMilvus(folder=folder)
    with srv:
        tree = process_tree(srv.pid)
        assert srv.running and all(pid_alive(p) for p in tree)
        assert srv.start_s > 0 and srv.rss_mb_at_start > 50  # the Go binary's resident memory, at least
        assert srv.uri.startswith("http://127.0.0.1:")
        assert (folder / "configs" / "embedEtcd.yaml").is_file()
        assert "level: debug" in (folder / "configs" / "milvus.yaml").read_text()
    assert not srv.running
    assert not any(pid_alive(p) for p in tree), "a server process outlived stop()"
    assert (folder / "logs" / "standalone-1.log").stat().st_size > 0  # the logs stay beside the run
    assert not (folder / "data").exists()  # the server's own data goes


def test_server_dies_with_a_python_killed_outright(tmp_path):
    """A Python killed by SIGKILL runs no atexit hook; the server must not outlive it all the same."""
    import os
    import signal
    import time

    code = ("import sys, time\nfrom milvus_edu.real import RealMilvus\n"
            f"s = RealMilvus(folder={str(tmp_path / 'server')!r}).start()\nprint(s.pid, flush=True)\ntime.sleep(600)\n")
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        pid = int(child.stdout.readline())
        assert pid_alive(pid)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    for _ in range(100):  # the kernel delivers the parent-death signal as the child exits
        if not pid_alive(pid):
            break
        time.sleep(0.1)
    assert not pid_alive(pid), "the server outlived the Python that started it"


def test_seed_example_agrees_at_strong(seed_compare):
    table = seed_compare.table
    strong = table[table["level"] == "Strong"]
    assert len(strong) == 5 and seed_compare.ok, "\n".join(map(str, seed_compare.failures().to_dict("records")))
    # The seed's table: nothing, A1, A1 and A2, A2; the last read (after the flush, nothing in flight) exactly.
    last = strong.iloc[-1]
    assert last["model"] == last["real"] == ["A2"] and "set aside" not in last["note"]
    assert list(strong["label"]) == ["t2", "t6", "t10", "t14", "after flush"]


def test_real_run_folder_reads_like_a_model_run(seed_compare):
    events = load_run(seed_compare.real_dir)
    r = reads(events)
    assert list(r["level"]) == ["Strong"] * 5 and list(r["label"]) == ["t2", "t6", "t10", "t14", "after flush"]
    assert r["rows"].iloc[-1] == ["A2"] and r["error"].isna().all()
    clock = events[events["kind"] == "run.clock"]
    assert len(clock) == 1 and int(clock["clock_ms"].iloc[0]) > 1_600_000_000_000  # the wall clock, Unix ms
    acks = events[events["kind"] == "client.insert"]
    assert acks["ts"].notna().all() and (acks["ts"].astype("int64") > 0).all()  # MutationResult.timestamp
    from milvus_edu.viz.stepper import TimelineStepper

    from milvus_edu.mechanisms.query.lanes import ReadsLane

    stepper = TimelineStepper(events)
    assert any(isinstance(lane, ReadsLane) for lane in stepper.lanes)
    paths = stepper.to_static(seed_compare.real_dir / "timeline.png")
    assert paths and all(p.stat().st_size > 0 for p in paths)


def test_every_answered_read_finds_tsafe_at_its_guarantee_in_the_stepper(seed_compare):
    """A delegator answers a read only once tsafe reached its guarantee (waitTSafe); the stepper's tsafe must say so.
    The sampled QueryNode gauge shows the pack that let a waiting read through only at the next sample: that pack is
    placed at the read. The exception the metrics module allows: more packs than vchannels came in since the sample
    before (a stalled sampler), so the sampled pack may not be the one that served the read."""
    from milvus_edu.narrate import detail_dict
    from milvus_edu.real.metrics import tsafe_at_answers

    events = seed_compare.real_events
    at = tsafe_at_answers(events)
    # each assertion shows the table (the sampler's timing differs from run to run: a failure must say what it saw)
    shown = at.to_string()
    assert len(at) == 10 and set(at["request"]) == {1, 2, 3, 4, 5}, shown  # five Strong reads on two shards
    packs = events[events["kind"] == "querynode.pack"].sort_values("seq")
    for r in at[~at["reached"]].itertuples():  # only where the counter says two rounds came in one sample
        after = packs[(packs["vchannel"] == r.vchannel) & (packs["t_ms"] > r.t_ms)].iloc[0]
        assert detail_dict(after["detail"])["packs"] > 2, f"{r}\nthe next pack: {after['detail']}\n{shown}"
    # most waiting reads are let through by a pack the sampler sees only after the answer: those are placed
    assert at["reached"].mean() >= 0.8 and at["placed"].any(), shown
    moved = at["moved_ms"].dropna()
    # the panel at the end: the delete's timestamp 0 said where it shows, no "0 rows" for a shard's unlogged result
    from milvus_edu.viz.stepper import TimelineStepper

    stepper = TimelineStepper(events)
    stepper.goto(len(events) - 1)
    panel = stepper.panel_html
    assert "delete A1 returned timestamp 0" in panel and "rows not logged" in panel and " 0 rows" not in panel, panel
    # placed after the sample before began: moved back by less than two gaps between samples
    gap = seed_compare.server["metrics"]["gap_max_ms"]
    assert (moved >= 0).all() and (moved < 2 * gap).all(), f"largest gap between samples {gap} ms\n{shown}"


def test_deletes_and_reinserts_of_one_key_agree_at_strong(server):
    # 1.5 s between calls: no write is in flight during a read on either side (a real Strong read takes 0.2-0.8 s,
    # the first after a load the longest), so every Strong read compares exactly.
    steps = [{"at": 0.5, "client": "Client1", "op": "create_collection", "collection": "D"}]
    plan = [("insert", {"data": [{"id": 7}, {"id": 8}]}), ("query", {"filter": "id in [7, 8, 9]"}),
            ("delete", {"ids": [7]}), ("query", {"filter": "id in [7, 8, 9]"}),
            ("insert", {"data": [{"id": 7}]}), ("query", {"ids": [7, 8]}),
            ("delete", {"ids": [7, 8]}), ("search", {}), ("insert", {"ids": [8]}), ("query", {})]
    for k, (op, args) in enumerate(plan):
        step = {"at": 1.0 + 1.5 * k, "client": "Client1" if op != "query" else "Client2", "op": op, "collection": "D",
                **args}
        if op in ("query", "search"):
            step["consistency_level"] = "Strong"
        steps.append(step)
    result = compare(steps, server=server)
    strong = result.table[result.table["level"] == "Strong"]
    assert result.ok, "\n".join(map(str, result.failures().to_dict("records")))
    assert list(strong["real"]) == [[7, 8], [8], [7, 8], [], [8]]
    assert not strong["note"].str.contains("set aside").any()


def test_missing_binary_is_one_line_and_starts_nothing(tmp_path):
    before = _children()
    with pytest.raises(RealMilvusError) as err:
        RealMilvus(folder=tmp_path / "s", binary=tmp_path / "no" / "milvus").start()
    assert "no Milvus server binary" in str(err.value) and "\n" not in str(err.value)
    assert _children() == before


def test_taken_port_is_one_line_and_starts_nothing(tmp_path):
    before = _children()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        with pytest.raises(RealMilvusError) as err:
            RealMilvus(folder=tmp_path / "s", port=port).start()
    assert f"port {port}" in str(err.value) and "taken" in str(err.value) and "\n" not in str(err.value)
    assert _children() == before


def test_a_relative_folder_reaches_the_server_as_the_folder_it_names(monkeypatch, tmp_path):
    """The server runs inside its folder: a relative one (`compare --out runs/x`) was handed to it as is, so it found
    no configuration, took Milvus's default ports and failed with 'address already in use' on 19530."""
    import milvus_edu.real.server as server_module

    launched = {}

    def popen(argv, cwd, env, **kwargs):
        launched.update(cwd=Path(cwd), conf=Path(env["MILVUSCONF"]), etcd=Path(env["ETCD_CONFIG_PATH"]))
        raise OSError(2, "No such file or directory")  # stop here: only what the server would be given matters

    monkeypatch.setattr(server_module.subprocess, "Popen", popen)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(RealMilvusError, match="cannot start"):
        RealMilvus(folder=Path("runs") / "server").start()
    folder = tmp_path / "runs" / "server"
    assert launched["cwd"] == folder and launched["conf"] == folder / "configs"
    assert launched["etcd"] == folder / "configs" / "embedEtcd.yaml"
    assert str(folder) in (folder / "configs" / "milvus.yaml").read_text()  # the data folder the config names


def test_wrong_machine_is_one_line_and_starts_nothing(monkeypatch, tmp_path):
    monkeypatch.setattr("platform.machine", lambda: "aarch64")
    before = _children()
    with pytest.raises(RealMilvusError, match="runs on Linux x86-64 only") as err:
        RealMilvus(folder=tmp_path / "s").start()
    assert "\n" not in str(err.value) and _children() == before and not (tmp_path / "s").exists()


def test_no_space_is_one_line_and_starts_nothing(monkeypatch, tmp_path):
    import shutil
    from collections import namedtuple

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage(10 * 2**20, 9 * 2**20, 2**20))
    before = _children()
    with pytest.raises(RealMilvusError, match="no space") as err:
        RealMilvus(folder=tmp_path / "s").start()
    assert "\n" not in str(err.value) and _children() == before


def test_unknown_real_parameter_is_refused():
    with pytest.raises(RealMilvusError, match="no counterpart"):
        RealMilvus(params={"tso.max_logical": 10})
    assert RealMilvus(params={"timetick.time_tick_interval_ns": 50_000_000}).yaml == {"proxy.timeTickInterval": 50}


def test_compare_cli_bad_workload_is_one_line(tmp_path):
    bad = tmp_path / "w.json"
    bad.write_text(json.dumps([{"at": 0, "client": "C", "op": "upsert", "collection": "X"}]))
    out = subprocess.run([sys.executable, "-m", "milvus_edu.cli", "compare", "--workload", str(bad)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "unknown op 'upsert'" in out.stderr


def test_compare_cli_shows_the_model_when_the_real_side_cannot_run():
    # A parameter the model has and Milvus 2.3.5's milvus.yaml does not: the model runs, the real server never starts.
    out = subprocess.run([sys.executable, "-m", "milvus_edu.cli", "compare", "--param",
                          "datanode.binlog_max_size=67108864"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "no counterpart" in out.stderr
    assert "the real server did not run" in out.stdout and "A1, A2" in out.stdout  # the model's t10 answer


@pytest.mark.parametrize("package", ["milvus", "pymilvus"])
def test_missing_package_is_one_line_and_starts_nothing(monkeypatch, tmp_path, package):
    monkeypatch.setitem(sys.modules, package, None)  # import fails as if it were not installed
    before = _children()
    with pytest.raises(RealMilvusError) as err:
        RealMilvus(folder=tmp_path / "s").start()
    assert f"`{package}`" in str(err.value) and "pip install 'milvus-edu[real]'" in str(err.value)
    assert "\n" not in str(err.value) and _children() == before


def test_mixed_key_types_are_refused_before_a_server_starts():
    steps = parse_steps([{"at": 0, "client": "C", "op": "insert", "collection": "X", "data": [{"id": 1}]},
                         {"at": 0, "client": "C", "op": "insert", "collection": "X", "data": [{"id": "a"}]}])
    with pytest.raises(WorkloadError, match="mixes string and whole-number keys"):
        key_types(steps)
    with pytest.raises(WorkloadError):
        run_workload([{"at": 0, "client": "C", "op": "insert", "collection": "X", "data": [{"id": 1.5}]}])


keys = st.one_of(st.lists(st.integers(-2**62, 2**62), min_size=1, max_size=6),
                 st.lists(st.text(st.characters(min_codepoint=32, max_codepoint=126, exclude_characters='"\\'),
                                  min_size=1, max_size=6), min_size=1, max_size=6))


@settings(max_examples=60, deadline=None)
@given(keys, keys)
def test_ids_filter_selects_exactly_the_ids(ids, others):
    """The filter a real read sends for ``ids`` keeps exactly those keys, as the model's grammar reads it."""
    pred = parse_filter(read_filter({"ids": ids}))
    for k in ids:
        assert pred(k)
    for k in others:
        assert pred(k) == (k in ids)


def _row(seq, t_ms, node, kind, **cols):
    detail = cols.pop("detail", None)
    return {"run_id": "r", "seq": seq, "t_ms": t_ms, "node": node, "kind": kind,
            "detail": None if detail is None else json.dumps(detail, sort_keys=True), **cols}


def _two_sides(real_read_start_ms: float, real_rows: list, real_error: str | None = None,
               model_error: str | None = None):
    """A two-step workload (Client1 inserts A at 1.0 s, Client2 reads at Strong at 0.9 s) as the model ran it (the
    read answered at 0.95 s, before the insert: empty, or failed with ``model_error``) and as a real run with the
    read sent at ``real_read_start_ms`` and answered 50 ms later with ``real_rows`` (or failed with ``real_error``)."""
    from milvus_edu.events import rows_to_frame

    real = rows_to_frame([
        _row(0, 1005.0, "Client1", "client.insert", ts=7, count=1,
             detail={"pks": ["A"], "collection": "C", "step": 1, "latency_ms": 5.0}),
        _row(1, real_read_start_ms + 50.0, "Client2", "client.read", request=1, level="Strong", count=len(real_rows),
             error=real_error, detail={"op": "query", "pks": real_rows, "step": 0, "latency_ms": 50.0})])
    return line_up(TWO_STEPS, _model_side(model_error), real)


#: The workload of :func:`_two_sides`.
TWO_STEPS = [{"at": 0.9, "client": "Client2", "op": "query", "collection": "C", "consistency_level": "Strong"},
             {"at": 1.0, "client": "Client1", "op": "insert", "collection": "C", "data": [{"id": "A"}]}]


def _model_side(error: str | None = None):
    """:data:`TWO_STEPS` as the model ran it: the read answered at 0.95 s, before the insert, empty (or failed with
    ``error``)."""
    from milvus_edu.events import rows_to_frame

    return rows_to_frame([
        _row(0, 900.0, "Client2", "client.read_start", request=1, level="Strong", detail={"op": "query"}),
        _row(1, 950.0, "Client2", "client.read", request=1, level="Strong", count=0, error=error,
             detail={"op": "query", "pks": []}),
        _row(2, 1004.0, "Client1", "client.insert", ts=5, count=1, detail={"pks": ["A"], "collection": "C"})])


def test_strong_comparison_sets_aside_only_writes_ordered_differently():
    # The real read was sent after the insert was acknowledged: A lies on different sides of it, not compared.
    table = _two_sides(1100.0, ["A"])
    assert bool(table["agree"].iloc[0])
    assert table["note"].iloc[0] == ("Strong: the same rows once set-aside keys are left out (compared none on both; "
                                     "set aside: A written before the read on the real server and after it on the "
                                     "model)")
    # The same order on both sides (the read done before the insert): a real answer with A is a failure.
    table = _two_sides(900.0, ["A"])
    assert table["level"].iloc[0] == "Strong" and not table["agree"].iloc[0]
    assert "set aside" not in table["note"].iloc[0]
    assert bool(_two_sides(900.0, [])["agree"].iloc[0])


def test_a_strong_read_failing_on_one_side_only_differs_and_on_both_agrees():
    # An error is compared as an outcome: one side failing is a failure whatever the keys set aside.
    for real_error, model_error in (("timeout", None), (None, "timeout")):
        table = _two_sides(1100.0, [], real_error=real_error, model_error=model_error)
        assert not table["agree"].iloc[0]
        assert table["note"].iloc[0] == ("Strong results differ (set aside: A written before the read on the real "
                                         "server and after it on the model)")
    table = _two_sides(900.0, [], real_error="timeout", model_error="timeout")
    assert bool(table["agree"].iloc[0]) and table["note"].iloc[0] == "Strong: the same rows"
    assert table["model"].iloc[0] == table["real"].iloc[0] == "error: timeout"


def test_a_real_side_that_did_not_run_is_not_reported_as_differing():
    # compare's report when the server could not start said "Strong results differ" under every Strong read
    table = line_up(TWO_STEPS, _model_side(), _model_side().iloc[0:0])
    assert table["agree"].isna().all() and (table["note"] == "").all()
    comparison = Comparison(table, _model_side(), _model_side().iloc[0:0], {})
    assert comparison.ok and comparison.failures().empty
    lines = report(comparison)
    assert "the real server did not run" in lines[0] and not any("differ" in line for line in lines)


def test_the_report_fits_a_laptop_wide_notebook_with_each_note_under_its_step():
    # Long answers and a set-aside note: no line wider than a notebook shows at 1280 px, cuts marked "…".
    table = _two_sides(1100.0, [f"key-{i}" for i in range(12)])
    server = {"version": "2.3.5", "start_s": 3.0, "rss_mb_at_start": 150}
    lines = report(Comparison(table, table.iloc[0:0], table.iloc[0:0], server))
    assert max(map(len, lines)) <= REPORT_WIDTH
    read = next(i for i, line in enumerate(lines) if line.startswith("0 "))
    assert "…" in lines[read] and "query" in lines[read] and "Strong" in lines[read]
    insert = next(i for i, line in enumerate(lines) if line.startswith("1 "))
    note = " ".join(line.strip() for line in lines[read + 1:insert])
    assert lines[read + 1].startswith("     Strong ") and "set aside: A written before the read" in note
    assert "insert" in lines[insert] and all(line.startswith("     ") for line in lines[read + 1:insert])


def test_real_run_shows_time_ticks_syncs_and_tsafe_in_the_stepper(server, tmp_path):
    """Milvus 2.3.5 logs no time tick: the sampled gauges give them, and the stepper draws them beside the log's
    syncs and the reads."""
    from milvus_edu.mechanisms.query.lanes import DelegatorLane, ReadsLane
    from milvus_edu.mechanisms.timetick.lanes import PChannelLane, ProxyLane
    from milvus_edu.mechanisms.timetick.panel import pchannels_of
    from milvus_edu.narrate import detail_dict
    from milvus_edu.real.metrics import QUERYNODE_TT, ROOTCOORD_TT
    from milvus_edu.viz.lanes import EventsLane
    from milvus_edu.viz.stepper import TimelineStepper

    steps = [{"at": 0.2, "client": "C1", "op": "create_collection", "collection": "TT", "consistency_level": "Strong"},
             {"at": 0.4, "client": "C1", "op": "insert", "collection": "TT", "data": [{"id": k} for k in range(1, 5)]},
             {"at": 0.6, "client": "C2", "op": "query", "collection": "TT", "filter": "id >= 2"},
             {"at": 0.8, "client": "C1", "op": "flush", "collection": "TT"},
             {"at": 1.0, "client": "C2", "op": "query", "collection": "TT", "filter": "id >= 2"}]
    run = run_workload(steps, server=server, out_dir=tmp_path / "run")
    events = load_run(run.out_dir)
    kind = events["kind"].astype(str)
    ticks = events[(kind == "mq.produce") & (events["msg_type"] == "TimeTick")]
    assert len(ticks) >= 4 and set(ticks["node"]) == {"rootcoord-1"}
    assert {detail_dict(d)["metric"] for d in ticks["detail"]} == {ROOTCOORD_TT}
    assert (ticks["ts"] == ticks["tick_ts"]).all()
    # A tick's timestamp is never after the sample that saw it: the lag is subtracted from the sample's clock.
    base = int(events.loc[kind == "run.clock", "clock_ms"].iloc[0])
    physical = ticks["tick_ts"].to_numpy(dtype="int64") >> 18
    assert (physical <= base + ticks["t_ms"].to_numpy() + 1).all()
    assert (kind == "proxy.report").sum() >= 2
    packs = events[kind == "querynode.pack"]
    assert len(packs) and {detail_dict(d)["metric"] for d in packs["detail"]} == {QUERYNODE_TT}
    watched = set(events.loc[kind == "querynode.watch", "vchannel"])
    tsafe = events[kind == "querynode.tsafe"]
    assert len(watched) == 2 and set(tsafe["vchannel"]) == watched
    assert (kind == "datanode.sync").sum() >= 2  # the flush syncs each shard's segment: from the log
    assert run.server["metrics"]["samples"] > 10 and run.server["metrics"]["errors"] == 0
    assert (run.out_dir / "metrics.jsonl").stat().st_size > 0

    # The shared server ticks the pchannels of earlier collections too: draw the two this collection writes to.
    written = sorted(set(events.loc[kind == "proxy.enqueue", "channel"]))
    assert len(written) == 2 and set(written) <= set(ticks["channel"])
    slots = [pchannels_of(events).index(c) for c in written]
    lanes = [DelegatorLane(0), DelegatorLane(1), ReadsLane(), PChannelLane(slots[0]), PChannelLane(slots[1]),
             ProxyLane(), EventsLane()]
    stepper = TimelineStepper(events, lanes=lanes)
    delegators, pchannels, proxy = lanes[:2], lanes[3:5], lanes[5]
    for lane in delegators:  # tsafe's track: the watch and every tsafe of its vchannel
        mine = (kind.isin(["querynode.watch", "querynode.tsafe"]) & (events["vchannel"] == lane.vchannel)).fillna(False)
        assert any(len(track.x) == mine.sum() > 2 for track, _ in lane.tracks)
    assert {lane.channel for lane in pchannels} == set(written)
    for lane in pchannels:  # the time ticks' track: every tick of its pchannel
        assert any(len(track.x) == (ticks["channel"] == lane.channel).sum() for track, _ in lane.tracks)
    assert proxy.names == ["proxy-1"]
    assert stepper.to_static(tmp_path / "timeline.png")
