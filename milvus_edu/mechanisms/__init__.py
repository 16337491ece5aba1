"""The lessons, each registering itself with :mod:`milvus_edu.registry` on import.

``import milvus_edu`` imports this package, so every lesson is registered before any run, view or analysis asks
the registry. A lesson is found in one of two ways, and neither edits a file outside the lesson:

* a folder here, ``milvus_edu/mechanisms/<name>/``, whose ``__init__`` calls :func:`~milvus_edu.registry.register`:
  every such folder is imported, the built-in lessons first in :data:`LESSON_ORDER` (the order of the book), then
  any other folder in name order;
* a package installed elsewhere that names its module under the entry-point group :data:`ENTRY_POINT_GROUP`
  (``[project.entry-points."milvus_edu.mechanisms"]`` in its ``pyproject.toml``); that module registers its
  lesson when imported, after the folders here. This is how the ``milvus-edu`` command sees a lesson kept
  outside this repository; a notebook may instead import such a module itself.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import warnings
from collections.abc import Iterable
from importlib.metadata import entry_points
from pathlib import Path

#: The built-in lessons in the book's order; folders not named here are imported after them, by name.
LESSON_ORDER = ("tso", "timetick", "flush", "query")
#: The entry-point group under which an installed package names the module that registers its lesson.
ENTRY_POINT_GROUP = "milvus_edu.mechanisms"


def lesson_folders(paths: Iterable[str | Path]) -> list[str]:
    """The lesson packages found in ``paths`` (folders holding an ``__init__.py``), :data:`LESSON_ORDER` first."""
    found = {m.name for m in pkgutil.iter_modules([str(p) for p in paths]) if m.ispkg}
    return [n for n in LESSON_ORDER if n in found] + sorted(found - set(LESSON_ORDER))


def load_installed_lessons() -> list[str]:
    """Import every module named under :data:`ENTRY_POINT_GROUP` not imported yet; returns their names.

    A module that fails to import is reported as a warning naming it and left out, so that one broken lesson does
    not stop the command line, the other lessons or the runs that do not use it; a later call tries it again (Python
    keeps no module that failed), so a lesson fixed as the warning asks loads without a restart.
    """
    loaded = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        module = ep.value.partition(":")[0].strip()
        if module in sys.modules:  # imported already, here or by its user: it registered its lesson then
            continue
        try:
            importlib.import_module(module)
        except Exception as exc:  # a plug-in's own error: say whose it is and go on with the rest
            warnings.warn(f"lesson {ep.name!r} (module {module}, entry point {ENTRY_POINT_GROUP}) failed to load and "
                          f"is left out: {type(exc).__name__}: {exc}; fix or uninstall it", stacklevel=2)
            continue
        loaded.append(module)
    return loaded


for _name in lesson_folders(__path__):
    importlib.import_module(f"{__name__}.{_name}")
load_installed_lessons()
