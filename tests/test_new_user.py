"""Rough edges a new user met: following the README and the CLI with plausible mistakes, each pinned by a test that
failed before its fix."""

import json
import re
import shlex
import warnings
from pathlib import Path

import pytest

import milvus_edu
from milvus_edu.registry import scenarios
from run_support import digests, run_main


def test_a_fork_whose_fault_stops_progress_blames_the_fault_not_params_the_user_never_gave(capsys, tmp_path):
    # seed-example with querynode-1 killed at 1 s: tsafe stops and tsafe-progress fails; the exit status is 0
    # because the fault is the fork's lesson, and the note must say so, not speak of --param/--option values
    milvus_edu.simulate("seed-example", duration_s=3, out_dir=tmp_path / "a", keep_events=False)
    code, out, err = run_main(capsys, "fork", str(tmp_path / "a"), "--at", "1", "--kill", "querynode-1",
                              "--out", str(tmp_path / "b"))
    assert code == 0, err
    assert "checks FAILED: 2 tsafe-progress violations;" in out
    assert "--param" not in out and "--option" not in out
    assert "(expected: the fork's kill querynode-1 at 1.000 s keeps this run from making progress;" in out


README = Path(__file__).resolve().parent.parent / "README.md"


def readme_commands() -> list[list[str]]:
    """Every ``milvus-edu ...`` command the README shows, in its code blocks (continuation lines joined, comments
    dropped) and inline, as argument lists without the program's name."""
    text = README.read_text(encoding="utf-8")
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if words[:1] == ["milvus-edu"]:
                commands.append(words[1:])
    commands += [shlex.split(c)[1:] for c in re.findall(r"`(milvus-edu fork [^`]+)`", text)]
    return commands


def option(args: list[str], name: str) -> str | None:
    return args[args.index(name) + 1] if name in args else None


def test_the_readmes_python_imports_all_import():
    # `from milvus_edu.analysis import many, read_waits` failed: read_waits lives in the query lesson's analyses
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)
    imports = [line.strip() for block in blocks for line in block.splitlines()
               if re.match(r"\s*(from milvus_edu\S* import |import milvus_edu)", line)]
    assert len(imports) >= 4
    for line in imports:
        exec(line, {})


def test_no_two_readme_commands_write_the_same_run_folder():
    # the fork example wrote to runs/b, which the README's simulate of tso_skip_load_on_init had already filled
    outs = [option(args, "--out") for args in readme_commands() if args[0] in ("simulate", "fork")]
    outs = [o for o in outs if o is not None]
    assert len(outs) >= 10 and len(outs) == len(set(outs)), outs


@pytest.mark.slow
def test_the_readmes_fork_example_forks_the_run_the_readme_made(capsys, tmp_path, monkeypatch):
    # it forked runs/a, a tso-failover run, killing proxy-1, a node that scenario does not have
    monkeypatch.chdir(tmp_path)
    commands = readme_commands()
    [fork_args] = [args for args in commands if args[0] == "fork"]
    [made_by] = [args for args in commands if args[0] == "simulate" and option(args, "--out") == fork_args[1]]
    code, _, err = run_main(capsys, *made_by, "--duration", "3")
    assert code == 0, err
    code, out, err = run_main(capsys, *fork_args)
    assert code == 0, err
    assert "the runs first differ at event" in out and (tmp_path / option(fork_args, "--out") / "summary.json").exists()


@pytest.mark.parametrize("force", [[], ["--force"]])
@pytest.mark.parametrize("source, target", [("run", "run/events.jsonl"), ("run", "run/summary.json"),
                                            ("run/events.parquet", "run/events.jsonl"),
                                            ("run/events.jsonl", "run/./events.jsonl")])
def test_export_never_writes_over_the_run_it_exports(capsys, tmp_path, monkeypatch, force, source, target):
    # `export run --perfetto run/events.jsonl --force` replaced the run log with the trace (and without --force the
    # refusal suggested adding it)
    monkeypatch.chdir(tmp_path)
    milvus_edu.simulate("tso-basics", duration_s=1, out_dir="run", keep_events=False)
    before = digests(tmp_path)
    code, out, err = run_main(capsys, "export", source, "--perfetto", target, *force)
    assert code == 2 and out == ""
    assert err == (f"milvus-edu: error: {Path(target)} is a file of the run being exported; choose another file, "
                   "e.g. trace.json\n")
    assert digests(tmp_path) == before
    code, out, err = run_main(capsys, "export", source, "--perfetto", "run/trace.json", *force)
    assert code == 0 and (tmp_path / "run" / "trace.json").is_file(), err


def test_binlog_rows_pd_reads_one_run_folder_given_as_a_string(tmp_path):
    # binlog_rows_pd("runs/a") took each character of the name for a folder: "r: not a milvus-edu run folder"
    from milvus_edu.mechanisms.flush.analysis import binlog_rows_pd

    run = milvus_edu.simulate("seed-example", duration_s=5, out_dir=tmp_path / "a", keep_events=False)
    assert run.summary["checks"]["ok"]
    as_list = binlog_rows_pd([tmp_path / "a"])
    assert len(as_list) >= 1 and as_list["binlog_rows"].sum() >= 1
    for one in (str(tmp_path / "a"), tmp_path / "a"):
        assert binlog_rows_pd(one).equals(as_list)


def test_load_run_of_something_not_a_path_says_what_it_reads_and_where_the_log_is():
    # load_run(run) raised pathlib's "expected str, bytes or os.PathLike object, not RunResult"
    run = milvus_edu.simulate("tso-basics", duration_s=1)
    cases = [(run, "got RunResult; a run result holds its run log already: run.events"),
             (run.events, "got DataFrame; a DataFrame is a run log already"), (None, "got NoneType"), (7, "got int")]
    for given, says in cases:
        with pytest.raises(TypeError) as info:
            milvus_edu.load_run(given)
        assert str(info.value) == f"load_run reads a run folder or an events.parquet/events.jsonl file, {says}"


def test_simulate_takes_one_intervention_as_fork_does_and_refuses_a_class_in_one_line():
    # simulate(interventions=Kill(...)) raised "'Kill' object is not iterable", fork(run, t, Kill) dataclasses'
    # "replace() should be called on dataclass instances"
    from milvus_edu import Kill, fork, simulate

    one = simulate("seed-example", duration_s=2, interventions=Kill("proxy-1", 1000.0))
    listed = simulate("seed-example", duration_s=2, interventions=[Kill("proxy-1", 1000.0)])
    assert one.token == listed.token and one.events.equals(listed.events)
    class_given = "Kill is the class, not an intervention: call it with the node (or switch) and the time"
    for call in (lambda: simulate("seed-example", duration_s=2, interventions=Kill),
                 lambda: simulate("seed-example", duration_s=2, interventions=[Kill]),
                 lambda: fork(listed, 500.0, Kill)):
        with pytest.raises(ValueError, match=re.escape(class_given)):
            call()
    for given in ("kill proxy-1", 5):
        with pytest.raises(ValueError, match=f"^not an intervention: {given!r}; use Kill, Restart"):
            simulate("seed-example", duration_s=2, interventions=given)


@pytest.mark.parametrize("args, says", [
    (["--scenario", "tso-basic"], "unknown scenario 'tso-basic' (did you mean 'tso-basics'?); choose from "),
    (["--scenario", "seed_example"], "unknown scenario 'seed_example' (did you mean 'seed-example'?); choose from "),
    (["--scenario", "tso-basics", "--switch", "skip_wait_safe"],
     "unknown bug switch 'skip_wait_safe' (did you mean 'skip_wait_tsafe'?); choose from "),
    (["--scenario", "timetick-basics", "--option", "proxy=3"],
     "scenario timetick-basics has no option 'proxy' (did you mean 'proxies'?); its options: "),
    (["--scenario", "timetick-basics", "--param", "time_tick_interval_ns=100000000"],
     "unknown parameter 'time_tick_interval_ns' (did you mean 'timetick.time_tick_interval_ns'?); parameters are "),
    (["--scenario", "timetick-basics", "--param", "timetick.time_tick_interval=100000000"],
     "unknown parameter 'timetick.time_tick_interval' (did you mean 'timetick.time_tick_interval_ns'?); timetick has "),
    (["--scenario", "nope"], "unknown scenario 'nope'; choose from "),  # nothing close: no guess
])
def test_a_typo_in_a_name_is_answered_with_the_name_meant(capsys, tmp_path, args, says):
    # the refusals listed every valid name (31 scenarios on one line) and left the user to spot the one they meant
    code, out, err = run_main(capsys, "simulate", *args, "--duration", "1", "--out", str(tmp_path / "o"))
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert err.startswith(f"milvus-edu: error: {says}")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("scenario, options", [("seed-example", {}), ("flush-drop-collection", {"drop_at_s": 1})])
def test_no_event_is_told_with_a_python_none_or_nan(scenario, options):
    # `milvus-edu timeline` told a CreateCollection or DropCollection message as "... (0 row(s), ts ...) to
    # by-dev-rootcoord-dml_0 for None."
    from milvus_edu.narrate import describe

    rows = milvus_edu.simulate(scenario, duration_s=2, options=options).events.to_dict("records")
    ddl = [row for row in rows if row["kind"] == "mq.produce" and row["msg_type"] in ("CreateCollection",
                                                                                       "DropCollection")]
    assert ddl  # the run writes the messages this test is about
    assert describe(ddl[-1]).endswith(" to by-dev-rootcoord-dml_1.")
    for row in rows:
        text = describe(row)
        assert not re.search(r"\bNone\b|\bnan\b|<NA>", text), text


def test_a_workload_step_that_fails_is_named_in_the_report_not_only_counted(capsys, tmp_path):
    # a step that failed in the run (then: rows without "id"; now refused before the run, see the next test; here: an
    # insert into a collection nobody created), and `simulate` printed only "1 client error" on the TSO's line
    steps = [{"at": 0.5, "client": "Client1", "op": "create_collection", "collection": "C0"},
             {"at": 0.9, "client": "Client1", "op": "insert", "collection": "C9", "data": [{"id": "A1"}]}]
    (tmp_path / "steps.json").write_text(json.dumps(steps))
    code, out, err = run_main(capsys, "simulate", "--scenario", "workload", "--option",
                              f"steps={tmp_path / 'steps.json'}", "--duration", "2", "--out", str(tmp_path / "o"))
    assert code == 0, err
    first = json.loads((tmp_path / "o" / "summary.json").read_text())["tso"]["first_client_error"]
    assert first["node"] == "Client1" and "collection not found" in first["error"]
    assert (f"1 client error (the first, event {first['event']:,} at 0.900 s: Client1's request failed: collection not "
            "found") in out


@pytest.mark.parametrize("data, needle", [
    ([{"idx": "A1"}], "step 2: insert data must be rows with an 'id' field, e.g. [{'id': 'A1'}]"),
    (["A1"], "step 2: insert data must be rows with an 'id' field"),
    ([{"id": "A1", "when": {1, 2}}], "step 2: insert data: field 'when' holds a value of type set"),
])
def test_insert_rows_a_real_sdk_would_refuse_are_refused_before_the_run(capsys, tmp_path, data, needle):
    # rows without "id" ran, failed as a client error in the run, and exited 0 with a passing report
    steps = [{"at": 0.5, "client": "Client1", "op": "create_collection", "collection": "C0"},
             {"at": 0.9, "client": "Client1", "op": "insert", "collection": "C0", "data": data}]
    with pytest.raises(ValueError, match=re.escape(needle)):
        milvus_edu.simulate("workload", options={"steps": steps}, duration_s=2)
    if isinstance(data[0], dict) and "when" in data[0]:
        return  # a set is not JSON: no steps file can hold it
    (tmp_path / "steps.json").write_text(json.dumps(steps))
    code, out, err = run_main(capsys, "simulate", "--scenario", "workload", "--option",
                              f"steps={tmp_path / 'steps.json'}", "--duration", "2", "--out", str(tmp_path / "o"))
    assert code == 2 and out == "" and not (tmp_path / "o").exists()
    (line,) = err.strip().splitlines()
    assert line.startswith("milvus-edu: error: step 2: insert data") and needle in line


@pytest.mark.parametrize("command", [["timeline"], ["why", "--read", "1"], ["export", "--perfetto", "OUT"]])
def test_a_run_token_where_a_run_folder_goes_is_told_how_to_make_the_folder(capsys, tmp_path, command):
    # `milvus-edu timeline me1-...` (the token `simulate` prints) said "me1-... does not exist"
    token = milvus_edu.simulate("tso-basics", duration_s=1).token
    args = [command[0], token] + [str(tmp_path / "t.json") if a == "OUT" else a for a in command[1:]]
    code, out, err = run_main(capsys, *args)
    assert code == 2 and out == ""
    assert err == (f"milvus-edu: error: {token[:12]}... is a run token, not a run folder: `milvus-edu replay TOKEN "
                   "--out DIR` makes its folder (in Python, pass milvus_edu.replay(token) instead)\n")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_why_asks_about_a_flush_still_waiting_at_the_end_as_one_that_never_finished():
    # the question read "Why did flush 1 take 198 ms?" above an answer saying it had not finished
    run = milvus_edu.simulate("flush-manual", duration_s=12.2)  # the client flushes at 12 s
    lines = milvus_edu.why(run, flush=1).lines()
    assert lines[0] == "Why had flush 1 not finished when the run ended, 198 ms after it began?"
    assert "had not finished when the run ended, 198 ms after it began" in lines[1]
    assert milvus_edu.why(milvus_edu.simulate("flush-manual", duration_s=16), flush=1).lines()[0].startswith(
        "Why did flush 1 take ")


def test_the_explorer_refuses_an_event_past_the_run_and_a_kind_no_log_has_in_one_line():
    # details(10**9) and causal_past(10**9) raised pandas' and numpy's IndexError, details(-1) showed the last event
    # as "event 0", and jump_to_next("client.reads") (a typo) answered None as if no read were left
    explorer = milvus_edu.explore(milvus_edu.simulate("seed-example", duration_s=2))
    n = len(explorer.events)
    for call in (explorer.details, explorer.causal_past, explorer.question_at):
        for seq in (n, -1):
            with pytest.raises(ValueError, match=re.escape(f"there is no event {seq + 1:,} in this run of {n:,} "
                                                           f"events (seq counts from 0: 0 to {n - 1:,})")):
                call(seq)
    assert explorer.details(n - 1)["number"] == n
    assert explorer.answer({"type": "detail", "seq": n})["error"].startswith(f"there is no event {n + 1:,}")
    with pytest.raises(ValueError, match=re.escape("no event kind is called 'client.reads' (did you mean "
                                                   "'client.read'?)")):
        explorer.jump_to_next("client.reads")
    assert explorer.jump_to_next("client.read") is not None
    assert explorer.jump_to_previous("client.read") is None and explorer.jump_to_next("fault.kill") is None


def test_every_checker_says_what_each_of_its_invariants_promises():
    from milvus_edu.registry import mechanisms

    checkers = [m.checker for m in mechanisms() if m.checker is not None]
    assert len(checkers) >= 4
    for checker in checkers:
        assert set(checker.promises) == set(checker.invariants) and all(checker.promises.values()), checker


@pytest.mark.parametrize("scenario, duration", [("seed-example", "2"), ("flush-basics", "3")])
def test_a_passing_run_promises_only_what_it_tested(capsys, tmp_path, scenario, duration):
    # "checks passed (... durable ...): ... the final binlogs held every acknowledged row once" printed right below
    # "no final audit: the run ended before the last flush completed (durability not judged)"; a run without reads
    # said "every read returned exactly the rows visible at its read timestamp"
    from milvus_edu.registry import get_scenario, scenario_mechanisms

    code, out, err = run_main(capsys, "simulate", "--scenario", scenario, "--duration", duration,
                              "--out", str(tmp_path / "o"))
    assert code == 0, err
    checks = json.loads((tmp_path / "o" / "summary.json").read_text())["checks"]
    [passed] = [line for line in out.splitlines() if line.startswith("checks passed (")]
    said = 0
    for m in scenario_mechanisms(get_scenario(scenario)):
        untested = checks["vacuous"][m.name]
        for name in m.checker.invariants:
            assert (m.checker.promises[name] in passed) == (name not in untested), name
            said += name not in untested
    assert 0 < said < len(checks["invariants"])  # both kinds are in the run


def test_the_min_heap_run_differs_from_the_scan_only_in_run_start_as_the_readme_says():
    # the README called it "same run log", yet the first event names the parameter
    assert "# min-heap; only run.start differs" in README.read_text(encoding="utf-8")
    scan = milvus_edu.simulate("timetick-basics", duration_s=1).events
    heap = milvus_edu.simulate("timetick-basics", duration_s=1, params={"timetick.pchan_stats": "heap"}).events
    assert not scan.iloc[:1].equals(heap.iloc[:1]) and scan.iloc[1:].equals(heap.iloc[1:])


@pytest.mark.parametrize("summary", [{"token": "me1-x"}, {"checks": {"ok": False}}, {"checks": None}])
def test_why_violation_on_a_summary_without_its_checks_does_not_say_every_invariant_held(capsys, tmp_path, summary):
    # a summary.json without checks.violations (edited, or another tool's) was answered "this run has no violations:
    # its checkers found every invariant held"
    milvus_edu.simulate("tso-basics", duration_s=1, out_dir=tmp_path / "r", keep_events=False)
    (tmp_path / "r" / "summary.json").write_text(json.dumps(summary))
    code, out, err = run_main(capsys, "why", str(tmp_path / "r"), "--violation", "1")
    assert code == 2 and out == ""
    assert err == ("milvus-edu: error: this summary.json's checks.violations is not a list of violations (was it "
                   "edited?); run the scenario again for its summary\n")


def test_the_timeline_of_a_log_cut_short_at_a_line_end_says_so(capsys, tmp_path):
    # `head -n 300 events.jsonl > cut/events.jsonl` loaded and printed as if the run had ended there
    milvus_edu.simulate("seed-example", duration_s=2, out_dir=tmp_path / "r", keep_events=False)
    lines = (tmp_path / "r" / "events.jsonl").read_text().splitlines(keepends=True)
    (tmp_path / "cut").mkdir()
    (tmp_path / "cut" / "events.jsonl").write_text("".join(lines[:300]))
    code, out, err = run_main(capsys, "timeline", str(tmp_path / "cut"))
    last = json.loads(lines[299])
    assert code == 0, err
    assert out.splitlines()[-1] == (f"  (the log stops at event 300, {last['t_ms'] / 1000:.3f} s, without the run's end: "
                                    "it was cut short, so what the run did after that is missing)")
    code, out, err = run_main(capsys, "timeline", str(tmp_path / "r"))
    assert code == 0 and "cut short" not in out


def test_a_run_too_short_to_test_anything_promises_nothing(capsys, tmp_path):
    code, out, err = run_main(capsys, "simulate", "--scenario", "tso-basics", "--duration", "0.01",
                              "--out", str(tmp_path / "o"))
    assert code == 0, err
    assert "checks passed: nothing in this run gave an invariant a chance to fail (see below)\n" in out
    assert "strictly greater" not in out and "not tested in this run" in out


def _node_classes():
    import milvus_edu.cluster  # noqa: F401  every component's module
    from milvus_edu.cluster.node import Node

    found, todo = [], [Node]
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo.extend(cls.__subclasses__())
    return found


def test_every_bug_switch_is_declared_by_exactly_one_component():
    # the warning below is only as true as these declarations: a new switch must name the component it changes
    from milvus_edu.config import BugSwitches

    owners = {name: [cls.__name__ for cls in _node_classes() if name in vars(cls).get("SWITCHES", ())]
              for name in BugSwitches.names()}
    assert {name: len(classes) for name, classes in owners.items()} == dict.fromkeys(BugSwitches.names(), 1), owners
    assert all(cls.COMPONENT for cls in _node_classes() if vars(cls).get("SWITCHES"))


def test_a_switch_whose_component_the_scenario_lacks_warns_once_and_names_scenarios_where_it_acts(capsys, tmp_path):
    # tso-basics has no QueryNode: skip_wait_tsafe passed every check there, and nothing said it could not act
    code, out, err = run_main(capsys, "simulate", "--scenario", "tso-basics", "--switch", "skip_wait_tsafe",
                              "--duration", "5", "--out", str(tmp_path / "a"))
    assert code == 0, err
    (line,) = [line for line in err.splitlines() if line.strip()]
    assert line.startswith("milvus-edu: warning: switch skip_wait_tsafe cannot act in tso-basics: it changes the "
                           "QueryNode")
    named = re.search(r"e\.g\. (.*)$", line).group(1).split(", ")
    assert named and all(scenarios()[n].mechanisms[0] == "query" for n in named)
    # the same switch in a scenario the warning named: no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = milvus_edu.simulate(named[0], seed=1, switches=["skip_wait_tsafe"], duration_s=4)
    assert result.summary["switches"] == ["skip_wait_tsafe"]
    # a switch its component is there for does not warn, whichever lesson the scenario is
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        milvus_edu.simulate("seed-example", seed=1, switches=["skip_recovery_filter", "tso_no_window_save"],
                            duration_s=2)
    with pytest.warns(UserWarning, match="switch allocate_outside_enqueue_lock cannot act in tso-basics: it changes "
                                         "the proxy's DML path"):
        milvus_edu.simulate("tso-basics", seed=1, switches=["allocate_outside_enqueue_lock"], duration_s=2)


def test_the_readmes_workload_file_exists_holds_the_readmes_steps_and_runs(capsys, tmp_path, monkeypatch):
    # the README's `--option steps=my-steps.json` named a file the repository does not have
    root = README.parent
    [args] = [args for args in readme_commands() if "workload" in args and args[0] == "simulate"]
    path = option(args, "--option").split("=", 1)[1]
    block = next(b for b in re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)
                 if b.startswith("steps = ["))
    shown = eval(block[len("steps = "):block.index("]\n") + 1])  # the README's list literal
    assert json.loads((root / path).read_text(encoding="utf-8")) == shown
    monkeypatch.chdir(root)  # the README's commands run from the clone's root
    out_dir = tmp_path / "k"
    code, out, err = run_main(capsys, *[str(out_dir) if a == option(args, "--out") else a for a in args])
    assert code == 0, err
    assert "checks passed" in out and (out_dir / "summary.json").is_file()


def test_the_tso_line_names_client_errors_only_when_there_are_some(capsys, tmp_path):
    # ddl-recreate-under-load printed "reads answered: 11 Strong; 4 failed" and, two lines down, "0 client errors"
    code, out, err = run_main(capsys, "simulate", "--scenario", "ddl-recreate-under-load", "--seed", "1",
                              "--out", str(tmp_path / "a"))
    assert code == 0, err
    assert re.search(r"reads answered: .*; [1-9]\d* failed", out) and "client error" not in out
    tso_line = next(line for line in out.splitlines() if " allocations, " in line)
    assert tso_line.endswith(("window save", "window saves"))


def test_a_switch_that_cannot_act_excuses_no_failed_check_and_the_warning_suggests_where_it_shows():
    # a failed check with only an idle switch on exited 0 as "the switch's lesson"; and the warning suggested the
    # first scenarios by name (checkpoint-* for a TSO switch), where the switch shows nothing either
    from milvus_edu.cli import _acting_switches
    from milvus_edu.sim.scenarios import where_switch_acts

    assert _acting_switches({"scenario": "tso-basics", "switches": ["skip_wait_tsafe"]}) == []
    assert _acting_switches({"scenario": "seed-example", "switches": ["skip_wait_tsafe"]}) == ["skip_wait_tsafe"]
    flipped = [{"switch": "skip_recovery_filter", "on": True, "t_ms": 1.0},
               {"switch": "tso_no_window_save", "on": False, "t_ms": 2.0}]
    assert _acting_switches({"scenario": "timetick-basics", "switches": [], "switches_flipped": flipped}) == []
    assert _acting_switches({"scenario": "flush-basics", "switches": [], "switches_flipped": flipped}) == [
        "skip_recovery_filter"]
    assert where_switch_acts("allocate_outside_enqueue_lock")[1][0] == "timetick-unlocked-enqueue"
    assert where_switch_acts("tso_skip_load_on_init")[1] == ["tso-basics", "tso-clock-skew", "tso-failover"]
