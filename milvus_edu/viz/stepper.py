"""The timeline stepper: step through a run log event by event, in JupyterLab or headless.

::

    from milvus_edu.viz import TimelineStepper
    st = TimelineStepper(milvus_edu.simulate("tso-failover", seed=1).events)
    st                      # in a notebook: controls, the lanes, the state panel
    st.jump_to_next("fault.kill"); st.state()
    st.to_static("book/_static/tso-failover")   # PNG + SVG filmstrip

Views read events only: the stepper takes a run log (a DataFrame in memory or a run folder/file on
disk), precomputes the per-event state once (:class:`~milvus_edu.viz.data.RunIndex`) and draws lanes
(:mod:`milvus_edu.viz.lanes`) once into a background picture (:class:`~milvus_edu.viz.render.BlitRenderer`).

The controls, the time cursor and the state panel live in the browser
(:class:`~milvus_edu.viz.frontend.StepperView`, an ``anywidget`` whose JavaScript ships in this
package), so a click answers while the kernel runs another cell. Sent once: every event's time and
kind, and the background. Sent per window of events around the cursor: the panel's HTML and the
lanes' cursor artists as drawing operations (:func:`~milvus_edu.viz.render.artist_ops`), each
distinct piece once. The browser asks for a window when its cursor leaves or nears the edge of the
one it holds; the kernel answers every request, when it is free, for the cursor the request names
(:meth:`TimelineStepper.answer`).
"""

from __future__ import annotations

import copy
import html
from collections import OrderedDict
import json
import os
from pathlib import Path

import matplotlib
import numpy as np

from .data import RunIndex, as_frame
from .frontend import StepperView, widget_bundle
from .lanes import EventsLane, Lane
from .render import FILM_RC, BlitRenderer, filmstrip

__all__ = ["TimelineStepper", "SPEEDS", "default_lanes", "FIGSIZE", "WINDOW_BEFORE", "WINDOW_AFTER", "QUICK_WINDOW"]

#: Play speeds: label -> events per second (the browser plays; no kernel round trip per frame).
SPEEDS = {"2 events/s": 2, "5 events/s": 5, "10 events/s": 10, "25 events/s": 25, "100 events/s": 100,
          "500 events/s": 500, "2000 events/s": 2000}
#: Size of the lanes' picture in inches (at 90 dpi: 504 x 504 px). The browser shows it at this size, not
#: shrunk: at 1280 x 800 with JupyterLab's file browser open the output area is about 850 px wide, which
#: leaves the state panel about 340 px beside it, and the lanes fit in the screen's height.
FIGSIZE = (5.6, 5.6)
#: Events before and after the cursor whose panel and cursor drawing the browser holds.
WINDOW_BEFORE = 96
WINDOW_AFTER = 416
#: The browser asks for a new window when the cursor comes this close to an edge of the one it has.
WINDOW_MARGIN = 48
#: Events of the first answer to a cursor the browser holds nothing for (a jump or a scrub far away): a
#: tenth of the work of a full window, so the panel fills at once; the browser, then near the edge of
#: so short a window, asks for the full one around the same cursor. While the learner keeps scrubbing,
#: every stale request costs only this much.
QUICK_WINDOW = 64
#: Events before the cursor in a window asked for while playing forward (the rest lies ahead).
PLAY_BEFORE = 16
#: Windows' payloads kept, so a repeated request (the browser re-asks after a silence) is answered at once.
_PAYLOAD_CACHE = 8


def default_lanes(index: RunIndex) -> list[Lane]:
    """The lanes of the run's mechanism (the lesson's own); the events lane alone for a log of none."""
    m = index.mechanisms[0] if index.mechanisms else None
    return list(m.lanes()) if m is not None and m.lanes is not None else [EventsLane()]


class TimelineStepper:
    """Step through a run log with lanes, a state panel and Play/Step/scrub/jump controls.

    ``events_or_path``: a run-log DataFrame, a run folder or ``events.parquet``/``events.jsonl`` path,
    a ``RunResult`` or a list of row dicts. ``lanes``: the lanes to draw, top to bottom (default
    :func:`default_lanes`: the lanes of the run's mechanism, then the events lane). ``window_s``: show
    pages of that many seconds instead of the whole run (the background is redrawn only when the
    cursor changes page).

    The controls run in the browser (:class:`~milvus_edu.viz.frontend.StepperView`): stepping,
    scrubbing, Play and jumps answer at once even while the kernel is busy with another cell. The
    browser holds every event's time and kind, and for a window of :data:`WINDOW_BEFORE` +
    :data:`WINDOW_AFTER` events around the cursor the panel's text and the cursor drawing; it asks
    the kernel for the next window before it runs out.

    Events are numbered for people from 1: event ``n`` is the row with ``seq = n - 1`` (the slider,
    the panel, the jump messages, the filmstrip and the checkers' explanations all use ``n``).

    A log with no events raises ``ValueError``; a log of no registered mechanism gives a working view
    with the events lane alone.
    """

    def __init__(self, events_or_path, lanes: list[Lane] | None = None, *, window_s: float | None = None,
                 figsize=FIGSIZE, dpi: int = 90):
        self.events = as_frame(events_or_path)
        self.index = RunIndex(self.events)
        self.lanes = list(default_lanes(self.index) if lanes is None else lanes)
        if not self.lanes:
            raise ValueError("a stepper needs at least one lane; pass lanes=None for the run's default lanes")
        bad = [l for l in self.lanes if not (callable(getattr(l, "setup", None)) and callable(getattr(l, "update", None)))]
        if bad:
            raise TypeError(f"lanes need setup(ax, events) and update(cursor_index, t_ms): {bad!r}")
        # Fresh copies for static exports, taken before setup() fills the lanes with artists.
        try:
            self._lane_templates = [copy.deepcopy(l) for l in self.lanes]
        except Exception:  # a lane that cannot be copied is drawn in place by to_static instead
            self._lane_templates = None
        self._renderer = BlitRenderer(self.index, self.lanes, figsize=figsize, dpi=dpi, window_s=window_s)
        self._cursor = 0
        self._png_at: tuple[int, bytes] | None = None
        self._window = (0, 0)
        self._payloads: OrderedDict[tuple[int, int], tuple[bytes, list[int]]] = OrderedDict()
        seqs = self.events["seq"].to_numpy()
        self._seq_is_position = bool((seqs == np.arange(len(seqs))).all())
        self.view = self._build_view()
        # A short first window keeps the first draw quick: it ends within the margin, so the browser
        # asks for a full one at once (served as soon as the kernel is free).
        self._fill_window(0, size=WINDOW_MARGIN)

    # ------------------------------------------------------------------------------------ widget

    def _build_view(self) -> StepperView:
        idx = self.index
        kinds = idx.kinds_present
        film_kinds = [idx.kinds[i] for i in idx.film_steps()]
        default = next((k for k in kinds if k.startswith("fault.")), None) or (film_kinds[1:] or film_kinds or kinds)[0]
        code = {k: c for c, k in enumerate(kinds)}
        view = StepperView(
            n=idx.n,
            title=f"{idx.run_id or 'run'} · {idx.n:,} events",
            times=(np.nan_to_num(idx.t_ms, nan=0.0) / 1000.0).astype("<f4").tobytes(),
            kind_codes=np.asarray([code[k] for k in idx.kinds], dtype="<u2").tobytes(),
            kind_names=kinds,
            jump_kind=default,
            speeds=[[label, per_s] for label, per_s in SPEEDS.items()],
            speed="10 events/s",
            geometry=self._renderer.geometry(),
            margin=WINDOW_MARGIN,
        )
        view.add_class("milvus-edu-stepper")
        view.observe(self._on_view_cursor, names="cursor")
        view.on_msg(self._on_view_msg)
        return view

    @property
    def widget(self) -> StepperView:
        """The widget a notebook shows (the same as displaying the stepper itself)."""
        return self.view

    def close(self) -> None:
        """Close the widget: its views leave the notebook, and the stepper (with its run and figures) is freed
        once nothing else refers to it. ipywidgets keeps every widget until it is closed."""
        self.view.close()

    def _on_view_cursor(self, change) -> None:
        self._cursor = min(max(int(change["new"]), 0), self.index.n - 1)

    def _on_view_msg(self, _widget, content, _buffers) -> None:
        if isinstance(content, dict) and content.get("type") == "want":
            self.answer(content)

    def answer(self, want: dict) -> dict:
        """Answer one request of the browser for a window of events; return the reply's header.

        ``want`` (sent by ``stepper.js``): ``req`` its id, ``cursor`` the event the browser shows,
        ``have`` the ``[start, end)`` of the window it holds, ``pages`` the pages whose pictures it
        holds, ``ahead`` whether it is playing forward. Every request is answered, for the cursor it
        names (the ``cursor`` trait may lag behind while the browser's updates queue), even when the
        window is the one sent before: a request left unanswered would leave the browser waiting.

        The reply is a custom message ``{"type": "window", "req", "start", "end", "pictures_follow"}``
        with the window's JSON (:meth:`window_payload`) as its buffer, then, when the window is on pages
        the browser lacks (named in ``pictures_follow``), ``{"type": "pictures", "req", "pages"}`` with
        their PNGs: the panel fills before a new page is drawn. A cursor outside ``have`` gets a
        :data:`QUICK_WINDOW`; one inside it the full window.
        """
        n = self.index.n
        try:
            cursor = min(max(int(want.get("cursor", self._cursor)), 0), n - 1)
        except (TypeError, ValueError):
            cursor = self._cursor
        have = want.get("have")
        held = have is not None and len(have) == 2 and have[0] <= cursor < have[1]
        if held:
            before = PLAY_BEFORE if want.get("ahead") else WINDOW_BEFORE
            start, end = self._bounds(cursor, WINDOW_BEFORE + WINDOW_AFTER, before)
        else:
            start, end = self._bounds(cursor, QUICK_WINDOW, QUICK_WINDOW // 4)
        payload, pages = self._payload(start, end)
        known = {str(p) for p in want.get("pages") or ()}
        new = [str(p) for p in pages if str(p) not in known]
        header = {"type": "window", "req": want.get("req"), "start": start, "end": end, "pictures_follow": new}
        self.view.send(header, buffers=[payload])
        if new:
            self.view.send({"type": "pictures", "req": want.get("req"), "pages": new},
                           buffers=[self._renderer.background_png(int(p)) for p in new])
        return header

    def _repr_mimebundle_(self, **kwargs):
        return widget_bundle(self.view, f"milvus-edu's timeline stepper ({len(self):,} events)",
                             instead="draw it as pictures with .to_static(\"film\")", **kwargs)

    # ------------------------------------------------------------------------------------ window

    def _bounds(self, center: int, size: int, before: int) -> tuple[int, int]:
        """``[start, end)`` of ``size`` events with ``before`` of them before ``center``, inside the run."""
        n = self.index.n
        start = max(0, center - before)
        end = min(n, start + size)
        return max(0, end - size), end

    def _payload(self, start: int, end: int) -> tuple[bytes, list[int]]:
        """:meth:`window_payload`, from a small cache of the latest windows."""
        key = (start, end)
        if key in self._payloads:
            self._payloads.move_to_end(key)
        else:
            self._payloads[key] = self.window_payload(start, end)
            if len(self._payloads) > _PAYLOAD_CACHE:
                self._payloads.popitem(last=False)
        return self._payloads[key]

    def _fill_window(self, center: int, size: int = WINDOW_BEFORE + WINDOW_AFTER) -> None:
        """Put the panel text and cursor drawing of ``size`` events around ``center`` in the view's
        ``window`` trait (what a view starts from when it is rendered), unless it holds ``center`` already."""
        n = self.index.n
        lo, hi = self._window
        if lo <= center < hi and (center - lo >= WINDOW_MARGIN or lo == 0) and (
                hi - center > WINDOW_MARGIN or hi == n):
            return
        start, end = self._bounds(center, size, min(WINDOW_BEFORE, size // 4))
        if (start, end) == self._window:
            return
        payload, pages = self._payload(start, end)
        backgrounds = {str(p): self._renderer.background_png(p) for p in pages}
        with self.view.hold_sync():
            if set(backgrounds) != set(self.view.backgrounds):
                self.view.backgrounds = backgrounds
            self.view.window = payload
        self._window = (start, end)

    def window_payload(self, start: int, end: int) -> tuple[bytes, list[int]]:
        """The browser's data for events ``start .. end-1`` as UTF-8 JSON, and the pages they are on.

        Panel parts and drawing operations repeat from one event to the next, so each distinct one is
        sent once (``frags``, ``ops``) and every event lists the ids of its own (``panel``, ``draw``).
        """
        frags: dict[str, int] = {}
        ops: dict[str, int] = {}
        panel, draw, page_of, xlims, times = [], [], [], {}, []
        for i in range(start, end):
            panel.append([frags.setdefault(part, len(frags)) for part in self._panel_parts(i)])
            page, xlim = self._renderer.page_of(i)
            xlims[str(page)] = [round(xlim[0], 6), round(xlim[1], 6)]
            page_of.append(page)
            times.append(round(float(self.index.t_ms[i]), 3))
        for page in dict.fromkeys(page_of):  # page by page: lanes re-fit their y range on a new page
            for k, i in enumerate(range(start, end)):
                if page_of[k] == page:
                    draw.append((k, [ops.setdefault(json.dumps(op, separators=(",", ":")), len(ops))
                                     for op in self._renderer.overlay(i)]))
        draw = [ids for _k, ids in sorted(draw)]
        body = (f'{{"start":{start},"end":{end},"frags":{json.dumps(list(frags), separators=(",", ":"))},'
                f'"panel":{json.dumps(panel, separators=(",", ":"))},"ops":[{",".join(ops)}],'
                f'"draw":{json.dumps(draw, separators=(",", ":"))},"page":{json.dumps(page_of)},'
                f'"xlims":{json.dumps(xlims)},"t_ms":{json.dumps(times)}}}')
        return body.encode("utf-8"), sorted(set(page_of))

    # ------------------------------------------------------------------------------------ cursor

    @property
    def cursor(self) -> int:
        """Index of the current event (0-based row in ``seq`` order; the learner reads ``cursor + 1``)."""
        return self._cursor

    @cursor.setter
    def cursor(self, value: int) -> None:
        self.goto(value)

    @property
    def event_number(self) -> int:
        """The number of the event at the cursor as the slider and the panel show it (1-based)."""
        return self._cursor + 1

    def __len__(self) -> int:
        return self.index.n

    def goto(self, i: int) -> int:
        """Move to event ``i`` (0-based position, clamped to the run) and return the cursor."""
        i = min(max(int(i), 0), self.index.n - 1)
        self._fill_window(i)
        self._renderer.move_to(i)
        self._cursor = i
        self.view.message = ""
        self.view.cursor = i
        return self._cursor

    def goto_event(self, number: int) -> int:
        """Move to event ``number`` as people count (1-based: the slider, the panel, the checkers'
        "Let event ``number`` be ..."); returns the cursor (``number - 1``)."""
        return self.goto(int(number) - 1)

    def step_forward(self) -> int:
        """One event on (stays on the last one); returns the cursor."""
        return self.goto(self._cursor + 1)

    def step_back(self) -> int:
        """One event back (stays on the first one); returns the cursor."""
        return self.goto(self._cursor - 1)

    def jump_to_next(self, kind: str) -> int | None:
        """Move to the next event of ``kind`` after the cursor; ``None`` (cursor unchanged) if none."""
        j = self.index.next_of_kind(kind, self._cursor)
        if j is None:
            self.view.message = f"no {kind} after event {self.event_number:,}"
            return None
        self.goto(j)
        return j

    # ------------------------------------------------------------------------------------ state

    def state(self) -> dict:
        """What the state panel shows: the state after the event at the cursor, and that event.

        Keys: ``index`` (0-based), ``number`` (1-based, what the learner reads), ``events`` (count),
        ``seq``, ``sim_time_ms``, ``kind``, ``node``, ``event`` (the event in words), and the keys of
        the run's mechanism's panel (its ``state(i)``, e.g. the active rootcoord, the saved window end
        and every node's clock for a TSO run).
        """
        return {**self.index.state(self._cursor), "number": self._cursor + 1}

    @property
    def panel_html(self) -> str:
        """The state panel's HTML at the cursor (what the browser shows beside the lanes)."""
        return "".join(self._panel_parts(self._cursor))

    def _panel_parts(self, i: int) -> list[str]:
        s = self.index.state(i)
        esc = html.escape
        seq = "" if self._seq_is_position else f" &middot; seq {s['seq']}"
        rows = [("sim time", f"{s['sim_time_ms'] / 1000:.3f} s")] + self.index.panel_rows(s)
        return (
            ["<div class='mes-panel-body'>",
             f"<div class='mes-head'><b>event {i + 1:,}</b> of {s['events']:,}{seq} &middot; "
             f"<code>{esc(s['kind'])}</code> &middot; {esc(str(s['node']))}</div>",
             f"<div class='mes-event'>{esc(s['event'])}</div><table>"]
            + [f"<tr><td class='mes-key'>{k}</td><td>{v}</td></tr>" for k, v in rows]
            + ["</table></div>"]
        )

    @property
    def png(self) -> bytes:
        """The picture at the cursor as PNG bytes: the page's background with the cursor drawn on it
        (the browser composes the same from :meth:`window_payload`; drawn here on demand)."""
        if self._png_at is None or self._png_at[0] != self._cursor:
            self._png_at = (self._cursor, self._renderer.render(self._cursor, float(self.index.t_ms[self._cursor])))
        return self._png_at[1]

    # ------------------------------------------------------------------------------------ export

    def interesting_steps(self, count: int = 4) -> list[int]:
        """Steps worth a picture, chosen by the run's mechanism (for the TSO: the first init, a window
        re-save, the fault, the new active's init), padded with the last and evenly spaced events."""
        idx = self.index
        picks = sorted(set(idx.film_steps()))[:count]
        candidates = [idx.n - 1] + [round(k * (idx.n - 1) / (count + 1)) for k in range(1, count + 1)]
        for extra in candidates:  # pad a short story with the last event and evenly spaced ones
            if len(picks) >= min(count, idx.n):
                break
            if extra not in picks:
                picks.append(extra)
        return sorted(picks)

    def film_caption(self, i: int) -> str:
        """The filmstrip's caption of event ``i`` (0-based): its number as people count, time, words."""
        s = self.index.state(i)
        return f"event {i + 1:,} · t = {s['sim_time_ms'] / 1000:.3f} s · {s['event']}"

    def to_static(self, path, steps=None, columns: int = 1) -> list[Path]:
        """Write ``path.png`` and ``path.svg``: a filmstrip of ``steps`` (default :meth:`interesting_steps`).

        ``path`` may end in ``.png`` or have no suffix. One picture a row by default, sized for a book
        page (``columns=2`` for a wide screen). With ``window_s``, each picture shows that many
        seconds around its step. Returns the written paths.
        """
        p = Path(os.fspath(path))
        if p.suffix.lower() in (".png", ".svg"):
            p = p.with_suffix("")
        steps = self.interesting_steps() if steps is None else [min(max(int(s), 0), self.index.n - 1) for s in steps]
        if not steps:
            raise ValueError("to_static needs at least one step")
        templates = self._lane_templates
        if templates is None:
            raise TypeError("a lane could not be deep-copied before setup, so to_static cannot draw fresh copies")

        fig = filmstrip(self.index, templates, steps, self.film_caption, columns=columns, window_s=self._renderer.window_s)
        p.parent.mkdir(parents=True, exist_ok=True)
        out = [p.with_name(p.name + ".png"), p.with_name(p.name + ".svg")]
        with matplotlib.rc_context(FILM_RC):
            fig.savefig(out[0], format="png", metadata={"Software": None})
            fig.savefig(out[1], format="svg", metadata={"Date": None, "Creator": None})
        return out
