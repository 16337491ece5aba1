"""Two ways of computing the same thing agree on runs where something went wrong.

milvus-edu computes many things along more than one path: a run's checks in process, in the sink process, from a
replayed token, and from the run log read back as a DataFrame (the explorer of a bare log); a run advanced at once
or in steps (``simulate(progress=...)``, which the CLI uses on a terminal); a run and a fork of it before the fork
point; the explorer's "Why?" and :func:`milvus_edu.why`; an analysis in Spark and its pandas twin. On a healthy run
every path says "no violation", so a path that drops something agrees by accident: every test here runs a broken
run (a bug switch on) or a faulty one (kills, restarts, pauses) and asserts that what it compares is not empty.
"""

from __future__ import annotations

import functools
import itertools
from types import SimpleNamespace

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from milvus_edu import Kill, Pause, Restart, fork, load_run, replay, simulate, why
from milvus_edu.check.violation import frame_rows
from milvus_edu.events.schema import detail_object
from milvus_edu.explain import WhyError
from milvus_edu.explorer import Explorer
from milvus_edu.registry import get_scenario, scenario_mechanisms
from milvus_edu.sim import run as run_module

#: What "Why?" and the checks of a bare log are compared on: reads that skipped the tsafe wait.
BROKEN_READS = ("seed-example", ["skip_wait_tsafe"], 8.0)


def _lease_faults() -> list:
    """proxy-2 dies, comes back off the 500 ms grid of etcd's lessor, and dies again: its new session's lease runs
    out between two of the lessor's checks."""
    return [Kill("proxy-2", t_ms=1000.0), Restart("proxy-2", t_ms=1234.567), Kill("proxy-2", t_ms=2000.0)]


def test_a_run_advanced_in_steps_logs_what_the_same_run_advanced_at_once_logs():
    """``simulate(progress=...)`` advances the run in steps (the CLI does so on a terminal). Each step used to start
    another etcd lessor, off the first one's grid, so a lease that ran out between two checks was revoked earlier:
    here the restarted proxy's session was lost at 4.24 s instead of 4.5 s, and the tick stall ended earlier."""
    kw = dict(seed=1, duration_s=6, interventions=_lease_faults(), options={"inserts_per_s": 100},
              params={"tso.session_ttl_ns": 3_000_000_000})
    at_once = simulate("timetick-basics", **kw)
    stepped = []
    in_steps = simulate("timetick-basics", progress=lambda done, total: stepped.append(done), **kw)
    assert len(stepped) >= 50 and stepped[-1] == 6
    assert in_steps.rows == at_once.rows
    assert in_steps.summary == at_once.summary
    # what made the two differ: etcd revoked the lease of the session proxy-2 registered when it came back (its
    # second server id, 112), which ran out off the lessor's grid
    events = at_once.events
    lost = events[events["kind"] == "session.lost"]
    assert list(lost["detail"].astype(str).str.contains("session/proxy-112")) == [False, True]
    assert at_once.summary["checks"]["stalls"]



#: A short run with a restart off etcd's lessor grid, for the property below.
STEPPED = dict(seed=1, duration_s=3, interventions=_lease_faults()[:2], options={"inserts_per_s": 100},
               params={"tso.session_ttl_ns": 1_000_000_000})


@functools.lru_cache(maxsize=1)
def _stepped_at_once():
    return simulate("timetick-basics", **STEPPED)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(took=st.lists(st.floats(0.0, 5.0), min_size=1, max_size=40))
def test_a_run_cut_into_steps_of_any_length_logs_the_same(took, monkeypatch):
    """How long a step took sizes the next one (a slow run reports in shorter steps): whatever the wall clock says,
    and so wherever the steps end, the run log is the one of the run advanced at once."""
    ticks = itertools.cycle(took)
    now = [0.0]

    def clock() -> float:  # a step "takes" the next drawn duration (the clock is read before and after each)
        now[0] += next(ticks) / 2
        return now[0]

    monkeypatch.setattr(run_module, "time", SimpleNamespace(perf_counter=clock))
    monkeypatch.setattr(run_module, "PROGRESS_STEPS", (50, 1_000, 3_000))  # steps of 1 ms at least: a quick test
    stepped = []
    in_steps = simulate("timetick-basics", progress=lambda done, total: stepped.append(done), **STEPPED)
    assert stepped[-1] == 3 and stepped == sorted(set(stepped))
    assert in_steps.rows == _stepped_at_once().rows

#: (scenario, switches, simulated s, interventions, the invariant it breaks or "stall" for an explained stall)
BROKEN = [
    ("tso-failover", ["tso_skip_load_on_init"], 80.0, [], "global-monotonic"),
    ("timetick-slow-link", [], 2.0, [Kill("proxy-1", t_ms=500.0), Restart("proxy-1", t_ms=900.0),
                                     Pause("proxy-2", t_ms=1000.0, duration_ms=300.0)], "stall"),
    ("delete-then-read", ["update_tsafe_before_delete"], 3.0, [], "mvcc-exact"),
    (*BROKEN_READS, [], "read-after-guarantee"),
    ("tsafe-stall-proxy-restart", [], 14.0, [], "stall"),
]


@pytest.mark.parametrize("scenario,switches,duration_s,interventions,broken", BROKEN,
                         ids=[f"{c[0]}{'+' + c[1][0] if c[1] else ''}" for c in BROKEN])
def test_every_way_of_checking_a_broken_run_reports_the_same_checks(tmp_path, scenario, switches, duration_s,
                                                                    interventions, broken):
    """In process, in the sink process, replayed from the token, and from the log read back (kept rows, Parquet and
    JSON Lines, as the explorer of a bare log checks it): the same checks, violations, stalls and vacuous lists; and
    the same summary sections from the log's rows as from the run."""
    run = simulate(scenario, seed=1, duration_s=duration_s, switches=switches, interventions=interventions)
    checks = run.summary["checks"]
    if broken == "stall":
        assert checks["stalls"]
    else:
        assert checks["violation_counts"][broken] > 0
    away = simulate(scenario, seed=1, duration_s=duration_s, switches=switches, interventions=interventions,
                    out_dir=tmp_path / "run", sink_process=True, keep_events=False)
    assert away.summary == run.summary
    assert replay(run.token).summary == run.summary
    for frame in (run.events, load_run(tmp_path / "run"), load_run(tmp_path / "run" / "events.jsonl")):
        assert Explorer(frame).summary["checks"] == checks
    # the summaries, fed the log's rows one by one as check_frame feeds a checker, give the run's sections
    rows = frame_rows(run.events)
    for mech in scenario_mechanisms(get_scenario(scenario)):
        if mech.summary is not None:
            summary = mech.summary()
            for row in rows:
                summary.write(row)
            summary.close()
            for name, section in summary.sections(run.summary["events_by_kind"]).items():
                assert section == run.summary[name], name


@pytest.mark.slow
def test_a_bare_log_is_checked_with_the_parameters_its_run_used(tmp_path):
    """A 2 s time tick (Milvus: 200 ms) is no stall for the run that set it. Its ``run.start`` names the parameters
    that differ from Milvus's defaults (a default run's names none, so its log is as it was), and the explorer of the
    bare log checks with them: the run's checks, where Milvus's defaults would call every 2 s gap a stall."""
    params = {"timetick.time_tick_interval_ns": 2_000_000_000}
    run = simulate("timetick-basics", seed=1, duration_s=4.0, params=params, out_dir=tmp_path / "run")
    assert detail_object(run.events["detail"].iloc[0])["params"] == params
    assert "params" not in detail_object(simulate("timetick-basics", seed=1, duration_s=0.5).events["detail"].iloc[0])
    # the lesson's checkers on Milvus's defaults
    stalls = [v for mech in scenario_mechanisms(get_scenario("timetick-basics")) if mech.checker is not None
              for v in mech.checker().check_frame(run.events) if v.invariant == "tick-progress"]
    assert len(stalls) > 0 and run.summary["checks"]["violation_counts"]["tick-progress"] == 0
    (tmp_path / "run" / "summary.json").unlink()  # a bare events file: nothing but the log to go on
    for frame in (run.events, load_run(tmp_path / "run" / "events.parquet")):
        assert Explorer(frame).summary["checks"] == run.summary["checks"]


def test_a_fork_keeps_the_violations_that_rest_on_the_log_it_shares_with_its_original():
    """Before its first difference a fork's log is the original's: every violation resting only on events before it
    is reported by both runs, word for word."""
    scenario, switches, duration_s = BROKEN_READS
    original = simulate(scenario, seed=1, duration_s=duration_s, switches=switches)
    forked, first = fork(original, 4000.0, Kill("proxy-1"))
    assert first is not None

    def before(run):
        return [v for v in run.summary["checks"]["violations"] if max(v["seqs"]) < first]

    assert before(original) and before(forked) == before(original)
    assert len(before(original)) < len(original.violations)  # the fork point cuts the run's violations


@pytest.mark.slow
def test_the_explorer_of_a_bare_log_asks_and_answers_why_as_why_does_for_the_run_folder(tmp_path):
    """The explorer of a DataFrame numbers the violations it finds itself; each one's chain, and each read's, is the
    chain :func:`milvus_edu.why` gives for the run folder, whose summary.json numbered them."""
    scenario, switches, duration_s = BROKEN_READS
    folder = tmp_path / "run"
    simulate(scenario, seed=1, duration_s=duration_s, switches=switches, out_dir=folder)
    bare, opened = Explorer(load_run(folder)), Explorer(folder)
    violations = reads = 0
    for seq in range(len(bare)):
        try:
            question = bare.question_at(seq)
        except WhyError:
            continue
        assert question == opened.question_at(seq)
        if "violation" in question:
            violations += 1
        elif reads >= 3:  # a few reads are enough; every violation is asked about
            continue
        else:
            reads += 1
        try:
            want = why(folder, **question).lines()
        except WhyError as exc:  # a read that neither waited nor read stale data: both say so
            with pytest.raises(WhyError, match=str(exc)[:40]):
                bare.why(seq)
            continue
        assert bare.why(seq).lines() == want
    assert violations >= 2 and reads


def test_why_at_a_failed_flush_call_is_the_chain_why_gives_for_that_flush():
    """A flush whose RPC failed (DataCoord killed) has no flushTs; the explorer matched a client.flush to its flush by
    flushTs, so it said the failed call was no flush while :func:`milvus_edu.why` answered "flush 1 failed"."""
    run = simulate("flush-basics", seed=1, duration_s=3, options={"workload_s": 1.0, "inserts_per_s": 50.0},
                   interventions=[Kill("datacoord-1", t_ms=1000.0)])
    events = run.events
    calls = events[events["kind"] == "client.flush"]
    assert len(calls) == 1 and calls["ts"].isna().all() and calls["error"].notna().all()
    seq = int(calls["seq"].iloc[0])
    explorer = Explorer(run)
    assert explorer.question_at(seq) == {"flush": 1}
    want = why(run, flush=1).lines()
    assert want[0] == "Why did flush 1 fail?"
    assert explorer.why(seq).lines() == want


def test_the_stepper_marks_the_messages_the_watermark_checker_reports_and_the_summary_counts():
    """The TimeTick lesson's stepper finds messages written below a tick, and out of order, over the whole log
    (``panel.dml_messages``); the checker and the summary count them as the run streams by."""
    from milvus_edu.mechanisms.timetick.panel import dml_messages

    run = simulate("timetick-unlocked-enqueue", seed=1, duration_s=2, switches=["allocate_outside_enqueue_lock"])
    messages = dml_messages(run.events)
    below = int(messages["below_tick"].sum())
    assert below > 0 and below == run.summary["checks"]["violation_counts"]["watermark"]
    assert int(messages["out_of_order"].sum()) == run.summary["timetick"]["out_of_order_messages"] > 0
    assert len(messages) == run.summary["timetick"]["dml_messages"]


def test_the_summarys_failover_gap_is_the_silence_every_client_of_the_analysis_shared():
    """summary.json's ``client_gap_ms`` runs from the last answer any client got before the kill to the first any
    client got after it: from the latest ``before`` to the earliest ``after`` of ``failover_gaps``, on a failover
    whose timestamps went back."""
    from milvus_edu.mechanisms.tso.analysis import failover_gaps_pd

    run = simulate("tso-failover", seed=1, duration_s=80, switches=["tso_skip_load_on_init"])
    gaps = failover_gaps_pd(run.events)
    assert len(gaps) == 2 and not gaps["increased"].any()
    shared = float(gaps["after_t_ms"].min() - gaps["before_t_ms"].max())
    assert run.summary["failover"]["client_gap_ms"] == round(shared, 3)
    assert shared < float(gaps["gap_ms"].min())  # each client waited longer than the silence they shared


def test_the_query_summary_counts_the_reads_and_waits_the_analysis_finds():
    """Reads answered and failed, and the longest tsafe wait, per level: as the summary counts them while the run
    streams by (the wait as the QueryNode logged it) and as ``read_waits`` finds them in the log (the wait as the
    time between the shard read's wait and its read), on a run where Strong reads time out and a proxy is gone."""
    from milvus_edu.mechanisms.query.analysis import read_waits_pd

    run = simulate("tsafe-stall-proxy-restart", seed=1, duration_s=14)
    query = run.summary["query"]
    waits = read_waits_pd(run.events).set_index("level")
    assert query["failed_reads"] == int(waits["failed_reads"].sum()) > 0
    answered = {level: int(n) for level, n in waits["answered"].items() if n}
    assert query["reads_by_level"] == answered
    longest = {level: round(float(ms), 3) for level, ms in waits["max_wait_ms"].dropna().items()}
    assert longest == {level: ms for level, ms in query["longest_wait_ms_by_level"].items() if ms}
    assert longest["Strong"] > 4_000  # a Strong read waited out its 5 s timeout


@pytest.mark.spark
def test_spark_equals_its_pandas_twin_on_broken_and_faulty_runs(spark, tmp_path):
    """Every registered analysis, and the binlogs read back, in Spark and in pandas, on runs that broke invariants
    (timestamps that went back, reads below their guarantee, flushes declared done too early) and that lost nodes."""
    from milvus_edu.analysis import load_events, to_pandas
    from milvus_edu.mechanisms.flush.analysis import binlog_rows, binlog_rows_pd
    from milvus_edu.registry import mechanisms

    runs = [("tso-failover", ["tso_skip_load_on_init"], 80.0, []),
            ("timetick-unlocked-enqueue", ["allocate_outside_enqueue_lock"], 2.0, []),
            BROKEN[1][:4],
            (*BROKEN_READS, []),
            ("tsafe-stall-proxy-restart", [], 14.0, []),
            ("flush-ts-slow-store", ["reset_flush_ts_inclusive", "checkpoint_ignores_syncing_segments"], 40.0, [])]
    folders = []
    for scenario, switches, duration_s, interventions in runs:
        folder = tmp_path / f"{scenario}-{len(folders)}"
        result = simulate(scenario, seed=1, duration_s=duration_s, switches=switches, interventions=interventions,
                          out_dir=folder, keep_events=False, jsonl=False)
        assert not result.summary["checks"]["ok"] or result.summary["checks"]["stalls"]
        folders.append(folder)
    frame = pd.concat([load_run(f) for f in folders], ignore_index=True)
    loaded = load_events(spark, [str(f) for f in folders])
    assert loaded.malformed_count == 0
    results = {}
    for mech in mechanisms():
        for name, (spark_fn, pandas_fn) in (mech.analyses() if mech.analyses else {}).items():
            want = pandas_fn(frame)
            got = to_pandas(spark_fn(loaded.events))
            _assert_same_rows(got, want, f"{mech.name}.{name}")
            results[name] = want
    flush_folders = [f for f in folders if "flush" in f.name]
    _assert_same_rows(to_pandas(binlog_rows(spark, flush_folders)), binlog_rows_pd(flush_folders), "binlog_rows")
    # what was compared shows the runs' faults
    assert not results["failover_gaps"]["increased"].dropna().all()  # timestamps went back after the failover
    strong = results["read_staleness"][results["read_staleness"]["level"] == "Strong"]
    assert (strong["max_staleness_ms"] > 0).any()  # a Strong read below its guarantee
    latency = results["flush_latency"].dropna(subset=["latency_ms", "reset_latency_ms"])
    assert (latency["reset_latency_ms"] < latency["latency_ms"]).any()
    assert len(results["tsafe_lag"]) and len(results["produce_reorder"])


def _assert_same_rows(got: pd.DataFrame, want: pd.DataFrame, name: str) -> None:
    """The same columns and rows (in any order; Spark's is not the twin's), dtypes aside, floats to 1e-9."""
    assert list(got.columns) == list(want.columns), name
    assert len(want), f"{name}: nothing to compare"
    columns = list(want.columns)

    def ordered(frame: pd.DataFrame) -> pd.DataFrame:
        order = frame.astype(str).sort_values(columns, kind="stable").index
        return frame.loc[order].reset_index(drop=True)

    pd.testing.assert_frame_equal(ordered(got), ordered(want), check_dtype=False, check_exact=False, rtol=1e-9,
                                  obj=name)


def _typed(rows: list[dict]) -> list[list[tuple]]:
    return [[(name, type(value), value) for name, value in row.items()] for row in rows]


def test_frame_rows_are_pandas_records_in_seq_order_with_every_null_as_none(tmp_path):
    """``frame_rows`` builds the rows from the columns' lists; pandas' own ``to_dict("records")`` of the same
    object-cast frame is the reference: the same keys, values and Python types, row by row, in ``seq`` order,
    whether the frame is a run's own (nullable ints, strings) or read back from its files, and for a NaN float."""
    run = simulate("datanode-crash-recovery", seed=1, duration_s=12, out_dir=tmp_path / "run")
    frames = [run.events, load_run(tmp_path / "run"), run.events.iloc[::-1]]
    frames.append(pd.DataFrame({"seq": [2, 1], "t_ms": [float("nan"), 1.5], "node": ["b", None],
                                "count": pd.array([None, 3], dtype="Int64")}))
    for frame in frames:
        ordered = frame.sort_values("seq", kind="stable")
        reference = ordered.astype(object).where(ordered.notna(), None).to_dict("records")
        rows = frame_rows(frame)
        assert [row["seq"] for row in rows] == sorted(row["seq"] for row in rows)
        assert _typed(rows) == _typed(reference)
    assert frame_rows(frames[-1]) == [{"seq": 1, "t_ms": 1.5, "node": None, "count": 3},
                                      {"seq": 2, "t_ms": None, "node": "b", "count": None}]
