"""Every lab notebook runs top to bottom in a fresh kernel: as shipped (every exercise waits for an
answer) and with the reference answers of ``tests/lab_solutions.py`` put in (every check passes).

Both are one run per lab and session (``executed_labs`` in ``conftest.py``), where each exercise cell
runs with its reference answer just before it runs as shipped; the book is built from the same run
(``built_book``), so the suite executes each lab once."""

import re
from pathlib import Path

import pytest
from lab_solutions import SOLUTIONS, read_notebook, shipped_answers

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))
#: The labs that start a real Milvus server (the `real` extra): their runs are marked `real` too.
REAL_LABS = {"06_real_milvus.ipynb"}


def _lab_params() -> list:
    return [pytest.param(p, id=p.name, marks=[pytest.mark.real] if p.name in REAL_LABS else []) for p in NOTEBOOKS]
PENDING = "Not answered yet"


def _output_texts(cell) -> list[str]:
    """One text per output of a code cell: a stream's text, else the markdown shown (or plain text)."""
    texts = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            texts.append(str(out.get("text", "")))
        elif out.get("output_type") == "error":
            texts.append(f"{out.get('ename')}: {out.get('evalue')}")
        else:
            data = out.get("data", {})
            texts.append(str(data.get("text/markdown", data.get("text/plain", ""))))
    return texts


def _errors(nb) -> list:
    """The error outputs of the code cells (the run keeps them, and goes on)."""
    return [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
            if o.get("output_type") == "error"]


def _exercise_cells(nb) -> list:
    return [c for c in nb.cells if c.cell_type == "code" and re.search(r"^answer_\d+ = ", c.source, re.M)]


def _images(nb) -> int:
    return sum("image/png" in o.get("data", {}) for c in nb.cells if c.cell_type == "code" for o in c.outputs)


def test_notebooks_are_committed_without_outputs():
    assert NOTEBOOKS
    for path in NOTEBOOKS:
        nb = read_notebook(path)
        for cell in nb.cells:
            if cell.cell_type == "code":
                assert not cell.outputs and cell.execution_count is None, f"{path.name} has outputs"


#: Characters of a code line JupyterLab shows whole at 1280 px with the file browser open (it shows
#: about 95 to 100); a longer line is cut off on a student's laptop.
MAX_CODE_LINE = 95


def test_code_lines_fit_a_laptop_wide_jupyterlab():
    too_long = [f"{path.name} cell {i} line {j + 1} ({len(line)} characters): {line}"
                for path in NOTEBOOKS
                for i, cell in enumerate(read_notebook(path).cells) if cell.cell_type == "code"
                for j, line in enumerate(cell.source.split("\n")) if len(line) > MAX_CODE_LINE]
    assert not too_long, f"wrap these code lines to {MAX_CODE_LINE} characters:\n" + "\n".join(too_long)


def test_a_cell_that_writes_run_folders_makes_its_own_scratch_folder():
    # simulate refuses an out_dir that is not empty, so a cell writing into a folder made by an earlier cell fails
    # when a student runs it a second time (lab 3's Spark cell did: "basics-2 exists and is not empty")
    borrowed = [f"{path.name} cell {i}: out_dir={name} / ..."
                for path in NOTEBOOKS
                for i, cell in enumerate(read_notebook(path).cells) if cell.cell_type == "code"
                for name in sorted(set(re.findall(r"out_dir=\s*([A-Za-z_]\w*)\s*/", cell.source)))
                if not re.search(rf"^\s*{name}(\s*,\s*\w+)*\s*=\s*scratch_folder\(", cell.source, re.M)]
    written = sum(len(re.findall(r"out_dir=\s*[A-Za-z_]\w*\s*/", c.source))
                  for path in NOTEBOOKS for c in read_notebook(path).cells if c.cell_type == "code")
    assert written >= 5  # the labs do write run folders this way (7 on 2026-11-28): the check looks at something
    assert not borrowed, ("these cells write into a folder an earlier cell made; make a new one in the cell "
                          "(NAME = scratch_folder(\"milvus-edu-labN-\")) so that it runs again:\n" + "\n".join(borrowed))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_exercises_ship_unanswered_and_have_reference_answers(path):
    nb = read_notebook(path)
    names = shipped_answers(nb)
    assert names, f"{path.name} has no `answer_N = None` exercise"
    assert len(names) == len(_exercise_cells(nb)), "every `answer_N = ...` line must ship as `answer_N = None`"
    assert sorted(names) == sorted(SOLUTIONS[path.name]), "tests/lab_solutions.py must answer every exercise"
    for cell in _exercise_cells(nb):
        assert "check_" in cell.source, f"exercise cell without a self-check:\n{cell.source}"
        assert re.search(r"^answer_\d+ = None   # your answer: .+$", cell.source, re.M), \
            f"say what type the answer is: `answer_N = None   # your answer: an int`\n{cell.source}"
    source = "\n".join(c.source for c in nb.cells)
    for name, solution in SOLUTIONS[path.name].items():
        assert solution not in source, f"the reference answer to {name} is in the notebook"
    for cell in (c for c in nb.cells if c.cell_type == "code"):
        # the suite runs each lab once, answered and as shipped (conftest.executed_labs), relying on this
        used = set(re.findall(r"\banswer_\d+\b", cell.source)) - set(re.findall(r"^(answer_\d+) = ", cell.source, re.M))
        assert not used, f"only its exercise cell may use {sorted(used)}:\n{cell.source}"


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.parametrize("path", _lab_params())
def test_notebook_as_shipped_runs_and_waits_for_answers(path, built_book):
    executed = built_book["executed"].get(path.name)
    assert executed is not None, f"{path.name} is not a chapter of the book; add a symlink in book/ and a TOC entry"
    assert executed.is_file(), f"the book build did not execute {path.name}:\n{built_book['log'][-3000:]}"
    nb = read_notebook(executed)
    errors = _errors(nb)
    assert not errors, f"{path.name} raised: {errors[0].get('ename')}: {errors[0].get('evalue')}"
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(c.execution_count for c in code if c.source.strip()), f"{path.name} was not run to the end"
    shipped = [c.source for c in read_notebook(path).cells if c.cell_type == "code"]
    assert [c.source for c in code] == shipped, f"the book executed another version of {path.name}"
    text = "\n".join(t for c in nb.cells if c.cell_type == "code" for t in _output_texts(c))
    assert "✅" not in text and "❌" not in text, "an unanswered exercise must not be judged"
    for cell in _exercise_cells(nb):
        shown = "\n".join(_output_texts(cell))
        assert PENDING in shown, f"expected '⏳ {PENDING}: ...' under\n{cell.source}\ngot: {shown!r}"
    assert text.count(PENDING) == len(_exercise_cells(nb))
    assert _images(nb) >= 2, "expected the filmstrip and the window plot"


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.parametrize("path", _lab_params())
def test_notebook_with_reference_answers_passes_every_check(path, executed_labs):
    solutions = SOLUTIONS[path.name]
    nb = executed_labs[path.name].answered
    assert not shipped_answers(nb)
    errors = _errors(nb)
    assert not errors, f"{path.name} raised: {errors[0].get('ename')}: {errors[0].get('evalue')}"
    text = "\n".join(t for c in nb.cells if c.cell_type == "code" for t in _output_texts(c))
    assert "❌" not in text, "a self-check failed on the reference answers:\n" + "\n".join(
        t for c in nb.cells if c.cell_type == "code" for t in _output_texts(c) if "❌" in t)
    assert PENDING not in text
    checks = text.count("✅")
    assert checks == len(solutions), f"expected the {len(solutions)} exercise checks to pass, saw {checks}"
    assert _images(nb) >= 2, "expected the filmstrip and the window plot"
