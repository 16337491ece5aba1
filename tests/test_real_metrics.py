"""The sampled time-tick gauges of a real Milvus (milvus_edu.real.metrics), without a server: canned /metrics answers
on a hand-moved clock."""

from __future__ import annotations

import io
import json

import pytest

from milvus_edu.events.schema import validate_kind
from milvus_edu.real import metrics as m

CID = "470716249334611983"


def exposition(rc0: float, rc1: float, rounds: int, proxy: tuple[str, float], qn: float, qn_packs: int) -> str:
    """A /metrics answer as Milvus 2.3.5 writes it (the series the sampler reads, and some it does not)."""
    return "\n".join([
        "# HELP milvus_rootcoord_produce_tt_lag_ms now time minus tt per physical channel",
        "# TYPE milvus_rootcoord_produce_tt_lag_ms gauge",
        f'milvus_rootcoord_produce_tt_lag_ms{{channel_name="by-dev-rootcoord-dml_0"}} {rc0}',
        f'milvus_rootcoord_produce_tt_lag_ms{{channel_name="by-dev-rootcoord-dml_1"}} {rc1}',
        f"milvus_rootcoord_sync_timetick_latency_count {rounds}",
        'milvus_rootcoord_sync_timetick_latency_bucket{le="1"} 3',
        f'milvus_proxy_tt_lag_ms{{channel_name="{proxy[0]}",node_id="1"}} {proxy[1]}',
        f'milvus_querynode_consume_tt_lag_ms{{collection_id="{CID}",msg_type="insert",node_id="1"}} {qn}',
        f'milvus_querynode_consume_msg_count{{collection_id="{CID}",msg_type="insert",node_id="1"}} {qn_packs}',
        "milvus_rootcoord_timestamp 4.707162508484936e+17",
        "go_goroutines 812",
    ]) + "\n"


@pytest.fixture
def fake_server(monkeypatch):
    """Answers the sampler's reads from a list, on a clock the test sets (Unix ms)."""
    state = {"texts": [], "clock_ms": 1_795_640_000_000.0}
    monkeypatch.setattr(m.urllib.request, "urlopen", lambda url, timeout: io.BytesIO(state["texts"].pop(0).encode()))
    monkeypatch.setattr(m.time, "time", lambda: state["clock_ms"] / 1000.0)
    return state


def test_parse_metrics_reads_names_labels_and_values():
    got = m.parse_metrics(exposition(151, 152, 19, ("default", 26), 176, 17))
    assert got[(m.ROOTCOORD_TT, (("channel_name", "by-dev-rootcoord-dml_0"),))] == 151.0
    assert got[(m.PROXY_TT, (("channel_name", "default"), ("node_id", "1")))] == 26.0
    assert got[(m.ROOTCOORD_ROUNDS, ())] == 19.0
    assert not any(name in ("go_goroutines", "milvus_rootcoord_timestamp") for name, _ in got)


def test_sampler_keeps_changes_and_repeats_its_counters_show(fake_server):
    s = m.MetricsSampler("http://127.0.0.1:9091/metrics")
    answers = [exposition(151, 152, 19, ("default", 26), 176, 17),  # baseline: set before the run
               exposition(175, 152, 20, ("default", 26), 176, 17),  # a round: dml_0 ticked, dml_1 kept its value
               exposition(175, 152, 20, ("default", 125), 176, 17),  # only the proxy reported
               exposition(175, 152, 21, ("default", 125), 176, 19)]  # a round; the QueryNode took 2 packs, same lag
    for k, text in enumerate(answers):
        fake_server["texts"].append(text)
        fake_server["clock_ms"] += 30.0 if k < 3 else 2000.0  # the last round comes after LIVE_MS
        s.sample()
    seen = [(c.metric, c.labels.get("channel_name"), c.value, c.count, c.repeat) for c in s.changes]
    assert seen == [(m.ROOTCOORD_TT, "by-dev-rootcoord-dml_0", 175.0, 1, False),
                    (m.PROXY_TT, "default", 125.0, None, False),
                    (m.QUERYNODE_TT, None, 176.0, 2, True)]
    # dml_1 did not move in the first round: it is not live, so the round is not taken as its tick; after LIVE_MS
    # without a change neither is dml_0 (a pchannel no longer in use keeps its last value)
    assert s.summary()["samples"] == 4 and s.summary()["gap_max_ms"] == 2000.0 and s.errors == 0


def test_sampler_reads_only_a_local_server():
    with pytest.raises(ValueError, match="local server only"):
        m.MetricsSampler("http://example.com:9091/metrics")


def test_metric_events_are_the_models_kinds_with_their_origin():
    clock = 1_795_640_000_000.0
    changes = [m.Change(m.ROOTCOORD_TT, {"channel_name": "dml_0"}, 175.0, clock + 30, clock, 1),
               m.Change(m.PROXY_TT, {"channel_name": "default", "node_id": "1"}, 26.0, clock + 60, clock + 30),
               m.Change(m.PROXY_TT, {"channel_name": "dml_1", "node_id": "1"}, 80.0, clock + 90, clock + 60),
               m.Change(m.QUERYNODE_TT, {"collection_id": CID}, 176.0, clock + 120, clock + 90, 2, True)]
    watch = [{"kind": "querynode.watch", "vchannel": v, "detail": json.dumps({"collection_id": int(CID)})}
             for v in ("dml_0_xv0", "dml_1_xv1")]
    rows = m.metric_events(changes, run_id="r", t0_wall_ms=clock, server_rows=watch)
    assert [r["kind"] for r in rows] == ["mq.produce", "proxy.report", "proxy.report", "querynode.pack",
                                         "querynode.tsafe", "querynode.pack", "querynode.tsafe"]
    assert [r["seq"] for r in rows] == list(range(7))
    tick = rows[0]
    assert tick["t_ms"] == 30.0 and tick["channel"] == "dml_0" and tick["msg_type"] == "TimeTick"
    assert tick["tick_ts"] == tick["ts"] == (int(clock) + 30 - 175) << 18
    assert json.loads(tick["detail"])["metric"] == m.ROOTCOORD_TT and "sampled gauge" in json.loads(tick["detail"])["from"]
    assert rows[1]["ts"] == (int(clock) + 60 - 26) << 18  # "default": every pchannel's value is the default
    assert rows[2]["ts"] is None and json.loads(rows[2]["detail"])["channels"] == {"dml_1": (int(clock) + 90 - 80) << 18}
    assert {r["vchannel"] for r in rows if r["kind"] == "querynode.tsafe"} == {"dml_0_xv0", "dml_1_xv1"}
    assert rows[4]["detail"] is None and json.loads(rows[3]["detail"])["repeat"] is True
    for r in rows:
        validate_kind(r["kind"], {k: v for k, v in r.items() if v is not None})


def _read(vchannel: str, clock: float, guarantee_ms: int, request: int, logical: int = 0) -> dict:
    """A delegator's ``query segments...`` line as the log parser gives it: served at ``clock`` (Unix ms)."""
    return {"kind": "querynode.read", "vchannel": vchannel, "request": request, "error": None,
            "guarantee_ts": (guarantee_ms << 18) | logical, "detail": json.dumps({"clock_ms": int(clock)})}


def _two_shards():
    """A sampling clock (Unix ms), the collection's two vchannels, the QueryNode's watch of each (which tells
    metric_events the collection's vchannels) and the QueryNode gauge's labels."""
    vchs = ("dml_0_xv0", "dml_1_xv1")
    watch = [{"kind": "querynode.watch", "vchannel": v, "detail": json.dumps({"collection_id": int(CID)})}
             for v in vchs]
    return 1_795_640_000_000.0, vchs, watch, {"collection_id": CID}


def test_a_sampled_pack_an_answered_read_needed_is_placed_at_that_read():
    """The QueryNode's gauge is set when a pack enters the pipeline; its deleteNode sets tsafe and the delegator
    serves the reads waiting for it before the next sample: the read proves the pack was in by then."""
    clock, vchs, watch, qn = _two_shards()
    # pack ends: 200 ms apart, each sampled 20 ms after it came in 190 ms old; a read with guarantee +100 ms
    # waited for the second pack, and was served 10 ms before the sample that saw it (on vch 0 only)
    changes = [m.Change(m.QUERYNODE_TT, qn, 190.0, clock + 210, clock + 180, 2),
               m.Change(m.QUERYNODE_TT, qn, 190.0, clock + 410, clock + 380, 2, True)]
    rows = m.metric_events(changes, run_id="r", t0_wall_ms=clock,
                           server_rows=watch + [_read(vchs[0], clock + 400, int(clock) + 100, 7)])
    tsafe = [(r["vchannel"], r["t_ms"], r["ts"]) for r in rows if r["kind"] == "querynode.tsafe"]
    first = (int(clock) + 210 - 190) << 18
    assert tsafe == [(vchs[0], 210.0, first), (vchs[1], 210.0, first),
                     (vchs[0], 400.0, (int(clock) + 400 - 190) << 18),  # at the read: moved 10 ms along the lag
                     (vchs[1], 410.0, (int(clock) + 410 - 190) << 18)]  # no read of its own: at the sample
    placed = json.loads(next(r for r in rows if r["kind"] == "querynode.pack" and r["t_ms"] == 400.0)["detail"])
    assert placed["placed_at_read"]["requests"] == [7] and placed["placed_at_read"]["sampled_t_ms"] == 410.0
    assert placed["sampled_clock_ms"] == int(clock) + 410 and "proves" in placed["from"]


@pytest.mark.parametrize("case", ["before the sample before", "tsafe was there", "two packs", "pack too old"])
def test_a_sampled_pack_stays_at_its_sample_when_no_read_proves_it_was_in_earlier(case):
    clock = 1_795_640_000_000.0
    watch = [{"kind": "querynode.watch", "vchannel": "dml_0_xv0", "detail": json.dumps({"collection_id": int(CID)})}]
    qn = {"collection_id": CID}
    served, guarantee, count = clock + 400, int(clock) + 100, 1
    if case == "before the sample before":  # the read was served before the sample that had not seen the pack
        served = clock + 370
    elif case == "tsafe was there":  # the pack before was enough for it
        guarantee = int(clock) + 10
    elif case == "two packs":  # two packs came in since: the read may have been served by the first
        count = 2
    else:  # the sampled end is below the guarantee: not the pack that served the read
        guarantee = int(clock) + 300
    changes = [m.Change(m.QUERYNODE_TT, qn, 190.0, clock + 210, clock + 180, 1),
               m.Change(m.QUERYNODE_TT, qn, 190.0, clock + 410, clock + 380, count, True)]
    rows = m.metric_events(changes, run_id="r", t0_wall_ms=clock,
                           server_rows=watch + [_read("dml_0_xv0", served, guarantee, 7)])
    assert [r["t_ms"] for r in rows if r["kind"] == "querynode.tsafe"] == [210.0, 410.0]
    assert not any("placed_at_read" in json.loads(r["detail"]) for r in rows if r["kind"] == "querynode.pack")


def test_a_read_that_proves_more_than_the_gauges_ms_keeps_its_guarantee_as_the_bound():
    """The gauge keeps milliseconds: a pack ending in the guarantee's own ms is drawn at the guarantee."""
    clock = 1_795_640_000_000.0
    watch = [{"kind": "querynode.watch", "vchannel": "dml_0_xv0", "detail": json.dumps({"collection_id": int(CID)})}]
    qn = {"collection_id": CID}
    changes = [m.Change(m.QUERYNODE_TT, qn, 190.0, clock + 210, clock + 180, 1),
               m.Change(m.QUERYNODE_TT, qn, 190.0, clock + 410, clock + 380, 1, True)]
    read = _read("dml_0_xv0", clock + 400, int(clock) + 210, 7, logical=5)
    rows = m.metric_events(changes, run_id="r", t0_wall_ms=clock, server_rows=watch + [read])
    assert [r["ts"] for r in rows if r["kind"] == "querynode.tsafe"][-1] == read["guarantee_ts"]


def test_a_pack_is_placed_at_its_read_when_the_other_vchannel_set_the_gauge_again_after_it():
    """The gauge is per collection: vch 1's pack lets a read through at +395 ms, then vch 0's pack of the same round
    sets the gauge again at +405 ms, 10 ms older. The read's moment minus that lag is below the read's guarantee,
    yet the sample allows an end up to its own clock minus the lag: the pack is placed at the read, at the
    guarantee the read proves (it was drawn a tick below the answer)."""
    clock, vchs, watch, qn = _two_shards()
    changes = [m.Change(m.QUERYNODE_TT, qn, 190.0, clock + 210, clock + 180, 2),
               m.Change(m.QUERYNODE_TT, qn, 195.0, clock + 410, clock + 380, 2)]
    read = _read(vchs[1], clock + 395, int(clock) + 206, 3)
    rows = m.metric_events(changes, run_id="r", t0_wall_ms=clock, server_rows=watch + [read])
    tsafe = [(r["vchannel"], r["t_ms"], r["ts"]) for r in rows if r["kind"] == "querynode.tsafe"]
    assert (vchs[1], 395.0, read["guarantee_ts"]) in tsafe
    assert (vchs[0], 410.0, (int(clock) + 410 - 195) << 18) in tsafe  # no read of its own: at the sample
