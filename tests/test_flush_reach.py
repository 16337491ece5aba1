"""The flush mechanisms a run with Milvus's defaults never reaches, reached by a scenario or an option: the
stale-buffer and memory sync policies, the checkpoint updater's batches and waves, the flowgraph's drop
mode and graceful close, and the dispatcher's pursuit mode (a DataNode restarted far behind)."""

import json
import warnings

import pytest

import milvus_edu
from milvus_edu.config import DataNodeParams
from milvus_edu.tsoutil import physical_time


def _rows(run, kind):
    ev = run.events
    return ev[ev.kind == kind]


def _details(rows):
    return [json.loads(d) for d in rows.detail]


def test_stale_buffers_sync_after_the_sync_period():
    run = milvus_edu.simulate("flush-sync-policies", seed=1, duration_s=16)
    assert run.summary["checks"]["ok"]
    chosen = _rows(run, "datanode.sync_policy")
    details = _details(chosen)
    assert len(chosen) >= 4 and {d["reason"] for d in details} == {"buffer stale"}
    syncs = _rows(run, "datanode.sync")
    for (_, row), d in zip(chosen.iterrows(), details):
        # the chosen segment's sync follows in the same pack, and its oldest row is older than 5 s (no jitter above 10 %)
        cut = syncs[(syncs.seq > row.seq) & (syncs.vchannel == row.vchannel)].iloc[0]
        assert cut.segment in d["segments"]
        start = json.loads(cut.detail)["start_ts"]
        assert physical_time(row.ts) - physical_time(start) > 5000
    # 20 inserts/s never fill a 16 MiB buffer: with Milvus's 600 s period nothing syncs before the final flush
    quiet = milvus_edu.simulate("flush-sync-policies", seed=1, duration_s=16, options={"sync_period_s": 600.0})
    assert _rows(quiet, "datanode.sync_policy").empty and _rows(quiet, "datanode.sync").empty


def test_a_small_memory_makes_the_memory_check_evict_the_oldest_buffers():
    run = milvus_edu.simulate("flush-sync-policies", seed=1, duration_s=16,
                              options={"sync_period_s": 600.0, "memory_mb": 2.0})
    assert run.summary["checks"]["ok"]
    chosen = _rows(run, "datanode.sync_policy")
    details = _details(chosen)
    assert len(chosen) >= 3 and {d["reason"] for d in details} == {"oldest buffers"}
    assert all(d["buffered_bytes"] >= d["watermark_bytes"] == 1 << 20 for d in details)
    # the memory check runs every dataNode.memory.checkInterval (3 s) of the node's time
    period = DataNodeParams().memory_check_interval_ns / 1e6
    assert all(abs(t / period - round(t / period)) < 0.1 for t in chosen.t_ms - chosen.t_ms.iloc[0])


@pytest.mark.slow
def test_many_vchannels_go_in_rpcs_of_128_sent_in_waves():
    run = milvus_edu.simulate("checkpoint-many-vchannels", seed=1, duration_s=12)
    assert run.summary["checks"]["ok"]
    first = _rows(run, "datanode.cp_rpc")
    first = first[first.t_ms < 11_000]
    assert sorted(first["count"]) == [44, 128, 128]
    assert len({d["sent_ms"] for d in _details(first)}) == 1  # one wave: 3 RPCs <= 10 in parallel
    waves = milvus_edu.simulate("checkpoint-many-vchannels", seed=1, duration_s=12,
                                params={"datanode.update_channel_checkpoint_max_parallel": 2})
    rpcs = _rows(waves, "datanode.cp_rpc")
    rpcs = rpcs[rpcs.t_ms < 11_000]
    sent = [d["sent_ms"] for d in _details(rpcs)]
    assert sorted(rpcs["count"]) == [44, 128, 128] and len(set(sent)) == 2
    # the second wave leaves once the first has answered
    assert max(sent) >= max(t for t, s in zip(rpcs.t_ms, sent) if s == min(sent))


@pytest.mark.slow
def test_a_dropped_collection_syncs_as_drops_and_never_submits_its_checkpoint_again():
    run = milvus_edu.simulate("flush-drop-collection", seed=1)
    assert run.summary["checks"]["ok"]
    drops = _rows(run, "datanode.drop")
    assert len(drops) == 2 and drops.t_ms.min() > 20_000
    syncs = _rows(run, "datanode.sync")
    after = syncs[syncs.seq > drops.seq.min()]
    assert len(after) >= 2 and all(d["drop"] for d in _details(after))
    assert "Dropped" in {d["state"] for d in _details(_rows(run, "datacoord.save_binlog_paths"))}
    assert (_rows(run, "datanode.checkpoint").t_ms < drops.t_ms.min()).all()
    # without the drop, the periodic update falls due at about 60 s of message time
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # drop_at_s=0 says "no drop": nothing to warn about
        kept = milvus_edu.simulate("flush-drop-collection", seed=1, options={"drop_at_s": 0.0})
    assert _rows(kept, "datanode.drop").empty
    late = _rows(kept, "datanode.checkpoint")
    assert len(late[late.t_ms > 60_000]) == 2 and all(d["periodic"] for d in _details(late))


@pytest.mark.slow
def test_a_graceful_stop_submits_the_checkpoint_once_more_unless_dropped_and_never_sends_it():
    kept = milvus_edu.simulate("flush-drop-collection", seed=1, duration_s=30,
                               options={"drop_at_s": 0.0, "stop_at_s": 25.0})
    # "no drop" is the run whose drop falls after its end, event for event (run.start names the options)
    with pytest.warns(UserWarning, match="drop_at_s=100 is at or after the run's end"):
        late = milvus_edu.simulate("flush-drop-collection", seed=1, duration_s=30,
                                   options={"drop_at_s": 100.0, "stop_at_s": 25.0})
    assert late.events.iloc[1:].equals(kept.events.iloc[1:]) and len(kept.events) > 1000
    cps = _rows(kept, "datanode.checkpoint")
    closing = cps[[d.get("closing", False) for d in _details(cps)]]
    assert len(closing) == 2 and (closing.t_ms == 25_000).all()
    [stop] = _details(_rows(kept, "datanode.stop"))
    assert stop["unsent"] == dict(zip(closing.vchannel, closing.ts))
    assert (_rows(kept, "datanode.cp_rpc").t_ms < 25_000).all()  # the updater closed without sending them
    dropped = milvus_edu.simulate("flush-drop-collection", seed=1, duration_s=30, options={"stop_at_s": 25.0})
    assert not any(d.get("closing") for d in _details(_rows(dropped, "datanode.checkpoint")))  # drop mode
    assert _details(_rows(dropped, "datanode.stop")) == [{"unsent": {}}]


@pytest.mark.slow
def test_a_datanode_restarted_far_behind_merges_tick_rounds_in_pursuit_mode():
    def spans_after_restart(params):
        run = milvus_edu.simulate("datanode-crash-recovery", seed=1, duration_s=30, params=params)
        restart = _rows(run, "fault.restart").t_ms.iloc[0]
        packs = _rows(run, "datanode.buffer")
        packs = packs[(packs.t_ms > restart) & (packs.begin_ts > 0)]
        return [physical_time(e) - physical_time(b) for b, e in zip(packs.begin_ts, packs.end_ts)]

    assert max(spans_after_restart({})) > 1000  # mq.pursuitLag 10 s: rounds merge until less than 10 s behind
    assert max(spans_after_restart({"mq.enable_pursuit_mode": False})) < 1000
