"""Fork here: interventions applied part-way (faults, and bug switches flipped), the forked run's prefix
byte-identical to the original's, its token replaying it, the flip caught by the checker that catches the switch on
from the start, and the CLI's refusals."""

import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import milvus_edu
from milvus_edu import ClockJump, Kill, Pause, Restart, SetSwitch, fork, replay, simulate
from milvus_edu.config import BugSwitches, Config
from milvus_edu.events import NULL_RECORDER
from milvus_edu.registry import get_scenario, scenario_options
from milvus_edu.sim.kernel import Simulation
from milvus_edu.events.recorder import json_line
from milvus_edu.sim.run import first_difference
from run_support import digests, run_main


def lines_before(lines: list[str], at_ms: float) -> list[str]:
    """The lines of a run log up to (not including) its first event at or after ``at_ms``."""
    for i, line in enumerate(lines):
        if json.loads(line)["t_ms"] >= at_ms:
            return lines[:i]
    return lines


def jsonl(folder: Path) -> list[str]:
    return (folder / "events.jsonl").read_text(encoding="ascii").splitlines()


@pytest.mark.parametrize("scenario, at_ms, change, kind", [
    pytest.param("timetick-basics", 2000.0, Kill("proxy-1"), "fault.kill", marks=pytest.mark.slow),
    ("flush-basics", 2000.0, Kill("datanode-1"), "fault.kill"),
    ("tso-basics", 1500.0, ClockJump("rootcoord-1", delta_ms=-300), "fault.clock_jump"),
])
def test_a_forks_prefix_is_byte_identical_and_the_runs_first_differ_at_the_intervention(tmp_path, scenario, at_ms,
                                                                                          change, kind):
    original = simulate(scenario, duration_s=4, out_dir=tmp_path / "a")
    run, seq = fork(tmp_path / "a", at_ms, change, out_dir=tmp_path / "b")
    a, b = jsonl(tmp_path / "a"), jsonl(tmp_path / "b")
    prefix = lines_before(a, at_ms)
    assert len(prefix) > 50 and lines_before(b, at_ms) == prefix  # byte for byte, as written to the files
    assert seq is not None and seq >= len(prefix) and a[:seq] == b[:seq] and a[seq] != b[seq]
    # the first difference is the intervention itself or something at its time
    assert json.loads(b[seq])["t_ms"] == at_ms
    assert any(r["kind"] == kind and r["t_ms"] == at_ms and r["node"] == change.node for r in run.rows)
    assert run.summary["interventions"] == [{**change.to_dict(), "t_ms": at_ms}]
    assert "interventions" not in original.summary
    # the original's summary names the same run; only what the fork changed differs
    assert run.summary["run_id"] == original.summary["run_id"] and run.token != original.token


@pytest.mark.slow
def test_a_forked_runs_token_replays_it_byte_for_byte(tmp_path):
    simulate("timetick-basics", duration_s=2, out_dir=tmp_path / "a")
    reported = []
    run, _ = fork(tmp_path / "a", 1000.0, [Kill("proxy-2"), Restart("proxy-2", 1800.0)], out_dir=tmp_path / "b",
                  progress=lambda done, total: reported.append((done, total)))
    assert reported[-1] == (2, 2) and len(reported) >= 50  # the forked run reports its progress as simulate does
    again = replay(run.token, tmp_path / "c")
    assert again.token == run.token
    assert digests(tmp_path / "b") == digests(tmp_path / "c")
    kinds = [(r["kind"], r["t_ms"]) for r in run.rows if r["node"] == "proxy-2" and r["kind"].startswith("fault.")]
    assert kinds == [("fault.kill", 1000.0), ("fault.restart", 1800.0)]


@pytest.mark.slow
def test_a_fork_of_a_fork_keeps_the_first_forks_interventions(tmp_path):
    first, _ = fork(simulate("timetick-basics", duration_s=3), 800.0, Kill("proxy-1"))
    second, seq = fork(first, 2000.0, Pause("rootcoord-1", duration_ms=200))
    assert [i["kind"] for i in second.summary["interventions"]] == ["kill", "pause"]
    assert second.rows[seq]["t_ms"] == 2000.0
    assert lines_before([json_line(r) for r in second.rows], 2000.0) == \
        lines_before([json_line(r) for r in first.rows], 2000.0)


@pytest.mark.slow
@settings(max_examples=4, deadline=None)
@given(at_ms=st.floats(min_value=0.0, max_value=1499.0))
def test_any_forks_prefix_is_the_originals(at_ms):
    original = [json_line(r) for r in simulate("timetick-basics", duration_s=1.5).rows]
    run, seq = fork(milvus_edu.simulate("timetick-basics", duration_s=1.5), at_ms, Kill("proxy-2"))
    forked = [json_line(r) for r in run.rows]
    prefix = lines_before(original, at_ms)
    assert lines_before(forked, at_ms) == prefix
    assert seq is not None and seq >= len(prefix) and run.rows[seq]["t_ms"] >= at_ms


def test_a_fork_from_a_token_replays_the_original_to_compare():
    original = simulate("timetick-basics", duration_s=1.5)
    _, from_token = fork(original.token, 1000.0, Kill("proxy-1"))
    _, from_run = fork(original, 1000.0, Kill("proxy-1"))
    assert from_token == from_run is not None


def test_first_difference():
    a = ['{"seq":0}', '{"seq":1,"t_ms":1.0}', '{"seq":2}']
    assert first_difference(a, list(a)) is None
    assert first_difference(a, a[:2]) == 2  # one log ends early: it differs at the row it lacks
    assert first_difference(a, [a[0], '{"seq":1,"t_ms":2.0}', a[2]]) == 1
    rows = simulate("tso-basics", duration_s=0.5).rows
    assert first_difference(rows, [json_line(r) for r in rows]) is None  # rows and lines compare alike


@pytest.mark.parametrize("change, says", [
    (Kill("proxy-9", 500.0), "no node named 'proxy-9'"),
    (Kill("proxy-1", 3000.0), "at or after the run's end"),
    (Restart("rootcoord-1", 500.0), "cannot be restarted"),
    (ClockJump("proxy-1", 500.0, delta_ms=10), "clock cannot jump"),
])
def test_simulate_refuses_an_intervention_it_cannot_apply_before_writing(tmp_path, change, says):
    with pytest.raises(ValueError, match=says):
        simulate("timetick-basics", duration_s=2, out_dir=tmp_path / "x", interventions=[change])
    assert not (tmp_path / "x").exists()


def test_fork_refuses_a_time_outside_the_run_and_an_intervention_before_it():
    original = simulate("tso-basics", duration_s=0.5)
    with pytest.raises(ValueError, match="within the run"):
        fork(original, 500.0, Kill("rootcoord-1"))
    with pytest.raises(ValueError, match="before the fork's time"):
        fork(original, 300.0, Kill("rootcoord-1", 100.0))


def test_the_cli_forks_a_run_folder_and_names_the_first_difference(capsys, tmp_path):
    simulate("flush-basics", duration_s=3, out_dir=tmp_path / "a")
    code, out, err = run_main(capsys, "fork", str(tmp_path / "a"), "--at", "2", "--kill", "datanode-1",
                              "--out", str(tmp_path / "b"))
    assert code == 0, err
    token = json.loads((tmp_path / "b" / "summary.json").read_text())["token"]
    assert f"token (`milvus-edu replay TOKEN --out DIR` makes this run again): {token}" in out
    seq = first_difference(jsonl(tmp_path / "a"), jsonl(tmp_path / "b"))
    assert f"the runs first differ at event {seq + 1:,} (2.000 s): datanode-1 is killed" in out


@pytest.mark.slow
def test_the_cli_flips_a_switch_part_way_and_the_flip_accounts_for_its_violations(capsys, tmp_path):
    simulate("timetick-unlocked-enqueue", duration_s=5, out_dir=tmp_path / "a")
    code, out, err = run_main(capsys, "fork", str(tmp_path / "a"), "--at", "1", "--switch",
                              "allocate_outside_enqueue_lock", "--out", str(tmp_path / "b"))
    assert code == 0, err  # the violations are the switch's, as with --switch from the start
    summary = json.loads((tmp_path / "b" / "summary.json").read_text())
    assert not summary["checks"]["ok"] and summary["switches_flipped"][0]["switch"] == "allocate_outside_enqueue_lock"
    assert "forked " in out and "with switch allocate_outside_enqueue_lock on at 1.000 s" in out
    seq = first_difference(jsonl(tmp_path / "a"), jsonl(tmp_path / "b"))
    assert (f"the runs first differ at event {seq + 1:,} (1.000 s): Bug switch allocate_outside_enqueue_lock is turned "
            "on for every component from now on.") in out


def test_the_cli_turns_a_switch_off_part_way(capsys, tmp_path):
    simulate("timetick-unlocked-enqueue", duration_s=2, switches=["allocate_outside_enqueue_lock"],
             out_dir=tmp_path / "a")
    code, out, err = run_main(capsys, "fork", str(tmp_path / "a"), "--at", "1", "--switch-off",
                              "allocate_outside_enqueue_lock", "--out", str(tmp_path / "b"))
    assert code == 0, err
    assert "with switch allocate_outside_enqueue_lock off at 1.000 s" in out
    assert "Bug switch allocate_outside_enqueue_lock is turned off for every component from now on." in out
    summary = json.loads((tmp_path / "b" / "summary.json").read_text())
    assert summary["switches_flipped"] == [{"switch": "allocate_outside_enqueue_lock", "on": False, "t_ms": 1000.0}]
    # a switch that is off already: nothing to turn off; it was run and said only "the runs do not differ"
    code, out, err = run_main(capsys, "fork", str(tmp_path / "b"), "--at", "1.5", "--switch-off",
                              "allocate_outside_enqueue_lock", "--out", str(tmp_path / "c"))
    assert code == 2 and out == "" and not (tmp_path / "c").exists()
    assert err == ("milvus-edu: error: switch allocate_outside_enqueue_lock is not on at 1.500 s in this run, so "
                   "turning it off changes nothing; the switches on then: none\n")
    # on from the start: turning it on again is refused the same way, naming the switches that are on
    code, out, err = run_main(capsys, "fork", str(tmp_path / "a"), "--at", "0.5", "--switch",
                              "allocate_outside_enqueue_lock", "--out", str(tmp_path / "c"))
    assert code == 2 and out == "" and not (tmp_path / "c").exists()
    assert "switch allocate_outside_enqueue_lock is already on at 0.500 s in this run, so turning it on changes " \
           "nothing; the switches on then: allocate_outside_enqueue_lock" in err


@pytest.mark.parametrize("args, says", [
    (["--at", "1", "--kill", "proxy-9"], "no node named 'proxy-9'"),
    (["--at", "9", "--kill", "proxy-1"], "--at must be a time within the run (0 to 2 s, before its end), got 9 s"),
    (["--at", "1", "--pause", "proxy-1"], "expected NODE:MS"),
    (["--at", "1", "--clock-jump", "proxy-1:50"], "clock cannot jump"),
    (["--at", "1", "--kill", "proxy-1", "--restart", "proxy-1"], "not allowed with"),
    (["--at", "1", "--switch", "no_such_switch"], "unknown bug switch 'no_such_switch'; choose from"),
    (["--at", "1", "--switch", "skip_wait_tsafe", "--kill", "proxy-1"], "not allowed with"),
    (["--at", "1", "--kill", "proxy-1", "OCCUPIED"], "exists and is not empty"),
    (["--at", "1", "--kill", "proxy-1", "NOTOKEN"], "without a token"),
    (["--at", "1", "--kill", "proxy-1", "NORUN"], "not a run folder"),
    # accepted, run, and reported only as "the runs do not differ"
    (["--at", "1", "--switch-off", "skip_wait_tsafe"],
     "switch skip_wait_tsafe is not on at 1.000 s in this run, so turning it off changes nothing; the switches on "
     "then: none"),
    (["--at", "1", "--restart", "proxy-1"],
     "proxy-1 is running at 1.000 s in this run, and a restart starts again only a node that is down; kill it "
     "first, then restart it later"),
])
def test_the_cli_refuses_bad_input_in_one_line_and_writes_nothing(capsys, tmp_path, args, says):
    run = tmp_path / "run"
    simulate("timetick-basics", duration_s=2, out_dir=run)
    out_dir = tmp_path / "out"
    occupied = "OCCUPIED" in args
    if occupied:
        out_dir.mkdir()
        (out_dir / "mine.txt").write_text("keep me")
    if "NOTOKEN" in args:
        summary = json.loads((run / "summary.json").read_text())
        del summary["token"]
        (run / "summary.json").write_text(json.dumps(summary))
    if "NORUN" in args:
        run = tmp_path / "empty"
        run.mkdir()
    args = [a for a in args if a not in ("OCCUPIED", "NOTOKEN", "NORUN")]
    before = digests(tmp_path)
    code, out, err = run_main(capsys, "fork", str(run), *args, "--out", str(out_dir))
    assert code == 2 and out == ""
    assert err.startswith("milvus-edu: error: ") and says in err and len(err.strip().splitlines()) == 1
    assert digests(tmp_path) == before  # nothing written, nothing replaced
    assert out_dir.exists() == occupied


def test_each_kind_applies_at_its_exact_time_through_the_nodes_own_fault_api():
    run = simulate("flush-basics", duration_s=3, interventions=[
        Pause("rootcoord-1", 2000, duration_ms=100), Restart("datanode-1", 1500.3), Kill("datanode-1", 1000),
        Restart("proxy-1", 1200.0)])  # proxy-1 is running then: a restart of a running node changes nothing
    faults = [(r["t_ms"], r["node"], r["kind"]) for r in run.rows if r["kind"].startswith("fault.")]
    assert faults == [(1000.0, "datanode-1", "fault.kill"), (1500.3, "datanode-1", "fault.restart"),
                      (2000.0, "rootcoord-1", "fault.pause"), (2100.0, "rootcoord-1", "fault.resume")]
    # kept sorted by time (equal times in the order given), as the token keeps them
    assert [(i["kind"], i["t_ms"]) for i in run.summary["interventions"]] == [
        ("kill", 1000.0), ("restart", 1200.0), ("restart", 1500.3), ("pause", 2000.0)]


# ---- bug switches flipped part-way

# one switch per lesson, in the scenario that shows it, flipped before the damage it does
FLIPS = [
    ("tso-basics", 6, "tso_no_window_save", 1000.0),
    pytest.param("timetick-unlocked-enqueue", 5, "allocate_outside_enqueue_lock", 1000.0, marks=pytest.mark.slow),
    pytest.param("checkpoint-rpc-lost", 40, "drop_failed_checkpoint_tasks", 5000.0, marks=pytest.mark.slow),
    ("seed-example", None, "skip_wait_tsafe", 500.0),
    # copied when built: the standby's InitTimestamp and the QueryNode's deleteNode take the flip through the hook
    ("tso-failover", None, "tso_skip_load_on_init", 1000.0),
    ("delete-then-read", None, "update_tsafe_before_delete", 1000.0),  # after the watch (501 ms)
]


def broken(summary) -> set[str]:
    return {name for name, n in summary["checks"]["violation_counts"].items() if n}


@pytest.mark.parametrize("scenario, duration_s, switch, at_ms", FLIPS)
def test_a_switch_flipped_part_way_is_caught_by_the_checker_that_catches_it_from_the_start(scenario, duration_s,
                                                                                             switch, at_ms):
    faithful = simulate(scenario, duration_s=duration_s)
    from_start = simulate(scenario, duration_s=duration_s, switches=[switch])
    run, seq = fork(faithful, at_ms, SetSwitch(switch))
    assert faithful.summary["checks"]["ok"] and broken(from_start.summary)
    assert broken(run.summary) & broken(from_start.summary)
    # every violation's evidence ends after the flip: the run before it is the faithful one
    assert all(max(faithful_t(run, v)) >= at_ms for v in run.violations)
    flips = [r for r in run.rows if r["kind"] == "fault.switch"]
    assert [(r["t_ms"], r["node"], json.loads(r["detail"])) for r in flips] == [(at_ms, "sim", {"switch": switch,
                                                                                               "on": True})]
    assert run.rows[seq]["t_ms"] >= at_ms
    assert lines_before([json_line(r) for r in run.rows], at_ms) == \
        lines_before([json_line(r) for r in faithful.rows], at_ms)
    # "switches" keeps naming those on from the start; the flip is listed on its own
    assert run.summary["switches"] == [] and run.summary["switches_flipped"] == [
        {"switch": switch, "on": True, "t_ms": at_ms}]
    assert run.summary["interventions"] == [{"kind": "switch", "name": switch, "on": True, "t_ms": at_ms}]
    assert "switches_flipped" not in faithful.summary and "switches_flipped" not in from_start.summary


def faithful_t(run, violation) -> list[float]:
    """The times of a violation's evidence events."""
    return [run.rows[int(s)]["t_ms"] for s in violation["seqs"]]


@pytest.mark.slow
def test_a_switch_flipped_part_way_replays_byte_for_byte_and_can_be_turned_off_again(tmp_path):
    simulate("timetick-unlocked-enqueue", duration_s=3, out_dir=tmp_path / "a")
    run, _ = fork(tmp_path / "a", 800.0, [SetSwitch("allocate_outside_enqueue_lock"),
                                          SetSwitch("allocate_outside_enqueue_lock", False, 2000.0)],
                  out_dir=tmp_path / "b")
    again = replay(run.token, tmp_path / "c")
    assert again.token == run.token and digests(tmp_path / "b") == digests(tmp_path / "c")
    assert [(f["on"], f["t_ms"]) for f in run.summary["switches_flipped"]] == [(True, 800.0), (False, 2000.0)]
    # a run with the switch on from the start turns it off part-way: the summary says both
    off, _ = fork(simulate("timetick-unlocked-enqueue", duration_s=2, switches=["allocate_outside_enqueue_lock"]),
                  1000.0, SetSwitch("allocate_outside_enqueue_lock", on=False))
    assert off.summary["switches"] == ["allocate_outside_enqueue_lock"]
    assert off.summary["switches_flipped"] == [{"switch": "allocate_outside_enqueue_lock", "on": False, "t_ms": 1000.0}]


def test_a_switch_already_so_is_left_as_it_is_and_a_fork_of_it_is_refused():
    original = simulate("tso-basics", duration_s=1, switches=["tso_no_window_save"])
    run = simulate("tso-basics", duration_s=1, switches=["tso_no_window_save"],
                   interventions=[SetSwitch("tso_no_window_save", t_ms=500.0)])
    assert run.rows == original.rows and "switches_flipped" not in run.summary
    with pytest.raises(ValueError, match="^switch tso_no_window_save is already on at 0.500 s in this run"):
        fork(original, 500.0, SetSwitch("tso_no_window_save"))
    # a flip the fork itself made earlier counts: off at 0.6 s after off at 0.5 s changes nothing
    with pytest.raises(ValueError, match="is not on at 0.600 s in this run.*the switches on then: none$"):
        fork(original, 500.0, [SetSwitch("tso_no_window_save", False), SetSwitch("tso_no_window_save", False, 600.0)])


def test_a_kill_restart_or_pause_that_the_original_log_shows_could_do_nothing_is_refused(tmp_path):
    original = simulate("timetick-proxy-restart", duration_s=6, out_dir=tmp_path / "a")  # proxy-2 down 2 s to 5 s
    for source in (tmp_path / "a", original.token):  # its events.jsonl, or the log its token makes
        for change, says in [(Kill("proxy-2"), "proxy-2 is down at 3.000 s in this run (killed at 2.000 s), and a "
                                               "kill leaves a node that is down as it is"),
                             (Pause("proxy-2", duration_ms=50), "proxy-2 is down at 3.000 s in this run (killed at "
                                                                "2.000 s), and only a running node can be paused"),
                             (Restart("proxy-1"), "proxy-1 is running at 3.000 s in this run")]:
            with pytest.raises(ValueError, match=re.escape(says)):
                fork(source, 3000.0, change, out_dir=tmp_path / "b")
            assert not (tmp_path / "b").exists()
    assert fork(original, 3000.0, Restart("proxy-2")).first_difference is not None  # down then: it starts again
    # at the very time of the original's kill, either order may hold: taken, not refused
    fork(original, 2000.0, Kill("proxy-2"))


@pytest.mark.filterwarnings("ignore:switch .* cannot act in")  # any switch: the run's cluster may lack its component
@settings(max_examples=6, deadline=None)
@given(switch=st.sampled_from(BugSwitches.names()), at_ms=st.floats(min_value=0.0, max_value=1499.0))
def test_any_switch_flipped_at_any_time_keeps_the_originals_prefix(switch, at_ms):
    original = [json_line(r) for r in simulate("flush-basics", duration_s=1.5).rows]
    run, seq = fork(simulate("flush-basics", duration_s=1.5), at_ms, SetSwitch(switch))
    forked = [json_line(r) for r in run.rows]
    prefix = lines_before(original, at_ms)
    assert lines_before(forked, at_ms) == prefix
    # the flip is recorded at its time, so the logs differ there at the latest
    assert seq is not None and seq >= len(prefix) and run.rows[seq]["t_ms"] == at_ms


def _copies(root, names: set[str], seen: set[int], path: str = ""):
    """Every (path, value) of an attribute named after a bug switch, or holding all of them, reachable from
    ``root`` through attributes, lists and dicts (not through the Simulation, which holds the current ones)."""
    if id(root) in seen or isinstance(root, (Simulation, str, bytes, int, float, type(None))) or callable(root):
        return
    seen.add(id(root))
    if isinstance(root, BugSwitches):
        yield path, root
        return
    if isinstance(root, dict):
        items = root.items()
    elif isinstance(root, (list, tuple, set, frozenset)):
        items = enumerate(root)
    elif hasattr(root, "__dict__") and type(root).__module__.startswith("milvus_edu"):
        items = vars(root).items()
    else:
        return
    for key, value in items:
        if key in names and isinstance(value, bool):
            yield f"{path}.{key}", value
        else:
            yield from _copies(value, names, seen, f"{path}.{key}")


@pytest.mark.parametrize("scenario", ["datanode-crash-recovery", "delete-then-read", "tso-failover"])
def test_no_component_keeps_a_stale_copy_of_a_flipped_switch(scenario):
    spec = get_scenario(scenario)
    sim = Simulation(1, NULL_RECORDER, Config())
    spec.build(sim, **scenario_options(spec, None))
    sim.run(3000.0)  # every component built: channels watched, allocators up, segments growing
    names = set(BugSwitches.names())
    copies = list(_copies(list(sim.nodes.values()), names, set()))
    assert copies  # the walk finds the copies there are
    for name in BugSwitches.names():
        assert sim.set_switch(name, True) and not sim.set_switch(name, True)
    now = sim.config.switches
    assert now == BugSwitches.from_names(BugSwitches.names())
    for path, value in _copies(list(sim.nodes.values()), names, set()):
        assert value is True or value == now, f"{path} kept {value!r} after the flip"


def test_the_books_page_shows_what_a_fork_with_a_switch_prints(tmp_path, capsys):
    # book/explain.md shows `milvus-edu fork runs/seed --at 0.5 --switch skip_wait_tsafe`: each line it shows must be
    # printed today, in that order ("..." stands for lines left out)
    page = (Path(__file__).resolve().parents[1] / "book" / "explain.md").read_text(encoding="utf-8")
    command = "$ milvus-edu fork runs/seed --at 0.5 --switch skip_wait_tsafe --out runs/seed-flip\n"
    shown = [line for line in page.split(command, 1)[1].split("\n```", 1)[0].splitlines() if line != "..."]
    assert len(shown) >= 4
    code, _, _ = run_main(capsys, "simulate", "--scenario", "seed-example", "--out", str(tmp_path / "seed"))
    assert code == 0
    code, out, err = run_main(capsys, "fork", str(tmp_path / "seed"), "--at", "0.5", "--switch", "skip_wait_tsafe",
                              "--out", str(tmp_path / "seed-flip"))
    assert code == 0, err
    printed = out.replace(str(tmp_path) + "/", "runs/").splitlines()
    positions = [printed.index(line) for line in shown]  # ValueError: a line the page shows is not printed
    assert positions == sorted(positions)
