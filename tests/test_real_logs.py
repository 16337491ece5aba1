"""A real Milvus 2.3.5 server's log read into the run log (milvus_edu.real.logs), without a server.

``tests/data/real_milvus_2.3.5.log`` is a real log, trimmed: PyPI ``milvus`` 2.3.5 started at ``log.level: debug``,
``log.format: json``, then pymilvus 2.5's MilvusClient created ``demo`` (Bounded), inserted 1, queried at Strong,
inserted 2, queried at Bounded and Eventually, deleted 1, queried at Strong, flushed, queried and searched at
Strong. The lines before the configuration is read are zap's text form (they hold the TSO's start); the rest is
JSON. Every line of a kind we map is kept, and one line of every other record. ``real_milvus_2.3.5_client.jsonl``
holds the client's calls of that run as run-log rows, ``t_ms`` counted from the log's first line (``T0``).
"""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

import milvus_edu  # noqa: E402
from milvus_edu.events.io import rows_to_frame  # noqa: E402
from milvus_edu.events.schema import EVENT_KINDS, FIELD_NAMES  # noqa: E402
from milvus_edu.mechanisms.flush.lanes import VChannelLane, WriteBufferLane  # noqa: E402
from milvus_edu.mechanisms.query import levels  # noqa: E402
from milvus_edu.mechanisms.query.lanes import DelegatorLane, ReadsLane  # noqa: E402
from milvus_edu.real.logs import (GRACEFUL_TIME_MS, REQUIRED_LOG_LEVEL, SERVER_REQUEST_BASE, merge_events,  # noqa: E402
                                  parse_line, parse_log, pchannel_of, write_real_run)
from milvus_edu.narrate import ts_text  # noqa: E402
from milvus_edu.viz import TimelineStepper  # noqa: E402

DATA = Path(__file__).parent / "data"
LOG = DATA / "real_milvus_2.3.5.log"
CLIENT = DATA / "real_milvus_2.3.5_client.jsonl"
#: Wall clock (Unix ms) of the log's first line: 2026/11/25 20:21:37.582 UTC.
T0 = 1795638097582
VCH = "by-dev-rootcoord-dml_0_470715753561325588v0"
SEGMENT = 470715753561525625

EXPECTED_KINDS = {
    "datacoord.channel_cp": 2, "datacoord.flush": 1, "datacoord.flush_segments": 1, "datacoord.save_binlog_paths": 2,
    "datacoord.segment_state": 2, "datanode.buffer": 2, "datanode.cp_rpc": 2, "datanode.flush_ts": 1,
    "datanode.seal": 1,
    "datanode.sync": 2, "datanode.sync_done": 2, "datanode.watch": 1, "proxy.enqueue": 3, "proxy.finish": 3,
    "proxy.read": 6, "querynode.read": 6, "querynode.tsafe": 1, "querynode.wait": 4, "querynode.watch": 1,
    "rootcoord.ddl": 2, "tso.init": 1,
}


@pytest.fixture(scope="module")
def parsed():
    return parse_log(LOG, run_id="real-seed")


@pytest.fixture(scope="module")
def client():
    return [json.loads(line) for line in CLIENT.read_text().splitlines()]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, parsed, client):
    rows = merge_events(client, parse_log(LOG, run_id="real-seed", t0=T0).events)
    return write_real_run(tmp_path_factory.mktemp("real") / "run", rows,
                          {"server": "milvus 2.3.5", "log_level": "debug", "unparsed": parsed.unparsed})


def _of(events, kind):
    return [e for e in events if e["kind"] == kind]


def _detail(e):
    return json.loads(e["detail"])


def test_the_captured_log_gives_the_models_kinds(parsed):
    assert parsed.by_kind == EXPECTED_KINDS
    assert parsed.lines == 736 and parsed.unparsed == 1 and parsed.skipped == 677
    assert parsed.unparsed_examples == ["---Milvus Proxy successfully initialized and ready to serve!---"]
    for e in parsed.events:
        assert set(e) == set(FIELD_NAMES)
        assert e["kind"] in EVENT_KINDS and e["run_id"] == "real-seed"
        if "detail" in EVENT_KINDS[e["kind"]].fields:
            d = _detail(e)
            assert list(d) == sorted(d) and d["go"].count(":") == 1 and d["message"]
    assert [e["seq"] for e in parsed.events] == list(range(len(parsed.events)))
    assert [e["t_ms"] for e in parsed.events] == sorted(e["t_ms"] for e in parsed.events)


def test_tso_init_is_rootcoords_tso_from_a_text_line(parsed):
    # four "sync and save timestamp" lines (timestampOracle.InitTimestamp of the TSO and of ID allocators built on
    # it); only the one followed by "tso allocator initialized" is rootcoord's TSO
    (init,) = _of(parsed.events, "tso.init")
    assert init["node"] == "rootcoord-1"
    assert init["physical_ms"] == 1795638097998 and init["window_end_ms"] == 1795638100998 and init["logical"] == 0
    assert init["clock_ms"] == 1795638097998 and init["t_ms"] == 416.0
    assert _detail(init)["go"] == "tso/tso.go:122"


def test_reads_carry_guarantee_level_and_wait(parsed):
    reads = _of(parsed.events, "proxy.read")
    assert [r["level"] for r in reads] == ["Strong", "Bounded", "Eventually", "Strong", "Strong", "Strong"]
    assert [r["request"] for r in reads] == list(range(SERVER_REQUEST_BASE, SERVER_REQUEST_BASE + 6))
    strong, bounded, eventually = reads[:3]
    assert strong["ts"] == strong["guarantee_ts"] == 470715755585077249
    assert all(_detail(r)["from_tso"] for r in reads[:5])  # logical parts 1, 3, 4, ...: the TSO's
    assert bounded["ts"] - bounded["guarantee_ts"] == GRACEFUL_TIME_MS << 18
    assert eventually["guarantee_ts"] == 1
    assert _detail(reads[5])["level_from"] == "logged" and reads[5]["ts"] is None  # a search logs no mvcc_ts
    served = _of(parsed.events, "querynode.read")
    assert [round(_detail(r)["waited_ms"]) for r in served] == [279, 0, 0, 309, 282, 224]
    assert all(r["vchannel"] == VCH for r in served)
    assert _detail(served[0])["go"] == "delegator/delegator.go:381"
    assert _detail(served[0])["arrived_go"] == "querynodev2/handlers.go:155"
    waits = _of(parsed.events, "querynode.wait")
    assert [w["request"] for w in waits] == [SERVER_REQUEST_BASE + k for k in (0, 3, 4, 5)]
    assert waits[0]["t_ms"] == strong["t_ms"] + 1 and waits[0]["detail"] is None  # the kind has no detail column


def test_datanode_and_datacoord_lines(parsed):
    syncs = _of(parsed.events, "datanode.sync")
    assert [(s["ts"], s["segment"], s["count"], _detail(s)["flush"]) for s in syncs] == [
        (470715755768578049, SEGMENT, 2, False), (470715756293914625, SEGMENT, 0, True)]  # the flush sync: stats only
    buffered = _of(parsed.events, "datanode.buffer")
    assert [(b["count"], _detail(b)["buffer_rows"]) for b in buffered] == [(1, 1), (1, 2)]
    assert all(b["t_ms"] < syncs[0]["t_ms"] and b["vchannel"] == VCH for b in buffered)
    assert _detail(syncs[0])["go"] == "datanode/flow_graph_insert_buffer_node.go:478"
    saves = _of(parsed.events, "datacoord.save_binlog_paths")
    assert [(s["ts"], s["count"], s["peer"], _detail(s)["flushed"]) for s in saves] == [
        (470715755768578049, 2, "datanode-1", False), (470715756293914625, 2, "datanode-1", True)]
    cps = _of(parsed.events, "datacoord.channel_cp")
    assert [c["ts"] for c in cps] == [470715754510286849, 470715755821006849]
    rpcs = _of(parsed.events, "datanode.cp_rpc")
    assert [_detail(r)["positions"] for r in rpcs] == [{VCH: c["ts"]} for c in cps]
    assert all(r["t_ms"] >= c["t_ms"] and r["seq"] > c["seq"] for r, c in zip(rpcs, cps))  # after DataCoord saved it
    assert _detail(rpcs[0])["go"] == "datanode/flow_graph_time_tick_node.go:115"
    assert [_detail(s)["state"] for s in _of(parsed.events, "datacoord.segment_state")] == ["Sealed", "Flushed"]
    (watch,) = _of(parsed.events, "datanode.watch")
    assert watch["channel"] == "by-dev-rootcoord-dml_0" == pchannel_of(VCH) and watch["ts"] == 470715754431381509
    (flush,) = _of(parsed.events, "datacoord.flush")
    (flush_ts,) = _of(parsed.events, "datanode.flush_ts")
    assert flush["ts"] == flush_ts["ts"] == 1795638106366 << 18  # flushTs is logged to the millisecond only
    assert [(e["ts"], e["count"]) for e in _of(parsed.events, "proxy.enqueue")] == [
        (470715755573542916, 1), (470715755650613250, 1), (470715755663458309, None)]  # insert 1, insert 2, delete 1
    enqueued = [e["ts"] for e in _of(parsed.events, "proxy.enqueue")]
    assert [e["ts"] for e in _of(parsed.events, "proxy.finish")] == enqueued
    (tsafe,) = _of(parsed.events, "querynode.tsafe")
    assert tsafe["ts"] == 470715755703042050 and tsafe["vchannel"] == VCH


def test_unknown_lines_are_counted_not_fatal():
    lines = LOG.read_text().splitlines()[:60]
    garbage = ["not a log line at all", '{"level":"INFO","time":"2026/11/25 20:21:49.3',  # the second is truncated
               '[2026/13/45 99:99:99.000 +00:00] [INFO] [x.go:1] ["m"]', '["only", "an", "array"]', "\x00\x01binary"]
    parsed = parse_log(lines[:30] + garbage + lines[30:], run_id="r")
    clean = parse_log(lines, run_id="r")
    assert parsed.unparsed == clean.unparsed + len(garbage)
    assert parsed.unparsed_examples[:len(garbage)] == garbage[:len(parsed.unparsed_examples)]
    assert parsed.by_kind == clean.by_kind and parsed.lines == clean.lines + len(garbage)


def test_text_and_json_lines_parse_alike():
    text = parse_line('[2026/11/25 20:21:37.721 +00:00] [INFO] [indexnode/indexnode.go:304] ["IndexNode Component '
                      'states"] [State="nodeID:-1 role:\\"indexnode\\" "] [ids="[1,2]"] [n=3] [list=[4, 5]] []'
                      ' ["consistency level"=Strong] [isFlush=false] [channels="[a_v0,b_v1]"] [none=[]] [t=1.5µs]')
    assert text.caller == "indexnode/indexnode.go:304" and text.level == "INFO"
    assert text.fields == {"State": 'nodeID:-1 role:"indexnode" ', "ids": [1, 2], "n": 3, "list": [4, 5],
                           "consistency level": "Strong", "isFlush": False, "channels": ["a_v0", "b_v1"], "none": [],
                           "t": "1.5µs"}
    # zap writes a field called "time" after the header's: the header wins
    js = parse_line('{"level":"INFO","time":"2026/11/25 20:21:50.115 +00:00","caller":"a/b.go:7","message":"m",'
                    '"time":"78.487µs"}')
    assert js.clock_ms == 1795638110115 and js.fields == {"time~2": "78.487µs"}


def test_a_log_folder_counts_a_record_once(tmp_path):
    lines = LOG.read_text().splitlines()
    (tmp_path / "standalone-1.log").write_text("\n".join(lines) + "\n")
    (tmp_path / "milvus-stdout.log").write_text("\n".join(lines[:200]) + "\n")
    assert parse_log(tmp_path, run_id="r").by_kind == EXPECTED_KINDS
    # within one source nothing is merged: a line given twice is two records
    cp = next(line for line in lines if "UpdateChannelCheckpoint done" in line)
    assert parse_log(lines + [cp], run_id="r").by_kind["datacoord.channel_cp"] == 3
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match="holds no Milvus log"):
        parse_log(empty, run_id="r")
    with pytest.raises(FileNotFoundError, match="does not exist; pass a Milvus log file"):
        parse_log(tmp_path / "missing.log", run_id="r")


@settings(max_examples=150, deadline=None)
@given(st.lists(st.text(max_size=120), max_size=12))
def test_any_text_is_counted_never_fatal(lines):
    parsed = parse_log(lines, run_id="r")
    assert parsed.lines == sum(1 for line in lines if line.strip())
    assert parsed.unparsed + parsed.skipped <= parsed.lines
    assert sum(parsed.by_kind.values()) == len(parsed.events)


def test_merge_orders_by_time_and_links_the_clients_reads(client):
    server = parse_log(LOG, run_id="real-seed", t0=T0).events
    merged = merge_events(client, server)
    assert len(merged) == len(client) + len(server)
    assert [r["seq"] for r in merged] == list(range(len(merged)))
    assert [r["t_ms"] for r in merged] == sorted(r["t_ms"] for r in merged)
    assert merged == merge_events(client, server)
    # DataFrames with the schema's dtypes (nullable Int64, pandas strings) merge the same as plain rows
    full = [{name: r.get(name) for name in FIELD_NAMES} for r in client]
    assert merge_events(rows_to_frame(full), rows_to_frame(server)) == merged
    reads = {r["request"]: r["level"] for r in merged if r["kind"] == "proxy.read"}
    client_levels = {r["request"]: r["level"] for r in client if r["kind"] == "client.read_start"}
    assert reads == client_levels  # each server read got its client call's id
    for req in client_levels:
        kinds = [r["kind"] for r in merged if r["request"] == req]
        assert kinds[0] == "client.read_start" and kinds[-1] == "client.read" and "querynode.read" in kinds
    # pymilvus returns no timestamps: a linked client.read takes the server's guarantee and read ts
    answers = [r for r in merged if r["kind"] == "client.read"]
    assert (answers[0]["guarantee_ts"], answers[0]["ts"]) == (470715755585077249, 470715755585077249)
    assert answers[1]["guarantee_ts"] == answers[1]["ts"] - (GRACEFUL_TIME_MS << 18)
    assert json.loads(answers[0]["detail"])["from_server"] == ["guarantee_ts", "ts"]
    assert answers[5]["ts"] is None and answers[5]["guarantee_ts"] == 470715756542689281  # a search logs no mvcc
    assert all(r.get("guarantee_ts") is None for r in client if r["kind"] == "client.read")  # inputs unchanged
    # a tie goes to the client's event
    tie = dict(server[0], t_ms=client[0]["t_ms"])
    assert merge_events(client[:1], [tie])[0]["node"] == client[0]["node"]


def test_a_read_the_proxy_logged_in_the_clients_millisecond_is_linked(client):
    # zap cuts a line's time to the millisecond: a read stamped 7133.15 ms by the client whose PreExecute line came
    # 0.6 ms later reads 7133 ms (a suite run, 2026-11-27); it is that call's, and the linked read then gets no
    # server id and follows the call in the merged log. A line a whole millisecond before the call is not linked.
    server = [r for r in parse_log(LOG, run_id="real-seed", t0=T0).events if r["kind"] == "proxy.read"][:1]
    start = next(r for r in client if r["kind"] == "client.read_start")  # the call the first proxy.read serves
    answer = next(r for r in client if r["kind"] == "client.read" and r["request"] == start["request"])
    assert start["t_ms"] <= server[0]["t_ms"] <= answer["t_ms"] and server[0]["request"] >= SERVER_REQUEST_BASE
    for offset, linked in ((0.15, True), (0.999, True), (1.0, False), (1.5, False)):
        read_start = dict(start, t_ms=float(int(server[0]["t_ms"])) + offset)
        merged = merge_events([read_start, answer], [dict(server[0], t_ms=float(int(server[0]["t_ms"])))])
        proxy = next(r for r in merged if r["kind"] == "proxy.read")
        assert (proxy["request"] == start["request"]) is linked, (offset, proxy["request"])
        assert (proxy["request"] >= SERVER_REQUEST_BASE) is not linked
        if linked:  # moved to the call's time (its line's uncut time is no earlier), so it follows the call
            assert [r["kind"] for r in merged] == ["client.read_start", "proxy.read", "client.read"]
            assert proxy["t_ms"] == read_start["t_ms"]


def test_the_run_folder_loads_and_opens_in_the_stepper(run_dir):
    frame = milvus_edu.load_run(run_dir)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["source"] == "real" and summary["server"] == "milvus 2.3.5" and summary["events"] == len(frame)
    assert frame["kind"].iloc[0] == "run.start" and frame["kind"].iloc[-1] == "run.end"
    assert json.loads(frame["detail"].iloc[0])["real"] is True
    answered = levels.reads(frame)
    assert list(answered["level"]) == ["Strong", "Bounded", "Eventually", "Strong", "Strong", "Strong"]
    assert list(answered["rows"]) == [[1], [1], [1], [2], [2], [2]]
    assert answered["guarantee_ts"].notna().all()
    stepper = TimelineStepper(run_dir)
    assert [type(lane).__name__ for lane in stepper.lanes][:3] == ["DelegatorLane", "DelegatorLane", "ReadsLane"]
    assert stepper.jump_to_next("querynode.wait") is not None
    assert "Strong" in stepper.panel_html
    # a real run's time axis is the wall clock since it started, its timestamps dates (not hours since 2026)
    assert stepper._renderer.axes[-1].get_xlabel() == "wall-clock time since the run started (s)"
    assert TimelineStepper(milvus_edu.simulate("tso-basics", duration_s=0.5).events)._renderer.axes[-1] \
        .get_xlabel() == "simulated time (s)"
    stamped = frame.ts[frame.ts.notna() & (frame.ts > 1 << 18)]
    assert len(stamped) and all(ts_text(int(ts))[:2] == "20" for ts in stamped)
    fig, axes = plt.subplots(2, 1)
    try:
        lane = DelegatorLane(0)
        lane.setup(axes[0], frame)
        assert lane.vchannel == VCH
        dot, name = lane.update(len(frame) - 1, 0.0)
        assert dot.get_visible()  # tsafe: the watch's start and the tsafe the delete's pack set
        assert name.get_text() == "dml_0_470715753561325588v0"  # the vchannel's name, drawn over the cursor
        reads = ReadsLane()
        reads.setup(axes[1], frame)
        assert [t.get_text() for t in axes[1].get_yticklabels()] == ["Client1"]
    finally:
        plt.close(fig)


def test_the_panel_says_what_2_3_5_does_not_log_rather_than_zero_rows(run_dir):
    """A shard's read in 2.3.5's log carries no rows (and a search no MVCC timestamp): the panel must not say
    "0 rows" beside the client's answer of one row."""
    stepper = TimelineStepper(run_dir)
    assert stepper.jump_to_next("client.read") is not None
    text = stepper.panel_html
    assert "got 1 row" in text and "rows not logged" in text and " 0 rows" not in text, text


def test_write_real_run_refuses_nothing(tmp_path):
    with pytest.raises(ValueError, match="no events"):
        write_real_run(tmp_path / "empty", [])


def test_at_info_the_reads_and_checkpoint_rpcs_are_gone():
    """Why a real run must log at REQUIRED_LOG_LEVEL: the same log without its DEBUG lines loses the reads, the
    DataNode's checkpoint RPCs and the proxy's DML tasks."""
    assert REQUIRED_LOG_LEVEL == "debug"
    info = [line for line in LOG.read_text().splitlines()
            if '"level":"DEBUG"' not in line and "] [DEBUG] [" not in line]
    kinds = parse_log(info, run_id="r").by_kind
    for gone in ("proxy.read", "querynode.read", "querynode.wait", "datanode.cp_rpc", "proxy.enqueue", "proxy.finish",
                 "querynode.tsafe"):
        assert gone not in kinds and gone in EXPECTED_KINDS
    assert kinds["datanode.sync"] == 2 and kinds["datacoord.channel_cp"] == 2  # INFO lines


def test_a_text_form_log_of_two_shards():
    """``real_milvus_2.3.5_text_2shards.log``: the same workload at ``log.format: text`` on a collection of 2 shards
    (and ids 2 and 3 inserted together), only the lines we map. Every read reaches both delegators, each waits
    from its own arrival; lists, booleans and quoted keys of the text form read as the JSON form's."""
    parsed = parse_log(DATA / "real_milvus_2.3.5_text_2shards.log", run_id="r")
    assert parsed.unparsed == 0 and parsed.skipped == 0 and parsed.lines == 91
    kinds = parsed.by_kind
    assert kinds["querynode.read"] == 2 * kinds["proxy.read"] == 12 and kinds["querynode.wait"] == 8
    assert kinds["datanode.watch"] == kinds["querynode.watch"] == 2
    # each DML task is enqueued on both pchannels (a task's stats cover all its collection's channels); the proxy
    # logs an insert's rows, not a delete's
    assert [(e["count"], e["channel"][-1]) for e in _of(parsed.events, "proxy.enqueue")] == [
        (1, "0"), (1, "1"), (2, "0"), (2, "1"), (None, "0"), (None, "1")]
    assert [r["level"] for r in _of(parsed.events, "proxy.read")][-1] == "Strong"  # the search's quoted key
    by_request: dict = {}
    for r in _of(parsed.events, "querynode.read"):
        by_request.setdefault(r["request"], set()).add(r["vchannel"])
    assert all(len(v) == 2 for v in by_request.values()) and len(by_request) == 6
    (flush,) = _of(parsed.events, "datacoord.flush")
    assert flush["count"] == 2 and _detail(flush)["segments"] == [470715906772897147, 470715906772897149]
    assert sorted(e["vchannel"] for e in _of(parsed.events, "datanode.flush_ts")) == [
        "by-dev-rootcoord-dml_0_470715906772697111v0", "by-dev-rootcoord-dml_1_470715906772697111v1"]
    assert [(_detail(s)["flush"], s["count"]) for s in _of(parsed.events, "datanode.sync")] == [
        (False, 2), (False, 1), (True, 0), (True, 0)]  # ids 1 and 2 on shard 0, 3 on shard 1
    assert sum(b["count"] for b in _of(parsed.events, "datanode.buffer")) == 3


def test_the_flush_lanes_open_the_real_run(run_dir):
    """The flush chapter's lanes on the real run: the stored checkpoints and flushTs on the vchannel lane (a buffered
    pack without an end, as the log gives it, does not drag the consumed line to timestamp 0), and the write buffer
    rising with the two inserts and emptied by the flush's sync."""
    frame = milvus_edu.load_run(run_dir)
    fig, axes = plt.subplots(2, 1)
    try:
        lane = VChannelLane(0)
        lane.setup(axes[0], frame)
        lo, hi = axes[0].get_ylim()
        assert 0 < lo < hi < frame["t_ms"].max() / 1000.0 + 5  # timestamps drawn in seconds since the run began
        buffer = WriteBufferLane()
        buffer.setup(axes[1], frame)
        (line,) = [ln for ln in axes[1].get_lines() if ln.get_label() == "rows buffered, vch 0"]
        assert max(line.get_ydata()) == 2 and line.get_ydata()[-1] == 0
    finally:
        plt.close(fig)
