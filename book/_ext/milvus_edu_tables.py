"""Sphinx directives that render milvus-edu's own tables at build time (one source of truth).

The book never copies a table by hand when the package already holds it:

``milvus-edu-fields``
    The run-log columns, from :data:`milvus_edu.events.schema.FIELDS`.
``milvus-edu-event-kinds``
    Every event kind, its meaning, the columns it fills and the Go function it comes from, from
    :data:`milvus_edu.events.schema.EVENT_KINDS`: one table of the kinds every run may hold, then
    one per registered mechanism (:func:`milvus_edu.registry.mechanisms`), in the schema's order.
``milvus-edu-bug-switches``
    The bug switches of :class:`milvus_edu.config.BugSwitches` with their docstrings.
``milvus-edu-api``
    API reference: one module name per line of content; each becomes a section with
    ``automodule`` (and, for a package, one subsection per public submodule). Must be used inside
    ``{eval-rst}`` because autodoc generates reStructuredText.

It also provides the MyST substitutions ``{{ schema_version }}``, ``{{ event_kind_count }}`` and
``{{ field_count }}``, and resolves the package's own cross-references that Sphinx's lookup misses
(:func:`_resolve_by_name`).
"""

from __future__ import annotations

import importlib
import pkgutil

from docutils import nodes
from docutils.parsers.rst import directives
from docutils.statemachine import StringList
from sphinx.application import Sphinx
from sphinx.util.nodes import make_refnode
from sphinx.util.docutils import SphinxDirective

__version__ = "1.0"


# ---- small docutils helpers -----------------------------------------------------------------
def _inline(directive: SphinxDirective, text: str) -> list[nodes.Node]:
    """Parse ``text`` as inline markup of the current document (Markdown in MyST, rST in eval-rst)."""
    parsed, messages = directive.state.inline_text(text, directive.lineno)
    return [*parsed, *messages]


def _literal(text: str) -> nodes.paragraph:
    return nodes.paragraph("", "", nodes.literal(text, text))


def _table(directive: SphinxDirective, headers: list[str], rows: list[list], widths: list[int],
           classes: list[str], title: str | None = None) -> nodes.table:
    """A docutils table; each cell is a node, a list of nodes, or a string parsed as inline markup."""
    # colwidths-given: the HTML writer writes the widths (a <colgroup>) only for a table with this class
    table = nodes.table(classes=[*classes, "colwidths-given"])
    if title:
        table += nodes.title("", "", *_inline(directive, title))
    group = nodes.tgroup(cols=len(headers))
    table += group
    for w in widths:
        group += nodes.colspec(colwidth=w)
    head = nodes.thead()
    group += head
    row = nodes.row()
    for h in headers:
        row += nodes.entry("", nodes.paragraph("", h))
    head += row
    body = nodes.tbody()
    group += body
    for cells in rows:
        row = nodes.row()
        for cell in cells:
            entry = nodes.entry()
            if isinstance(cell, str):
                entry += nodes.paragraph("", "", *_inline(directive, cell))
            elif isinstance(cell, nodes.Node):
                entry += cell
            else:
                entry.extend(cell)
            row += entry
        body += row
    return table


# ---- the run log ----------------------------------------------------------------------------
class FieldsTable(SphinxDirective):
    """Table of the run-log columns (``milvus_edu.events.schema.FIELDS``)."""

    has_content = False

    def run(self):
        from milvus_edu.events import schema

        self.env.note_dependency(schema.__file__)
        rows = [[_literal(f.name), _literal(f.type), "yes" if f.nullable else "no", f.doc] for f in schema.FIELDS]
        return [_table(self, ["column", "type", "nullable", "meaning"], rows, [14, 8, 8, 70],
                       ["milvus-edu-fields"])]


class EventKindsTable(SphinxDirective):
    """Tables of every event kind (``milvus_edu.events.schema.EVENT_KINDS``), grouped by owner.

    The first table holds the kinds no mechanism owns (the run, faults, the network); then one table
    per registered mechanism. Within and across the tables the schema's order is kept, which is
    checked: a kind of no group, or groups out of the schema's order, is an error.
    """

    has_content = False

    def _row(self, kind) -> list:
        cols_par = nodes.paragraph()
        for i, col in enumerate(kind.fields):
            if i:
                cols_par += nodes.Text(" ")
            cols_par += nodes.literal(col, col)
        go = "–" if kind.go in ("", "-") else kind.go
        go_par = nodes.paragraph("", "", nodes.literal(go, go)) if go != "–" else nodes.paragraph("", go)
        return [_literal(kind.name), kind.doc, cols_par, go_par]

    def run(self):
        from milvus_edu import registry
        from milvus_edu.events import schema

        self.env.note_dependency(schema.__file__)
        self.env.note_dependency(registry.__file__)
        owned = {k.name: m for m in registry.mechanisms() for k in m.kinds}
        common = [k for k in schema.EVENT_KINDS if k not in owned]
        groups = [("Every run: the run itself, faults and the network", common)]
        groups += [(f"{m.title} (mechanism `{m.name}`)", [k.name for k in m.kinds]) for m in registry.mechanisms()]
        if [k for _, names in groups for k in names] != list(schema.EVENT_KINDS):
            raise self.error("event kinds are not grouped in the schema's order; register mechanisms' kinds in order")
        headers = ["kind", "meaning", "columns it fills", "Milvus function"]
        return [
            _table(self, headers, [self._row(schema.EVENT_KINDS[k]) for k in names], [18, 42, 24, 16],
                   ["milvus-edu-event-kinds"], title=title)
            for title, names in groups if names
        ]


# ---- bug switches ---------------------------------------------------------------------------
class BugSwitchesTable(SphinxDirective):
    """Table of :class:`milvus_edu.config.BugSwitches`: name, default and the field's docstring."""

    has_content = False

    def run(self):
        from dataclasses import fields

        from sphinx.pycode import ModuleAnalyzer

        from milvus_edu import config

        self.env.note_dependency(config.__file__)
        docs = ModuleAnalyzer.for_module(config.__name__).find_attr_docs()
        rows = []
        for f in fields(config.BugSwitches):
            doc = " ".join(line.strip() for line in docs.get(("BugSwitches", f.name), [])).strip()
            if not doc:
                raise self.error(f"BugSwitches.{f.name} has no docstring; document it in milvus_edu/config.py")
            rows.append([_literal(f.name), _literal(repr(f.default)), doc])
        return [_table(self, ["switch", "default", "the wrong rule it switches on"], rows, [24, 8, 68],
                       ["milvus-edu-bug-switches"])]


# ---- API reference --------------------------------------------------------------------------
def _public_submodules(package) -> list[str]:
    if not hasattr(package, "__path__"):
        return []
    return sorted(
        f"{package.__name__}.{info.name}"
        for info in pkgutil.iter_modules(package.__path__)
        if not info.name.startswith("_")
    )


class ApiDirective(SphinxDirective):
    """``automodule`` for each listed module, each under its own heading.

    A plain module is documented with its members. A package is documented by its docstring and
    then one subsection per public submodule (with members), so that each class appears once, under
    the module that mirrors its Milvus Go file. ``:members-of-packages:`` documents a package's
    re-exports instead of walking its submodules.
    """

    has_content = True
    option_spec = {"members-of-packages": directives.flag}

    def _section(self, modname: str) -> nodes.section:
        module = importlib.import_module(modname)
        if getattr(module, "__file__", None):
            self.env.note_dependency(module.__file__)
        section_id = nodes.make_id(f"api-{modname}")
        section = nodes.section(ids=[section_id], names=[nodes.fully_normalize_name(modname)])
        section += nodes.title("", "", nodes.literal(modname, modname))
        submodules = [] if "members-of-packages" in self.options else _public_submodules(module)
        rst = [f".. automodule:: {modname}"]
        if submodules:
            rst.append("   :no-members:")
        holder = nodes.Element()
        self.state.nested_parse(StringList(rst, source=f"<milvus-edu-api {modname}>"), self.content_offset, holder)
        section.extend(holder.children)
        for sub in submodules:
            section += self._section(sub)
        return section

    def run(self):
        names = [line.strip() for line in self.content if line.strip() and not line.strip().startswith("#")]
        if not names:
            raise self.error("milvus-edu-api needs at least one module name, one per line")
        out: list[nodes.Node] = []
        for name in names:
            try:
                out.append(self._section(name))
            except ImportError as exc:
                raise self.error(f"cannot import {name!r} for the API reference: {exc}") from exc
        return out


# ---- cross-references -----------------------------------------------------------------------
def _resolve_by_name(app: Sphinx, env, node, contnode):
    """A Python cross-reference Sphinx's own lookup did not find, resolved when it names one documented object.

    Docstrings name objects as their readers know them: a short name their module imports (``RPCError`` in a module
    that raises it; Sphinx looks for it in the current module and class only), or a name as the package re-exports it
    (``milvus_edu.events.load_run``, documented under the submodule that defines it). Such a reference is resolved when
    exactly one documented object's full name ends with it, or, failing that, with its last part among the objects
    under the package it names (``milvus_edu.events``); a name the package itself exports (``why``) goes to
    ``milvus_edu.why``. Anything else (builtins, typing names, private helpers, an
    ambiguous short name) stays plain code, as Sphinx leaves it.
    """
    if node.get("refdomain") != "py":
        return None
    target = node.get("reftarget", "")
    if not target.startswith("milvus_edu") and not target[:1].isalpha():
        return None
    domain = env.get_domain("py")
    reftype = node.get("reftype")
    matches = [m for m in domain.find_obj(env, None, None, target, reftype, 1) if m[0].startswith("milvus_edu.")]
    if len(matches) != 1 and "." in target:
        package, _, last = target.rpartition(".")
        matches = [m for m in domain.find_obj(env, None, None, last, reftype, 1) if m[0].startswith(package + ".")]
    if len(matches) > 1:  # an entry point is documented twice: as the package gives it, and where it is defined
        front = [m for m in matches if m[0] == "milvus_edu." + target.rpartition(".")[2]]
        matches = front or matches
    if len(matches) != 1:
        return None
    name, obj = matches[0]
    return make_refnode(app.builder, node["refdoc"], obj.docname, obj.node_id, contnode, name)


# ---- substitutions --------------------------------------------------------------------------
def _add_substitutions(app: Sphinx, config) -> None:
    from milvus_edu.events import schema

    subs = dict(getattr(config, "myst_substitutions", {}) or {})
    subs.setdefault("schema_version", str(schema.SCHEMA_VERSION))
    subs.setdefault("event_kind_count", str(len(schema.EVENT_KINDS)))
    subs.setdefault("field_count", str(len(schema.FIELDS)))
    config.myst_substitutions = subs


def setup(app: Sphinx) -> dict:
    app.add_directive("milvus-edu-fields", FieldsTable)
    app.add_directive("milvus-edu-event-kinds", EventKindsTable)
    app.add_directive("milvus-edu-bug-switches", BugSwitchesTable)
    app.add_directive("milvus-edu-api", ApiDirective)
    app.connect("config-inited", _add_substitutions)
    app.connect("missing-reference", _resolve_by_name)
    return {"version": __version__, "parallel_read_safe": True, "parallel_write_safe": True}
