"""Progress of a long run: the steps ``simulate(progress=...)`` advances in, and the CLI's progress line."""

from __future__ import annotations

import io
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from milvus_edu import cli
from milvus_edu.sim.run import PROGRESS_EVERY_S, PROGRESS_STEPS, advance_in_steps
from test_cli import run_main


class _Sim:
    """A stand-in for the simulation that only records where each step ends (the sizing under test)."""

    def __init__(self):
        self.untils: list[float] = []

    def run(self, until_ms: float) -> None:
        assert not self.untils or until_ms > self.untils[-1]
        self.untils.append(until_ms)


def _advance(total_ms: float, seconds_per_ms: float) -> list[float]:
    """Where the steps end for a run whose every simulated ms takes ``seconds_per_ms`` of wall time."""
    sim, now, reports = _Sim(), [0.0], []

    def clock() -> float:
        if sim.untils and len(reports) < len(sim.untils):  # the read after a step: that step's wall time
            done = sim.untils[-2] if len(sim.untils) > 1 else 0.0
            now[0] += (sim.untils[-1] - done) * seconds_per_ms
        return now[0]

    advance_in_steps(sim, total_ms, reports.append, clock=clock)
    assert reports == sim.untils
    return reports


def test_a_fast_run_reports_about_every_two_percent_and_ends_at_its_duration():
    untils = _advance(60_000.0, 1e-7)
    most, first, _ = (60_000.0 / n for n in PROGRESS_STEPS)
    assert untils[0] == pytest.approx(first) and untils[-1] == 60_000.0
    steps = [b - a for a, b in zip(untils, untils[1:])]
    assert max(steps) == pytest.approx(most) and 50 <= len(untils) <= 55


def test_a_slow_run_reports_every_half_second_of_wall_time_from_its_first_second():
    """A 1-µs tick makes a simulated ms cost 0.1 s: the run reports after 6 s (its first step), then every 0.5 s."""
    untils = _advance(60_000.0, 0.1)
    assert untils[0] * 0.1 == pytest.approx(6.0)
    steps = [b - a for a, b in zip(untils, untils[1:])]
    assert steps[-2] * 0.1 == pytest.approx(PROGRESS_EVERY_S)
    assert untils[-1] == 60_000.0


@settings(max_examples=60, deadline=None)
@given(total_ms=st.floats(0.001, 1e9), seconds_per_ms=st.floats(0.0, 1e3))
def test_steps_are_bounded_grow_at_most_four_fold_and_end_exactly_at_the_duration(total_ms, seconds_per_ms):
    untils = _advance(total_ms, seconds_per_ms)
    most, first, least = (total_ms / n for n in PROGRESS_STEPS)
    assert untils[-1] == total_ms and len(untils) <= 2 + total_ms / least
    steps = [untils[0]] + [b - a for a, b in zip(untils, untils[1:])]
    assert steps[0] == pytest.approx(min(first, total_ms))
    for before, step in zip(steps[:-1], steps[1:-1]):  # the last step is what was left
        assert least * (1 - 1e-9) <= step <= min(most, 4 * before) * (1 + 1e-9)


@pytest.mark.parametrize("seconds, text", [
    (0.2, "1 s"), (44.6, "45 s"), (59.4, "59 s"), (61, "1 min"), (12 * 60 + 10, "12 min"), (3600, "1 h"),
    (3 * 3600 + 20 * 60, "3 h 20 min"), (47 * 3600, "47 h"), (9 * 86400, "9 days"), (4e6 * 86400, "4,000,000 days"),
])
def test_wall_time_reads_in_the_largest_units_that_read_well(seconds, text):
    assert cli.wall_time_text(seconds) == text


def test_the_time_left_is_from_the_pace_so_far_and_a_long_one_says_how_to_stop_or_shorten_it():
    assert cli.remaining_text(10.0, 0.0, 60.0) == ""  # no pace yet
    assert cli.remaining_text(10.0, 30.0, 60.0) == ", about 10 s left"
    long = cli.remaining_text(60.0, 0.1, 60.0)  # a minute for 0.1 of 60 simulated s
    assert long.startswith(", about 9 h 59 min left") and "Ctrl-C" in long and "--duration" in long


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_cli_shows_one_progress_line_on_a_terminal_with_the_time_left(monkeypatch):
    err = _Terminal()
    monkeypatch.setattr(cli.sys, "stderr", err)
    clock = iter([100.0, 100.5, 102.0, 103.0, 104.0])  # started; then one reading per call
    monkeypatch.setattr(cli.time, "monotonic", lambda: next(clock))
    show = cli._progress_printer()
    show(1.0, 40.0)  # within the first second: nothing
    show(2.0, 40.0)
    show(20.0, 40.0)
    show(40.0, 40.0)
    lines = err.getvalue().split("\r")[1:]
    assert [re.sub(r"\x1b\[K", "", line) for line in lines] == [
        "simulating:   5% (2.0 of 40 simulated s), about 38 s left",
        "simulating:  50% (20.0 of 40 simulated s), about 3 s left",
        "simulating: 100% (40.0 of 40 simulated s)\n",
    ]


def test_the_cli_shows_no_progress_line_when_stderr_is_not_a_terminal(monkeypatch):
    monkeypatch.setattr(cli.sys, "stderr", io.StringIO())
    assert cli._progress_printer() is None


def _stop_halfway():
    def stop(done_s: float, total_s: float) -> None:
        if done_s >= total_s / 2:
            raise KeyboardInterrupt

    return stop


def test_ctrl_c_names_the_unfinished_files_it_leaves_and_force_reuses_the_folder(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(cli, "_progress_printer", _stop_halfway)
    out = tmp_path / "run"
    code, _, err = run_main(capsys, "simulate", "--scenario", "timetick-basics", "--duration", "4", "--out", str(out))
    assert code == 130
    assert err.strip() == (f"milvus-edu: interrupted; {out} holds the unfinished events.jsonl.partial and "
                           "events.parquet.partial (reuse the folder with --force, which replaces them, or delete it)")
    monkeypatch.setattr(cli, "_progress_printer", lambda: None)
    assert run_main(capsys, "simulate", "--scenario", "tso-basics", "--duration", "1", "--out", str(out))[0] == 2
    assert run_main(capsys, "simulate", "--scenario", "tso-basics", "--duration", "1", "--out", str(out),
                    "--force")[0] == 0
    assert sorted(p.name for p in out.iterdir()) == ["events.jsonl", "events.parquet", "summary.json"]


def test_ctrl_c_before_any_file_says_only_interrupted(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(cli, "_progress_printer", _stop_halfway)
    code, _, err = run_main(capsys, "simulate", "--scenario", "tso-basics", "--duration", "2", "--out",
                            str(tmp_path / "short"))
    assert code == 130 and err.strip() == "milvus-edu: interrupted"
    assert not list((tmp_path / "short").glob("*"))
