"""The query mechanism end to end: the design documents' table, each bug switch caught in its scenario, the incidents, the
workload format and its errors, every level side by side, determinism.

Reads the run log only, as the checkers and views do.
"""

from __future__ import annotations

import hashlib
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import milvus_edu
from milvus_edu.cli import main as cli_main
from milvus_edu.client.workload import parse_steps
from milvus_edu.mechanisms.query.levels import reads, side_by_side
from milvus_edu.narrate import detail_dict


def _reads(run, client=None):
    frame = reads(run.events)
    return frame if client is None else frame[frame["client"] == client]


def test_client2_sees_exactly_what_client1_wrote_before_under_strong():
    run = milvus_edu.simulate("seed-example", seed=1)
    got = [sorted(r) for r in _reads(run, "Client2")["rows"]]
    assert got == [[], ["A1"], ["A1", "A2"], ["A2"]]
    assert run.summary["checks"]["ok"], run.summary["checks"]["violations"][:1]


def test_the_last_read_after_the_flush_comes_from_a_sealed_segment_loaded_from_binlogs(tmp_path):
    run = milvus_edu.simulate("seed-example", seed=1, out_dir=tmp_path / "r")
    loads = run.events[run.events["kind"] == "querynode.load"]
    assert len(loads) >= 1 and int(loads["count"].sum()) == 2  # A1 and A2, the delete hides A1
    last = _reads(run, "Client1").iloc[-1]
    assert last["label"] == "after flush" and last["rows"] == ["A2"]
    assert list((tmp_path / "r" / "objects").rglob("insert_log/*/*/*/*/*"))


@pytest.mark.parametrize("scenario,switch,invariant,words", [
    ("seed-example", "skip_wait_tsafe", "strong-sees-acked", "below the write's, so it cannot reflect it"),
    ("delete-then-read", "update_tsafe_before_delete", "mvcc-exact", "yet the read still returned it"),
    ("insert-delete-reorder", "delete_ignores_timestamps", "mvcc-exact", "no delete at or below the read timestamp"),
    ("insert-then-search", "session_uses_zero_ts", "session-sees-own", "its guarantee 0"),
])
def test_each_bug_switch_is_caught_in_its_scenario_and_clean_without_it(scenario, switch, invariant, words):
    broken = milvus_edu.simulate(scenario, seed=1, switches=switch, keep_events=False).summary["checks"]
    assert not broken["ok"] and broken["violation_counts"][invariant] > 0
    text = next(v["explanation"] for v in broken["violations"] if v["invariant"] == invariant)
    assert text.startswith("Let event ") and words in text
    assert milvus_edu.simulate(scenario, seed=1, keep_events=False).summary["checks"]["ok"]


def test_a_bounded_read_right_after_an_insert_is_often_empty_and_strong_never():
    run = milvus_edu.simulate("insert-then-search", seed=1)
    frame = _reads(run, "Client1")
    default, strong = frame[frame["label"] == "default"], frame[frame["label"] == "strong"]
    assert (default["level"] == "Bounded").all()
    assert sum(1 for r in default["rows"] if not r) >= 6  # issue #35090: most are empty
    assert all(len(r) == 1 for r in strong["rows"])
    assert all(len(r) == 1 for r in frame[frame["label"] == "session"]["rows"])  # read your own writes


def test_a_proxy_clock_ahead_makes_its_bounded_reads_wait():
    run = milvus_edu.simulate("clock-skew-bounded", seed=1)
    ev = run.events
    waits = ev[ev["kind"] == "querynode.read"]
    by_proxy = {}
    proxy_of = {int(r.request): r.node for r in ev[ev["kind"] == "proxy.read"].itertuples()}
    for r in waits.itertuples():
        by_proxy.setdefault(proxy_of[int(r.request)], []).append(detail_dict(r.detail)["waited_ms"])
    assert max(by_proxy["proxy-1"]) < 400  # at most a tick
    assert min(by_proxy["proxy-2"]) > 2500  # about 8 s ahead - 5 s graceful time



@pytest.mark.parametrize("ahead_ms", [8000, 6000])
def test_a_bounded_staleness_violation_on_a_skewed_proxy_gives_the_data_age_by_the_true_time(ahead_ms):
    """The begin timestamp of a Bounded read is the proxy's own clock: the violation says how far below it the read
    was (staleness by that clock, which the checker judges) and, apart, how old the data was by the true time, so a
    clock's seconds ahead are not read as the read's staleness."""
    run = milvus_edu.simulate("clock-skew-bounded", seed=1, switches="skip_wait_tsafe",
                              options={"ahead_ms": ahead_ms})
    ev = run.events.set_index("seq")
    stale = [v for v in run.summary["checks"]["violations"] if v["invariant"] == "bounded-staleness"]
    assert stale
    for v in stale:
        proxy, read = ev.loc[v["seqs"][0]], ev.loc[v["seqs"][1]]
        assert proxy["node"] == "proxy-2"  # proxy-1's clock is right: its reads stay within gracefulTime
        below = (int(proxy["ts"]) >> 18) - (int(read["ts"]) >> 18)
        true_age = below - ahead_ms  # the begin timestamp is the true time plus the skew
        assert f"{below:,} ms below that timestamp" in v["explanation"]
        assert f"proxy-2's clock was {ahead_ms:,} ms ahead: by the true time, the data it read was " \
               f"{true_age:,} ms old" in v["explanation"]


def test_a_dead_proxy_session_stalls_tsafe_and_strong_reads_time_out():
    run = milvus_edu.simulate("tsafe-stall-proxy-restart", seed=1)
    frame = _reads(run)
    failed = frame[frame["error"].notna()]
    assert any("deadline" in e for e in failed["error"])
    ev = run.events
    tsafe = ev[(ev["kind"] == "querynode.tsafe")]["t_ms"].sort_values()
    assert tsafe.diff().max() > 30_000  # no tick while the dead session's lease runs
    assert run.summary["checks"]["ok"]


def test_a_guarantee_a_day_ahead_is_refused_with_milvus_error_and_a_near_one_waits():
    run = milvus_edu.simulate("lag-too-large", seed=1)
    frame = _reads(run)
    day = frame[frame["label"] == "a day ahead"].iloc[0]
    assert "Timestamp lag too large lag(24h" in day["error"] and "max(24h0m0s)" in day["error"]
    soon = frame[frame["label"] == "3 s ahead"].iloc[0]
    assert soon["error"] is None and soon["rows"] == ["A1"]
    assert soon["read_ts"] >= soon["guarantee_ts"]


def test_insert_delete_insert_in_one_pack_leaves_exactly_the_second_a():
    run = milvus_edu.simulate("insert-delete-reorder", seed=1)
    for rows in _reads(run)["rows"]:
        assert sorted(rows) == ["A", "B"]
    packs = run.events[run.events["kind"] == "querynode.pack"]
    assert any(detail_dict(d).get("deletes") and c >= 2 for d, c in zip(packs["detail"], packs["count"]))


def test_every_level_side_by_side_shows_what_strong_gains():
    run = milvus_edu.simulate("seed-example", seed=1)
    second = _reads(run, "Client2").iloc[1]
    frame = side_by_side(run.events, int(second["request"]))
    assert list(frame["level"]) == ["Strong", "Session", "Bounded", "Eventually"]
    strong = frame.iloc[0]
    assert strong["actual"] and strong["waits"] and strong["rows"] == ["A1"]
    for r in frame.iloc[1:].itertuples():
        assert not r.waits and r.rows == [] and r.lost == ["A1"] and r.read_ts == r.tsafe_on_arrival
    with pytest.raises(ValueError, match="did not reach the QueryNode"):
        side_by_side(run.events, 999)


def test_a_learners_workload_runs_and_reports_its_results():
    steps = [{"at": 0.5, "client": "me", "op": "create_collection", "collection": "X", "consistency_level": "Strong"},
             {"at": 1.0, "client": "me", "op": "insert", "collection": "X", "data": [{"id": 1}, {"id": 2}]},
             {"at": 1.0, "client": "me", "op": "delete", "collection": "X", "filter": "id in [2]"},
             {"at": 1.0, "client": "you", "op": "query", "collection": "X"},
             {"at": 1.0, "client": "me", "op": "search", "collection": "X", "ids": [1, 2], "limit": 1},
             {"at": 1.0, "client": "me", "op": "query", "collection": "nope"}]
    run = milvus_edu.simulate("workload", seed=3, options={"steps": steps})
    frame = _reads(run)
    mine = frame[frame["client"] == "me"].iloc[0]
    assert mine["level"] == "Strong" and mine["rows"] == [1]  # the collection's default level applies
    errors = run.events[run.events["kind"] == "client.error"]
    assert list(errors["error"]) == ["collection not found[collection=nope]"]
    assert run.summary["checks"]["ok"]


@pytest.mark.parametrize("steps,message", [
    ([{"at": 1, "client": "a", "op": "bogus", "collection": "X"}], "unknown op 'bogus'"),
    ([{"at": 2, "client": "a", "op": "query", "collection": "X"},
      {"at": 1, "client": "a", "op": "query", "collection": "X"}], "list steps in time order"),
    ([{"at": 1, "client": "a", "op": "query", "collection": "X", "consistency_level": "Sometimes"}],
     "unknown consistency level 'Sometimes'"),
    ([{"at": 1, "client": "a", "op": "query", "collection": "X", "consistency_level": "Customized",
       "guarantee_timestamp": -5}], "guarantee_timestamp must be a hybrid timestamp"),
    ([{"at": 1, "client": "a", "op": "query", "collection": "X", "filter": "id >"}], "expected a value after '>'"),
    ([{"at": 1, "client": "a", "op": "insert", "collection": "X", "rows": []}], "insert takes no argument 'rows'"),
    ([{"client": "a", "op": "query", "collection": "X"}], "step 1 has no 'at'"),
])
def test_a_bad_workload_is_one_clear_error(steps, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        parse_steps(steps)
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        milvus_edu.simulate("workload", seed=1, options={"steps": steps})


def test_the_cli_takes_a_workload_file_and_refuses_a_bad_one_with_exit_2(tmp_path, capsys):
    good = tmp_path / "w.json"
    good.write_text(json.dumps([{"at": 0.5, "client": "a", "op": "create_collection", "collection": "X"},
                                {"at": 1, "client": "a", "op": "query", "collection": "X"}]))
    assert cli_main(["simulate", "--scenario", "workload", "--option", f"steps={good}", "--out",
                     str(tmp_path / "ok")]) == 0
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert cli_main(["simulate", "--scenario", "workload", "--option", f"steps={bad}", "--out",
                     str(tmp_path / "no")]) == 2
    err = capsys.readouterr().err
    assert "is not valid JSON" in err and "Traceback" not in err and not (tmp_path / "no").exists()


def test_same_seed_same_bytes(tmp_path):
    digests = []
    for name in ("a", "b"):
        milvus_edu.simulate("seed-example", seed=5, out_dir=tmp_path / name, keep_events=False)
        digests.append({f: hashlib.sha256((tmp_path / name / f).read_bytes()).hexdigest()
                        for f in ("events.parquet", "events.jsonl", "summary.json")})
    assert digests[0] == digests[1]


_LEVEL = st.sampled_from(["Strong", "Session", "Bounded", "Eventually", None])


@st.composite
def workloads(draw):
    steps = [{"at": 0.5, "client": "c0", "op": "create_collection", "collection": "X"}]
    t = 0.6
    keys = [f"k{i}" for i in range(6)]
    for _ in range(draw(st.integers(3, 14))):
        t += draw(st.sampled_from([0.0, 0.01, 0.05, 0.2]))
        client = draw(st.sampled_from(["c0", "c1", "c2"]))
        op = draw(st.sampled_from(["insert", "delete", "query", "search"]))
        step = {"at": round(t, 3), "client": client, "op": op, "collection": "X"}
        if op in ("insert", "delete"):
            step["ids"] = draw(st.lists(st.sampled_from(keys), min_size=1, max_size=3))
        else:
            level = draw(_LEVEL)
            if level is not None:
                step["consistency_level"] = level
        steps.append(step)
    return steps


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=workloads(), seed=st.integers(0, 10_000))
def test_random_workloads_keep_every_read_promise(steps, seed):
    run = milvus_edu.simulate("workload", seed=seed, options={"steps": steps}, duration_s=4.0, keep_events=False)
    checks = run.summary["checks"]
    assert checks["ok"], checks["violations"][:1]
