""""Why?" as a causal chain: each read that waited is explained back to its root cause, every link an event of the run.

The reads asked about are found in the log (the first Strong read that timed out, the first read through the
proxy whose clock runs ahead), and every number the chain states is checked against the events it points to.
"""

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import milvus_edu
from milvus_edu.explain import Chain, Link, WhyError, why
from milvus_edu.narrate import detail_dict, plural
from milvus_edu.registry import Mechanism, asker, explainer, register
from run_support import run_main


@pytest.fixture(scope="module")
def stall():
    return milvus_edu.simulate("tsafe-stall-proxy-restart", seed=1).events


@pytest.fixture(scope="module")
def skew():
    return milvus_edu.simulate("clock-skew-bounded", seed=1).events


def timed_out_strong_reads(events):
    """Every Strong read a shard refused with a timeout, in order."""
    rows = events[(events["kind"] == "querynode.read") & (events["level"] == "Strong")
                  & events["error"].fillna("").str.contains("deadline")]
    return sorted({int(r) for r in rows["request"]})


def event(events, seq):
    return events[events["seq"] == seq].iloc[0]


def kinds_of(events, chain):
    return [str(event(events, link.seq)["kind"]) for link in chain.links]


def assert_links_are_their_events(events, chain):
    """Each link names the event it stands on: its seq exists, with the link's time and component."""
    for link in chain.links:
        row = event(events, link.seq)
        assert link.t_ms == pytest.approx(float(row["t_ms"])) and link.node == str(row["node"])


def test_the_first_strong_read_that_timed_out_names_the_stopped_ticks_and_the_expired_lease(stall):
    read = timed_out_strong_reads(stall)[0]
    chain = why(stall, read=read)
    assert_links_are_their_events(stall, chain)
    assert kinds_of(stall, chain) == ["querynode.read", "querynode.wait", "mq.produce", "rootcoord.timetick_update",
                                      "session.lost", "fault.kill"]
    wait = event(stall, chain.links[1].seq)
    pchannel = str(event(stall, chain.links[2].seq)["channel"])
    assert wait["request"] == read and str(wait["vchannel"]).startswith(pchannel)
    # The stopped ticks: the pchannel and the time its next tick came, as the log has them.
    later = stall[(stall["kind"] == "mq.produce") & (stall["msg_type"] == "TimeTick") & (stall["channel"] == pchannel)
                  & (stall["seq"] > chain.links[2].seq)].iloc[0]
    assert "stood still" in chain.links[2].text and pchannel in chain.links[2].text
    assert f"{later['t_ms'] / 1000:.3f} s (event {int(later['seq']) + 1:,})" in chain.links[2].text
    assert "waiting for a report from proxy-2" in chain.links[3].text
    # proxy-2's session: the key etcd dropped, the time its lease expired, the kill that started it.
    lost, kill = event(stall, chain.links[4].seq), event(stall, chain.links[5].seq)
    key = json.loads(lost["detail"])["key"]
    assert key in chain.links[4].text and f"lease expired at {lost['t_ms'] / 1000:.3f} s" in chain.links[4].text
    assert str(json.loads(kill["detail"])["server_id"]) in key
    assert kill["node"] == "proxy-2" and f"killed at {kill['t_ms'] / 1000:.3f} s" in chain.root.text
    text = str(chain)
    assert text.startswith(f"Read {read} (Strong") and text.count(", because ") == len(chain.links) - 1


def test_a_bounded_read_through_the_proxy_whose_clock_runs_ahead_names_its_clock_offset(skew):
    ahead = json.loads(skew[skew["kind"] == "run.start"].iloc[0]["detail"])["options"]["ahead_ms"]
    through = skew[(skew["kind"] == "proxy.read") & (skew["node"] == "proxy-2")]["request"]
    waited = skew[(skew["kind"] == "querynode.wait") & skew["request"].isin(through)]
    chain = why(skew, read=int(waited.iloc[0]["request"]))
    assert_links_are_their_events(skew, chain)
    assert kinds_of(skew, chain)[-1] == "proxy.read" and chain.root.node == "proxy-2"
    assert f"proxy-2's clock runs {ahead:,.0f} ms ahead" in chain.root.text


@pytest.mark.parametrize("ahead_ms", [6500.0, 9000.0])
def test_the_clock_offset_named_is_the_runs_own(ahead_ms):
    events = milvus_edu.simulate("clock-skew-bounded", seed=3, duration_s=8.0, options={"ahead_ms": ahead_ms}).events
    waited = events[events["kind"] == "querynode.wait"]
    assert len(waited)
    for read in sorted({int(r) for r in waited["request"]}):
        chain = why(events, read=read)
        assert f"proxy-2's clock runs {ahead_ms:,.0f} ms ahead" in chain.root.text
        assert f"set the guarantee {ahead_ms - 5000:,.0f} ms in the future" in chain.root.text


def test_reads_through_proxies_with_true_clocks_are_not_blamed_on_a_clock(stall):
    waited = sorted({int(r) for r in stall[stall["kind"] == "querynode.wait"]["request"]})
    levels = set(stall[stall["kind"] == "querynode.wait"]["level"])
    assert len(waited) > 5 and {"Strong", "Bounded"} <= levels
    for read in waited:
        assert not any("clock runs" in link.text for link in why(stall, read=read).links)


def test_a_customized_guarantee_in_the_future_is_the_clients_not_a_clock():
    events = milvus_edu.simulate("lag-too-large", seed=1).events
    read = int(events[(events["kind"] == "querynode.wait") & (events["level"] == "Customized")].iloc[0]["request"])
    chain = why(events, read=read)
    assert_links_are_their_events(events, chain)
    assert "the client asked for guarantee" in chain.root.text and "clock runs" not in str(chain)


def test_a_paused_proxy_is_blamed_at_its_pause_not_its_resume():
    from milvus_edu.labs.incidents import clock_behind_steps

    run = milvus_edu.simulate("workload", seed=1, duration_s=16, options={"steps": clock_behind_steps(), "proxies": 3},
                              interventions=[milvus_edu.Pause("proxy-3", 2500, duration_ms=11000)])
    events = run.events
    stale = int(events[(events["kind"] == "client.read") & (events["t_ms"] > 9000)]["request"].iloc[0])
    chain = why(events, read=stale)
    assert_links_are_their_events(events, chain)
    assert kinds_of(events, chain)[-1] == "fault.pause"
    assert "proxy-3 was paused" in chain.root.text and "for 11.000 s" in chain.root.text
    assert "fault.resume" not in str(chain)


def test_an_ordinary_strong_wait_ends_at_the_tick_that_released_it():
    events = milvus_edu.simulate("seed-example", seed=1).events
    waits = events[(events["kind"] == "querynode.wait") & (events["level"] == "Strong")]
    read = int(waits.iloc[0]["request"])
    chain = why(events, read=read)
    assert_links_are_their_events(events, chain)
    assert kinds_of(events, chain) == ["querynode.read", "querynode.wait", "querynode.tsafe"]
    released = event(events, chain.root.seq)
    assert int(released["ts"]) >= int(waits.iloc[0]["guarantee_ts"]) and "ordinary wait" in chain.root.text


def test_a_chain_renders_effect_first_with_every_event_numbered_from_one():
    chain = Chain("Why did read 1 wait?", (Link(4, 1500.0, "querynode-1", "read 1 waited"),
                                          Link(0, 0.0, "proxy-2", "proxy-2's clock runs ahead")))
    assert str(chain) == "Read 1 waited, because proxy-2's clock runs ahead."
    assert chain.lines() == ["Why did read 1 wait?", "  event 5 (1.500 s, querynode-1): read 1 waited",
                             "  because event 1 (0.000 s, proxy-2): proxy-2's clock runs ahead"]
    assert chain.root.node == "proxy-2"


@pytest.mark.parametrize("read,needle", [(999, "there is no read 999"), (None, "say what to explain"),
                                         ("3", "whole number")])
def test_bad_questions_are_one_line_errors(stall, read, needle):
    with pytest.raises(WhyError, match=needle) as info:
        why(stall, read=read)
    assert "\n" not in str(info.value)


def test_a_stale_read_is_traced_to_the_stopped_ticks(stall):
    kill = stall[stall["kind"] == "fault.kill"].iloc[0]
    eventually = stall[(stall["kind"] == "querynode.read") & (stall["level"] == "Eventually")
                       & (stall["t_ms"] > float(kill["t_ms"]) + 1000)].iloc[0]
    chain = why(stall, read=int(eventually["request"]))
    assert chain.question == f"Why did read {int(eventually['request'])} read stale data?"
    assert_links_are_their_events(stall, chain)
    assert kinds_of(stall, chain)[1:] == ["mq.produce", "rootcoord.timetick_update", "session.lost", "fault.kill"]
    # The data was as old as the tsafe it read at: true time minus the tsafe's physical part.
    behind = milvus_edu.events.SIM_EPOCH_MS + float(chain.links[0].t_ms) - (int(event(stall, chain.links[0].seq)["ts"]) >> 18)
    assert f"{behind:,.0f} ms behind the true time" in chain.links[0].text


def test_a_read_that_neither_waited_nor_was_stale_is_refused_naming_reads_that_waited(stall):
    waited = set(stall[stall["kind"] == "querynode.wait"]["request"].dropna().astype(int))
    quick = next(int(r) for r in stall[stall["kind"] == "client.read_start"]["request"] if int(r) not in waited)
    with pytest.raises(WhyError, match=f"read {quick} neither waited nor read stale data") as info:
        why(stall, read=quick)
    assert f"reads that waited in this run: {min(waited)}, " in str(info.value)


def test_a_read_the_proxy_failed_is_refused_without_claiming_a_shard_answered():
    """ddl-recreate-under-load: reads sent while C0 is dropped fail at the proxy (collection not found) and reach no
    delegator; the refusal said every shard had answered at once."""
    events = milvus_edu.simulate("ddl-recreate-under-load", seed=1).events
    failed = events[(events["kind"] == "client.read") & events["error"].notna()]
    shard = set(events.loc[events["kind"] == "querynode.read", "request"].dropna().astype(int))
    request = next(int(r) for r in failed["request"] if int(r) not in shard)
    with pytest.raises(WhyError) as error:
        why(events, read=request)
    message = str(error.value)
    error_text = str(failed[failed["request"] == request]["error"].iloc[0])
    assert "\n" not in message and "every shard answered" not in message
    assert f"it never reached a shard (it failed with {error_text})" in message


def test_a_question_kind_has_one_answer():
    assert explainer("read") is not None and explainer("tick-stopped") is not None
    with pytest.raises(ValueError, match="already answered"):
        register(Mechanism(name="why-clash", title="a second answer to the same question",
                           explainers={"read": lambda events, subject: None}))


def test_an_event_kind_asks_one_question_and_events_of_a_read_ask_about_that_read(stall):
    assert asker("client.flush") is not None and asker("querynode.wait") is not None and asker("tso.alloc") is None
    with pytest.raises(ValueError, match="already narrated, marked or asked about"):
        register(Mechanism(name="ask-clash", title="a second question for the same kind",
                           asks={"client.read": lambda events, i: None}))
    for kind in ("client.read_start", "proxy.read", "querynode.read", "client.read"):
        i = int(np.flatnonzero(stall["kind"].to_numpy() == kind)[0])
        assert asker(kind)(stall, i) == {"read": int(stall["request"].iloc[i])}


@pytest.fixture(scope="module")
def short_stall(tmp_path_factory):
    """A 15 s run folder: the first Strong timeouts are in it, the lease's expiry (60 s) is not."""
    out = tmp_path_factory.mktemp("why") / "run"
    milvus_edu.simulate("tsafe-stall-proxy-restart", seed=1, duration_s=15.0, out_dir=out, keep_events=False)
    return out


def test_the_cli_prints_the_chain_with_each_event(short_stall, capsys):
    events = milvus_edu.load_run(short_stall)
    read = timed_out_strong_reads(events)[0]
    code, out, err = run_main(capsys, "why", str(short_stall), "--read", str(read))
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0] == f"Why did read {read} wait?" and len(lines) == 7
    assert all(line.lstrip().startswith(("event ", "because event ")) for line in lines[1:])
    # The run ends before the dead session's lease expires: the chain says so instead of inventing an expiry.
    assert "no other came before the run ended" in out and "still registered when the run ended at 15.000 s" in out


@pytest.mark.parametrize("args,needle", [
    (["--read", "999"], "there is no read 999"),
    (["--read", "1"], "neither waited nor read stale data"),
    (["--read", "x"], "invalid int value"),
    ([], "--read"),
])
def test_cli_mistakes_are_one_line_exit_2_and_write_nothing(short_stall, capsys, args, needle):
    before = sorted(p.name for p in short_stall.iterdir())
    code, out, err = run_main(capsys, "why", str(short_stall), *args)
    assert code == 2 and needle in err and out == ""
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert sorted(p.name for p in short_stall.iterdir()) == before


def test_cli_on_a_folder_that_is_not_a_run_is_one_line_exit_2(tmp_path, capsys):
    code, out, err = run_main(capsys, "why", str(tmp_path), "--read", "1")
    assert code == 2 and "no events.parquet or events.jsonl" in err and len(err.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


@settings(max_examples=4, deadline=None)
@given(seed=st.integers(1, 10_000), kill_at_s=st.sampled_from([3.0, 4.5, 6.0]))
def test_every_timed_out_strong_read_is_traced_to_the_stopped_ticks_and_the_kill(seed, kill_at_s):
    events = milvus_edu.simulate("tsafe-stall-proxy-restart", seed=seed, duration_s=kill_at_s + 13.0,
                                 options={"kill_at_s": kill_at_s}).events
    kill = events[events["kind"] == "fault.kill"].iloc[0]
    reads = timed_out_strong_reads(events)
    assert reads
    for read in reads:
        chain = why(events, read=read)
        kinds = kinds_of(events, chain)
        assert "mq.produce" in kinds and "stood still" in chain.links[kinds.index("mq.produce")].text
        assert chain.root.seq == int(kill["seq"]) and f"killed at {kill_at_s:.3f} s" in chain.root.text


def test_a_read_failed_by_a_dropped_collection_is_traced_to_the_release():
    events = milvus_edu.simulate("ddl-recreate-under-load", seed=1, duration_s=4.0).events
    failed = events[(events["kind"] == "querynode.read") & events["error"].fillna("").str.contains("delegator closed")]
    assert len(failed)
    for read in sorted({int(r) for r in failed["request"]}):
        chain = why(events, read=read)
        assert_links_are_their_events(events, chain)
        assert kinds_of(events, chain)[-1] == "querynode.release"
        assert event(events, chain.root.seq)["vchannel"] == event(events, chain.links[1].seq)["vchannel"]


# --- why did a flush take as long as it did? why did a checker report a violation? -------------------------------

def client_flushes(events):
    """The clients' flushes in issue order, each with the client.flush that said it was flushed (same client, ts)."""
    rows = events[events["kind"] == "client.flush"]
    flushed = [json.loads(d).get("flushed") is True for d in rows["detail"]]
    starts, dones = rows[[not f for f in flushed]], rows[flushed]
    return [(s, dones[(dones["node"] == s["node"]) & (dones["ts"] == s["ts"]) & (dones["seq"] > s["seq"])].iloc[0])
            for _, s in starts.iterrows()]


def assert_flush_chain_walks_back_from_getflushstate(events, chain, start, done):
    """The chain's first link is the client's "flushed", its last-held condition is a segment reaching Flushing or
    Flushed or a checkpoint stored at flushTs, and the allocation of flushTs is the DataCoord Flush of that ts."""
    assert_links_are_their_events(events, chain)
    kinds = kinds_of(events, chain)
    assert chain.links[0].seq == int(done["seq"]) and kinds[0] == "client.flush"
    alloc = allocation(events, start)
    took = float(done["t_ms"]) - float(alloc["t_ms"])
    assert chain.question.endswith(f"take {took:,.0f} ms?") and f"took {took:,.0f} ms" in chain.links[0].text
    gate = event(events, chain.links[1].seq)
    assert gate["kind"] in ("datacoord.save_binlog_paths", "datacoord.segment_state", "datacoord.channel_cp")
    assert int(start["seq"]) < int(gate["seq"]) < int(done["seq"])
    if gate["kind"] == "datacoord.channel_cp":
        assert int(gate["ts"]) >= int(start["ts"])
    else:
        assert json.loads(gate["detail"])["state"] in ("Flushing", "Flushed")
        assert int(gate["segment"]) in json.loads(start["detail"])["segments"]
    sealed = events[(events["kind"] == "datacoord.flush") & (events["ts"] == start["ts"])].iloc[-1]
    for row, words in ((alloc, "allocated flushTs"), (sealed, "DataCoord's Flush sealed segments")):
        said = [link.seq for link in chain.links if link.text.startswith(words) or f" {words}" in link.text]
        if int(row["seq"]) < chain.root.seq:
            # where the flush began, before a root cause found later, is a clause of the root: a link would read
            # "because <where it began>, because <a later event>"
            assert said == [chain.root.seq] and f"(event {int(row['seq']) + 1:,})" in chain.root.text
        else:
            assert said == [int(row["seq"])]


def allocation(events, start):
    """The TSO allocation of a flush's flushTs: where the flush began (the client.flush row comes when Flush returns)."""
    return events[(events["kind"] == "rootcoord.alloc_timestamp") & (events["ts"] == start["ts"])].iloc[0]


@pytest.fixture(scope="module")
def basics():
    return milvus_edu.simulate("flush-basics", seed=1).events


def test_a_flush_on_a_healthy_cluster_waits_for_datacoord_to_let_the_sealed_segment_go(basics):
    (start, done), = client_flushes(basics)
    chain = why(basics, flush=1)
    assert_flush_chain_walks_back_from_getflushstate(basics, chain, start, done)
    root = event(basics, chain.root.seq)
    # DataCoord asks the DataNode to flush a sealed segment on the first of its time ticks (every 500 ms) past the
    # expiry of the segment's last allocation (flushPolicyL1): not "the time tick came only here"
    assert root["kind"] == "datacoord.flush_segments" and "flushPolicyL1" in chain.root.text
    assert "dataCoord.segment.assignmentExpiration" in chain.root.text
    assert f"carried {milvus_edu.narrate.ts_text(int(root['ts']))}" in chain.root.text
    assert f"{float(root['t_ms']) - float(allocation(basics, start)['t_ms']):,.0f} ms into the flush" in chain.root.text
    assert not any(word in str(chain) for word in ("crashed", "failed", "slow"))


def test_the_datanode_ticks_a_flush_waits_through_came_every_half_second_before_datacoord_let_the_segment_go(
        monkeypatch):
    """The chain's rule checked on DataCoord itself: the segment was not flushable on the DataNode's earlier time
    ticks, because they had not passed its last allocation's expiry, so the wait is that expiry, not the tick."""
    from milvus_edu.datacoord.segment_manager import SegmentManager

    seen = []
    flushable = SegmentManager.get_flushable_segments

    def spy(self, channel, ts, now_ns):
        got = flushable(self, channel, ts, now_ns)
        seen.extend((now_ns, ts, segment, self.last_expire_time(segment), segment in got)
                    for segment in sorted(self._sealed.get(channel, ())))
        return got

    monkeypatch.setattr(SegmentManager, "get_flushable_segments", spy)
    events = milvus_edu.simulate("flush-manual", seed=1, duration_s=16).events
    root = event(events, why(events, flush=1).root.seq)
    segment = json.loads(root["detail"])["segments"][0]
    mine = [s for s in seen if s[2] == segment]
    waited = [s for s in mine if not s[4]]
    assert len(waited) >= 3 and all(ts < expire for _, ts, _, expire, _ in waited)
    assert next(s for s in mine if s[4])[1] == int(root["ts"]) >= mine[0][3]


def test_the_flush_rule_gives_the_datanode_tick_as_a_default_not_as_this_runs_interval():
    """The chain cannot read the run's parameters: with dataNode.timetick.interval at 1.5 s it said '500 ms'."""
    events = milvus_edu.simulate("flush-manual", seed=1, duration_s=18,
                                 params={"datanode.timetick_interval_ns": 1_500_000_000}).events
    text = why(events, flush=1).root.text
    assert "dataNode.timetick.interval, 500 ms by default" in text
    assert "dataNode.timetick.interval, 500 ms)" not in text


@pytest.fixture(scope="module")
def lost_sync():
    """checkpoint-during-sync with the older checkpoint: the crash loses syncs the checkpoint already passed."""
    return milvus_edu.simulate("checkpoint-during-sync", seed=1,
                               switches=["checkpoint_ignores_syncing_segments"]).events


def test_a_flush_that_never_finished_is_not_called_an_ordinary_wait(lost_sync):
    """Flush 2 began after the crash and its recovery, so no crash explains it; its sealed segments 10000 and 10001
    never became Flushing because their only syncs were lost: the chain names that, not "the ordinary round"."""
    events = lost_sync
    chain = why(events, flush=2)
    assert_links_are_their_events(events, chain)
    assert "had not finished when the run ended" in chain.links[0].text
    assert "ordinary round" not in str(chain) and "nothing on the way" not in str(chain)
    cut = event(events, chain.root.seq)
    assert cut["kind"] == "datanode.sync" and f"segment {int(cut['segment'])} had not become Flushing" in chain.root.text
    saved = events[(events["kind"] == "datacoord.save_binlog_paths") & (events["segment"] == cut["segment"])
                   & events["error"].isna()]
    assert not len(saved) and "NumOfRows != 0" in chain.root.text
    # the crash lost the sync, and the channel was watched again from a checkpoint past its oldest row
    kill = events[events["kind"] == "fault.kill"].iloc[0]
    watch = events[(events["kind"] == "datanode.watch") & (events["vchannel"] == cut["vchannel"])
                   & (events["seq"] > kill["seq"])].iloc[0]
    assert int(cut["seq"]) < int(kill["seq"]) and int(watch["ts"]) > int(cut["begin_ts"])
    assert f"event {int(kill['seq']) + 1:,}," in chain.root.text and "never read that sync's rows again" in chain.root.text


def test_a_flush_cut_short_by_the_runs_end_is_not_called_stuck_for_good():
    """flush-manual cut at 12.2 s: the flush began 198 ms before the end, its segments' syncs were not stored yet;
    the chain says what had not happened yet, not that it never will."""
    events = milvus_edu.simulate("flush-manual", seed=1, duration_s=12.2).events
    chain = why(events, flush=1)
    assert_links_are_their_events(events, chain)
    assert "had not become Flushing or Flushed when the run ended" in chain.root.text
    assert not any(word in str(chain) for word in ("never reached", "never read", "ordinary round", "crashed"))


def test_a_crash_whose_checkpoint_passed_lost_syncs_does_not_claim_the_replay_recovered_them(lost_sync):
    events = lost_sync
    chain = why(events, flush=1)
    kill = events[events["kind"] == "fault.kill"].iloc[0]
    assert chain.root.seq == int(kill["seq"])
    assert "replaying the channel from there" in chain.root.text and "what was lost" not in chain.root.text
    assert "segment 10000 Flushing or Flushed, segment 10001 Flushing or Flushed never held" in str(chain)


def test_a_flush_on_a_slow_object_store_names_the_slow_writes():
    events = milvus_edu.simulate("flush-ts-slow-store", seed=1).events
    start, done = client_flushes(events)[0]
    chain = why(events, flush=1)
    assert_flush_chain_walks_back_from_getflushstate(events, chain, start, done)
    cut = event(events, chain.root.seq)
    assert cut["kind"] == "datanode.sync" and "the object store is slow" in chain.root.text
    saved = events[(events["kind"] == "datacoord.save_binlog_paths") & (events["segment"] == cut["segment"])
                   & (events["seq"] > cut["seq"])].iloc[0]
    assert f"spent {float(saved['t_ms']) - float(cut['t_ms']):,.0f} ms writing its binlogs" in chain.root.text


@pytest.mark.slow
def test_a_flush_across_a_datanode_crash_names_the_crash_and_the_recovery():
    events = milvus_edu.simulate("checkpoint-during-sync", seed=1).events
    start, done = client_flushes(events)[0]
    kill = events[(events["kind"] == "fault.kill") & (events["node"] == "datanode-1")].iloc[0]
    assert int(start["seq"]) < int(kill["seq"]) < int(done["seq"])
    chain = why(events, flush=1)
    assert_flush_chain_walks_back_from_getflushstate(events, chain, start, done)
    assert chain.root.seq == int(kill["seq"]) and "datanode-1 crashed here" in chain.root.text
    watch = events[(events["kind"] == "datanode.watch") & (events["seq"] > kill["seq"])].iloc[0]
    assert f"(event {int(watch['seq']) + 1:,})" in chain.root.text and str(watch["vchannel"]) in chain.root.text


@pytest.mark.slow
def test_a_flush_sent_to_a_dead_datanode_names_the_crash_before_it_and_the_handover():
    events = milvus_edu.simulate("datanode-takeover", seed=1).events
    start, done = client_flushes(events)[-1]
    kill = events[(events["kind"] == "fault.kill") & (events["node"] == "datanode-1")].iloc[0]
    reassign = events[events["kind"] == "datacoord.reassign"].iloc[0]
    assert float(kill["t_ms"]) < float(allocation(events, start)["t_ms"]) < float(reassign["t_ms"])
    chain = why(events, flush=len(client_flushes(events)))
    assert_flush_chain_walks_back_from_getflushstate(events, chain, start, done)
    assert chain.root.seq == int(kill["seq"]) and "before the flush began" in chain.root.text
    assert f"handed its channels to {reassign['peer']} only at {reassign['t_ms'] / 1000:.3f} s" in chain.root.text


@pytest.mark.slow
@pytest.mark.parametrize("scenario, options, seed", [("flush-stuck-memory-sync", None, 1),
                                                     # no policy chose the segment again: only its deletes show it
                                                     ("flush-stuck-memory-sync", None, 2),
                                                     # the memory check the scenario's description suggests trying
                                                     ("flush-sync-policies", {"memory_mb": 2}, 1)])
def test_a_flush_that_never_finished_names_the_checkpoint_below_flush_ts_and_the_l0_segment_synced_for_good(
        scenario, options, seed):
    events = milvus_edu.simulate(scenario, seed=seed, options=options).events
    assert (events["kind"] == "client.flush").sum() == 1
    start = events[events["kind"] == "client.flush"].iloc[0]
    chain = why(events, flush=1)
    assert_links_are_their_events(events, chain)
    assert "had not finished when the run ended" in chain.links[0].text
    # the vchannel whose checkpoint stayed below flushTs: the last checkpoint its ttNode handed over during the flush,
    # or that it handed none
    vchannel = re.search(r"the checkpoint of (\S+) at flushTs never held", chain.root.text).group(1)
    began = events[(events["kind"] == "rootcoord.alloc_timestamp") & (events["ts"] == start["ts"])].iloc[0]
    handed = events[(events["kind"] == "datanode.checkpoint") & (events["vchannel"] == vchannel)
                    & (events["seq"] > began["seq"])]
    if len(handed):
        last = handed.iloc[-1]
        assert int(last["ts"]) < int(start["ts"])
        assert f"its last, at {last['t_ms'] / 1000:.3f} s (event {int(last['seq']) + 1:,}), was" in chain.root.text
    else:
        assert f"handed the updater no checkpoint of {vchannel} during the flush" in chain.root.text
    # the root is the L0 segment's sync by the memory check (quirk P24), never synced again; what shows its buffer is
    # left: the policies chose it again, or deletes came with no L0 segment of the channel synced after it
    synced = event(events, chain.root.seq)
    assert synced["kind"] == "datanode.sync" and detail_dict(synced["detail"])["level"] == "L0"
    assert synced["vchannel"] == vchannel
    segment = int(synced["segment"])
    before = events[(events["kind"] == "datanode.sync_policy") & (events["seq"] < synced["seq"])]
    chose_it = [detail_dict(d) for d in before["detail"] if segment in detail_dict(d)["segments"]]
    assert chose_it[-1]["reason"] == "oldest buffers"  # the memory check's EvictBuffer
    after = events[events["seq"] > synced["seq"]]
    policies = after[after["kind"] == "datanode.sync_policy"]
    chose = [row for _, row in policies.iterrows() if segment in detail_dict(row["detail"])["segments"]]
    assert not len(after[(after["kind"] == "datanode.sync") & (after["segment"] == segment)])
    l0_after = [row for _, row in after[(after["kind"] == "datanode.sync") & (after["vchannel"] == vchannel)].iterrows()
                if detail_dict(row["detail"])["level"] == "L0"]
    deleted = [row for _, row in after[(after["kind"] == "datanode.buffer") & (after["vchannel"] == vchannel)].iterrows()
               if detail_dict(row["detail"]).get("deletes")]
    assert f"segment {segment}, the L0 segment" in chain.root.text and "quirk P24" in chain.root.text
    assert chose or (deleted and not l0_after)
    if chose:
        assert (f"chose segment {segment} {len(chose):,} time" in chain.root.text and
                f"the first at {chose[0]['t_ms'] / 1000:.3f} s, event {int(chose[0]['seq']) + 1:,}" in chain.root.text)
    if deleted and not l0_after:
        total = sum(int(detail_dict(row["detail"])["deletes"]) for row in deleted)
        assert (f"{total:,} deletes came to {vchannel} after it (the first at {deleted[0]['t_ms'] / 1000:.3f} s, "
                f"event {int(deleted[0]['seq']) + 1:,}) and no L0 segment" in chain.root.text)


def test_a_flush_whose_savebinlogpaths_failed_names_the_failed_rpc():
    events = milvus_edu.simulate("checkpoint-rpc-failures", seed=1).events
    start, done = client_flushes(events)[0]
    chain = why(events, flush=1)
    assert_flush_chain_walks_back_from_getflushstate(events, chain, start, done)
    root = event(events, chain.root.seq)
    assert root["kind"] in ("datacoord.save_binlog_paths", "datanode.cp_rpc") and pd.notna(root["error"])
    assert str(root["error"]) in chain.root.text and int(start["seq"]) < int(root["seq"]) < int(done["seq"])


@pytest.fixture(scope="module")
def lost(tmp_path_factory):
    """checkpoint-rpc-lost with the switch that drops failed checkpoint tasks: its checker reports violations."""
    out = tmp_path_factory.mktemp("why-violation") / "run"
    milvus_edu.simulate("checkpoint-rpc-lost", seed=1, switches=["drop_failed_checkpoint_tasks"], out_dir=out)
    return out


def test_a_violations_chain_is_its_evidence_then_the_checkers_explanation(lost):
    summary = json.loads((lost / "summary.json").read_text())
    violations = summary["checks"]["violations"]
    assert violations
    events = milvus_edu.load_run(lost)
    for number, violation in enumerate(violations, 1):
        chain = why(lost, violation=number)
        assert_links_are_their_events(events, chain)
        evidence = sorted(violation["seqs"])
        assert [link.seq for link in chain.links[:len(evidence)]] == evidence
        assert chain.links[len(evidence)].seq == evidence[-1]
        assert violation["explanation"].rstrip(".") in chain.links[len(evidence)].text
        assert violation["invariant"] in chain.question
        for link in chain.links[:len(evidence)]:
            assert link.text == milvus_edu.narrate.describe(event(events, link.seq).to_dict()).rstrip(".")
        # joined as what they are: evidence in time order ("and"), the verdict ("so"), then causes ("because"); a
        # student read "event 710 ..., because event 1,017 ..." as a cause that came after its effect
        joints = [link.joint for link in chain.links]
        assert joints[1:len(evidence)] == ["and"] * (len(evidence) - 1) and joints[len(evidence)] == "so"
        assert set(joints[len(evidence) + 1:]) <= {"because"}
        lines = chain.lines()
        assert lines[len(evidence) + 1].startswith("  so event ") and all(
            line.startswith("  and event ") for line in lines[2:len(evidence) + 1])


def test_a_violations_evidence_is_narrated_from_the_rows_fields():
    # a pandas row hands over its `count` method for the column of that name: the narration must get the column
    result = milvus_edu.simulate("tso-failover", seed=1, switches=["tso_skip_load_on_init"])
    chain = why(result, violation=1)
    first = chain.links[0]
    count = int(event(result.events, first.seq)["count"])
    assert f"answers client-1: {plural(count, 'timestamp')} starting at" in first.text
    assert all("bound method" not in link.text for link in chain.links)


def test_a_stale_read_violation_follows_the_read_lessons_chain():
    result = milvus_edu.simulate("tsafe-stall-proxy-restart", seed=1, duration_s=15.0,
                                 switches=["skip_wait_tsafe"])
    violations = result.summary["checks"]["violations"]
    assert violations
    followed = 0
    for number, violation in enumerate(violations, 1):
        chain = why(result, violation=number)
        evidence = len(set(violation["seqs"]))
        reads = {int(event(result.events, s)["request"]) for s in violation["seqs"]
                 if pd.notna(event(result.events, s)["request"])}
        if len(chain.links) > evidence + 1:
            followed += 1
            assert any(f"read {r} " in chain.links[evidence + 1].text for r in reads)
    assert followed


def test_violation_numbers_that_do_not_exist_and_runs_without_violations_are_refused(lost):
    count = len(json.loads((lost / "summary.json").read_text())["checks"]["violations"])
    with pytest.raises(WhyError, match=f"there is no violation {count + 1} in this run"):
        why(lost, violation=count + 1)
    clean = milvus_edu.simulate("flush-basics", seed=1, duration_s=3.0)
    with pytest.raises(WhyError, match="this run has no violations"):
        why(clean, violation=1)
    with pytest.raises(WhyError, match="pass the run folder or the run result"):
        why(clean.events, violation=1)
    with pytest.raises(WhyError, match="there is no flush 1 in this run: no client flushed in it"):
        why(clean, flush=1)
    with pytest.raises(WhyError, match="ask one question at a time"):
        why(clean, read=1, flush=1)


@pytest.mark.parametrize("args,needle", [
    (["--flush", "3"], "there is no flush 3 in this run"),
    (["--flush", "0"], "there is no flush 0"),
    (["--violation", "99"], "there is no violation 99 in this run"),
    (["--violation", "1", "--flush", "1"], "not allowed with"),
    (["--flush", "x"], "invalid int value"),
])
def test_cli_flush_and_violation_mistakes_are_one_line_exit_2_and_write_nothing(lost, capsys, args, needle):
    before = sorted(p.name for p in lost.iterdir())
    code, out, err = run_main(capsys, "why", str(lost), *args)
    assert code == 2 and needle in err and out == ""
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert sorted(p.name for p in lost.iterdir()) == before


def test_cli_violation_on_a_run_without_violations_is_one_line_exit_2(tmp_path, capsys):
    out_dir = tmp_path / "clean"
    milvus_edu.simulate("flush-basics", seed=1, duration_s=3.0, out_dir=out_dir)
    before = sorted(p.name for p in out_dir.iterdir())
    code, out, err = run_main(capsys, "why", str(out_dir), "--violation", "1")
    assert code == 2 and "this run has no violations" in err and out == ""
    assert len(err.strip().splitlines()) == 1 and sorted(p.name for p in out_dir.iterdir()) == before


def test_cli_prints_the_flush_and_violation_chains(lost, capsys):
    code, out, err = run_main(capsys, "why", str(lost), "--flush", "1")
    assert code == 0 and err == "" and out.splitlines()[0].startswith("Why did flush 1 take ")
    assert all(line.lstrip().startswith(("event ", "because event ")) for line in out.splitlines()[1:])
    code, out, err = run_main(capsys, "why", str(lost), "--violation", "1")
    assert code == 0 and err == "" and "Why was invariant checkpoint-retried violated (violation 1)?" in out


def test_the_books_page_shows_the_chain_the_command_prints(tmp_path, capsys):
    # book/explain.md shows `milvus-edu why runs/stall --read 6` on tsafe-stall-proxy-restart, seed 1: its text must
    # be what the command prints today
    page = (Path(__file__).resolve().parents[1] / "book" / "explain.md").read_text(encoding="utf-8")
    block = page.split("$ milvus-edu why runs/stall --read 6\n", 1)[1].split("\n```", 1)[0]
    code, _, _ = run_main(capsys, "simulate", "--scenario", "tsafe-stall-proxy-restart", "--out", str(tmp_path / "stall"))
    assert code == 0
    code, out, err = run_main(capsys, "why", str(tmp_path / "stall"), "--read", "6")
    assert code == 0, err
    assert out.rstrip("\n") == block


def test_a_read_refused_for_a_guarantee_past_max_timestamp_lag_is_explained_not_refused():
    """lag-too-large: a Customized guarantee a day ahead is refused at once ('Timestamp lag too large'); why names the
    refusal, the lag and that the client sent the guarantee, each link an event of the read."""
    run = milvus_edu.simulate("lag-too-large", seed=1)
    events = run.events
    refused = events[(events["kind"] == "querynode.read") & events["error"].fillna("").str.startswith("Timestamp lag")]
    request = int(refused.iloc[0]["request"])
    chain = why(run, read=request)
    assert chain.question == f"Why was read {request} refused?"
    assert chain.links[0].seq == int(refused.iloc[0]["seq"]) and "maxTimestampLag" in chain.links[0].text
    assert event(events, chain.root.seq)["kind"] == "client.read_start" and "the client sent" in chain.root.text


def test_a_violations_chain_explains_the_wait_on_the_shard_the_violation_names():
    """Read 1 of insert-delete-reorder waited on both shards (224 ms on dml_0, 222 ms on dml_1); the MVCC violation
    is on dml_1, so the chain follows dml_1's wait, not the longest one (as the lab 8 student pass found)."""
    run = milvus_edu.simulate("insert-delete-reorder", seed=1, switches=["delete_ignores_timestamps"])
    violation = run.violations[0]
    assert violation["invariant"] == "mvcc-exact" and "dml_1_100v1" in violation["explanation"]
    texts = [link.text for link in milvus_edu.why(run, violation=1).links]
    waited = [t for t in texts if t.startswith("read 1 (") and " waited " in t]
    assert waited and all("for vchannel by-dev-rootcoord-dml_1_100v1" in t for t in waited)
    assert not any("by-dev-rootcoord-dml_0_100v0" in t for t in texts)
    # asked about the read alone, why still explains its longest wait
    alone = [link.text for link in milvus_edu.why(run, read=1).links]
    assert any("for vchannel by-dev-rootcoord-dml_0_100v0" in t for t in alone)
