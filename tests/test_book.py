"""The jupyter-book site under book/: it builds offline with warnings as errors, and its generated
tables come from the code.

The build test (``-m book``) runs ``jupyter-book build`` into a temporary directory (book/ is not
touched) and executes the notebook chapters, so it takes a while. The other tests are quick checks of
the book's sources.
"""

from __future__ import annotations

import ast
import html
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from milvus_edu.config import BugSwitches
from milvus_edu.events.schema import EVENT_KINDS, FIELDS, SCHEMA_VERSION

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
PACKAGE = ROOT / "milvus_edu"
BUILD_TIMEOUT_S = 1800


# ---- quick checks of the sources --------------------------------------------------------------
def _config() -> dict:
    return yaml.safe_load((BOOK / "_config.yml").read_text(encoding="utf-8"))


def test_config_executes_notebooks_and_has_a_binder_button():
    cfg = _config()
    assert cfg["execute"]["execute_notebooks"] == "force"
    assert cfg["execute"]["timeout"] >= 600
    assert cfg["launch_buttons"]["binderhub_url"] == "https://mybinder.org"
    assert cfg["repository"]["url"] == "https://github.com/milvus-edu/milvus-edu"
    assert cfg["repository"]["path_to_book"] == "book"
    assert {"sphinx.ext.autodoc", "sphinx.ext.napoleon"} <= set(cfg["sphinx"]["extra_extensions"])
    assert cfg["sphinx"]["local_extensions"] == {"milvus_edu_tables": "_ext"}
    # offline: intersphinx is loaded by jupyter-book but must have nothing to fetch
    assert cfg["sphinx"]["config"]["intersphinx_mapping"] == {}


def test_tso_chapter_is_the_notebook():
    link = BOOK / "tso.ipynb"
    assert link.is_symlink(), "book/tso.ipynb must be a symlink to the lesson notebook"
    assert os.readlink(link) == "../notebooks/01_tso.ipynb"
    assert link.resolve() == (ROOT / "notebooks" / "01_tso.ipynb").resolve()


def test_api_lists_importable_modules():
    text = (BOOK / "api.md").read_text(encoding="utf-8")
    block = text.split(".. milvus-edu-api::", 1)[1].split("```", 1)[0]
    modules = [line.strip() for line in block.splitlines() if line.strip()]
    for name in ("milvus_edu.tsoutil", "milvus_edu.tso", "milvus_edu.storage", "milvus_edu.sessionutil",
                 "milvus_edu.rootcoord", "milvus_edu.events", "milvus_edu.config"):
        assert name in modules
    import importlib

    for name in modules:
        importlib.import_module(name)


def _docstrings(tree: ast.Module):
    yield ast.get_docstring(tree) or ""
    for node in ast.walk(tree):
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            yield ast.get_docstring(node) or ""


def _modules_with_simplifications() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if any(re.search(r"^\s*Simplifications?\b", doc, re.M) for doc in _docstrings(tree)):
            rel = path.relative_to(ROOT).with_suffix("")
            parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
            found.append(".".join(parts))
    return found


def test_every_simplification_in_the_code_is_in_the_book():
    """The architecture asks the book to keep a table of every simplification the docstrings state."""
    quirks = (BOOK / "quirks.md").read_text(encoding="utf-8")
    missing = [m for m in _modules_with_simplifications() if m not in quirks]
    assert not missing, (
        f"docstrings of {missing} state a 'Simplification'; add a row for each to the "
        "Simplifications table in book/quirks.md (where / simplification / why)"
    )


def test_quirks_table_covers_reference_section_6():
    quirks = (BOOK / "quirks.md").read_text(encoding="utf-8")
    table = quirks.split(":class: milvus-edu-quirks", 1)[1].split("```", 1)[0]
    numbers = [int(n) for n in re.findall(r"^\* - (\d+)$", table, re.M)]
    assert numbers == list(range(1, 13))
    assert table.count("  - reproduced\n") == 3


# ---- the build ----------------------------------------------------------------------------------
def _page(html_dir: Path, name: str) -> str:
    path = html_dir / name
    assert path.is_file(), f"{name} was not built"
    return path.read_text(encoding="utf-8")


def _table(page: str, css_class: str) -> str:
    m = re.search(rf'<table class="[^"]*\b{re.escape(css_class)}\b[^"]*">(.*?)</table>', page, re.S)
    assert m, f"no table with class {css_class}"
    return m.group(1)


def _text(fragment: str) -> str:
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", fragment)))


def _cells(table: str) -> list[list[str]]:
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", table, re.S)
    return [[_text(c).strip() for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", r, re.S)] for r in rows]


@pytest.fixture(scope="module")
def built_book(tmp_path_factory):
    out = tmp_path_factory.mktemp("book")
    cmd = [
        sys.executable, "-c", "import sys; from jupyter_book.cli.main import main; sys.exit(main())",
        "build", str(BOOK), "--path-output", str(out), "--warningiserror", "--keep-going", "--all",
    ]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
    log = proc.stdout + proc.stderr
    return {"rc": proc.returncode, "log": log, "html": out / "_build" / "html"}


@pytest.mark.book
@pytest.mark.slow
def test_book_builds_without_warnings(built_book):
    problems = [l for l in built_book["log"].splitlines() if ": WARNING:" in l or ": ERROR:" in l]
    assert built_book["rc"] == 0, "\n".join(problems) + "\n--- end of the build log ---\n" + built_book["log"][-4000:]
    assert "build succeeded" in built_book["log"]
    # Sphinx's own warnings look like "<file>:<line>: WARNING: ..."; with -W each also fails the build.
    warnings = [l for l in built_book["log"].splitlines() if ": WARNING:" in l]
    assert not warnings, "\n".join(warnings)


@pytest.mark.book
@pytest.mark.slow
def test_run_log_page_lists_every_kind_and_field(built_book):
    page = _page(built_book["html"], "run-log.html")
    kinds = _cells(_table(page, "milvus-edu-event-kinds"))
    assert kinds[0] == ["kind", "meaning", "columns it fills", "Milvus function"]
    assert [row[0] for row in kinds[1:]] == list(EVENT_KINDS)
    for row, kind in zip(kinds[1:], EVENT_KINDS.values()):
        assert row[2].split() == list(kind.fields)
    fields = _cells(_table(page, "milvus-edu-fields"))
    assert [row[0] for row in fields[1:]] == [f.name for f in FIELDS]
    assert f"version {SCHEMA_VERSION}" in _text(page)


@pytest.mark.book
@pytest.mark.slow
def test_quirks_page(built_book):
    page = _page(built_book["html"], "quirks.html")
    quirks = _cells(_table(page, "milvus-edu-quirks"))
    status = {row[0]: row[2] for row in quirks[1:]}
    assert [status[str(i)] for i in (1, 2, 3)] == ["reproduced"] * 3
    assert all(status[str(i)].startswith("later mechanism") for i in range(4, 13))
    assert "compose_ts" in quirks[2][3]
    simplifications = _text(_table(page, "milvus-edu-simplifications"))
    for phrase in ("integer nanoseconds", "Caller-serialised atomics", "Lazy lease expiry", "ProcessActiveStandBy"):
        assert phrase in simplifications
    switches = _cells(_table(page, "milvus-edu-bug-switches"))
    assert [row[0] for row in switches[1:]] == BugSwitches.names()
    assert all(row[2] for row in switches[1:])


@pytest.mark.book
@pytest.mark.slow
def test_api_page(built_book):
    page = _page(built_book["html"], "api.html")
    for anchor in ("milvus_edu.tsoutil.compose_ts", "milvus_edu.tso.global_allocator.GlobalTSOAllocator",
                   "milvus_edu.tso.tso.TimestampOracle", "milvus_edu.storage.kv.MemoryKV",
                   "milvus_edu.sessionutil.Session", "milvus_edu.rootcoord.root_coord.Core",
                   "milvus_edu.events.recorder.Recorder", "milvus_edu.config.BugSwitches"):
        assert f'id="{anchor}"' in page, anchor


@pytest.mark.book
@pytest.mark.slow
def test_tso_chapter_and_binder_button(built_book):
    page = _page(built_book["html"], "tso.html")
    assert "https://mybinder.org/v2/gh/milvus-edu/milvus-edu/" in page
    intro = _page(built_book["html"], "intro.html")
    assert "mybinder.org/badge_logo.svg" in intro
    assert (built_book["html"] / "index.html").is_file()


def test_tso_chapter_is_executed_with_the_filmstrip_and_plots(built_book):
    import re

    page = _page(built_book["html"], "tso.html")
    assert "why a timestamp never goes back" in page
    assert "Not answered yet" in page  # executed as shipped: the self-checks ran
    images = re.findall(r'<img[^>]+src="([^"]+\.png)"', page)
    assert len(images) >= 2, images  # the static filmstrip (widgets cannot run here) and the window plot
    for src in images:
        assert (built_book["html"] / src).is_file() and (built_book["html"] / src).stat().st_size > 10_000
