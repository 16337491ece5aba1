"""The timeline stepper: step through a run log event by event, in JupyterLab or headless.

::

    from milvus_edu.viz import TimelineStepper
    st = TimelineStepper(milvus_edu.simulate("tso-failover", seed=1).events)
    st                      # in a notebook: controls, the lanes, the state panel
    st.jump_to_next("fault.kill"); st.state()
    st.to_static("book/_static/tso-failover")   # PNG + SVG filmstrip

Views read events only: the stepper takes a run log (a DataFrame in memory or a run folder/file on
disk), precomputes the per-event state once (:class:`~milvus_edu.viz.data.RunIndex`) and draws lanes
(:mod:`milvus_edu.viz.lanes`). Each step moves artists in place and blits them onto a cached
background (:class:`~milvus_edu.viz.render.BlitRenderer`); the picture is sent to an
``ipywidgets.Image``. Only ipywidgets and matplotlib are used, no JupyterLab extension.
"""

from __future__ import annotations

import copy
import html
import os
from pathlib import Path

import ipywidgets as widgets
import matplotlib

from .data import RunIndex, as_frame
from .lanes import EventsLane, Lane
from .render import FILM_RC, BlitRenderer, filmstrip

__all__ = ["TimelineStepper", "SPEEDS", "default_lanes"]

#: Play speeds: label -> events per second.
SPEEDS = {"2 events/s": 2, "5 events/s": 5, "10 events/s": 10, "25 events/s": 25, "100 events/s": 100,
          "500 events/s": 500, "2000 events/s": 2000}
_MIN_INTERVAL_MS = 100  # the kernel renders one picture per Play tick; do not ask for more than 10 a second


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

    A log with no events raises ``ValueError``; a log of no registered mechanism gives a working view
    with the events lane alone.
    """

    def __init__(self, events_or_path, lanes: list[Lane] | None = None, *, window_s: float | None = None,
                 figsize=(9.0, 6.6), dpi: int = 90):
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
        self._syncing = False
        self._build_widgets()
        self._show(0)

    # ------------------------------------------------------------------------------------ widgets

    def _build_widgets(self) -> None:
        n = self.index.n
        w, h = self._renderer.size_px
        self.play = widgets.Play(value=0, min=0, max=n - 1, step=1, interval=100, description="Play",
                                 tooltip="play / pause", show_repeat=False)
        self.speed = widgets.Dropdown(options=list(SPEEDS), value="10 events/s", description="speed",
                                      layout=widgets.Layout(width="190px"))
        self.back_button = widgets.Button(description="◀ Step", tooltip="step back",
                                          layout=widgets.Layout(width="80px"))
        self.forward_button = widgets.Button(description="Step ▶", tooltip="step forward",
                                             layout=widgets.Layout(width="80px"))
        self.back_button.add_class("milvus-edu-step-back")
        self.forward_button.add_class("milvus-edu-step-forward")
        self.slider = widgets.IntSlider(value=0, min=0, max=n - 1, step=1, description="event",
                                        continuous_update=True, layout=widgets.Layout(width="420px"))
        kinds = self.index.kinds_present
        film_kinds = [self.index.kinds[i] for i in self.index.film_steps()]
        default = next((k for k in kinds if k.startswith("fault.")), None) or (film_kinds[1:] or film_kinds or kinds)[0]
        self.kind_dropdown = widgets.Dropdown(options=kinds, value=default, description="next",
                                              layout=widgets.Layout(width="260px"))
        self.jump_button = widgets.Button(description="Jump ▶", tooltip="jump to next event of this kind",
                                          layout=widgets.Layout(width="80px"))
        self.message = widgets.HTML(value="")
        self.image = widgets.Image(format="png", layout=widgets.Layout(width=f"{w}px", max_width="100%"))
        self.state_html = widgets.HTML(layout=widgets.Layout(width="330px", min_width="260px"))
        self.state_html.add_class("milvus-edu-state")

        widgets.link((self.play, "value"), (self.slider, "value"))
        self.slider.observe(self._on_slider, names="value")
        self.speed.observe(self._on_speed, names="value")
        self.back_button.on_click(lambda _b: self.step_back())
        self.forward_button.on_click(lambda _b: self.step_forward())
        self.jump_button.on_click(lambda _b: self.jump_to_next(self.kind_dropdown.value))
        self._on_speed({"new": self.speed.value})

        title = widgets.HTML(f"<b>{html.escape(self.index.run_id or 'run')}</b> &middot; {n:,} events")
        controls = widgets.HBox([self.play, self.speed, self.back_button, self.forward_button, self.slider],
                                layout=widgets.Layout(flex_flow="row wrap", align_items="center"))
        jump = widgets.HBox([self.kind_dropdown, self.jump_button, self.message],
                            layout=widgets.Layout(align_items="center"))
        body = widgets.HBox([self.image, self.state_html], layout=widgets.Layout(flex_flow="row wrap"))
        self.widget = widgets.VBox([title, controls, jump, body])
        self.widget.add_class("milvus-edu-stepper")

    def _on_slider(self, change) -> None:
        if not self._syncing:
            self.goto(change["new"])

    def _on_speed(self, change) -> None:
        per_s = SPEEDS[change["new"]]
        interval = max(_MIN_INTERVAL_MS, int(1000 / per_s))
        self.play.interval = interval
        self.play.step = max(1, round(per_s * interval / 1000))

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)

    # ------------------------------------------------------------------------------------ cursor

    @property
    def cursor(self) -> int:
        """Index of the current event (0-based row in ``seq`` order)."""
        return self._cursor

    @cursor.setter
    def cursor(self, value: int) -> None:
        self.goto(value)

    def __len__(self) -> int:
        return self.index.n

    def goto(self, i: int) -> int:
        """Move to event ``i`` (clamped to the run) and return the cursor."""
        i = min(max(int(i), 0), self.index.n - 1)
        if i != self._cursor:
            self._show(i)
        return self._cursor

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
            self.message.value = (f"<span style='color:#a33'>no {html.escape(str(kind))} after event "
                                  f"{self._cursor}</span>")
            return None
        self.goto(j)
        return j

    def _show(self, i: int) -> None:
        self._cursor = i
        self._syncing = True
        try:
            self.slider.value = i
        finally:
            self._syncing = False
        self.message.value = ""
        self.state_html.value = self._state_html(i)
        self._png = self._renderer.render(i, float(self.index.t_ms[i]))
        self.image.value = self._png

    # ------------------------------------------------------------------------------------ state

    def state(self) -> dict:
        """What the state panel shows: the state after the event at the cursor, and that event.

        Keys: ``index``, ``events`` (count), ``seq``, ``sim_time_ms``, ``kind``, ``node``, ``event``
        (the event in words), and the keys of the run's mechanism's panel (its ``state(i)``, e.g. the
        active rootcoord, the saved window end and every node's clock for a TSO run).
        """
        return self.index.state(self._cursor)

    def _state_html(self, i: int) -> str:
        s = self.index.state(i)
        esc = html.escape
        rows = [("sim time", f"{s['sim_time_ms'] / 1000:.3f} s")] + self.index.panel_rows(s)
        table = "".join(f"<tr><td style='color:#666;padding-right:8px;vertical-align:top'>{k}</td><td>{v}</td></tr>"
                        for k, v in rows)
        return (
            "<div style='font-size:13px;line-height:1.35'>"
            f"<div><b>event {s['index'] + 1:,}</b> of {s['events']:,} &middot; seq {s['seq']} &middot; "
            f"<code>{esc(s['kind'])}</code> &middot; {esc(str(s['node']))}</div>"
            f"<div style='margin:6px 0;padding:6px;background:#f4f6fa;border-left:3px solid #4a78c2'>"
            f"{esc(s['event'])}</div>"
            f"<table style='border-collapse:collapse'>{table}</table></div>"
        )

    @property
    def png(self) -> bytes:
        """The picture at the cursor as PNG bytes (what the widget shows)."""
        return self._png

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

    def to_static(self, path, steps=None) -> list[Path]:
        """Write ``path.png`` and ``path.svg``: a filmstrip of ``steps`` (default :meth:`interesting_steps`).

        ``path`` may end in ``.png`` or have no suffix. With ``window_s``, each picture shows that many
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

        def caption(i):
            s = self.index.state(i)
            return f"event {i + 1:,} · t = {s['sim_time_ms'] / 1000:.3f} s · {s['event']}"

        fig = filmstrip(self.index, templates, steps, caption, window_s=self._renderer.window_s)
        p.parent.mkdir(parents=True, exist_ok=True)
        out = [p.with_name(p.name + ".png"), p.with_name(p.name + ".svg")]
        with matplotlib.rc_context(FILM_RC):
            fig.savefig(out[0], format="png", metadata={"Software": None})
            fig.savefig(out[1], format="svg", metadata={"Date": None, "Creator": None})
        return out
