"""The jupyter-book site under book/: it builds offline with warnings as errors, and its generated
tables come from the code.

The build tests (``-m book``) read one ``jupyter-book build`` of a copy of book/ into a temporary
directory (book/ is not touched), whose notebook chapters are the labs as the suite ran them once
(``built_book`` and ``executed_labs`` in ``conftest.py``), so they take a while. The other tests are
quick checks of the book's sources.
"""

from __future__ import annotations

import ast
import html
import json
import os
import re
from pathlib import Path

import pytest
import yaml

from milvus_edu.config import BugSwitches
from milvus_edu.events.schema import EVENT_KINDS, FIELDS, SCHEMA_VERSION

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
PACKAGE = ROOT / "milvus_edu"


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
    assert "sphinx.ext.autodoc" in cfg["sphinx"]["extra_extensions"]
    # No napoleon: the docstrings are prose, and napoleon reads "Not a Milvus key: ..." in an attribute's
    # docstring as a type and a description (it showed 155 of them as "Type: Not a Milvus key")
    assert "sphinx.ext.napoleon" not in cfg["sphinx"]["extra_extensions"]
    assert cfg["sphinx"]["local_extensions"] == {"milvus_edu_tables": "_ext"}
    # offline: intersphinx is loaded by jupyter-book but must have nothing to fetch
    assert cfg["sphinx"]["config"]["intersphinx_mapping"] == {}


def test_tso_chapter_is_the_notebook():
    link = BOOK / "tso.ipynb"
    assert link.is_symlink(), "book/tso.ipynb must be a symlink to the lesson notebook"
    assert os.readlink(link) == "../notebooks/01_tso.ipynb"
    assert link.resolve() == (ROOT / "notebooks" / "01_tso.ipynb").resolve()


def test_every_lab_is_a_chapter_of_the_book():
    toc = yaml.safe_load((BOOK / "_toc.yml").read_text(encoding="utf-8"))
    files = [c["file"] for part in toc["parts"] for c in part["chapters"]]
    chapters = {link.resolve(): link.stem for link in BOOK.glob("*.ipynb") if link.is_symlink()}
    for lab in sorted((ROOT / "notebooks").glob("*.ipynb")):
        assert lab.resolve() in chapters, f"{lab.name} has no symlink in book/"
        assert chapters[lab.resolve()] in files, f"{lab.name}'s chapter is not in book/_toc.yml"
    assert os.readlink(BOOK / "at_scale.ipynb") == "../notebooks/05_at_scale.ipynb"


def test_introduction_lists_every_page_in_the_order_of_the_toc():
    toc = yaml.safe_load((BOOK / "_toc.yml").read_text(encoding="utf-8"))
    files = [c["file"] for part in toc["parts"] for c in part["chapters"]]
    intro = (BOOK / "intro.md").read_text(encoding="utf-8").split("## What is in the book", 1)[1]
    assert re.findall(r"^\* \{doc\}`([\w-]+)`", intro, flags=re.M) == files


def test_a_labs_links_to_files_resolve_from_its_own_folder():
    """A lab opened in JupyterLab resolves a relative link from notebooks/ (the book, from book/, where the lab is a
    symlink). JupyterLab started as the README says (`jupyter lab notebooks/`) serves notebooks/ and nothing above it,
    so a link to a book page may not leave the folder: each book page a lab cites has a symlink beside the labs, and
    the same link names the page in the book. A link to an anchor (`#label`) resolves in the book only, so there is
    none."""
    links = 0
    for lab in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(lab.read_text(encoding="utf-8"))["cells"]
        text = "".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
        assert not re.search(r"\]\(#", text), f"{lab.name} links to an anchor, which JupyterLab cannot follow"
        for target in re.findall(r"\]\(([^)\s#]+)(?:#[^)]*)?\)", text):
            if re.match(r"[a-z]+:", target):
                continue  # a URL
            links += 1
            assert "/" not in target, f"{lab.name} links to {target}, outside the folder JupyterLab serves"
            assert (lab.parent / target).is_file(), f"{lab.name} links to {target}, which JupyterLab cannot open"
            assert (BOOK / target).is_file(), f"{lab.name} links to {target}, which the book cannot resolve"
    assert links >= 9


def test_real_milvus_lab_is_a_chapter_after_the_other_labs():
    link = BOOK / "model_and_real.ipynb"
    assert link.is_symlink() and os.readlink(link) == "../notebooks/06_real_milvus.ipynb"
    toc = yaml.safe_load((BOOK / "_toc.yml").read_text(encoding="utf-8"))
    files = [c["file"] for part in toc["parts"] for c in part["chapters"]]
    assert files.index("model_and_real") > files.index("guarantee_ts")
    assert "{doc}`model_and_real`" in (BOOK / "intro.md").read_text(encoding="utf-8")
    assert "{doc}`model_and_real`" in (BOOK / "real_milvus.md").read_text(encoding="utf-8")


def test_api_lists_importable_modules():
    text = (BOOK / "api.md").read_text(encoding="utf-8")
    blocks = [part.split("```", 1)[0] for part in text.split(".. milvus-edu-api::")[1:]]
    modules = [line.strip() for block in blocks for line in block.splitlines()
               if line.strip() and not line.strip().startswith(":")]
    # every top-level module and package of the package is in the reference (the version is one constant)
    top = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()
           if (p.suffix == ".py" and not p.name.startswith("_")) or (p / "__init__.py").is_file()}
    missing = sorted(f"milvus_edu.{name}" for name in top - {"version"} if f"milvus_edu.{name}" not in modules)
    assert not missing, f"add {missing} to book/api.md's list"
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


def _list_table(text: str, css_class: str) -> list[list[str]]:
    """The rows of the MyST ``list-table`` with ``:class: css_class``, each a list of its cells' text."""
    assert f":class: {css_class}\n" in text, f"no list-table with class {css_class}"
    block = text.split(f":class: {css_class}\n", 1)[1].split("```", 1)[0]
    rows = []
    for chunk in re.split(r"^\* - ", block, flags=re.M)[1:]:
        cells = re.split(r"^  - ", chunk, flags=re.M)
        rows.append([" ".join(cell.split()) for cell in cells])
    return rows


# Reference section 6: the quirks the model reproduces now; the others wait for their mechanism.
REPRODUCED_REFERENCE_QUIRKS = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12)


def test_quirks_table_covers_reference_section_6():
    quirks = (BOOK / "quirks.md").read_text(encoding="utf-8")
    header, *rows = _list_table(quirks, "milvus-edu-quirks")
    assert header[0] == "\\#" and len(header) == 4  # escaped: a bare "#" is an empty heading
    assert [row[0] for row in rows] == [str(n) for n in range(1, 13)]
    for number, _quirk, status, where in rows:
        if int(number) in REPRODUCED_REFERENCE_QUIRKS:
            assert status == "reproduced", number
            assert "{py:" in where, f"quirk {number} is reproduced: say where, with a {{py:...}} role"
        else:
            assert status.startswith("later mechanism ("), number
    assert "ChannelsTimeTicker.next_gate" in rows[3][3] and "ticker_fixed_interval_unit" in rows[3][3]
    assert "TimetickSync.send_to_channel" in rows[4][3]
    assert "51471" in rows[2][1]


# Subjects the table of quirks found while porting must keep (a missing row fails the test).
PORTING_QUIRK_SUBJECTS = (
    "syncedTtHistogram", "minTimeTick", "timestamp go back", "`cnt`", "useLockScheduler", "initial pchannels",
    "`tsSet` is a set", "min(maxTs, min(tsSet))", "AllocTimestamp", "Seek` skips", "lastTimeStamp",
    "seen", "DropCollection", "strings.Contains", "GetCollectionIDFromVChannel", "common.session.ttl: 30",
    "retry.Do", "LivenessCheck", "partitioned active", "Promote", "recvKeepAlive",
)


def test_quirks_found_while_porting_say_status_and_where():
    quirks = (BOOK / "quirks.md").read_text(encoding="utf-8")
    header, *rows = _list_table(quirks, "milvus-edu-porting-quirks")
    assert header[0] == "\\#" and len(header) == 4  # escaped: a bare "#" is an empty heading
    assert [row[0] for row in rows] == [f"P{i}" for i in range(1, len(rows) + 1)]
    for number, quirk, status, where in rows:
        assert status.startswith(("reproduced", "not reproduced", "not modelled")), (number, status)
        assert "milvus_edu." in where, f"{number}: say where in the model it lives"
    text = " ".join(row[1] for row in rows)
    missing = [s for s in PORTING_QUIRK_SUBJECTS if s not in text]
    assert not missing, f"rows about {missing} are gone from the table of quirks found while porting"


def test_sessions_page_states_the_facts_it_was_checked_against():
    page = (BOOK / "sessions.md").read_text(encoding="utf-8")
    assert "{code-cell}" not in page  # plain MyST: nothing executes
    for fact in ("rootCoord.enableActiveStandby: false", "component_param.go", "TTL/3", "500 ms",
                 "200, 400 and 800 ms", "os.Exit(1)", "panic", "20.5 s", "80.5 s", "61 calls", "7 of 20 seeds",
                 "milvus-edu simulate --scenario tso-pause --out runs/pause"):
        assert fact in page, fact
    toc = yaml.safe_load((BOOK / "_toc.yml").read_text(encoding="utf-8"))
    files = [c["file"] for part in toc["parts"] for c in part["chapters"]]
    assert "sessions" in files


def test_tso_pause_numbers_in_the_sessions_page_match_a_run():
    """The page's story of seed 1, checked against the run it tells (the scenario takes seconds)."""
    import milvus_edu

    ev = milvus_edu.simulate("tso-pause", seed=1).events
    keep = ev[(ev.kind == "session.keepalive") & (ev.node == "rootcoord-1")]
    assert keep.t_ms.max() == 20_500.0
    active = ev[ev.kind == "session.active"]
    assert list(zip(active.node, active.t_ms)) == [("rootcoord-1", 0.0), ("rootcoord-2", 80_500.0)]
    late = ev[(ev.kind == "rootcoord.alloc_timestamp") & (ev.node == "rootcoord-1") & (ev.t_ms >= 100_000.0)]
    assert len(late) == 61
    saves = ev[(ev.kind == "tso.save") & (ev.t_ms == 100_000.0)]
    assert list(saves.node) == ["rootcoord-1"]
    exits = ev[ev.kind == "session.exit"]
    assert list(zip(exits.node, exits.t_ms)) == [("rootcoord-1", 100_000.0)]
    assert exits.seq.iloc[0] > late.seq.max()


# ---- the build ----------------------------------------------------------------------------------
def _page(html_dir: Path, name: str) -> str:
    path = html_dir / name
    assert path.is_file(), f"{name} was not built"
    return path.read_text(encoding="utf-8")


def _tables(page: str, css_class: str) -> list[str]:
    found = re.findall(rf'<table class="[^"]*\b{re.escape(css_class)}\b[^"]*"[^>]*>(.*?)</table>', page, re.S)
    assert found, f"no table with class {css_class}"
    return found


def _table(page: str, css_class: str) -> str:
    return _tables(page, css_class)[0]


def _text(fragment: str) -> str:
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", fragment)))


def _cells(table: str) -> list[list[str]]:
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", table, re.S)
    return [[_text(c).strip() for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", r, re.S)] for r in rows]


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
def test_every_page_fits_tables_to_the_column_and_titles_every_column(built_book):
    css = built_book["html"] / "_static" / "milvus-edu.css"
    assert "overflow-wrap: anywhere" in css.read_text(encoding="utf-8")
    for path in sorted(built_book["html"].glob("*.html")):
        page = path.read_text(encoding="utf-8")
        if "<article" in page:  # the book's pages, not the redirect of index.html
            assert "_static/milvus-edu.css" in page, path.name
        for head in re.findall(r"<thead>(.*?)</thead>", page, re.S):
            # a header cell that starts with "#" in a MyST list-table became an empty heading
            assert "rubric" not in head, path.name
    # the generated tables keep the widths their directives give (the HTML writer drops them otherwise)
    kinds = _tables(_page(built_book["html"], "run-log.html"), "milvus-edu-event-kinds")[0]
    assert re.findall(r'<col style="width: ([\d.]+)%" />', kinds) == ["18.0", "42.0", "24.0", "16.0"]


@pytest.mark.book
@pytest.mark.slow
def test_run_log_page_lists_every_kind_and_field(built_book):
    page = _page(built_book["html"], "run-log.html")
    tables = [_cells(table) for table in _tables(page, "milvus-edu-event-kinds")]
    for table in tables:
        assert table[0] == ["kind", "meaning", "columns it fills", "Milvus function"]
    rows = [row for table in tables for row in table[1:]]
    assert [row[0] for row in rows] == list(EVENT_KINDS)
    for row, kind in zip(rows, EVENT_KINDS.values()):
        assert row[2].split() == list(kind.fields)
    assert {"proxy.report", "rootcoord.timetick_update", "mq.produce", "mq.pack"} <= {row[0] for row in rows}
    captions = _text(" ".join(re.findall(r"<caption>(.*?)</caption>", page, re.S)))
    assert "TimeTick and message streams" in captions and "Timestamp oracle" in captions, captions
    fields = _cells(_table(page, "milvus-edu-fields"))
    assert [row[0] for row in fields[1:]] == [f.name for f in FIELDS]
    assert f"version {SCHEMA_VERSION}" in _text(page)


@pytest.mark.book
@pytest.mark.slow
def test_quirks_page(built_book):
    page = _page(built_book["html"], "quirks.html")
    quirks = _cells(_table(page, "milvus-edu-quirks"))
    status = {row[0]: row[2] for row in quirks[1:]}
    assert [status[str(i)] for i in REPRODUCED_REFERENCE_QUIRKS] == ["reproduced"] * len(REPRODUCED_REFERENCE_QUIRKS)
    later = [i for i in range(1, 13) if i not in REPRODUCED_REFERENCE_QUIRKS]
    assert all(status[str(i)].startswith("later mechanism") for i in later)
    assert "compose_ts" in quirks[2][3]
    assert "ChannelsTimeTicker.next_gate" in quirks[4][3] and "TimetickSync.send_to_channel" in quirks[5][3]
    porting = _cells(_table(page, "milvus-edu-porting-quirks"))
    assert [row[0] for row in porting[1:]] == [f"P{i}" for i in range(1, len(porting))]
    # every "where" cell of a reproduced quirk links into the API reference
    for table_class in ("milvus-edu-quirks", "milvus-edu-porting-quirks"):
        for row in re.findall(r"<tr[^>]*>(.*?)</tr>", _table(page, table_class), re.S)[1:]:
            cells = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
            if _text(cells[2]).strip().startswith("reproduced"):
                assert 'href="api.html#milvus_edu.' in cells[3], _text(cells[0])
    simplifications = _text(_table(page, "milvus-edu-simplifications"))
    for phrase in ("integer nanoseconds", "Caller-serialised atomics", "Lazy lease expiry", "ProcessActiveStandBy",
                   "poll-driven", "one-slot"):
        assert phrase in simplifications
    assert "simply stops serving" not in simplifications  # the session layer now exits as Milvus does
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
                   "milvus_edu.events.recorder.Recorder", "milvus_edu.config.BugSwitches",
                   "milvus_edu.proxy.channels_time_ticker.ChannelsTimeTicker",
                   "milvus_edu.rootcoord.timeticksync.TimetickSync", "milvus_edu.mq.msgstream.MqTtMsgStream",
                   "milvus_edu.proto.MsgPosition", "milvus_edu.registry.Mechanism",
                   "milvus_edu.cluster.dml.ProxyNode", "milvus_edu.simulate", "milvus_edu.why"):
        assert f'id="{anchor}"' in page, anchor
    # an attribute's docstring is shown whole, its first clause not taken for a type
    assert '>Type<span class="colon">' not in page
    assert "Not a Milvus key: False reproduces" in page
    # names as the docstrings write them, which Sphinx's own lookup misses (a short name a module imports, a
    # re-export, the package's entry points): each is a link (book/_ext's _resolve_by_name), never plain code
    xrefs = re.findall(r'(<a [^>]*>)?<code class="xref py[^"]*"[^>]*><span class="pre">([^<]*)</span>', page)
    for name in ("milvus_edu.simulate()", "milvus_edu.why()", "RPCError", "BugSwitches", "milvus_edu.events.load_run()",
                 "run_sweep()"):
        linked = [bool(a) for a, shown in xrefs if shown == name]
        assert linked and all(linked), f"{name}: {linked.count(False)} of {len(linked)} references are not links"


@pytest.mark.book
@pytest.mark.slow
def test_tso_chapter_and_binder_button(built_book):
    page = _page(built_book["html"], "tso.html")
    assert "https://mybinder.org/v2/gh/milvus-edu/milvus-edu/" in page
    intro = _page(built_book["html"], "intro.html")
    assert "mybinder.org/badge_logo.svg" in intro
    assert 'href="sessions.html"' in intro and 'href="timetick.html"' in intro
    assert (built_book["html"] / "index.html").is_file()


@pytest.mark.book
@pytest.mark.slow
def test_sessions_page_is_built_with_its_links(built_book):
    page = _page(built_book["html"], "sessions.html")
    assert "When the active only" in page
    assert 'href="tso.html"' in page and 'href="quirks.html"' in page
    assert 'href="api.html#milvus_edu.cluster.rootcoord.RootCoordNode"' in page


@pytest.mark.book
@pytest.mark.slow
def test_tso_chapter_is_executed_with_the_filmstrip_and_plots(built_book):
    page = _page(built_book["html"], "tso.html")
    assert "why a timestamp never goes back" in page
    assert "Not answered yet" in page  # executed as shipped: the self-checks ran
    images = re.findall(r'<img[^>]+src="([^"]+\.png)"', page)
    assert len(images) >= 2, images  # the static filmstrip (widgets cannot run here) and the window plot
    for src in images:
        assert (built_book["html"] / src).is_file() and (built_book["html"] / src).stat().st_size > 10_000


@pytest.mark.book
@pytest.mark.slow
def test_tso_chapter_reads_right_on_the_static_page(built_book):
    """What the book reader sees: the stepper's text names the filmstrip, the filmstrip fits the page
    column (one moment a row, so its 9 pt text stays 9 pt), the checker's explanation is wrapped, and
    no Spark warning shows as an error box."""
    from PIL import Image

    page = _page(built_book["html"], "tso.html")
    assert "On the book\u2019s static page" in html.unescape(page) or "On the book's static page" in html.unescape(page)
    assert 'class="output stderr"' not in page, "a cell wrote to stderr (Spark's start-up warnings?)"
    sizes = [Image.open(built_book["html"] / src).size
             for src in re.findall(r'<img[^>]+src="([^"]+\.png)"', page)]
    film = [(w, h) for w, h in sizes if h > 2 * w]
    assert film and all(w <= 690 for w, _h in film), sizes
    blocks = [html.unescape(re.sub(r"<[^>]+>", "", b)) for b in re.findall(r"<pre[^>]*>(.*?)</pre>", page, re.S)]
    shown = [b for b in blocks if "Let event" in b and "checks ok" in b]
    assert shown, "the Break it output is missing"
    assert all(len(line) <= 100 for b in shown for line in b.splitlines()), shown


@pytest.mark.book
@pytest.mark.slow
def test_at_scale_chapter_is_executed_with_its_plots(built_book):
    page = _page(built_book["html"], "at_scale.html")
    assert "Thousands of runs" in page
    assert "Not answered yet" in page  # executed as shipped: the self-checks ran
    images = re.findall(r'<img[^>]+src="([^"]+\.png)"', page)
    assert len(images) >= 4, images  # one plot per question and the verdicts' heat map
    for src in images:
        assert (built_book["html"] / src).is_file() and (built_book["html"] / src).stat().st_size > 10_000
    assert 'class="output stderr"' not in page, "a cell wrote to stderr"
    assert 'href="at_scale.html"' in _page(built_book["html"], "intro.html")
