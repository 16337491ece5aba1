"""The stepper's browser side: one ``anywidget`` whose JavaScript (``stepper.js``) runs the controls.

Stepping, scrubbing, Play, ⏮ and jumps, the time cursor and the state panel all happen in the
browser on data the kernel sent before, so they answer at once even while the kernel is busy with
another cell. The kernel only hears where the cursor is (``cursor``) and, when the browser's cursor
leaves or nears the edge of the events it holds, a ``{"type": "want", "req", "cursor", ...}``
message; it answers every one, when it is free, with a window of events around that cursor
(:meth:`~milvus_edu.viz.stepper.TimelineStepper.answer`).

The JavaScript and CSS are files of this package (no CDN, nothing fetched at run time).
"""

from __future__ import annotations

from importlib import resources

import anywidget
import traitlets


def widget_bundle(view, what: str, instead: str = "", **kwargs):
    """``view``'s MIME bundle with a ``text/plain`` that says what the widget is and what to do when that text is all
    one sees (a front end without the widget extensions: JupyterLab started from another environment, a plain
    console, a notebook viewer), rather than ipywidgets' ``<... object at 0x...>``. ``instead``: another way to see
    it, a clause."""
    bundle = view._repr_mimebundle_(**kwargs)
    data = bundle[0] if isinstance(bundle, tuple) else bundle
    if isinstance(data, dict) and "text/plain" in data:
        data["text/plain"] = (
            f"{what}. If this line is all you see, this front end cannot show widgets: start JupyterLab from the "
            f"Python environment milvus-edu is installed in (pip install -e \".[all]\" installs ipywidgets and "
            f"anywidget, the widgets' JupyterLab side) and reload the page" + (f"; or {instead}" if instead else "")
            + ".")
    return bundle


def asset_text(package: str, name: str) -> str:
    """The file ``name`` of ``package`` as text, for a widget's ``_esm`` or ``_css`` (also when the package is
    imported from a zip, as a sweep ships it to Spark's executors).

    Text, not a path: anywidget watches a file given by its path for changes, and the watch holds every widget
    made from it for the life of the process, with all it refers to (a stepper's figures and run);
    ``tests/test_viz.py`` and ``tests/test_explorer.py`` check that a closed stepper and explorer are freed."""
    return resources.files(package).joinpath(name).read_text(encoding="utf-8")


class StepperView(anywidget.AnyWidget):
    """The stepper's widget: controls, the lanes' picture with a cursor overlay, the state panel.

    Synced state (all set by :class:`~milvus_edu.viz.stepper.TimelineStepper`): ``n`` events;
    ``times`` (float32 seconds per event) and ``kind_codes`` (uint16 index into ``kind_names`` per
    event), sent once; ``geometry`` (picture size and lane boxes in pixels); ``backgrounds`` (page
    -> PNG without cursor) and ``window`` (UTF-8 JSON: panel parts and cursor drawing of a range of
    events), what a view starts from, set again when the kernel moves the cursor itself (the
    browser's requests are answered by custom messages); ``cursor`` (0-based, changed by either
    side); ``jump_kind``, ``speed``, ``message``.
    """

    _esm = asset_text(__package__, "stepper.js")
    _css = asset_text(__package__, "stepper.css")

    n = traitlets.Int(1).tag(sync=True)
    title = traitlets.Unicode("").tag(sync=True)
    times = traitlets.Bytes(b"").tag(sync=True)
    kind_codes = traitlets.Bytes(b"").tag(sync=True)
    kind_names = traitlets.List(traitlets.Unicode()).tag(sync=True)
    geometry = traitlets.Dict().tag(sync=True)
    backgrounds = traitlets.Dict().tag(sync=True)
    window = traitlets.Bytes(b"").tag(sync=True)
    margin = traitlets.Int(48).tag(sync=True)
    cursor = traitlets.Int(0).tag(sync=True)
    jump_kind = traitlets.Unicode("").tag(sync=True)
    speeds = traitlets.List().tag(sync=True)
    speed = traitlets.Unicode("").tag(sync=True)
    message = traitlets.Unicode("").tag(sync=True)
