"""Progress of a long run: the steps ``simulate(progress=...)`` advances in, and the CLI's progress line."""

from __future__ import annotations

import io
import sys
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import milvus_edu
from milvus_edu import cli
from milvus_edu.sim import progress
from milvus_edu.sim import run as run_module
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
    steps_bounds = (50, 1_000, 3_000)  # the floor at 1/3,000 of the run keeps a slow example to 3,000 steps
    with mock.patch.object(run_module, "PROGRESS_STEPS", steps_bounds):
        untils = _advance(total_ms, seconds_per_ms)
    most, first, least = (total_ms / n for n in steps_bounds)
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
    assert progress.wall_time_text(seconds) == text


def test_the_time_left_is_from_the_pace_so_far_and_a_long_one_says_how_to_stop_or_shorten_it():
    assert progress.remaining_text(10.0, 0.0, 60.0) == ""  # no pace yet
    assert progress.remaining_text(10.0, 60.0, 60.0) == ""  # done
    assert progress.remaining_text(10.0, 30.0, 60.0) == ", about 10 s left"
    long = progress.remaining_text(60.0, 0.1, 60.0)  # a minute for 0.1 of 60 simulated s
    assert long.startswith(", about 9 h 59 min left") and "Ctrl-C" in long and "shorter duration" in long


def _clock(*readings):
    it = iter(readings)
    return lambda: next(it)


def test_the_terminal_line_rewrites_itself_from_the_first_second_and_ends_with_a_newline():
    out = io.StringIO()
    show = progress.TerminalLine(out, clock=_clock(100.0, 100.5, 102.0, 103.0, 104.0))  # started; one per report
    show(1.0, 40.0)  # within the first second: nothing
    show(2.0, 40.0)
    show(20.0, 40.0)
    show(40.0, 40.0)
    first, second, last = out.getvalue().split("\r")[1:]
    assert first == "simulating:   5% (2.0 of 40 simulated s), about 38 s left"
    assert second == "simulating:  50% (20.0 of 40 simulated s), about 3 s left"
    assert last.endswith("\n") and last.rstrip() == "simulating: 100% (40.0 of 40 simulated s)"
    assert len(last) - 1 == len(second)  # spaces over what the longer line before it left on the screen


def test_a_run_shorter_than_a_second_shows_nothing_at_all():
    out = io.StringIO()
    show = progress.TerminalLine(out, clock=_clock(0.0, 0.3, 0.9))
    show(20.0, 40.0)
    show(40.0, 40.0)
    assert out.getvalue() == ""


def test_log_lines_keep_one_line_every_ten_seconds_and_the_last():
    out = io.StringIO()
    show = progress.LogLines(out, clock=_clock(0.0, 2.0, 5.0, 12.5, 13.0, 14.0))
    for done in (1.0, 2.0, 5.0, 6.0, 8.0):
        show(done, 8.0)
    lines = out.getvalue().splitlines()
    assert [line.split(" (")[0] for line in lines] == ["simulating:  12%", "simulating:  62%", "simulating: 100%"]


def test_the_notebook_bar_appears_when_first_shown_and_follows_the_run():
    shown = []
    bar = progress.NotebookBar(shown.append, clock=_clock(0.0, 0.5, 2.0, 4.0))
    bar(1.0, 8.0)
    assert shown == [] and bar.bar is None
    bar(2.0, 8.0)
    assert len(shown) == 1 and bar.bar.max == 8.0 and bar.bar.value == 2.0
    assert bar.label.value == " 25% (2.0 of 8 simulated s), about 6 s left"
    bar(8.0, 8.0)
    assert len(shown) == 1 and bar.bar.value == 8.0 and bar.bar.bar_style == "success"


def test_progress_true_outside_a_notebook_and_a_terminal_writes_log_lines(monkeypatch):
    err = io.StringIO()
    monkeypatch.setattr(progress.sys, "stderr", err)
    assert isinstance(progress.progress_display(), progress.LogLines)
    assert progress.resolve_progress(False) is None and progress.resolve_progress(None) is None
    fn = lambda done, total: None  # noqa: E731
    assert progress.resolve_progress(fn) is fn


@pytest.mark.parametrize("bad", ["yes", 1, 0.5, [print]])
def test_simulate_refuses_a_progress_that_is_no_flag_or_function(bad):
    with pytest.raises(ValueError, match="progress is True, False, None or a function"):
        milvus_edu.simulate("tso-basics", duration_s=1, progress=bad)


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_cli_shows_the_terminal_line_only_on_a_terminal(monkeypatch):
    monkeypatch.setattr(progress.sys, "stderr", io.StringIO())
    assert cli._progress_printer() is None
    monkeypatch.setattr(progress.sys, "stderr", _Terminal())
    assert isinstance(cli._progress_printer(), progress.TerminalLine)


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


@pytest.mark.slow
def test_progress_true_in_a_notebook_kernel_shows_a_widget_bar_under_the_cell(tmp_path):
    """In a real kernel, a run shows an ipywidgets bar (a widget view output) once it has taken SHOW_AFTER_S, here 0
    (so the test does not depend on how fast the machine is)."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(
        "import milvus_edu\n"
        "import milvus_edu.sim.progress\n"
        "milvus_edu.sim.progress.SHOW_AFTER_S = 0.0\n"
        "result = milvus_edu.simulate('flush-basics', duration_s=20, progress=True)\n"
        "print(result.summary['events'])")]
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = nb.cells[0].outputs
    views = [o for o in outputs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
    printed = [o["text"] for o in outputs if o.get("output_type") == "stream" and o.get("name") == "stdout"]
    assert len(views) == 1 and int(printed[0]) > 10_000


def test_an_interrupted_run_ends_its_progress_line_before_saying_so(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(progress, "SHOW_AFTER_S", 0.0)

    def printer():
        line = progress.TerminalLine(sys.stderr)

        def show(done_s: float, total_s: float) -> None:
            line(done_s, total_s)
            if done_s >= total_s / 2:
                raise KeyboardInterrupt

        return show

    monkeypatch.setattr(cli, "_progress_printer", printer)
    code, _, err = run_main(capsys, "simulate", "--scenario", "tso-basics", "--duration", "2", "--out",
                            str(tmp_path / "r"))
    last = err.split("\r")[-1]
    assert code == 130 and last.startswith("simulating:  50%") and last.endswith(" left\nmilvus-edu: interrupted\n")
    assert progress.TerminalLine.open is None
