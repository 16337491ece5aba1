"""The plug-in contract, read from the source: shared modules name no mechanism, and no mechanism imports another.

A *mechanism* is a folder ``milvus_edu/mechanisms/<name>/`` (one lesson). A *shared module* is every module of
``milvus_edu`` outside ``milvus_edu/mechanisms/``. The rules, checked on each module's syntax tree:

1. A shared module imports nothing from ``milvus_edu.mechanisms.<name>`` (absolute or relative, ``import`` or
   ``from ... import``). Only the package's ``__init__`` imports ``milvus_edu.mechanisms`` itself, which
   registers every built-in lesson without naming one.
2. A shared module holds no string constant in its code that names a mechanism: a string equal to a
   mechanism's name (``if mech == "flush"``, ``{"query": ...}``, ``get_mechanism("tso")``) or a path into one
   (``"milvus_edu.mechanisms.flush.x"``, ``"mechanisms/flush"``). Docstrings and other bare string statements
   are prose, not code, and are not checked; nor are the keys of a run-log event's ``detail={...}``, which name
   Milvus's own fields (a sync pack's ``flush`` flag), not a lesson.
3. No shared module or package is named after a mechanism (``check/flush.py`` is a lesson's file in a shared
   room), except a top-level component package that mirrors the Milvus Go package of the same name
   (``milvus_edu/tso/`` models ``internal/tso``).
4. A module of ``mechanisms/<a>/`` imports nothing from ``mechanisms/<b>/``: what two lessons share is a
   shared part (a component, the cluster, a view helper) and lives below both. ``mechanisms/__init__.py``
   is no lesson: it imports each one so that each registers itself.
5. A lesson's ``scenarios.py`` wires no node: of ``milvus_edu.cluster`` it imports only the builder
   (``milvus_edu.cluster.builder``: the cluster's shape as data, ``build``), and it calls no class that a
   ``milvus_edu/cluster/`` module defines other than the builder's specs, so every cluster is built by ``build``.

One shared module may spell these words as strings: ``milvus_edu/client/workload.py``, the workload's vocabulary,
where pymilvus's operation names (``flush``, ``query``) are defined once (``OPS``, ``READ_OPS``, ``KIND_OF_OP``)
for every other module to use by constant. Those strings name a client call, not a lesson.

Identifiers are not checked: Milvus's own vocabulary uses these words (a segment's ``flush`` flag, the ``tso``
allocator, a ``query`` request, the ``timetick`` parameter group), and an identifier reaches a lesson's code
only through an import, which rule 1 covers.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "milvus_edu"
MECHANISMS = PACKAGE / "mechanisms"
#: The one shared module that spells pymilvus's operation names (some are also lessons' names).
CLIENT_VOCABULARY = PACKAGE / "client" / "workload.py"
#: Shared packages named like a lesson because they mirror the Milvus Go package of that name.
MILVUS_PACKAGES_NAMED_LIKE_A_LESSON = {"tso"}  # internal/tso


def mechanism_names() -> set[str]:
    """The lessons: each folder of ``milvus_edu/mechanisms`` with an ``__init__.py``."""
    return {p.name for p in MECHANISMS.iterdir() if (p / "__init__.py").is_file()}


def module_name(path: Path) -> str:
    """``milvus_edu/check/violation.py`` -> ``milvus_edu.check.violation`` (a package's ``__init__`` is the package)."""
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path, tree: ast.Module) -> list[tuple[int, list[str]]]:
    """Per import statement, its line and the dotted paths it may reach (the module, and ``module.name`` for
    each name a ``from`` import takes, since that name may be a submodule); relative imports resolved."""
    here = module_name(path).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, [a.name]) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
            out.append((node.lineno, [base] + [f"{base}.{a.name}" for a in node.names]))
    return out


def lesson_of(dotted: str, names: set[str]) -> str | None:
    """The mechanism a dotted module path reaches into, or ``None``."""
    parts = dotted.split(".")
    if parts[:2] == ["milvus_edu", "mechanisms"] and len(parts) > 2 and parts[2] in names:
        return parts[2]
    return None


def prose(tree: ast.Module) -> set[int]:
    """The ids of the string constants that name no lesson whatever they say: statements of their own (docstrings,
    attribute notes) and the keys of a ``detail={...}`` keyword argument (run-log field names)."""
    out = {id(n.value) for n in ast.walk(tree)
           if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)}
    out |= {id(k) for n in ast.walk(tree) if isinstance(n, ast.keyword) and n.arg == "detail"
            and isinstance(n.value, ast.Dict) for k in n.value.keys if isinstance(k, ast.Constant)}
    return out


def names_a_lesson(text: str, names: set[str]) -> bool:
    """Whether a string constant is a mechanism's name or a path into one."""
    return text in names or any(f"mechanisms{sep}{n}" in text for n in names for sep in "./")


def shared_files() -> list[Path]:
    """Every module of the package outside ``mechanisms/``."""
    return sorted(p for p in PACKAGE.rglob("*.py") if MECHANISMS not in p.parents)


def breaches(files: list[Path], names: set[str]) -> list[str]:
    """Each broken rule as ``path:line what`` (empty when the contract holds)."""
    found = []
    for path in files:
        rel = path.relative_to(PACKAGE.parent)
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        if MECHANISMS in path.parents:
            if path.parent == MECHANISMS:  # the face that registers every built-in lesson, itself no lesson
                continue
            me = path.relative_to(MECHANISMS).parts[0]
            for line, reached in imported(path, tree):
                other = next((d for d in reached if lesson_of(d, names) not in (None, me)), None)
                if other is not None:
                    found.append(f"{rel}:{line} lesson {me} imports lesson {lesson_of(other, names)} ({other})")
            continue
        for line, reached in imported(path, tree):
            lesson = next((d for d in reached if lesson_of(d, names) is not None), None)
            if lesson is not None:
                found.append(f"{rel}:{line} imports a lesson ({lesson})")
            elif "milvus_edu.mechanisms" in reached and path != PACKAGE / "__init__.py":
                found.append(f"{rel}:{line} imports milvus_edu.mechanisms (only the package's __init__ registers them)")
        notes = prose(tree)
        for node in ast.walk(tree) if path != CLIENT_VOCABULARY else ():
            if (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in notes
                    and names_a_lesson(node.value, names)):
                found.append(f"{rel}:{node.lineno} names lesson {node.value!r} in a string")
        inside = path.relative_to(PACKAGE).with_suffix("").parts
        if inside[0] not in MILVUS_PACKAGES_NAMED_LIKE_A_LESSON:
            lesson = next((part for part in inside if part in names), None)
            if lesson is not None:
                found.append(f"{rel} is a shared module named after lesson {lesson!r}")
    return found


CLUSTER = PACKAGE / "cluster"
BUILDER = "milvus_edu.cluster.builder"


def builder_names() -> set[str]:
    """The classes a scenario may call: the spec dataclasses of ``cluster/builder.py``."""
    tree = ast.parse((CLUSTER / "builder.py").read_text(encoding="utf-8"))
    return {n.name for n in tree.body if isinstance(n, ast.ClassDef) and n.name.endswith("Spec")}


def cluster_classes() -> set[str]:
    """Every class a module of ``milvus_edu/cluster/`` defines (nodes, collections, clients, stores, specs)."""
    found = set()
    for path in CLUSTER.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found |= {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
    return found


def wiring(path: Path, node_classes: set[str]) -> list[str]:
    """Each place where a lesson's ``scenarios.py`` wires nodes itself, as ``path:line what``: an import of a
    ``milvus_edu.cluster`` module other than the builder, or a call of a cluster class that is no builder spec."""
    rel = path.relative_to(PACKAGE.parent)
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for line, reached in imported(path, tree):
        module = reached[0]
        if (module == "milvus_edu.cluster" or module.startswith("milvus_edu.cluster.")) and module != BUILDER:
            found.append(f"{rel}:{line} imports {module} (a scenario builds its cluster through {BUILDER})")
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            called = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
            if called in node_classes:
                found.append(f"{rel}:{node.lineno} creates {called} (describe it in a ClusterSpec and call build)")
    return found


def test_there_are_lessons_to_check():
    assert {"tso", "timetick", "flush", "query"} <= mechanism_names()


@pytest.mark.slow
def test_shared_modules_name_no_lesson_and_lessons_import_no_other_lesson():
    names = mechanism_names()
    files = shared_files() + sorted(MECHANISMS.rglob("*.py"))
    assert breaches(files, names) == []


def test_scenarios_build_their_clusters_through_the_builder():
    node_classes = cluster_classes() - builder_names()
    assert {"RootCoordNode", "ProxyNode", "DataNodeNode", "QueryNodeNode", "Cluster"} <= node_classes
    files = sorted(MECHANISMS.glob("*/scenarios.py"))
    assert len(files) == len(mechanism_names())
    assert [w for f in files for w in wiring(f, node_classes)] == []


@pytest.mark.parametrize("source, expected", [
    ("from ...cluster.dml import ProxyNode\n", "imports milvus_edu.cluster.dml"),
    ("from ...cluster import rootcoord\n", "imports milvus_edu.cluster "),
    ("from ...cluster.builder import build\n\ndef f(sim, b):\n    return b.RootCoordNode(sim)\n",
     "creates RootCoordNode"),
    ("from ...cluster.builder import Cluster\n\ndef f(sim, spec):\n    return Cluster(sim, spec)\n", "creates Cluster"),
])
def test_a_scenario_that_wires_nodes_is_caught(tmp_path, monkeypatch, source, expected):
    scenarios = tmp_path / "milvus_edu" / "mechanisms" / "tso" / "scenarios.py"
    scenarios.parent.mkdir(parents=True)
    scenarios.write_text(source)
    _root_at(monkeypatch, tmp_path)
    found = wiring(scenarios, {"RootCoordNode", "ProxyNode", "Cluster"})
    assert len(found) == 1 and expected in found[0], found


def test_a_scenario_built_from_specs_is_no_wiring(tmp_path, monkeypatch):
    scenarios = tmp_path / "milvus_edu" / "mechanisms" / "tso" / "scenarios.py"
    scenarios.parent.mkdir(parents=True)
    scenarios.write_text("from ...cluster.builder import ClusterSpec, RootCoordSpec, build\n\n"
                         "def f(sim):\n    build(sim, ClusterSpec(rootcoords=(RootCoordSpec(),))).start()\n")
    _root_at(monkeypatch, tmp_path)
    assert wiring(scenarios, {"RootCoordNode", "Cluster"}) == []


def _root_at(monkeypatch, tmp_path):
    """Point the rules at a package under ``tmp_path`` (the probes below are written there)."""
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", tmp_path / "milvus_edu")
    monkeypatch.setattr(sys.modules[__name__], "MECHANISMS", tmp_path / "milvus_edu" / "mechanisms")


@pytest.mark.parametrize("source, expected", [
    ("from ..mechanisms.flush.nodes import DataNodeNode\n", "imports a lesson"),
    ("import milvus_edu.mechanisms.query.cluster\n", "imports a lesson"),
    ("from milvus_edu.mechanisms import flush\n", "imports a lesson"),
    ("from .. import mechanisms\n", "imports milvus_edu.mechanisms"),
    ("def f(m):\n    return m == 'flush'\n", "names lesson 'flush'"),
    ("X = {'query': 1}\n", "names lesson 'query'"),
    ("rec.emit('x', detail={'a': 'flush'})\n", "names lesson 'flush'"),
    ("import importlib\nM = importlib.import_module('milvus_edu.mechanisms.tso.lanes')\n", "names lesson"),
])
def test_each_rule_catches_its_breach(tmp_path, monkeypatch, source, expected):
    shared = tmp_path / "milvus_edu" / "viz" / "probe.py"
    shared.parent.mkdir(parents=True)
    shared.write_text(source)
    _root_at(monkeypatch, tmp_path)
    found = breaches([shared], {"tso", "timetick", "flush", "query"})
    assert len(found) == 1 and expected in found[0], found


def test_prose_and_milvus_words_are_not_breaches(tmp_path, monkeypatch):
    shared = tmp_path / "milvus_edu" / "tso" / "tso.py"
    shared.parent.mkdir(parents=True)
    shared.write_text('"""Models internal/tso; the flush lesson reads it."""\n\n'
                      'def f(tso, rec, flush=False):\n    """Returns \'flush\' never."""\n'
                      '    rec.emit("datanode.sync", detail={"flush": flush})\n    return tso.flush\n')
    _root_at(monkeypatch, tmp_path)
    assert breaches([shared], {"tso", "timetick", "flush", "query"}) == []


def test_one_lesson_importing_another_is_a_breach(tmp_path, monkeypatch):
    lesson = tmp_path / "milvus_edu" / "mechanisms" / "query" / "cluster.py"
    lesson.parent.mkdir(parents=True)
    lesson.write_text("from ..flush.nodes import DataNodeNode\nfrom .nodes import QueryNodeNode\n")
    _root_at(monkeypatch, tmp_path)
    found = breaches([lesson], {"tso", "timetick", "flush", "query"})
    assert found == ["milvus_edu/mechanisms/query/cluster.py:1 lesson query imports lesson flush "
                     "(milvus_edu.mechanisms.flush.nodes)"]


@pytest.mark.parametrize("where", ["check/flush.py", "labs/tso.py", "analysis/query/reads.py"])
def test_a_shared_file_named_after_a_lesson_is_a_breach(tmp_path, monkeypatch, where):
    shared = tmp_path / "milvus_edu" / where
    shared.parent.mkdir(parents=True)
    shared.write_text("X = 1\n")
    _root_at(monkeypatch, tmp_path)
    lesson = next(p for p in Path(where).with_suffix("").parts if p in {"tso", "flush", "query"})
    assert breaches([shared], {"tso", "flush", "query"}) == [
        f"milvus_edu/{where} is a shared module named after lesson {lesson!r}"]
