"""User mistakes found by probing every command and entry point: each is one line saying what is wrong and how to fix
it (exit status 2 on the command line, a ValueError from Python), and nothing the user had is touched.

The option and parameter checks run before the run folder is created, so these tests are cheap: the command runs in
this process, as in tests/test_cli.py.
"""

import contextlib
import io
import json
import math
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import milvus_edu
from milvus_edu.cli import main
from milvus_edu.registry import scenarios
from test_cli import run_main


def refused(capsys, tmp_path, *args):
    """Run the command with OUT standing for a new folder; assert it was refused in one line and wrote nothing."""
    out = tmp_path / "out"
    code, stdout, err = run_main(capsys, *[a.replace("OUT", str(out)) for a in args])
    assert code == 2, (stdout, err)
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert not out.exists()
    return err


@pytest.mark.parametrize("scenario,option,needle", [
    # nan passed every "must be positive" check; inf ran forever or overflowed converting memory_mb to bytes
    ("timetick-basics", "inserts_per_s=nan", "option inserts_per_s takes a finite number, got 'nan'"),
    ("flush-basics", "workload_s=inf", "option workload_s takes a finite number"),
    ("flush-sync-policies", "memory_mb=inf", "option memory_mb takes a finite number"),
    ("workload", "proxy2_clock_offset_ms=nan", "option proxy2_clock_offset_ms takes a finite number"),
    ("tso-logical-overflow", "activate_ms=inf", "option activate_ms takes a finite number"),
    # any word but a true one used to mean false
    ("datanode-takeover", "takeover=maybe", "option takeover takes true or false, got 'maybe'"),
    # a negative task time ran as if it were 0
    ("timetick-basics", "task_ms=-1", "option task_ms must not be negative"),
    # negative counts ran as 0, negative times failed inside SimPy with "Negative delay"
    ("insert-then-search", "rounds=-1", "option rounds must not be negative"),
    ("clock-skew-bounded", "reads=-2", "option reads must not be negative"),
    ("tsafe-stall-proxy-restart", "kill_at_s=-1", "option kill_at_s must not be negative"),
    ("tsafe-stall-proxy-restart", "restart_after_s=-1", "option restart_after_s must not be negative"),
    ("tsafe-stall-proxy-restart", "timeout_s=0", "option timeout_s must be positive"),
    ("ddl-recreate-under-load", "writes=-1", "option writes must not be negative"),
    ("ddl-recreate-under-load", "gap_s=-1", "option gap_s must not be negative"),
    # the proxy's reads overflowed a timestamp mid-run ("Python int too large to convert to C long")
    ("clock-skew-bounded", "ahead_ms=1e300", "a proxy's clock offset must be at most 100 years"),
    ("workload", "proxy2_clock_offset_ms=-1e300", "a proxy's clock offset must be at most 100 years"),
    # 1e300 s overflowed converting to nanoseconds mid-run; 1e-300 s was blamed on "DataNodeParams.sync_period_ns"
    ("flush-sync-policies", "sync_period_s=1e300", "sync_period_s must be positive, from 1e-9 (1 ns) to 9.2e9"),
    ("flush-sync-policies", "sync_period_s=1e-300", "sync_period_s must be positive, from 1e-9 (1 ns) to 9.2e9"),
    ("flush-sync-policies", "sync_period_s=0", "sync_period_s must be positive"),
    ("flush-sync-policies", "memory_mb=-1", "memory_mb must be positive"),
    ("checkpoint-many-vchannels", "vchannels=1", "vchannels must be at least 2"),
    ("checkpoint-many-vchannels", "vchannels=5000", "vchannels must be at most"),
    ("flush-drop-collection", "drop_at_s=-1", "drop_at_s must not be negative"),
    ("flush-drop-collection", "stop_at_s=-1", "stop_at_s must not be negative"),
])
def test_an_option_out_of_range_is_refused_before_anything_runs(tmp_path, capsys, scenario, option, needle):
    err = refused(capsys, tmp_path, "simulate", "--scenario", scenario, "--out", "OUT", "--option", option)
    assert needle in err


def test_a_workload_file_that_is_not_text_is_named(tmp_path, capsys):
    steps = tmp_path / "steps.json"
    steps.write_bytes(b"\xff\xfe\x00")  # the message was just "utf-8" (UnicodeDecodeError's first argument)
    err = refused(capsys, tmp_path, "simulate", "--scenario", "workload", "--out", "OUT", "--option", f"steps={steps}")
    assert f"{steps} is not UTF-8 text" in err


def test_a_parameter_too_large_for_go_is_refused(tmp_path, capsys):
    # 9e25 ns passed the checks and overflowed a timestamp's bytes inside the run (a traceback)
    err = refused(capsys, tmp_path, "simulate", "--scenario", "tso-basics", "--out", "OUT",
                  "--param", "tso.save_interval_ns=" + "9" * 26)
    assert "parameter tso.save_interval_ns must fit a 64-bit integer" in err


@pytest.mark.parametrize("kwargs,needle", [
    ({"options": [("proxies", 3)]}, "options are a dict"),  # AttributeError: 'list' object has no attribute 'items'
    ({"params": ["timetick.time_tick_interval_ns"]}, "params are a dict"),
    ({"options": {"proxies": 1.5}}, "option proxies takes a whole number, got 1.5"),  # ran with 1 proxy
    ({"options": {"proxies": True}}, "option proxies takes a whole number, got True"),  # ran with 1 proxy
    ({"switches": 5}, "switches are a switch's name or a list of names"),  # TypeError: 'int' object is not iterable
    ({"duration_s": True}, "duration must be a positive number of seconds, got True"),  # ran for 1 s
    ({"duration_s": 1e300}, r"duration must be at most 100 years \(3.156e\+09 s\)"),  # ran until killed
])
def test_simulate_names_a_bad_options_or_params_argument(kwargs, needle):
    with pytest.raises(ValueError, match=needle):
        milvus_edu.simulate("timetick-basics", **{"duration_s": 1, **kwargs})


_READ = {"at": 1, "client": "c2", "op": "query", "collection": "C0", "ids": ["A1"]}


@pytest.mark.parametrize("change,needle", [
    ({"at": float("nan")}, "step 2: at must be a finite, non-negative number of seconds, got nan"),
    ({"at": float("inf")}, "step 2: at must be a finite"),
    ({"timeout": -1}, "step 2: timeout must be a positive number of seconds, got -1"),
    ({"timeout": "5"}, "step 2: timeout must be a positive number"),
    ({"limit": 0}, "step 2: limit must be a whole number of rows, 1 or more, got 0"),
    ({"limit": "x"}, "step 2: limit must be a whole number"),
])
def test_a_workload_step_with_a_bad_time_timeout_or_limit_is_refused(change, needle):
    steps = [{"at": 0, "client": "c1", "op": "create_collection", "collection": "C0"}, {**_READ, **change}]
    with pytest.raises(ValueError, match=needle):
        milvus_edu.simulate("workload", duration_s=2, options={"steps": steps})


@pytest.mark.parametrize("delta", [1e300, -1e300, 2.0 ** 46])
def test_a_clock_jump_beyond_what_a_timestamp_holds_is_refused(delta):
    # it overflowed inside the run ("int too big to convert") after the run folder was begun
    with pytest.raises(ValueError, match="at most 100 years"):
        milvus_edu.ClockJump("rootcoord-1", 1000.0, delta_ms=delta)


@settings(max_examples=40, deadline=None)
@given(st.one_of(st.sampled_from(["nan", "-inf", "Infinity", "1e400", " NaN "]), st.text(max_size=12)))
def test_any_text_as_a_number_option_is_a_finite_number_or_refused_in_one_line(text):
    from milvus_edu.registry import get_scenario, scenario_options

    try:
        value = scenario_options(get_scenario("timetick-basics"), {"inserts_per_s": text})["inserts_per_s"]
    except ValueError as exc:
        assert "\n" not in str(exc) and "inserts_per_s" in str(exc)
    else:
        assert math.isfinite(value)


@settings(max_examples=30, deadline=None)
@given(st.text(max_size=20).filter(lambda t: t not in scenarios() and not t.startswith("-")))
def test_any_text_as_a_scenario_name_exits_2_with_one_line_and_writes_nothing(tmp_path_factory, text):
    out = tmp_path_factory.mktemp("run") / "out"
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(["simulate", "--scenario", text, "--out", str(out)])
    assert code == 2 and len(err.getvalue().strip().splitlines()) == 1 and "unknown scenario" in err.getvalue()
    assert not out.exists()


@pytest.mark.parametrize("args", [
    ["simulate", "--scenario", "tso-basics", "--out", ""],
    ["simulate", "--scenario", "tso-basics", "--out", " "],
    ["demo", "--out", ""],  # an empty --out used to write ./milvus-edu-demo, as if none were given
])
def test_an_empty_out_is_refused_not_read_as_the_current_folder(tmp_path, capsys, monkeypatch, args):
    monkeypatch.chdir(tmp_path)  # empty: a run here would have been written and passed
    err = refused(capsys, tmp_path, *args)
    assert "--out is empty; give the name of a new folder" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("option", ["--kill", "--restart"])
def test_fork_names_an_empty_node(tmp_path, capsys, option):
    # an empty --kill was taken for no option at all and reported as "a switch intervention names a bug switch"
    err = refused(capsys, tmp_path, "fork", str(tmp_path), "--at", "1", option, "", "--out", "OUT")
    assert "an intervention names a node" in err and "got ''" in err


def test_fork_refuses_a_huge_clock_jump_before_running(tmp_path, capsys):
    err = refused(capsys, tmp_path, "fork", str(tmp_path), "--at", "1", "--clock-jump", "rootcoord-1:1e300",
                  "--out", "OUT")
    assert "argument --clock-jump: a clock jump is a non-zero step of at most 100 years" in err  # not delta_ms


@pytest.mark.parametrize("where", ["missing/trace.json", "file.txt/trace.json"])
def test_export_into_a_folder_that_is_not_there_is_the_users_mistake(tmp_path, capsys, where):
    (tmp_path / "file.txt").write_text("mine")
    err = refused(capsys, tmp_path, "export", str(tmp_path), "--perfetto", str(tmp_path / where))
    assert "is not a folder; create it or choose a file in an existing folder" in err  # was exit 1, "could not write"
    assert (tmp_path / "file.txt").read_text() == "mine"


def test_why_violation_with_a_summary_that_is_not_an_object(tmp_path, capsys):
    (tmp_path / "events.jsonl").write_text('{"run_id":"r","seq":0,"t_ms":1,"node":"x","kind":"tso.save"}\n')
    (tmp_path / "summary.json").write_text("[1, 2]\n")  # AttributeError: 'list' object has no attribute 'get'
    err = refused(capsys, tmp_path, "why", str(tmp_path), "--violation", "1")
    assert "summary.json is not a run summary (it holds a JSON list)" in err


@pytest.mark.parametrize("command", ["sweep", "compare"])
def test_a_grid_or_workload_file_that_is_not_text_is_named(tmp_path, capsys, command):
    bad = tmp_path / "grid.json"
    bad.write_bytes(b"\xff\xfe{}")
    args = ["sweep", str(bad), "--out", "OUT"] if command == "sweep" else ["compare", "--workload", str(bad)]
    # sweep: a UnicodeDecodeError traceback; compare: the line "'utf-8' codec can't decode..."
    err = refused(capsys, tmp_path, *args)
    assert f"{bad} is not UTF-8 text" in err


def test_replay_into_a_users_folder_is_refused_and_leaves_it_as_it_was(tmp_path, capsys):
    token = milvus_edu.simulate("tso-basics", duration_s=0.5).token
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    code, _, err = run_main(capsys, "replay", token, "--out", str(mine))
    assert code == 2 and "--force" in err and len(err.strip().splitlines()) == 1
    assert [p.name for p in mine.iterdir()] == ["notes.txt"] and (mine / "notes.txt").read_text() == "keep"


def test_simulate_names_a_network_that_is_not_network_params():
    with pytest.raises(TypeError, match="network is a milvus_edu.sim.kernel.NetworkParams, got str"):
        milvus_edu.simulate("tso-basics", duration_s=1, network="lossy")  # was an AttributeError from inside SimPy


def test_why_on_events_without_the_run_log_columns_names_one(tmp_path):
    (tmp_path / "events.jsonl").write_text('{"run_id":"r","seq":0,"t_ms":1,"node":"x","kind":"tso.save"}\n')
    events = milvus_edu.load_run(tmp_path)[["seq", "t_ms", "node", "kind"]]
    with pytest.raises(ValueError, match="these events lack the run-log column 'run_id'"):  # was KeyError: 'request'
        milvus_edu.why(events, read=1)


@pytest.mark.parametrize("item,needle", [
    ({"kind": "kill", "node": "proxy-1"}, "lacks 't_ms'; give node, t_ms"),
    ({"kind": "pause", "t_ms": 5.0}, "lacks 'node'"),
    ({"kind": "kill", "node": "proxy-1", "t_ms": 5.0, "at": 1}, "has no field 'at'"),
])
def test_an_intervention_dict_says_which_field_is_wrong(item, needle):
    with pytest.raises(ValueError, match=needle):  # was "not a kill intervention: {...}" and nothing more
        milvus_edu.simulate("timetick-basics", duration_s=1, interventions=[item])


@pytest.mark.parametrize("scenario", ["timetick-basics", "flush-basics", "seed-example"])
def test_a_mistyped_proxy_count_is_refused_not_a_memory_error(tmp_path, capsys, scenario):
    err = refused(capsys, tmp_path, "simulate", "--scenario", scenario, "--out", "OUT", "--option", "proxies=100000000")
    assert "has at most 1,000 proxies in this model, got 100,000,000" in err


def test_running_out_of_memory_is_one_line_exit_1(tmp_path, capsys, monkeypatch):
    from milvus_edu.sim import run as run_module

    def too_big(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(run_module, "simulate", too_big)
    code, _, err = run_main(capsys, "simulate", "--scenario", "tso-basics", "--out", str(tmp_path / "r"))
    assert code == 1 and len(err.strip().splitlines()) == 1 and "out of memory" in err


@pytest.mark.parametrize("grid", ["[1]", '{"scenario": ["tso-basics"]}'])
def test_load_sweep_of_a_folder_whose_grid_is_not_a_sweeps(tmp_path, grid):
    from milvus_edu.sweep import SweepFolderError, load_sweep

    (tmp_path / "grid.json").write_text(grid)  # was TypeError "list indices must be integers" / KeyError 'options'
    with pytest.raises(SweepFolderError, match="grid.json is not a sweep's grid; give the --out of a sweep"):
        load_sweep(tmp_path, spark=object())  # refused before Spark is asked for anything


def test_flush_latency_of_runs_without_a_flush_is_an_empty_table(tmp_path):
    from milvus_edu.mechanisms.flush.analysis import FLUSH_LATENCY_COLUMNS, flush_latency_pd

    (tmp_path / "events.jsonl").write_text('{"run_id":"r","seq":0,"t_ms":1,"node":"x","kind":"tso.save"}\n')
    table = flush_latency_pd(milvus_edu.load_run(tmp_path))  # was KeyError: 'called_ms'
    assert list(table.columns) == FLUSH_LATENCY_COLUMNS and table.empty


def test_force_never_replaces_an_objects_folder_a_run_did_not_write(tmp_path, capsys):
    out = tmp_path / "mine"
    (out / "objects").mkdir(parents=True)
    (out / "objects" / "photo.jpg").write_text("mine")
    code, _, err = run_main(capsys, "simulate", "--scenario", "tso-basics", "--out", str(out), "--force")
    assert code == 2 and "objects exists and was not written by a milvus-edu run" in err
    assert [p.relative_to(out).as_posix() for p in out.rglob("*")] == ["objects", "objects/photo.jpg"]


def test_sweep_refuses_an_empty_out_before_spark(tmp_path, capsys, monkeypatch):
    grid = tmp_path / "grid.json"
    grid.write_text('{"scenario": "tso-basics", "seeds": 1}')
    monkeypatch.chdir(tmp_path)  # not empty: an empty --out was read as this folder
    err = refused(capsys, tmp_path, "sweep", str(grid), "--out", "")
    assert "--out is empty; give the name of a new folder" in err
    assert [p.name for p in tmp_path.iterdir()] == ["grid.json"]


def test_compare_refuses_an_empty_out_before_running_either_side(tmp_path, capsys, monkeypatch):
    from milvus_edu.real import compare as compare_module

    def no_server(*args, **kwargs):
        raise AssertionError("the real side must not start")

    monkeypatch.setattr(compare_module, "run_workload", no_server)
    monkeypatch.chdir(tmp_path)
    err = refused(capsys, tmp_path, "compare", "--out", "")
    assert "--out is empty; give the name of a new folder" in err and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("api, arg", [("simulate", "out_dir"), ("run_sweep", "out"), ("compare", "out_dir")])
def test_an_empty_folder_name_in_python_names_the_python_argument(tmp_path, monkeypatch, api, arg):
    """One check for an empty folder name, worded for the caller: Python names its own argument (the command
    line says --out, above); nothing is written to the current folder and nothing starts."""
    from milvus_edu.real.compare import compare
    from milvus_edu.sweep import run_sweep

    calls = {"simulate": lambda out: milvus_edu.simulate("tso-basics", duration_s=1, out_dir=out),
             "run_sweep": lambda out: run_sweep({"scenario": "tso-basics", "seeds": 1}, out),
             "compare": lambda out: compare(out_dir=out)}
    from milvus_edu.sim.run import RunFolderError

    monkeypatch.chdir(tmp_path)
    with pytest.raises(RunFolderError) as caught:
        calls[api](" ")
    assert str(caught.value) == f"{arg} is empty; give the name of a new folder"
    assert caught.value.cli == "--out is empty; give the name of a new folder"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("master", ["nope", "", "local[", "spark://"])
def test_sweep_refuses_a_master_that_is_no_spark_master_before_writing_or_starting_anything(tmp_path, capsys, master):
    grid = tmp_path / "grid.json"
    grid.write_text('{"scenario": "tso-basics", "seeds": 1}')
    # it wrote the sweep folder's grid.json, then started a JVM that failed (exit 1, "Spark did not start")
    err = refused(capsys, tmp_path, "sweep", str(grid), "--out", "OUT", "--master", master)
    assert "argument --master: expected a Spark master such as local[2] or spark://host:7077" in err


@pytest.mark.parametrize("master", ["local", "local[2]", "local[*]", "local[4,2]", "local-cluster[2,1,1024]", "yarn",
                                    "spark://host:7077", "k8s://https://host:443"])
def test_the_spark_master_forms_are_accepted(master):
    from milvus_edu.cli import build_parser

    args = build_parser().parse_args(["sweep", "grid.json", "--out", "o", "--master", master])
    assert args.master == master


def test_fork_of_a_folder_whose_log_was_damaged_still_names_the_true_first_difference(tmp_path):
    run = milvus_edu.simulate("tso-basics", duration_s=1, out_dir=tmp_path / "run")
    intact = milvus_edu.fork(run.token, 500.0, milvus_edu.Kill("rootcoord-1")).first_difference
    log = tmp_path / "run" / "events.jsonl"
    lines = log.read_text().splitlines(keepends=True)
    lines[2] = '{"broken\n'
    log.write_text("".join(lines))
    # it said "the runs first differ at event 3 (0.000 s)", before the fork's time, where no fork changes anything
    assert milvus_edu.fork(tmp_path / "run", 500.0, milvus_edu.Kill("rootcoord-1")).first_difference == intact > 2


@pytest.mark.parametrize("command", [["timeline", ""], ["why", "", "--read", "1"], ["export", "", "--perfetto", "OUT"]])
def test_an_empty_run_path_is_named_as_empty(tmp_path, capsys, command):
    err = refused(capsys, tmp_path, *command)  # it said ". has no events.parquet or events.jsonl"
    assert "the run path is empty" in err


@pytest.mark.parametrize("summary,needle", [
    ('{"checks": 5}', "checks.violations is not a list of violations"),  # AttributeError: 'int' ... 'get'
    ('{"checks": {"violations": 5}}', "checks.violations is not a list of violations"),  # TypeError: not iterable
    ('{"checks": {"violations": [1]}}', "checks.violations is not a list of violations"),
    ('{"checks": {"violations": [{"seqs": ["x"]}]}}', "violation 1's seqs in summary.json are not event numbers"),
])
def test_why_violation_on_a_hand_edited_summary_says_what_is_wrong(tmp_path, capsys, summary, needle):
    (tmp_path / "events.jsonl").write_text('{"run_id":"r","seq":0,"t_ms":1,"node":"x","kind":"tso.save"}\n')
    (tmp_path / "summary.json").write_text(summary + "\n")
    err = refused(capsys, tmp_path, "why", str(tmp_path), "--violation", "1")
    assert needle in err


@pytest.mark.parametrize("detail", ["not json", "[1, 2]"])
def test_export_of_a_log_with_a_hand_edited_detail_shows_that_event_plainly(tmp_path, detail):
    import json

    row = {"run_id": "r", "seq": 0, "t_ms": 1.0, "node": "client-1", "kind": "client.read_start", "request": 1,
           "detail": detail}  # JSONDecodeError / AttributeError: 'list' object has no attribute 'get'
    (tmp_path / "events.jsonl").write_text(json.dumps(row) + "\n")
    assert milvus_edu.export_perfetto(tmp_path, tmp_path / "trace.json") > 0
    names = [e.get("name") for e in json.loads((tmp_path / "trace.json").read_text())["traceEvents"]]
    assert "client.read_start" in names  # the row's plain instant


def _registered_analyses():
    from milvus_edu.registry import mechanisms

    return sorted((name, fns) for m in mechanisms() if m.analyses for name, fns in m.analyses().items())


@pytest.fixture(scope="module")
def small_run():
    return milvus_edu.simulate("seed-example", seed=1, duration_s=1)


@pytest.mark.parametrize("name,fns", _registered_analyses(), ids=[n for n, _ in _registered_analyses()])
def test_an_analysis_given_the_wrong_thing_says_what_to_pass(name, fns, small_run, tmp_path):
    from milvus_edu.analysis import LoadedEvents

    spark_fn, pandas_fn = fns
    frame = small_run.events
    refused = {  # what each side is given by mistake, and the words its one line must hold
        pandas_fn: [(small_run, f"{pandas_fn.__name__}(run.events)"),  # was TypeError: not subscriptable
                    (str(tmp_path), "milvus_edu.load_run("),  # was: string indices must be integers
                    (None, "not None"),
                    (LoadedEvents(events=1, malformed=2), f"call {name}(loaded.events)")],
        spark_fn: [(frame, f"call {name}_pd (the pandas twin)"),  # was a bare AssertionError inside pyspark
                   (LoadedEvents(events=1, malformed=2), f"{name}(loaded.events)"),
                   (small_run, f"call {name}_pd(run.events)"),
                   (tmp_path, "load_events(spark, ")],
    }
    for fn, cases in refused.items():
        for wrong_thing, words in cases:
            with pytest.raises(TypeError) as info:
                fn(wrong_thing)
            message = str(info.value)
            assert message.startswith(f"{fn.__name__} takes ") and words in message and "\n" not in message
    with pytest.raises(ValueError, match=rf"^{pandas_fn.__name__}: the frame is not a run log's events "
                                         r"\(it lacks the column\(s\) kind\)"):
        pandas_fn(frame.drop(columns=["kind"]))  # was KeyError: 'kind'
    assert list(pandas_fn(frame[frame.seq < 0]).columns) == list(pandas_fn(frame).columns)  # rows filtered: fine


def test_binlog_vs_meta_pd_says_what_to_pass(tmp_path):
    from milvus_edu.mechanisms.flush.analysis import binlog_vs_meta_pd

    with pytest.raises(TypeError, match=r"^binlog_vs_meta_pd takes a run log's events as a pandas DataFrame, "
                                        r"not a path: read the run first"):
        binlog_vs_meta_pd(tmp_path, [tmp_path])


def test_every_bad_input_to_the_api_is_a_value_error_naming_the_fix(tmp_path):
    """A caller catches bad input to any of milvus-edu's functions as ``ValueError``, whatever module raised it."""
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("my notes")
    existing = tmp_path / "trace.json"
    existing.write_text("{}")
    run = milvus_edu.simulate("tso-basics", seed=1, duration_s=1, out_dir=tmp_path / "run")
    cases = [
        (lambda: milvus_edu.load_run(tmp_path / "absent"), "does not exist"),  # RunLogError
        (lambda: milvus_edu.simulate("tso-basics", duration_s=1, out_dir=tmp_path / "mine"),  # RunFolderError
         r"choose another out_dir or pass force=True to replace its run files"),  # Python's words, not the CLI's
        (lambda: milvus_edu.export_perfetto(run.out_dir, existing), "exists"),  # ExportError
        (lambda: milvus_edu.replay("not-a-token"), "token"),  # TokenError
    ]
    for call, needle in cases:
        with pytest.raises(ValueError, match=needle):
            call()
    assert (tmp_path / "mine" / "notes.txt").read_text() == "my notes" and existing.read_text() == "{}"


_LATE = [{"at": 0.1, "client": "c1", "op": "create_collection", "collection": "C0"},
         {"at": 500, "client": "c1", "op": "insert", "collection": "C0", "data": [{"id": 1}]},
         {"at": 900, "client": "c1", "op": "query", "collection": "C0", "ids": [1]}]


def test_workload_steps_after_the_runs_end_are_named_not_silently_dropped(tmp_path, capsys):
    """A workload whose times were meant as milliseconds ran its first step and quietly nothing else."""
    with pytest.warns(UserWarning, match=r"2 of the workload's 3 steps are at or after the run's end \(5 s\), "
                                         r"the first at 500 s, and will not run; a step's at is in seconds"):
        run = milvus_edu.simulate("workload", duration_s=5, options={"steps": _LATE})
    assert run.summary["events_by_kind"].get("client.insert", 0) == 0  # it is true: they did not run
    path = tmp_path / "late.json"
    path.write_text(json.dumps(_LATE), encoding="utf-8")
    code, _, err = run_main(capsys, "simulate", "--scenario", "workload", "--option", f"steps={path}",
                            "--duration", "5", "--out", str(tmp_path / "r"))
    assert code == 0 and err.splitlines()[0].startswith("milvus-edu: warning: 2 of the workload's 3 steps are")


@pytest.mark.parametrize("scenario, option", [("datanode-crash-recovery", "crash_at_s"),
                                              ("tsafe-stall-proxy-restart", "kill_at_s"),
                                              ("flush-drop-collection", "stop_at_s"),
                                              ("ddl-recreate-under-load", "drop_at_s")])
def test_a_fault_time_option_after_the_runs_end_is_named_not_silently_dropped(scenario, option):
    # a crash at 500 s in a 1 s run quietly never happened, while workload steps after the end were warned of
    with pytest.warns(UserWarning, match=rf"^option {option}=1 is at or after the run's end \(1 s\), so what it times "
                                         rf"will not happen in this run; {option} is in seconds from the run's start"):
        milvus_edu.simulate(scenario, duration_s=1, options={option: "1"})


def test_the_command_warns_of_a_crash_after_the_end_in_one_line_and_runs(tmp_path, capsys):
    code, out, err = run_main(capsys, "simulate", "--scenario", "datanode-crash-recovery", "--option", "crash_at_s=500",
                              "--duration", "1", "--out", str(tmp_path / "r"))
    assert code == 0 and "wrote " in out
    assert err.splitlines() == ["milvus-edu: warning: option crash_at_s=500 is at or after the run's end (1 s), so what "
                                "it times will not happen in this run; crash_at_s is in seconds from the run's start: "
                                "give a longer run or an earlier time"]


def test_a_time_option_before_the_end_or_left_at_its_default_warns_nothing():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        milvus_edu.simulate("datanode-crash-recovery", duration_s=1, options={"crash_at_s": 0.5})
        milvus_edu.simulate("datanode-crash-recovery", duration_s=1)  # its own crash at 26 s: the run is cut short
        milvus_edu.simulate("flush-drop-collection", duration_s=1, options={"stop_at_s": 0})  # 0: no stop


def test_every_option_that_times_something_in_the_run_is_declared_a_time():
    from milvus_edu.sim.scenarios import At

    timed = {(name, option) for name, spec in scenarios().items() for option in spec.options
             if option.endswith("_at_s")}
    assert timed and all(isinstance(scenarios()[name].options[option], At) for name, option in timed), timed


def _one_warning(call) -> str:
    """The one UserWarning ``call()`` gives (none other), as text."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call()
    assert [w.category for w in caught] == [UserWarning], [str(w.message) for w in caught]
    return str(caught[0].message)


@pytest.mark.parametrize("scenario, duration_s, options, message", [
    # the issue: a restart 500 s after the kill silently never happened
    ("tsafe-stall-proxy-restart", 6, {"restart_after_s": 500},
     "option restart_after_s=500 puts what it times at 505 s, at or after the run's end (6 s), so it will not happen "
     "in this run; restart_after_s is in seconds after kill_at_s (5 s): give a longer run or a shorter delay"),
    # the start given too, inside the run: only the delay is named; landing exactly on the end counts
    ("datanode-crash-recovery", 1, {"crash_at_s": 0.5, "restart_after_s": "0.5"},
     "option restart_after_s=0.5 puts what it times at 1 s, at or after the run's end (1 s), so it will not happen in "
     "this run; restart_after_s is in seconds after crash_at_s (0.5 s): give a longer run or a shorter delay"),
    ("ddl-recreate-under-load", 3, {"gap_s": 2},
     "option gap_s=2 puts what it times at 4 s, at or after the run's end (3 s), so it will not happen in this run; "
     "gap_s is in seconds after drop_at_s (2 s): give a longer run or a shorter delay"),
])
def test_a_delay_option_that_lands_after_the_runs_end_is_named_not_silently_dropped(scenario, duration_s, options,
                                                                                    message):
    runs = []
    assert _one_warning(lambda: runs.append(milvus_edu.simulate(scenario, duration_s=duration_s,
                                                                options=options))) == message
    assert runs[0].summary["duration_s"] == duration_s  # a warning, and the run still ran


def test_the_command_warns_of_a_restart_after_the_end_in_one_line_and_runs(tmp_path, capsys):
    code, out, err = run_main(capsys, "simulate", "--scenario", "tsafe-stall-proxy-restart", "--option",
                              "restart_after_s=500", "--duration", "6", "--out", str(tmp_path / "r"))
    assert code == 0 and "wrote " in out
    assert err.splitlines() == ["milvus-edu: warning: option restart_after_s=500 puts what it times at 505 s, at or "
                                "after the run's end (6 s), so it will not happen in this run; restart_after_s is in "
                                "seconds after kill_at_s (5 s): give a longer run or a shorter delay"]


def test_a_delay_carried_by_a_runs_token_warns_again_when_it_is_replayed():
    with pytest.warns(UserWarning, match=r"^option restart_after_s=500 puts what it times at 505 s"):
        run = milvus_edu.simulate("tsafe-stall-proxy-restart", duration_s=6, options={"restart_after_s": 500})
    with pytest.warns(UserWarning, match=r"^option restart_after_s=500 puts what it times at 505 s"):
        milvus_edu.replay(run.token)


def test_a_delay_inside_the_run_left_at_its_default_or_after_a_start_past_the_end_warns_nothing():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        milvus_edu.simulate("tsafe-stall-proxy-restart", duration_s=6, options={"restart_after_s": 0.5})
        milvus_edu.simulate("tsafe-stall-proxy-restart", duration_s=6)  # its own restart at 7 s: the run is cut short
        # the kill at 5 s is itself after a 3 s run: nothing it would follow happens (its own warning, when given)
        milvus_edu.simulate("tsafe-stall-proxy-restart", duration_s=3, options={"restart_after_s": 500})
    assert _one_warning(lambda: milvus_edu.simulate("tsafe-stall-proxy-restart", duration_s=3, options={
        "kill_at_s": 4, "restart_after_s": 500})).startswith("option kill_at_s=4 is at or after the run's end (3 s)")


def test_every_option_that_is_a_delay_after_a_time_is_declared_one_counting_from_a_time_option():
    from milvus_edu.sim.scenarios import After, At

    delays = {(name, option): value for name, spec in scenarios().items() for option, value in spec.options.items()
              if option.endswith("_after_s") or isinstance(value, After)}
    assert delays and all(isinstance(value, After) for value in delays.values()), delays
    for (name, option), value in delays.items():
        assert isinstance(scenarios()[name].options.get(value.since), At), (name, option, value.since)


@pytest.mark.parametrize("option", ["kill_at_s", "restart_after_s"])
def test_a_time_or_delay_option_given_a_word_is_refused_as_a_number(tmp_path, capsys, option):
    # the refusal named the option's Python type: "takes At", "takes After[kill_at_s]"
    err = refused(capsys, tmp_path, "simulate", "--scenario", "tsafe-stall-proxy-restart", "--out", "OUT",
                  "--option", f"{option}=soon")
    assert err == f"milvus-edu: error: option {option} takes a number, got 'soon'\n"


def test_a_delay_keeps_the_option_it_counts_from_when_given_pickled_or_copied():
    import copy
    import pickle

    from milvus_edu.registry import get_scenario, scenario_options
    from milvus_edu.sim.scenarios import After

    given = scenario_options(get_scenario("tsafe-stall-proxy-restart"), {"restart_after_s": "1.5"})["restart_after_s"]
    assert isinstance(given, After) and given == 1.5 and given.since == "kill_at_s"
    for again in (pickle.loads(pickle.dumps(given)), copy.deepcopy(given)):
        assert type(again) is type(given) and again == 1.5
    assert json.dumps({"restart_after_s": given}) == '{"restart_after_s": 1.5}'
    with pytest.raises(TypeError, match="After needs the name of the option the delay counts from"):
        After(2.0)


def test_a_scenarios_own_steps_cut_by_a_short_duration_warn_nothing():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        milvus_edu.simulate("insert-then-search", duration_s=2)  # its steps go on to 6.5 s
        milvus_edu.simulate("workload", duration_s=10, options={"steps": _LATE[:1]})


def test_a_run_folder_error_speaks_python_to_python_and_the_command_line_to_the_command_line(tmp_path, capsys):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("my notes")
    with pytest.raises(ValueError) as raised:
        milvus_edu.simulate("tso-basics", duration_s=1, out_dir=tmp_path / "mine")
    assert "--" not in str(raised.value) and "out_dir" in str(raised.value)
    code, _, err = run_main(capsys, "simulate", "--scenario", "tso-basics", "--out", str(tmp_path / "mine"))
    assert code == 2 and err.strip().endswith("choose another --out or add --force to replace its run files")
    assert (tmp_path / "mine" / "notes.txt").read_text() == "my notes"
