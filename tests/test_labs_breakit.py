"""Lab 8 (break it): every bug switch has its section, its grid, its Go rule; the self-checks pass the right answer,
fail a wrong one with a hint, and wait for an answer while it is None. The runs judged here are the short ones
(the TSO and QueryNode scenarios, under a second each); the lab's own run (tests/test_notebooks.py) judges the rest.
"""

from __future__ import annotations

import ast
import re
from html import unescape
from pathlib import Path

import pandas as pd
import pytest

import milvus_edu
from milvus_edu.config import BugSwitches
from milvus_edu.labs import breakit
from milvus_edu.labs.breakit import (RULES, Break, breaks, breaks_of, brief, check_go_rule, check_prediction, lesson_of,
                                     run_break, summary_style, summary_table, tour, violation_matrix, wrong_rule)
from milvus_edu.registry import get_scenario, mechanisms
from lab_solutions import SOLUTIONS, read_notebook

LAB = Path(__file__).resolve().parents[1] / "notebooks" / "08_break_it.ipynb"


@pytest.fixture(scope="module")
def lab():
    return read_notebook(LAB)


def _sections(nb) -> dict[str, str]:
    """Switch -> the text of its section (from its ``### n.m `switch``` heading to the next heading of that level)."""
    text = "\n".join(c.source for c in nb.cells)
    parts = re.split(r"^(?=#{2,3} )", text, flags=re.M)
    out = {}
    for part in parts:
        m = re.match(r"### \d+\.\d+ `(\w+)`", part)
        if m:
            out[m.group(1)] = part
    return out


# ---- coverage: a new switch must get a section, a grid and a rule ----------------------------------------------
def test_every_switch_has_a_section_with_both_self_checks_and_its_rule_named(lab):
    sections = _sections(lab)
    assert set(sections) == set(BugSwitches.names()), "every bug switch needs a `### n.m `switch`` section in lab 8"
    for switch, text in sections.items():
        assert 'check_prediction(answer_' in text and f', "{switch}")' in text, switch
        assert re.search(rf'check_go_rule\(answer_\d+, "{switch}"\)', text), switch
        rule = RULES[switch]
        assert rule.file.split(" ")[0] in text and rule.function.split(" ")[0] in text, \
            f"the section of {switch} must name {rule.file} and {rule.function}"


def test_sections_follow_the_tour_lesson_by_lesson(lab):
    order = list(_sections(lab))
    assert order == [s for _, switches in tour() for s in switches]
    text = "\n".join(c.source for c in lab.cells)
    titles = [m.title for m, _ in tour()]
    assert [t for t in re.findall(r"^## \d+\. (.+)$", text, flags=re.M) if t in titles] == titles


def test_every_switch_has_a_grid_a_docstring_and_a_rule():
    for switch in BugSwitches.names():
        alone = breaks_of(switch)[0]
        assert alone.switches == (switch,) and alone.seed == 1
        assert len(wrong_rule(switch)) > 40
        assert switch in RULES
    assert set(RULES) == set(BugSwitches.names())
    with pytest.raises(ValueError, match="unknown bug switch"):
        breaks_of("no_such_switch")
    with pytest.raises(ValueError, match="has no docstring"):
        wrong_rule("enabled")


def test_the_brief_states_the_rule_in_plain_text_and_not_what_a_run_shows(capsys):
    # lab 8's prediction exercise printed reset_flush_ts_inclusive's whole docstring: "Alone it changes no answer a
    # client gets (quirk P23)" gave the right prediction away, and ``>=`` and *reaches* showed as typed
    for switch in BugSwitches.names():
        brief(switch)
        out = capsys.readouterr().out
        rule = out.split("\nscenario ", 1)[0]
        assert "``" not in rule and not re.search(r"\*\w", rule), rule
        one_line = " ".join(rule.split())  # wrapped: a sentence may end at a line's end
        assert one_line.endswith(".") and one_line.count(". ") == 0, rule  # one sentence
    brief("reset_flush_ts_inclusive")
    out = capsys.readouterr().out
    assert "reaches it (>=) instead of passing it (>)" in " ".join(out.split())
    assert "Alone it changes" not in out and "P23" not in out


def test_breaks_are_the_reliability_sweeps_switch_grids():
    grids = [(b.scenario, b.switches) for b in breaks()]
    assert ("flush-ts-boundary", ("reset_flush_ts_inclusive",)) in grids
    assert ("flush-ts-slow-store", ("checkpoint_ignores_syncing_segments", "reset_flush_ts_inclusive")) in grids
    assert [b.switches for b in breaks_of("reset_flush_ts_inclusive")][0] == ("reset_flush_ts_inclusive",)


def test_the_grid_file_ships_inside_the_package():
    """The lab must work from a plain ``pip install`` (Binder, a wheel), not only from a clone: the grids are package
    data, declared in pyproject.toml."""
    import tomllib

    root = Path(__file__).resolve().parents[1]
    assert breakit.GRID.is_relative_to(root / "milvus_edu") and breakit.GRID.is_file()
    data = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["package-data"]
    package = breakit.GRID.parent.parent.relative_to(root).as_posix().replace("/", ".")
    assert any(breakit.GRID.match(pattern) for pattern in data[package])


def test_tour_groups_each_switch_once_under_its_scenarios_first_mechanism():
    groups = tour()
    names = [m.name for m, _ in groups]
    assert names == [m.name for m in mechanisms() if m.name in names]
    seen = [s for _, switches in groups for s in switches]
    assert sorted(seen) == sorted(BugSwitches.names()) and len(seen) == len(set(seen))
    for m, switches in groups:
        for switch in switches:
            assert lesson_of(switch) is m
            assert get_scenario(breaks_of(switch)[0].scenario).mechanisms[0] == m.name


# ---- the Go rules ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("switch", BugSwitches.names())
def test_go_rule_check_right_wrong_and_pending(switch):
    rule = RULES[switch]
    assert rule.faithful != rule.switch and {rule.faithful, rule.switch} <= set(rule.choices)
    assert set(rule.hints) == set(rule.choices) - {rule.faithful, rule.switch}
    assert check_go_rule(rule.faithful, switch)
    assert check_go_rule(f" ({rule.faithful.upper()}) ", switch)
    said = check_go_rule(rule.switch, switch)
    assert not said and "wrong rule the switch puts in" in str(said)
    for letter, hint in rule.hints.items():
        said = check_go_rule(letter, switch)
        assert not said and str(said).endswith(hint)
    assert "Not answered yet" in str(check_go_rule(None, switch))
    assert "not one of the choices" in str(check_go_rule("z", switch))
    assert "type int" in str(check_go_rule(3, switch))


@pytest.mark.slow
def test_reference_answers_pick_milvus_line_and_name_a_checker():
    solutions = SOLUTIONS[LAB.name]
    nb = read_notebook(LAB)
    for cell in nb.cells:
        for name, switch in re.findall(r'check_go_rule\((answer_\d+), "(\w+)"\)', cell.source):
            assert ast.literal_eval(solutions[name]) == RULES[switch].faithful, switch
        for name, switch in re.findall(r'check_prediction\((answer_\d+), "(\w+)"\)', cell.source):
            assert isinstance(ast.literal_eval(solutions[name]), str), switch


# ---- predictions, judged on the run ----------------------------------------------------------------------------
def test_prediction_right_when_the_checker_failed_and_says_who_else_did():
    said = check_prediction("Global Monotonic", "tso_skip_load_on_init")
    assert said and "global-monotonic failed" in str(said) and "client-monotonic" in str(said)
    assert check_prediction("window", "tso_no_window_save")


def test_prediction_wrong_gets_a_hint_not_the_answer():
    said = check_prediction("global-monotonic", "tso_no_window_save")
    assert not said and "held in this run" in str(said) and "Timestamp oracle" in str(said)
    assert "window" not in str(said).replace("the wrong", "")
    # it says what the guessed checker promises, so the student sees why it held
    assert "(its promise: every timestamp handed out is strictly greater than every earlier one)" in str(said)
    said = check_prediction("none", "session_uses_zero_ts")
    assert not said and "does fail" in str(said)
    assert "is a bug switch" in str(check_prediction("session_uses_zero_ts", "session_uses_zero_ts"))
    assert "not a checker of this run" in str(check_prediction("durable", "session_uses_zero_ts"))
    assert "Not answered yet" in str(check_prediction(None, "session_uses_zero_ts"))
    assert not check_prediction(7, "session_uses_zero_ts")


def test_reset_flush_ts_inclusive_alone_breaks_no_checker():
    """Quirk P23: alone, the switch changes no answer a client gets, so 'none' is the right prediction."""
    assert check_prediction("none", "reset_flush_ts_inclusive")
    said = check_prediction("flush-durable", "reset_flush_ts_inclusive")
    assert not said and "every other checker" in str(said)


def test_runs_are_shared_and_only_the_last_two_kept():
    first = run_break("tso_no_window_save")
    assert run_break("tso_no_window_save") is first
    run_break("delete_ignores_timestamps")
    run_break("session_uses_zero_ts")
    assert len(breakit._RUNS) <= 2 and breaks_of("tso_no_window_save")[0] not in breakit._RUNS
    assert breakit.counts_of(breaks_of("tso_no_window_save")[0])["window"] > 0  # the counts outlive the run


def test_report_and_chain_print_the_run(capsys):
    run = run_break("update_tsafe_before_delete")
    breakit.report(run)
    breakit.show_chain(milvus_edu.why(run, violation=1))
    out = capsys.readouterr().out
    assert "delete-then-read, seed 1, switches: update_tsafe_before_delete" in out
    assert "mvcc-exact" in out and "Let event" in out and "because event" in out
    assert all(len(line) <= breakit.WIDTH for line in out.splitlines())
    breakit.report(milvus_edu.simulate("delete-then-read", seed=1))
    assert "every checker held" in capsys.readouterr().out


def test_briefs_and_rules_fit_the_page(capsys):
    """JupyterLab at 1280 px with the file browser open shows 107 characters a line: a longer line wraps mid-word."""
    for switch in BugSwitches.names():
        breakit.brief(switch)
        breakit.show_rule(switch)
    out = capsys.readouterr().out
    assert "timestampOracle.InitTimestamp" in out
    assert all(len(line) <= breakit.WIDTH for line in out.splitlines())


def test_the_window_violation_reads_its_times_as_the_chain_does():
    run = run_break("tso_no_window_save")
    first = run.violations[0]
    assert first["invariant"] == "window"
    assert "allocating on physical 00:00:03.000. " in first["explanation"] and " ms" not in first["explanation"]


def test_table_and_matrix_come_from_the_runs(monkeypatch):
    cheap = (Break("tso-basics", ("tso_no_window_save",), 1), Break("delete-then-read", ("update_tsafe_before_delete",), 1))
    monkeypatch.setattr(breakit, "breaks", lambda: cheap)
    table = summary_table()
    assert list(table.switches) == ["tso_no_window_save", "update_tsafe_before_delete"]
    window = breakit.counts_of(cheap[0])["window"]
    assert table["checkers that failed (violations)"][0] == f"window ({window:,})"
    assert table["rule in Milvus 2.5"][1] == "delete_node.go: deleteNode.Operate"
    matrix = violation_matrix()
    assert list(matrix.columns) == ["window", "mvcc-exact"] and matrix.loc[cheap[0].label, "window"] == window



def _cells_html(html: str) -> list[str]:
    """The inner HTML of every body cell of a Styler's table: the index's ``th`` and the data's ``td``."""
    return re.findall(r"<(?:td|th) [^>]*class=\"(?:data|row_heading)[^\"]*\"[^>]*>(.*?)</(?:td|th)>", html, re.S)


def test_the_summary_shows_every_name_whole_or_broken_after_an_underscore():
    """JupyterLab broke the summary's names in its narrow columns (at a hyphen, or anywhere): the Styler lets a name
    break only at a space, after an underscore (``<wbr>``) or after a ``Type.`` prefix, keeps a hyphenated one on
    one line, and adds no character, so a name copied from the page is the name; the data stays the DataFrame."""
    table = pd.DataFrame([
        {"switches": "checkpoint_ignores_syncing_segments + reset_flush_ts_inclusive",
         "scenario": "timetick-unlocked-enqueue",
         "checkers that failed (violations)": "read-after-guarantee (10), strong-sees-acked (3)",
         "rule in Milvus 2.5": "flow_graph_dd_node.go: ddNode.tryToFilterSegmentInsertMessages"},
        {"switches": "skip_wait_tsafe", "scenario": "seed-example", "checkers that failed (violations)": "none",
         "rule in Milvus 2.5": "DeletedRecord.h: DeletedRecord::InternalPush <&>"},
    ]).set_index("switches")
    styler = summary_style(table)
    assert styler.data is table  # only the display is styled: the lab's asserts read the DataFrame
    html = styler.to_html()
    css = re.search(r"<style[^>]*>(.*?)</style>", html, re.S).group(1)
    assert "word-break: normal" in css and "overflow-wrap: normal" in css
    assert "break-all" not in html and "anywhere" not in html and "break-word" not in html
    # a DataFrame's class, which the book's stylesheet sizes to fit its column (book/_static/milvus-edu.css)
    assert re.search(r'<table [^>]*class="dataframe"', html)
    assert "table.dataframe" in (Path(__file__).resolve().parents[1] / "book" / "_static" / "milvus-edu.css").read_text()
    cells = _cells_html(html)
    assert len(cells) == 2 * (1 + 3)
    shown = [unescape(re.sub(r"<[^>]+>", "", c)) for c in cells]
    assert shown == [v for name, row in table.iterrows() for v in (name, *row)]  # copied text = the names
    assert not re.search("[\u00ad\u200b-\u200d\u2011\u2060\ufeff]", html)  # no invisible or changed character
    switch, scenario, checkers, rule = cells[:4]
    assert switch == "checkpoint_<wbr>ignores_<wbr>syncing_<wbr>segments + reset_<wbr>flush_<wbr>ts_<wbr>inclusive"
    assert scenario == "<span style='white-space: nowrap'>timetick-unlocked-enqueue</span>"
    assert "<span style='white-space: nowrap'>read-after-guarantee</span> (10)" in checkers
    assert rule.endswith("node.go: ddNode.<wbr>tryToFilterSegmentInsertMessages")  # not inside "node.go"
    for cell in cells:  # a break only after "_" or a Type's "."; never between two letters
        assert all(cell[k - 1] in "_." for k in (m.start() for m in re.finditer("<wbr>", cell))), cell
    assert "&lt;&amp;&gt;" in cells[-1]  # the text is escaped before the breaks go in


def test_the_lab_displays_the_summary_through_its_style(lab):
    (cell,) = [c.source for c in lab.cells if c.cell_type == "code" and "summary_table()" in c.source]
    assert "display(summary_style(table." in cell and "max_colwidth" not in cell


# ---- what the lab's chains read: the narration says what Milvus does, not what a switch made happen ------------
def test_clearing_flush_ts_says_whether_the_checkpoint_passed_or_equalled_it():
    from milvus_edu.narrate import describe

    row = {"kind": "datanode.flush_ts", "node": "datanode-1", "vchannel": "v0", "ts": 100, "tick_ts": 100,
           "detail": '{"checkpoint": 100, "set": false}'}
    assert describe(row).endswith("stored the checkpoint " + milvus_edu.narrate.ts_text(100) + ", equal to it.")
    passed = {**row, "tick_ts": 120, "detail": '{"checkpoint": 120, "set": false}'}
    assert describe(passed).endswith(", past it.")


def test_a_failed_checkpoint_rpc_is_narrated_as_milvus_rule():
    from milvus_edu.narrate import describe

    row = {"kind": "datanode.cp_rpc", "node": "datanode-1", "error": "etcdserver: request timed out",
           "detail": '{"positions": {"v0": 100}}'}
    assert "Milvus's updater keeps a failed task for its next tick" in describe(row)
