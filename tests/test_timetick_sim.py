"""The TimeTick mechanism end to end: scenarios, the watermark promise, the bug switch, determinism.

Each scenario is run as a learner would (``milvus_edu.simulate``) and read back through the run log
only; the checkers in :mod:`milvus_edu.mechanisms.timetick.check` decide, and these tests pin what they decide. One
test drives a proxy's DML path itself, as a program of its own would, and reads its run log the same way.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import pytest

import milvus_edu
from milvus_edu.mechanisms.timetick.check import TimeTickChecker, check_timetick
from milvus_edu.config import TSOParams
from milvus_edu.narrate import describe
from milvus_edu.registry import get_mechanism
from milvus_edu.tsoutil import parse_hybrid_ts

TIMETICK_SCENARIOS = [s.name for s in get_mechanism("timetick").scenarios]


@pytest.fixture(scope="module")
def basics():
    return milvus_edu.simulate("timetick-basics", seed=1, duration_s=2.0)


def _dml(ev):
    return ev[(ev.kind == "mq.produce") & ev.msg_type.isin(["Insert", "Delete"])]


def _ticks(ev):
    return ev[(ev.kind == "mq.produce") & (ev.msg_type == "TimeTick")]


def test_every_pchannel_gets_ticks_and_out_of_order_messages(basics):
    ev = basics.events
    ticks = _ticks(ev)
    assert set(ticks.channel) == set(basics.summary["timetick"]["pchannels"]) and len(set(ticks.channel)) == 4
    for ch, rows in _dml(ev).groupby("channel"):
        ts = [int(t) for t in rows.end_ts]
        assert any(b < a for a, b in zip(ts, ts[1:])), f"{ch}: concurrency should write out of timestamp order"
    assert basics.summary["timetick"]["out_of_order_messages"] > 0
    assert basics.summary["checks"]["ok"], basics.violations[:1]


def test_no_message_is_written_at_or_below_a_tick_already_in_its_pchannel(basics):
    """The watermark promise, checked directly on the log (not through the checker)."""
    highest: dict[str, int] = {}
    for row in basics.events.itertuples():
        if row.kind != "mq.produce":
            continue
        if row.msg_type == "TimeTick":
            highest[row.channel] = max(highest.get(row.channel, 0), int(row.tick_ts))
        else:
            assert int(row.end_ts) > highest.get(row.channel, 0)


def test_ticks_never_go_back_and_trail_the_proxies_reports(basics):
    ev = basics.events
    for ch, rows in _ticks(ev).groupby("channel"):
        values = [int(v) for v in rows.tick_ts]
        assert values == sorted(values)
    # Every tick is at most what each proxy reported for that pchannel before it (its listed value or default).
    reported: dict[str, dict[str, int]] = {}
    for row in ev.itertuples():
        if row.kind == "proxy.report":
            d = json.loads(row.detail)
            reported[row.node] = {"": int(row.ts), **{c: int(v) for c, v in d["channels"].items()}}
        elif row.kind == "mq.produce" and row.msg_type == "TimeTick":
            for proxy, values in reported.items():
                assert int(row.tick_ts) <= values.get(row.channel, values[""])


def test_every_message_is_delivered_once_in_the_pack_of_its_interval(basics):
    ev = basics.events
    consumed = ev[ev.kind == "mq.consume"]
    assert not consumed.duplicated(["vchannel", "msg_id"]).any()
    packs = ev[ev.kind == "mq.pack"]
    last_end = {}
    for row in packs.itertuples():
        if row.vchannel in last_end:
            assert int(row.begin_ts) == last_end[row.vchannel]
        last_end[row.vchannel] = int(row.end_ts)
    dml = _dml(ev)
    delivered = set(zip(consumed.vchannel, consumed.msg_id.astype(int)))
    for row in dml.itertuples():
        if int(row.end_ts) <= last_end.get(row.vchannel, 0):
            assert (row.vchannel, int(row.msg_id)) in delivered
    for row in consumed.itertuples():
        assert int(row.ts) <= int(row.tick_ts)


def test_proxy_statistics_min_is_the_oldest_unfinished_task(basics):
    """Each logged row's statistics follow Go's rules, worked out from the log alone: min is the oldest
    unfinished task, max the newest task entered since the pchannel was last empty (never lowered)."""
    unfinished: dict[tuple[str, str], set[int]] = {}
    newest: dict[tuple[str, str], int] = {}
    for row in basics.events.itertuples():
        if row.kind not in ("proxy.enqueue", "proxy.finish"):
            continue
        key = (row.node, row.channel)
        pending = unfinished.setdefault(key, set())
        if row.kind == "proxy.enqueue":
            pending.add(int(row.ts))
            newest[key] = max(newest.get(key, 0), int(row.ts))
        else:
            pending.discard(int(row.ts))
        if pending:
            assert (int(row.min_ts), int(row.max_ts)) == (min(pending), newest[key])
        else:
            assert str(row.min_ts) == str(row.max_ts) == "<NA>"
            del newest[key]


@pytest.mark.slow
def test_unlocked_enqueue_breaks_the_watermark_and_the_checker_explains_it():
    run = milvus_edu.simulate("timetick-unlocked-enqueue", seed=1, switches=["allocate_outside_enqueue_lock"])
    counts = run.summary["checks"]["violation_counts"]
    assert counts["watermark"] > 0
    first = next(v for v in run.violations if v["invariant"] == "watermark")
    text = first["explanation"]
    assert text.startswith("Let event ") and " Then " in text and "because its task entered proxy-" in text
    assert "allocated before the task was counted" in text
    seqs = first["seqs"]
    ev = run.events.set_index("seq")
    kinds = [ev.loc[s, "kind"] for s in seqs]
    assert kinds == ["proxy.report", "proxy.enqueue", "mq.produce", "mq.produce"]
    # the late message's ts is at or below the tick it came after
    tick, late = ev.loc[seqs[2]], ev.loc[seqs[3]]
    assert tick.msg_type == "TimeTick" and int(late.end_ts) <= int(tick.tick_ts)
    # every such violation cites its task's enqueue on the violation's own pchannel (a task enqueues once per
    # pchannel; the checker once cited the task's last enqueue, on another pchannel)
    cited = [v for v in run.violations if v["invariant"] == "watermark" and len(v["seqs"]) == 4]
    assert len(cited) > 1
    for v in cited:
        report, enqueue, tick, message = (ev.loc[s] for s in v["seqs"])
        assert enqueue.channel == tick.channel == message.channel and int(enqueue.ts) == int(message.end_ts)


def test_same_scenario_without_the_switch_keeps_every_promise():
    run = milvus_edu.simulate("timetick-unlocked-enqueue", seed=1)
    assert run.summary["checks"]["ok"], run.violations[:1]


@pytest.mark.slow
def test_a_stalled_proxy_stops_every_pchannels_ticks_for_the_stall():
    run = milvus_edu.simulate("timetick-proxy-stall", seed=1)
    ev = run.events
    stall = ev[ev.kind == "fault.stall"].iloc[0]
    t0, t1 = float(stall.t_ms), float(stall.t_ms) + json.loads(stall.detail)["duration_ms"]
    for ch, rows in _ticks(ev).groupby("channel"):
        inside = rows[(rows.t_ms > t0 + 250) & (rows.t_ms < t1)]
        assert inside.empty, f"{ch} got ticks while proxy-2 was not reporting"
        assert (rows.t_ms > t1).any(), f"{ch} got no tick after the stall"
    dml_during = _dml(ev)
    assert ((dml_during.t_ms > t0 + 250) & (dml_during.t_ms < t1)).any()  # writes went on
    assert 2900 <= run.summary["timetick"]["longest_tick_gap_ms"] <= 3500
    assert run.summary["checks"]["ok"]


@pytest.mark.slow
def test_a_restarted_proxy_blocks_ticks_until_its_old_session_expires():
    run = milvus_edu.simulate("timetick-proxy-restart", seed=1)
    ev = run.events
    dels = ev[ev.kind == "rootcoord.session_del"]
    adds = ev[ev.kind == "rootcoord.session_add"]
    assert len(adds) == 3 and len(dels) == 1  # two at start, the restarted proxy's new session; the old one expires
    ttl_ms = TSOParams().session_ttl_ns / 1e6  # proxies' sessions have the same TTL (common.session.ttl)
    # the lease was last renewed at most one keep-alive period (TTL/3) before the crash at 2 s
    assert 2_000 + ttl_ms - ttl_ms / 3 - 1_000 <= float(dels.iloc[0].t_ms) <= 2_000 + ttl_ms + 1_000
    ticks = _ticks(ev)
    assert ticks[(ticks.t_ms > 2_500) & (ticks.t_ms < float(dels.iloc[0].t_ms))].empty
    assert (ticks.t_ms > float(dels.iloc[0].t_ms)).any()
    assert run.summary["checks"]["ok"]


def test_checker_flags_a_tick_that_goes_back_and_a_lost_message():
    def row(seq, kind, **kw):
        base = {"seq": seq, "kind": kind, "node": "n", "t_ms": float(seq), "detail": None}
        base.update(kw)
        return base

    c = TimeTickChecker()
    ch, v = "by-dev-rootcoord-dml_0", "by-dev-rootcoord-dml_0_100v0"
    c.write(row(0, "mq.produce", channel=ch, msg_type="TimeTick", tick_ts=100))
    c.write(row(1, "mq.produce", channel=ch, msg_type="TimeTick", tick_ts=90))
    c.write(row(2, "mq.produce", channel=ch, vchannel=v, msg_type="Insert", msg_id=3, end_ts=95))
    c.write(row(3, "mq.pack", vchannel=v, begin_ts=0, end_ts=100))
    counts = c.counts
    assert counts == {"tick-monotonic": 1, "watermark": 1, "pack-exact": 1, "tick-progress": 0}


@pytest.mark.slow
def test_check_timetick_on_a_frame_equals_the_streaming_result(basics):
    assert check_timetick(basics.events) == []
    run = milvus_edu.simulate("timetick-unlocked-enqueue", seed=1, duration_s=2.0,
                              switches=["allocate_outside_enqueue_lock"])
    assert [v.to_dict() for v in check_timetick(run.events)] == [
        v for v in run.violations if v["invariant"] in ("tick-monotonic", "watermark", "pack-exact")]


@pytest.mark.parametrize("scenario", TIMETICK_SCENARIOS)
def test_scenario_is_byte_identical_for_the_same_seed(tmp_path, scenario):
    digests = []
    for name in ("a", "b"):
        milvus_edu.simulate(scenario, seed=3, duration_s=1.5, out_dir=tmp_path / name, keep_events=False)
        digests.append({f: hashlib.sha256((tmp_path / name / f).read_bytes()).hexdigest()
                        for f in ("events.parquet", "events.jsonl", "summary.json")})
    assert digests[0] == digests[1]


@pytest.mark.slow
def test_timetick_run_does_not_depend_on_hash_seed(tmp_path):
    code = ("import milvus_edu,sys; milvus_edu.simulate('timetick-basics', seed=5, duration_s=1, "
            "out_dir=sys.argv[1], keep_events=False)")
    for name, hashseed in (("a", "1"), ("b", "4242")):
        subprocess.run([sys.executable, "-c", code, str(tmp_path / name)], check=True,
                       env={**os.environ, "PYTHONHASHSEED": hashseed})
    assert (tmp_path / "a" / "events.jsonl").read_bytes() == (tmp_path / "b" / "events.jsonl").read_bytes()


def test_bad_options_and_parameters_are_refused_in_python():
    with pytest.raises(ValueError, match="at least one proxy"):
        milvus_edu.simulate("timetick-basics", options={"proxies": 0}, duration_s=0.5)
    with pytest.raises(ValueError, match="no option 'pchannel'"):
        milvus_edu.simulate("timetick-basics", options={"pchannel": 2}, duration_s=0.5)
    with pytest.raises(ValueError, match="time_tick_interval_ns must be positive"):
        milvus_edu.simulate("timetick-basics", params={"timetick.time_tick_interval_ns": -1}, duration_s=0.5)


def test_more_proxies_option_adds_sessions_rootcoord_waits_for():
    run = milvus_edu.simulate("timetick-basics", seed=2, duration_s=1.0, options={"proxies": 3})
    ev = run.events
    assert sorted(ev[ev.kind == "rootcoord.session_add"].peer) == ["proxy-1", "proxy-2", "proxy-3"]
    assert run.summary["options"]["proxies"] == 3 and run.summary["checks"]["ok"]


def test_tick_values_are_real_hybrid_timestamps_near_true_time(basics):
    from milvus_edu.events import SIM_EPOCH_MS

    for row in _ticks(basics.events).itertuples():
        physical, _ = parse_hybrid_ts(int(row.tick_ts))
        lag = SIM_EPOCH_MS + float(row.t_ms) - physical
        assert 0 <= lag < 1000  # a tick trails true time, by less than a second here


@pytest.mark.parametrize("scenario", ["timetick-basics", "timetick-slow-link"])
def test_heap_pchan_stats_give_the_same_run_log_as_gos_scan(tmp_path, monkeypatch, scenario):
    """The design documents' min-heap (``timetick.pchan_stats=heap``) is a pure optimisation: the run logs are the same
    lines but the first, whose ``run.start`` names the parameter the heap run set, and the heap really served every
    pop of the heap run (with tasks pending behind the one that finished)."""
    from milvus_edu.proxy import task_scheduler

    pops = {"scan": 0, "heap": 0}
    deepest = {"scan": 0, "heap": 0}

    def counting(cls, name):
        class Counting(cls):
            def pop(self, pchans, ts):
                pops[name] += 1
                deepest[name] = max([deepest[name]] + [len(i.heap if name == "heap" else i.ts_set)
                                                        for i in self._infos.values()])
                super().pop(pchans, ts)
        return Counting

    monkeypatch.setitem(task_scheduler.STATS_IMPLEMENTATIONS, "scan", counting(task_scheduler.ScanPChanStats, "scan"))
    monkeypatch.setitem(task_scheduler.STATS_IMPLEMENTATIONS, "heap", counting(task_scheduler.HeapPChanStats, "heap"))
    files = {}
    for stats in ("scan", "heap"):
        milvus_edu.simulate(scenario, seed=4, duration_s=2.5, out_dir=tmp_path / stats, keep_events=False,
                            params={"timetick.pchan_stats": stats})
        files[stats] = (tmp_path / stats / "events.jsonl").read_text().splitlines()
        summary = json.loads((tmp_path / stats / "summary.json").read_text())
        assert summary["config"]["timetick"]["pchan_stats"] == stats
    assert files["scan"][1:] == files["heap"][1:] and len(files["scan"]) > 1000
    starts = {stats: json.loads(json.loads(lines[0])["detail"]) for stats, lines in files.items()}
    assert starts["heap"].pop("params") == {"timetick.pchan_stats": "heap"} and starts["heap"] == starts["scan"]
    assert pops["scan"] == pops["heap"] > 40
    assert deepest["scan"] > 1 and deepest["heap"] > 1


def test_an_unknown_pchan_stats_implementation_is_refused_naming_both():
    with pytest.raises(ValueError, match=r"parameter timetick.pchan_stats must be one of scan, heap, got 'tree'"):
        milvus_edu.simulate("timetick-basics", params={"timetick.pchan_stats": "tree"}, duration_s=0.5)
    from milvus_edu.config import PCHAN_STATS
    from milvus_edu.proxy.task_scheduler import STATS_IMPLEMENTATIONS

    assert tuple(STATS_IMPLEMENTATIONS) == PCHAN_STATS


def test_a_proxy_paused_past_its_lease_exits_when_it_wakes_and_the_ticks_come_back_when_its_session_is_dropped():
    """Proxy.Register's LivenessCheck: a proxy whose session lease ran out while it was paused exits (os.Exit(1)) at
    its next keep-alive instead of carrying on; rootcoord stops waiting for it once its session is dropped."""
    run = milvus_edu.simulate("timetick-basics", seed=1, duration_s=20, options={"inserts_per_s": 100},
                              params={"tso.session_ttl_ns": 5 * 10**9},
                              interventions=[milvus_edu.Pause("proxy-2", 1000, duration_ms=15000)])
    events = run.events
    dropped = events[(events["kind"] == "rootcoord.session_del") & (events["peer"] == "proxy-2")].iloc[0]
    resumed = events[events["kind"] == "fault.resume"].iloc[0]
    (exit_,) = events[(events["kind"] == "session.exit") & (events["node"] == "proxy-2")].itertuples()
    assert dropped.t_ms < resumed.t_ms <= exit_.t_ms
    assert not ((events["node"] == "proxy-2") & (events["seq"] > exit_.seq)).any(), "an exited proxy did something"
    assert run.summary["checks"]["ok"] and "dropped its expired session" in run.summary["checks"]["stalls"][0]["explanation"]


def test_a_dml_request_for_a_collection_not_created_yet_fails_with_collection_not_found_and_the_run_goes_on():
    """A program that drives the proxy itself, before the collection's CreateCollection ran: as in Go
    (``dmTaskQueue.Enqueue`` -> ``setChannels`` -> ``globalMetaCache.GetCollectionID``) the insert and the delete fail
    with "collection not found" before they enqueue (no timestamp, no message, no segment asked of DataCoord); the run
    goes on to its end, and once the DDL ran the same collection takes inserts."""
    from milvus_edu.cluster.builder import ClusterSpec, CollectionSpec, DataNodeSpec, ProxySpec, build
    from milvus_edu.events import MemorySink, Recorder
    from milvus_edu.sim.kernel import Simulation

    sink = MemorySink()
    recorder = Recorder("unknown-collection", sinks=[sink])
    sim = Simulation(1, recorder)
    cluster = build(sim, ClusterSpec(pchannels=2, proxies=(ProxySpec(),), consumers=True, datacoord=True,
                                     datanodes=(DataNodeSpec(),), collections=(CollectionSpec(100, 2),),
                                     create_collections_at_ms=150.0))
    cluster.start()
    proxy, collection = cluster.proxies[0], cluster.collections[0]
    answers = {}

    def program():
        yield sim.env.timeout(50.0)  # before the DDL at 150 ms
        answers["insert"] = yield from proxy.insert(collection, [1, 2, 3])
        answers["delete"] = yield from proxy.delete(collection, [1])
        yield sim.env.timeout(400.0 - sim.env.now)  # after it
        answers["later insert"] = yield from proxy.insert(collection, [4, 5])

    sim.env.process(program())
    sim.run(1000.0)
    recorder.close()
    assert sim.env.now == 1000.0
    assert answers["insert"] is None and answers["delete"] is None
    assert isinstance(answers["later insert"], int)
    misses = [r for r in sink.rows if r["kind"] == "proxy.meta_cache"]
    assert [(r["node"], r["peer"], r["error"], json.loads(r["detail"])) for r in misses] == [
        ("proxy-1", "rootcoord-1", "collection not found[collection=100]", {"collection_id": 100, "result": "miss"})] * 2
    assert describe(misses[0]) == ("proxy-1's meta cache misses collection 100; rootcoord answers: collection not "
                                   "found[collection=100].")
    assert all(r["t_ms"] < 150.0 for r in misses)
    enqueued = [r["ts"] for r in sink.rows if r["kind"] == "proxy.enqueue"]
    produced = [(r["msg_type"], r["count"]) for r in sink.rows if r["kind"] == "mq.produce" and r["node"] == "proxy-1"]
    assert set(enqueued) == {answers["later insert"]}  # the failed requests took no timestamp
    assert {t for t, _ in produced} == {"Insert"} and sum(c for _, c in produced) == 2


def test_a_finished_task_answers_first_and_its_pop_holds_atlock_against_a_task_dequeued_meanwhile():
    """``processTask`` (internal/proxy/task_scheduler.go) defers ``PopActiveTask``, then ``Notify``; deferred calls run
    last in, first out, so the client has its answer once the task's messages are in, whatever the locks do.
    ``PopActiveTask`` takes ``atLock``, then ``statsLock``: while enqueues hold ``statsLock`` (each across its
    ``AllocTimestamp``, 40 ms over this proxy's slow link), the pop waits holding ``atLock``, so a task that finished
    its enqueue meanwhile cannot ``AddActiveTask``: it starts, and produces, only after the pop, which comes after
    the enqueue queued ahead of the pop."""
    from milvus_edu.cluster.builder import ClusterSpec, CollectionSpec, ProxySpec, build
    from milvus_edu.cluster.dml import WRITER
    from milvus_edu.events import MemorySink, Recorder
    from milvus_edu.sim.kernel import Simulation

    sink = MemorySink()
    recorder = Recorder("atlock", sinks=[sink])
    sim = Simulation(1, recorder)
    cluster = build(sim, ClusterSpec(pchannels=2, proxies=(ProxySpec(rootcoord_extra_ms=20.0),), consumers=True,
                                     collections=(CollectionSpec(100, 2),)))
    cluster.start()
    proxy, collection, env = cluster.proxies[0], cluster.collections[0], sim.env
    answered, tss = {}, {}

    def client(name, at_ms, task_ms):
        yield env.timeout(at_ms - env.now)
        tss[name] = yield from proxy.insert(collection, [len(tss) + 1], task_ms=task_ms)
        answered[name] = env.now

    def holder():  # statsLock held from 350 to 600 ms, as a long enqueue would hold it
        yield env.timeout(350.0)
        wait = proxy.lock.acquire(WRITER)
        if wait is not None:
            yield wait
        yield env.timeout(600.0 - env.now)
        proxy.lock.release()

    env.process(client("A", 300.0, 100.0))  # enqueued by ~341 ms, its messages in by ~442 ms
    env.process(holder())
    env.process(client("B", 360.0, 0.0))  # both enqueues wait for statsLock, then take 40 ms each
    env.process(client("C", 370.0, 0.0))
    sim.run(1000.0)
    recorder.close()
    rows = sink.rows

    def first(kind, ts):
        return min(r["t_ms"] for r in rows if r["kind"] == kind and r["ts"] == ts and r["node"] == proxy.name)

    assert set(answered) == {"A", "B", "C"}
    # A was answered when its messages were in, long before its pop could take statsLock (after B's and C's enqueues)
    assert answered["A"] < 450.0 < first("proxy.finish", tss["A"])
    assert first("proxy.finish", tss["A"]) >= first("proxy.enqueue", tss["C"]) > first("proxy.enqueue", tss["B"]) > 600.0
    # B finished its enqueue first, but could start only once A's pop let go of atLock: after C's enqueue
    b_produced = min(r["t_ms"] for r in rows if r["kind"] == "mq.produce" and r["ts"] == tss["B"])
    assert b_produced > first("proxy.enqueue", tss["C"])
