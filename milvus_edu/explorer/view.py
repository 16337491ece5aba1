"""The explorer's browser side: one ``anywidget`` whose JavaScript (``explorer.js``) draws and steps.

The kernel sends the run once (:mod:`.payload`: column arrays in ``arrays``, their layout and names in ``meta``);
stepping, playing, scrubbing, jumps, filters and the causal past are computed in the browser from them, so no
click waits for the kernel. The kernel is asked only for words: an event's or a request's details, a "Why?"
chain, a fork (custom messages ``{"type": "detail" | "why" | "fork" | "show", ...}``, answered by
:meth:`~milvus_edu.explorer.explorer.Explorer.answer`).

The JavaScript and CSS are files of this package (no CDN, nothing fetched at run time).
"""

from __future__ import annotations

import anywidget
import traitlets

from ..viz.frontend import asset_text


class ExplorerView(anywidget.AnyWidget):
    """The explorer's widget. Synced state (set by :class:`~milvus_edu.explorer.explorer.Explorer`): ``arrays``
    (the run's column arrays, one byte string) and ``meta`` (their layout, names of lanes, kinds, tracks, the
    run's violations and stalls, the fork's first difference), replaced together when the shown run changes;
    ``cursor`` (0-based event, changed by either side), ``anchor`` (the event whose causal past is shown, -1 for
    none), ``span_ms`` (the visible time window), ``hidden_lanes``, ``hidden_kinds``, ``channel`` (filters),
    ``message``."""

    _esm = asset_text(__package__, "explorer.js")
    _css = asset_text(__package__, "explorer.css")

    arrays = traitlets.Bytes(b"").tag(sync=True)
    meta = traitlets.Dict().tag(sync=True)
    cursor = traitlets.Int(0).tag(sync=True)
    anchor = traitlets.Int(-1).tag(sync=True)
    span_ms = traitlets.Float(2000.0).tag(sync=True)
    hidden_lanes = traitlets.List(traitlets.Unicode()).tag(sync=True)
    hidden_kinds = traitlets.List(traitlets.Unicode()).tag(sync=True)
    channel = traitlets.Unicode("").tag(sync=True)
    message = traitlets.Unicode("").tag(sync=True)
