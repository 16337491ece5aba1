"""Fork here: interventions applied part-way, the forked run's prefix byte-identical to the original's, its token
replaying it, and the CLI's refusals."""

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import milvus_edu
from milvus_edu import ClockJump, Kill, Pause, Restart, fork, replay, simulate
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
    ("timetick-basics", 2000.0, Kill("proxy-1"), "fault.kill"),
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


def test_a_forked_runs_token_replays_it_byte_for_byte(tmp_path):
    simulate("timetick-basics", duration_s=3, out_dir=tmp_path / "a")
    run, _ = fork(tmp_path / "a", 1000.0, [Kill("proxy-2"), Restart("proxy-2", 1800.0)], out_dir=tmp_path / "b")
    again = replay(run.token, tmp_path / "c")
    assert again.token == run.token
    assert digests(tmp_path / "b") == digests(tmp_path / "c")
    kinds = [(r["kind"], r["t_ms"]) for r in run.rows if r["node"] == "proxy-2" and r["kind"].startswith("fault.")]
    assert kinds == [("fault.kill", 1000.0), ("fault.restart", 1800.0)]


def test_a_fork_of_a_fork_keeps_the_first_forks_interventions(tmp_path):
    first, _ = fork(simulate("timetick-basics", duration_s=3), 800.0, Kill("proxy-1"))
    second, seq = fork(first, 2000.0, Pause("rootcoord-1", duration_ms=200))
    assert [i["kind"] for i in second.summary["interventions"]] == ["kill", "pause"]
    assert second.rows[seq]["t_ms"] == 2000.0
    assert lines_before([json_line(r) for r in second.rows], 2000.0) == \
        lines_before([json_line(r) for r in first.rows], 2000.0)


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


@pytest.mark.parametrize("args, says", [
    (["--at", "1", "--kill", "proxy-9"], "no node named 'proxy-9'"),
    (["--at", "9", "--kill", "proxy-1"], "within the run"),
    (["--at", "1", "--pause", "proxy-1"], "expected NODE:MS"),
    (["--at", "1", "--clock-jump", "proxy-1:50"], "clock cannot jump"),
    (["--at", "1", "--kill", "proxy-1", "--restart", "proxy-1"], "not allowed with"),
    (["--at", "1", "--kill", "proxy-1", "OCCUPIED"], "exists and is not empty"),
    (["--at", "1", "--kill", "proxy-1", "NOTOKEN"], "without a token"),
    (["--at", "1", "--kill", "proxy-1", "NORUN"], "not a run folder"),
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
