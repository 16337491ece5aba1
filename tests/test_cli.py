"""The milvus-edu command: happy paths, and one-line errors with exit status 2 for user mistakes."""

import json
import re
import subprocess
import sys

import pytest

from milvus_edu.cli import main


def run_cli(*args, cwd=None):
    """The command as a user runs it, in a Python of its own (about 1.5 s of CPU): status, stdout, stderr."""
    proc = subprocess.run([sys.executable, "-m", "milvus_edu.cli", *args], capture_output=True, text=True, cwd=cwd)
    return proc.returncode, proc.stdout, proc.stderr


def run_main(capsys, *args):
    """The command in this process, for the quick checks of its answers: status, stdout, stderr."""
    try:
        code = main(list(args))
    except SystemExit as exc:  # argparse's own refusals
        code = exc.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.slow
def test_simulate_writes_the_run_folder(tmp_path):
    code, out, err = run_cli("simulate", "--scenario", "tso-failover", "--seed", "1", "--out", str(tmp_path / "a"))
    assert code == 0, err
    assert {p.name for p in (tmp_path / "a").iterdir()} == {"events.parquet", "events.jsonl", "summary.json"}
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert summary["scenario"] == "tso-failover" and summary["checks"]["ok"]
    assert "strictly greater" in out


def test_scenarios_lists_each_with_a_description(capsys):
    assert main(["scenarios"]) == 0
    out = capsys.readouterr().out
    for name in ("tso-basics", "tso-failover", "tso-clock-skew"):
        assert name in out
    # a list option shows what it takes, not its empty default as a Python tuple
    assert "options: steps=FILE.json (a JSON list; none by default), proxies=2" in out and "=()" not in out


@pytest.mark.parametrize("args,needle", [
    (["simulate", "--scenario", "nope", "--out", "OUT"], "unknown scenario 'nope'"),
    (["simulate", "--scenario", "tso-basics", "--duration", "-3", "--out", "OUT"], "positive"),
    (["simulate", "--scenario", "tso-basics", "--duration", "abc", "--out", "OUT"], "number of seconds"),
    (["simulate", "--scenario", "tso-basics", "--seed", "x", "--out", "OUT"], "whole number"),
    # the option as typed: "duration must be at most 100 years" named simulate's Python argument
    (["simulate", "--scenario", "tso-basics", "--duration", "1e30", "--out", "OUT"],
     "argument --duration: must be at most 100 years (3.156e+09 s), got 1e30"),
    (["simulate", "--scenario", "tso-basics", "--out", "OUT", "--switch", "nope"], "unknown bug switch"),
    (["simulate", "--out", "OUT"], "--scenario"),
    (["timeline", "OUT"], "does not exist"),
    (["frobnicate"], "unknown command 'frobnicate'; choose from simulate"),
])
def test_user_mistakes_give_one_line_and_exit_2(tmp_path, capsys, args, needle):
    args = [a.replace("OUT", str(tmp_path / "out")) for a in args]
    code, out, err = run_main(capsys, *args)
    assert code == 2
    assert needle in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_a_user_mistake_is_one_line_and_status_2_from_a_process_of_its_own_too(tmp_path):
    code, out, err = run_cli("simulate", "--scenario", "tso-basics", "--duration", "-3", "--out", str(tmp_path / "o"))
    assert code == 2
    assert "positive" in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert out == "" and not (tmp_path / "o").exists()


@pytest.mark.slow
def test_existing_nonempty_out_is_refused_and_left_untouched(tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("my data")
    code, _, err = run_cli("simulate", "--scenario", "tso-basics", "--out", str(out))
    assert code == 2 and "--force" in err
    assert [p.name for p in out.iterdir()] == ["notes.txt"]
    code, _, err = run_cli("simulate", "--scenario", "tso-basics", "--out", str(out), "--force")
    assert code == 0, err
    assert (out / "notes.txt").read_text() == "my data"  # --force replaces only the run's own files
    assert (out / "events.parquet").exists()


@pytest.mark.slow
def test_out_that_is_a_file_or_unwritable_is_refused(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    code, _, err = run_cli("simulate", "--scenario", "tso-basics", "--out", str(f))
    assert code == 2 and "not a folder" in err and f.read_text() == "x"
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        code, _, err = run_cli("simulate", "--scenario", "tso-basics", "--out", str(locked / "sub"))
    finally:
        locked.chmod(0o700)
    if code == 0:  # root ignores directory permissions; use a path under a file instead
        code, _, err = run_cli("simulate", "--scenario", "tso-basics", "--out", str(f / "sub"))
    assert code == 2 and "choose" in err


@pytest.mark.slow
def test_demo_runs_in_a_fresh_folder_and_reuses_a_full_one_only_with_force(tmp_path):
    code, out, err = run_cli("demo", cwd=tmp_path)
    assert code == 0, err
    table = {line.split()[0]: line for line in out.splitlines() if line.startswith(("t2 ", "t6 ", "t10 ", "t14 "))}
    assert "(empty) after" in table["t2"] and "A1 after" in table["t6"]  # Strong, Client2's view
    assert "A1, A2 after" in table["t10"] and "A2 after" in table["t14"]
    assert table["t6"].count("(empty)") == 3  # Session, Bounded and Eventually beside it: not yet
    assert "checks passed" in out and "levels.png" in out and "timeline.svg" in out and "04_guarantee_ts.ipynb" in out
    # one notation in the time column: seconds for every row of the table, the design documents' step beside it
    rows = out.split("\n\n")[1].splitlines()
    assert rows[0].split()[:2] == ["step", "returned"]
    assert all(re.fullmatch(r"\d+\.\d{3} s", line[12:22].strip()) for line in rows[1:]), rows
    assert rows[1].startswith("t0 ") and any(line.startswith("after flush") for line in rows)
    # the table is in return order, and says so where that differs from the order the calls were sent
    steps = [line.split()[0] for line in rows[1:] if re.match(r"t\d+ ", line)]
    assert steps.index("t4") < steps.index("t2")
    assert "Rows are in the order the calls returned: t2's search, sent before t4's insert, returned after it." in out
    assert "Client2 wrote nothing" in out and "equals Eventually's" in out  # why Session = Eventually here
    assert "landing after the next tick" in out  # Bounded/Eventually depend on where the read lands
    assert "0 packs consumed" not in out and "packs applied by the QueryNode" in out
    for name in ("events.parquet", "levels.png", "timeline.png"):
        assert (tmp_path / "milvus-edu-demo" / name).exists()
    assert list((tmp_path / "milvus-edu-demo" / "objects").rglob("insert_log/*/*/*/*/*"))
    code, out, err = run_cli("demo", cwd=tmp_path)
    assert code == 0, err
    assert (tmp_path / "milvus-edu-demo-2" / "summary.json").exists()
    assert out.startswith("milvus-edu-demo is not an empty folder, so this run goes to milvus-edu-demo-2 (")
    # --force, as its help says, reuses the default folder rather than numbering a third
    first = (tmp_path / "milvus-edu-demo" / "events.parquet").stat().st_mtime_ns
    code, out, err = run_cli("demo", "--force", cwd=tmp_path)
    assert code == 0, err
    assert not (tmp_path / "milvus-edu-demo-3").exists() and "not an empty folder" not in out
    assert (tmp_path / "milvus-edu-demo" / "events.parquet").stat().st_mtime_ns != first


@pytest.mark.slow
def test_timeline_prints_key_events_in_words(tmp_path):
    run_cli("simulate", "--scenario", "tso-failover", "--out", str(tmp_path / "r"))
    code, out, _ = run_cli("timeline", str(tmp_path / "r"))
    assert code == 0
    assert "is killed while active" in out and "one guard past the saved window" in out


@pytest.mark.slow
def test_timeline_of_a_flush_run_names_the_crash_the_restart_and_what_it_left_out(tmp_path):
    code, _, err = run_cli("simulate", "--scenario", "datanode-crash-recovery", "--seed", "1", "--out",
                           str(tmp_path / "r"), "--option", "inserts_per_s=30", "--option", "workload_s=12",
                           "--option", "crash_at_s=11", "--option", "restart_after_s=1", "--duration", "30")
    assert code == 0, err
    code, out, err = run_cli("timeline", str(tmp_path / "r"))
    assert code == 0, err
    assert "datanode-1 crashes; everything in its memory is lost." in out
    assert "datanode-1 starts again as server 20" in out
    assert "datanode-1 watches by-dev-rootcoord-dml_0_100v0 from" in out
    assert "not shown:" in out and "datanode.buffer" in out and "--all prints every event" in out


@pytest.mark.slow
def test_timeline_piped_into_head_stops_quietly(tmp_path):
    run_cli("simulate", "--scenario", "tso-basics", "--duration", "2", "--out", str(tmp_path / "r"))
    proc = subprocess.run(f"{sys.executable} -m milvus_edu.cli timeline {tmp_path / 'r'} --all | head -2",
                          shell=True, capture_output=True, text=True)
    assert len(proc.stdout.splitlines()) == 2
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize("content,needle", [
    ("", "holds no milvus-edu events"),
    ('{"a": 1}\n', "lack the required column"),
    ('{"run_id":"r","seq":0,"t_ms":"abc","node":"x","kind":"tso.save"}\n', "events.jsonl:1 does not fit"),
    ('{"run_id":"r","seq":0,"t_ms":1,"node":"x","kind":"tso.save"}\nnull\n', "events.jsonl:2 is not a JSON object"),
])
def test_timeline_on_damaged_or_foreign_logs_is_one_line_exit_2(tmp_path, content, needle):
    (tmp_path / "events.jsonl").write_text(content)
    code, out, err = run_cli("timeline", str(tmp_path / "events.jsonl"))
    assert code == 2 and needle in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.slow
def test_timeline_survives_hand_edited_fields(tmp_path):
    (tmp_path / "events.jsonl").write_text(
        '{"run_id":"r","seq":0,"t_ms":1,"node":"x","kind":"tso.save"}\n'
        '{"run_id":"r","seq":1,"t_ms":2,"node":"y","kind":"tso.update","detail":"not json"}\n')
    code, out, err = run_cli("timeline", str(tmp_path), "--all")
    assert code == 0, err
    assert "x: tso.save" in out and "y:" in out


@pytest.mark.slow
def test_demo_refuses_a_full_out_without_force_and_prints_nothing_first(tmp_path):
    out = tmp_path / "d"
    out.mkdir()
    (out / "mine.txt").write_text("keep")
    code, stdout, err = run_cli("demo", "--out", str(out))
    assert code == 2 and "--force" in err and stdout == ""
    code, stdout, err = run_cli("demo", "--out", str(out), "--force")
    assert code == 0, err
    assert (out / "mine.txt").read_text() == "keep" and (out / "summary.json").exists()


@pytest.mark.slow
def test_failed_checks_report_true_totals(tmp_path):
    code, out, _ = run_cli("simulate", "--scenario", "tso-failover", "--out", str(tmp_path / "b"),
                           "--switch", "tso_skip_load_on_init")
    assert code == 0  # a bug switch is expected to break a rule
    summary = json.loads((tmp_path / "b" / "summary.json").read_text())
    counts = summary["checks"]["violation_counts"]
    assert counts["global-monotonic"] > 20  # every batch of the new active, not just the 20 kept
    assert f"{counts['global-monotonic']:,} global-monotonic" in out
    assert len([v for v in summary["checks"]["violations"] if v["invariant"] == "global-monotonic"]) == 20


@pytest.mark.parametrize("failure", [OSError(28, "No space left on device"), "sink process"])
def test_a_full_disk_or_a_dead_sink_process_is_one_line_exit_1(tmp_path, capsys, monkeypatch, failure):
    from milvus_edu.events.worker import SinkProcessError
    from milvus_edu.sim import run as run_module

    def broken(*args, **kwargs):
        if failure == "sink process":
            raise SinkProcessError("the sink process ended before the run did (exit code -9); run the scenario again")
        raise failure

    monkeypatch.setattr(run_module, "simulate", broken)
    code = main(["simulate", "--scenario", "tso-basics", "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert ("No space left on device" in err) if failure != "sink process" else ("exit code -9" in err)


@pytest.mark.slow
def test_a_command_starts_without_the_drawing_and_widget_libraries():
    """``import milvus_edu`` (what every ``milvus-edu`` command does first) loads no matplotlib, no widget library
    and no IPython: a run that draws nothing does not pay for them (they were half of a command's start). The
    viz names are still there, loaded on first use."""
    code = ("import sys, milvus_edu.cli\n"
            "heavy = ['matplotlib', 'anywidget', 'ipywidgets', 'IPython']\n"
            "print(*[m for m in heavy if m in sys.modules])\n"
            "from milvus_edu.viz import TimelineStepper, RunIndex\n"
            "import milvus_edu.viz as viz\n"
            "print(TimelineStepper.__module__, RunIndex.__module__, 'matplotlib' in sys.modules,"
            " 'TimelineStepper' in dir(viz))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    loaded, names = out.stdout.splitlines()
    assert loaded == ""
    assert names == "milvus_edu.viz.stepper milvus_edu.viz.data True True"


@pytest.mark.parametrize("args,says", [
    # argparse blamed `milvus-edu --help` and named no option; the command's own help and the option meant are named
    (["simulate", "--scenario", "tso-basics", "--out", "OUT", "--sede", "1"],
     "milvus-edu simulate has no option --sede (did you mean --seed?) (see `milvus-edu simulate --help`)"),
    (["simulat", "--scenario", "tso-basics"], "unknown command 'simulat' (did you mean 'simulate'?); choose from"),
    (["sweep", "grid.json", "--out", "OUT", "--force"],
     "milvus-edu sweep has no option --force; its options: --jsonl, --master, --out (see `milvus-edu sweep --help`)"),
    # an unknown export format: the option typed is the mistake, not the --perfetto it lacks
    (["export", "OUT", "--chrome", "x.json"],
     "milvus-edu export has no option --chrome; its options: --force, --perfetto"),
    (["export", "OUT", "--perfetto", ""], "--perfetto is empty; give the name of the file to write"),  # ". is a folder"
    # compare has no --force, yet an --out holding a comparison was refused with "or add --force"
    (["compare", "--out", "CMP"], "model exists and is not empty: "),
    (["why", "OUT", "--reads", "1"], "milvus-edu why has no option --reads (did you mean --read?)"),
    (["--verison"], "milvus-edu has no option --verison (did you mean --version?)"),
    # a pause of negative length was refused in the Python API's words ("a pause's duration_ms")
    (["fork", "OUT", "--at", "1", "--pause", "proxy-1:-5", "--out", "OUT"],
     "argument --pause: a pause lasts more than 0 ms, such as proxy-1:500, got 'proxy-1:-5'"),
    # a pause of 0 ms passed the command line and was refused as "a pause's duration_ms must be positive"
    (["fork", "OUT", "--at", "1", "--pause", "proxy-1:0", "--out", "OUT"],
     "argument --pause: a pause lasts more than 0 ms, such as proxy-1:500, got 'proxy-1:0'"),
])
def test_a_mistyped_command_or_option_names_what_was_meant_and_the_commands_help(tmp_path, capsys, args, says):
    (tmp_path / "cmp" / "model").mkdir(parents=True)
    (tmp_path / "cmp" / "model" / "summary.json").write_text("{}")
    args = [a.replace("OUT", str(tmp_path / "out")).replace("CMP", str(tmp_path / "cmp")) for a in args]
    code, out, err = run_main(capsys, *args)
    assert code == 2 and says in err and len(err.strip().splitlines()) == 1, err
    assert "--force" not in err or "--force" in says
    assert not (tmp_path / "out").exists()


def test_abbreviations_and_negative_values_are_not_taken_for_unknown_options(tmp_path, capsys):
    code, _, err = run_main(capsys, "fork", str(tmp_path), "--at", "-1", "--kill", "proxy-1", "--out", "x")
    assert code == 2 and "argument --at: must be a time in the run" in err and "no option" not in err
    code, _, err = run_main(capsys, "simulate", "--scen", "nope", "--out", str(tmp_path / "o"))
    assert code == 2 and "unknown scenario 'nope'" in err


def test_each_commands_help_says_what_it_does(capsys):
    code, out, _ = run_main(capsys, "simulate", "--help")
    assert code == 0 and "Run a scenario and write a run folder." in out  # the top list's words, not an empty head
    code, out, _ = run_main(capsys, "demo", "--help")
    out = " ".join(out.split())  # as argparse wrapped it to the terminal
    assert code == 0 and "Client1/Client2" in out and "and keep every other file" in out  # what --force removes


def test_fork_never_writes_over_the_run_it_forks_even_with_force(tmp_path, capsys):
    import milvus_edu
    from run_support import digests

    run = tmp_path / "run"
    milvus_edu.simulate("timetick-basics", duration_s=0.5, out_dir=run)
    before = digests(run)
    for out in (run, tmp_path / "." / "run"):
        code, _, err = run_main(capsys, "fork", str(run), "--at", "0.2", "--kill", "proxy-1", "--out", str(out),
                                "--force")
        assert code == 2 and "is the run folder being forked; choose another --out for the fork" in err
    assert digests(run) == before  # --force replaced the original with its fork: the run forked was lost


def _a_demo_folder(folder):
    """A run folder as ``milvus-edu demo`` leaves it, without drawing: a run, pictures listed as its own, a user's
    notes."""
    import milvus_edu
    from milvus_edu.mechanisms.query.demo import PICTURES
    from milvus_edu.sim.run import record_products

    milvus_edu.simulate("seed-example", duration_s=2.5, out_dir=folder)
    for name in PICTURES:
        (folder / name).write_bytes(f"picture {name}".encode())
    record_products(folder, [folder / name for name in PICTURES])
    (folder / "notes.txt").write_text("mine")


def test_force_removes_the_earlier_runs_pictures_and_binlogs_and_keeps_the_users_files(tmp_path):
    import milvus_edu

    folder = tmp_path / "d"
    _a_demo_folder(folder)
    (folder / "timeline.svg").write_text("edited by hand")  # no longer the bytes the run wrote: not the run's now
    milvus_edu.simulate("tso-basics", duration_s=0.5, out_dir=folder, force=True, jsonl=False)
    # events.jsonl, levels.png, timeline.png and objects/ were the earlier run's: a reused folder mixed two runs
    assert sorted(p.name for p in folder.iterdir()) == ["events.parquet", "notes.txt", "summary.json", "timeline.svg"]
    assert (folder / "notes.txt").read_text() == "mine" and (folder / "timeline.svg").read_text() == "edited by hand"


def test_demo_with_force_refuses_to_write_its_pictures_over_a_users_file_and_removes_nothing(tmp_path, capsys):
    from run_support import digests

    folder = tmp_path / "d"
    _a_demo_folder(folder)
    (folder / "levels.png").write_text("my own picture")
    before = digests(folder)
    code, out, err = run_main(capsys, "demo", "--out", str(folder), "--force")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert f"{folder / 'levels.png'} was not written by a milvus-edu run (or was changed since)" in err
    assert digests(folder) == before


def test_demo_refuses_a_dangling_link_of_a_pictures_name_and_writes_nothing_where_it_points(tmp_path, capsys):
    # a link to a file not there yet "does not exist": the picture was written through it, outside the folder
    folder = tmp_path / "d"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    (folder / "levels.png").symlink_to(tmp_path / "elsewhere.png")
    code, out, err = run_main(capsys, "demo", "--out", str(folder), "--force")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert f"{folder / 'levels.png'} was not written by a milvus-edu run" in err
    assert not (tmp_path / "elsewhere.png").exists()
    assert sorted(p.name for p in folder.iterdir()) == ["levels.png", "notes.txt"]


@pytest.mark.slow
def test_a_folder_reused_with_force_holds_only_the_last_runs_files(tmp_path, capsys):
    folder = tmp_path / "x"
    assert run_main(capsys, "demo", "--out", str(folder))[0] == 0
    (folder / "notes.txt").write_text("mine")
    run_files = ["events.jsonl", "events.parquet", "summary.json"]
    assert {"levels.png", "timeline.png", "timeline.svg", "objects"} <= {p.name for p in folder.iterdir()}
    code, _, err = run_main(capsys, "simulate", "--scenario", "tso-basics", "--duration", "1", "--out", str(folder),
                            "--force")
    assert code == 0, err
    assert sorted(p.name for p in folder.iterdir()) == sorted(run_files + ["notes.txt"])  # the demo's pictures stayed
    code, out, err = run_main(capsys, "demo", "--out", str(folder), "--force")  # and the other way round
    assert code == 0, err
    assert sorted(p.name for p in folder.iterdir() if p.name != ".milvus-edu-products.json") == sorted(
        run_files + ["levels.png", "notes.txt", "objects", "timeline.png", "timeline.svg"])
    assert json.loads((folder / "summary.json").read_text())["scenario"] == "seed-example"


def test_compare_says_on_a_terminal_what_it_is_waiting_for(capsys, monkeypatch):
    import sys as system

    import milvus_edu.real.compare as real_compare

    def stop(*args, **kwargs):
        raise ValueError("stopped here: the real server is not what this test is about")

    monkeypatch.setattr(real_compare, "compare", stop)
    monkeypatch.setattr(system.stderr, "isatty", lambda: True)
    code, _, err = run_main(capsys, "compare")
    # a real server takes seconds to start and each of its DDLs seconds more: the command said nothing meanwhile
    assert code == 2 and err.splitlines()[0].startswith("compare: the model runs the workload, then a real Milvus")
    assert err.splitlines()[1] == "milvus-edu: error: stopped here: the real server is not what this test is about"


@pytest.mark.parametrize("violations,stalls,failed,explained", [
    ({"tick-monotonic": 1}, 1, "checks FAILED: 1 tick-monotonic violation;", "1 stall explained, not a violation;"),
    ({"tick-monotonic": 1, "watermark": 2}, 3, "checks FAILED: 1 tick-monotonic, 2 watermark violations;",
     "3 stalls explained, not violations;"),
])
def test_the_report_counts_violations_and_stalls_in_english(capsys, violations, stalls, failed, explained):
    """'1 violation(s)' and '1 stall(s)' read as forms, not sentences: the report says one or many."""
    from types import SimpleNamespace

    import milvus_edu
    from milvus_edu.cli import _report

    summary = json.loads(json.dumps(milvus_edu.simulate("timetick-basics", seed=1, duration_s=0.5,
                                                        keep_events=False).summary))
    checks = summary["checks"]
    checks["ok"], checks["violation_counts"] = False, violations
    checks["violations"] = [{"invariant": name, "explanation": "Let ...", "seqs": [0]} for name in violations]
    checks["stalls"] = [{"explanation": "a stall"}] * stalls
    _report(SimpleNamespace(summary=summary, out_dir="runs/x"))
    out = capsys.readouterr().out
    assert failed in out and explained in out and "(s)" not in out
