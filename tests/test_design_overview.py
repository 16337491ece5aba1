"""The book's design overview (book/design.md) and its pictures stay true to the code, checked without building
the book: every module path the page or a picture names exists, each module cites the Milvus file the page pairs
it with, every top-level module has a layer, no import points up a layer, and the committed pictures show what
book/draw_diagrams.py would draw."""

from __future__ import annotations

import html
import importlib.util
import re
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
PACKAGE = ROOT / "milvus_edu"
PAGE = BOOK / "design.md"


def _diagrams():
    """book/draw_diagrams.py as a module (it is a script of the book, not part of the package)."""
    spec = importlib.util.spec_from_file_location("draw_diagrams", BOOK / "draw_diagrams.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the script runs
    spec.loader.exec_module(module)
    return module


DIAGRAMS = _diagrams()


def _section(label: str) -> str:
    text = PAGE.read_text(encoding="utf-8")
    return text.split(f"({label})=\n", 1)[1].split("\n(design-", 1)[0]


def _table(section: str) -> list[list[str]]:
    """The rows (header left out) of the one pipe table in a section, each a list of its cells."""
    lines = [line for line in section.splitlines() if line.startswith("|")]
    assert len(lines) > 2 and set(lines[1]) <= set("|-"), "one table, header and separator first"
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[2:]]


def _code(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def _go_map() -> list[tuple[str, str]]:
    rows = []
    for go_cell, module_cell, _ in _table(_section("design-go-map")):
        [go], [module] = _code(go_cell), _code(module_cell)
        rows.append((go, module))
    return rows


def _cited(text: str) -> set[str]:
    """Milvus paths a source cites, with ``dir/{a.go, b.go}`` spelled out."""
    found = set(re.findall(r"(?:internal|pkg)/[\w/.-]+", text))
    for base, names in re.findall(r"((?:internal|pkg)/[\w/.-]*/)\{([^}]*)\}", text):
        found |= {base + name.strip() for name in names.split(",")}
    return found


def _cites(text: str, go: str) -> bool:
    """Whether a module's source names ``go``: the whole path, or its folder and (nearby, in a list) its file."""
    if go in _cited(text):
        return True
    folder, _, name = go.rpartition("/")
    return folder in text and re.search(rf"\b{re.escape(name)}\b", text) is not None


# ---- the page ---------------------------------------------------------------------------------------------
def test_the_page_is_in_the_toc_and_the_introduction():
    toc = yaml.safe_load((BOOK / "_toc.yml").read_text(encoding="utf-8"))
    assert "design" in [c["file"] for part in toc["parts"] for c in part["chapters"]]
    assert "{doc}`design`" in (BOOK / "intro.md").read_text(encoding="utf-8")


def test_every_module_the_go_map_names_exists_and_cites_its_go_file():
    rows = _go_map()
    assert len(rows) >= 40
    assert len({go for go, _ in rows}) == len(rows), "each Milvus file once"
    for go, module in rows:
        assert re.fullmatch(r"(internal|pkg)/[\w/.-]+\.(go|h|g4)", go), f"{go}: not a Milvus source path"
        path = PACKAGE / module
        assert path.is_file(), f"book/design.md names milvus_edu/{module}, which does not exist"
        assert _cites(path.read_text(encoding="utf-8"), go), (
            f"milvus_edu/{module} does not cite {go}: fix the row of book/design.md or the module's docstring")


def test_the_cites_check_can_fail():
    assert _cites("Models ``internal/flushcommon/metacache/{segment.go, meta_cache.go}``",
                  "internal/flushcommon/metacache/meta_cache.go")
    assert _cites("``internal/querynodev2/pipeline/``: ``filter_node.go``",
                  "internal/querynodev2/pipeline/filter_node.go")
    assert not _cites("Models ``internal/tso/tso.go``", "internal/tso/global_allocator.go")
    assert not _cites("``internal/proxy/util.go``", "internal/rootcoord/util.go")


def test_every_pure_module_that_cites_a_go_file_is_in_the_go_map():
    """A new component module with a Go counterpart gets its row (so the page does not go stale silently); a
    package's ``__init__`` that only sums up its modules needs none."""
    listed = {module for _, module in _go_map()}
    components = DIAGRAMS.LAYERS[[layer.name for layer in DIAGRAMS.LAYERS].index("components")].units
    missing = []
    for unit in components:
        for path in sorted((PACKAGE / unit).rglob("*.py")):
            module = path.relative_to(PACKAGE).as_posix()
            if path.name == "__init__.py" and len(list(path.parent.glob("*.py"))) > 1:
                continue  # a package's summary of its modules' Go files
            text = path.read_text(encoding="utf-8")
            docstring = text.split('"""')[1] if text.startswith('"""') else ""
            if re.search(r"(internal|pkg)/[\w/.{}, -]+\.go", docstring) and module not in listed:
                missing.append(module)
    assert not missing, f"add a row to book/design.md's table for each of {missing}"


def _assert_defined(name: str) -> None:
    """``path: Class`` or ``path: Class.method`` names a class (and its method) defined in ``milvus_edu/path``."""
    path, _, dotted = name.partition(": ")
    assert (PACKAGE / path).is_file(), f"milvus_edu/{path} does not exist"
    text = (PACKAGE / path).read_text(encoding="utf-8")
    cls, _, method = dotted.partition(".")
    assert re.search(rf"^class {cls}\b", text, re.M), f"no class {cls} in milvus_edu/{path}"
    assert not method or re.search(rf"^    def {method}\(", text, re.M), f"no {cls}.{method} in milvus_edu/{path}"


def test_every_simulated_node_the_page_names_exists():
    for cell in (row[1] for row in _table(_section("design-nodes"))):
        for name in _code(cell):
            _assert_defined(name)


# ---- the pictures -----------------------------------------------------------------------------------------
def _svg_text(name: str) -> str:
    return html.unescape((BOOK / "images" / name).read_text(encoding="utf-8"))


def test_every_path_in_the_cluster_picture_exists():
    for box in DIAGRAMS.BOXES:
        for part in box.parts:
            assert (PACKAGE / part.module).is_file(), f"{box.title}: milvus_edu/{part.module} does not exist"
        for node in box.nodes:
            _assert_defined(node)
    keys = {box.key for box in DIAGRAMS.BOXES}
    for arrow in DIAGRAMS.ARROWS:
        assert {arrow.src, arrow.dst} <= keys and arrow.kind in DIAGRAMS.STYLES


def test_the_committed_cluster_picture_is_the_drawn_one():
    svg = _svg_text("cluster.svg")
    for box in DIAGRAMS.BOXES:
        for text in (box.title, *box.nodes, *(p.label for p in box.parts), *(p.module for p in box.parts)):
            assert text in svg, f"book/images/cluster.svg lacks {text!r}: run python book/draw_diagrams.py"
    for arrow in DIAGRAMS.ARROWS:
        for line in arrow.label.splitlines():
            assert line in svg, f"book/images/cluster.svg lacks {line!r}: run python book/draw_diagrams.py"


def test_every_top_level_module_has_one_layer_and_imports_point_down():
    placed = [unit for layer in DIAGRAMS.LAYERS for unit in layer.units]
    assert len(placed) == len(set(placed)), "a module in two layers"
    assert sorted(placed) == DIAGRAMS.units(), (
        "give each top-level module of milvus_edu/ one layer in book/draw_diagrams.py's LAYERS (and no more)")
    upward = [f"{unit} -> {target}" for unit, targets in DIAGRAMS.imports().items() for target in targets
              if DIAGRAMS.layer_of(target) > DIAGRAMS.layer_of(unit)]
    assert not upward, f"imports that point up a layer: {upward}"


def test_the_import_reader_sees_relative_and_absolute_imports(tmp_path):
    package = tmp_path / "milvus_edu"
    for name in ("a", "b", "c"):
        (package / name).mkdir(parents=True)
        (package / name / "__init__.py").write_text("")
    (package / "__init__.py").write_text("__version__ = '0'\n")
    (package / "a" / "x.py").write_text("from ..b import thing\nimport milvus_edu.c.y\nfrom .. import __version__\n")
    (package / "b" / "y.py").write_text("from milvus_edu import simulate\n")
    assert DIAGRAMS.imports(package) == {"a": {"b", "c"}, "b": {"__init__"}}


def test_the_committed_layers_picture_is_the_drawn_one():
    svg = _svg_text("layers.svg")
    uses = DIAGRAMS.layer_imports()
    for i, layer in enumerate(DIAGRAMS.LAYERS):
        assert layer.name in svg and layer.role in svg
        assert "  ".join(DIAGRAMS._unit_name(u) for u in layer.units) in svg
        imported = ", ".join(DIAGRAMS.LAYERS[j].name for j in sorted(uses.get(i, ()), reverse=True)) or "nothing"
        assert f"imports: {imported}" in svg, f"layer {layer.name}: run python book/draw_diagrams.py"


@pytest.mark.parametrize("name", ["cluster.svg", "layers.svg"])
def test_the_book_shows_each_picture(name):
    assert f"images/{name}" in PAGE.read_text(encoding="utf-8")
