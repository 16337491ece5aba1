"""The explorer: the whole simulated cluster on one cursor, in JupyterLab or headless.

::

    import milvus_edu
    run = milvus_edu.simulate("tsafe-stall-proxy-restart", seed=1, duration_s=12)
    ex = milvus_edu.explore(run)     # in a notebook: the widget
    ex.next_stall(); ex.state()      # headless: the same moves as the buttons
    ex.why()                         # the causal chain of the read, flush or violation at the cursor
    ex.fork("kill", "proxy-1")       # the same run with one more fault at the cursor; ex.show("original")
    ex.fork("switch", "skip_wait_tsafe")  # ... or with a bug switch turned on at the cursor

One cursor (an event) drives a space-time diagram (a lane per component and per pchannel, events as dots,
messages as arrows, faults as red crosses), the watermark lanes of every mechanism on the same time axis (each
track's value drawn against the true time, so a stalled watermark falls away from the diagonal), the requests as
bars on their component's lane, and a state panel (every component's last event, every watermark's value and lag).
The run is sent to the browser once (:mod:`.payload`); the browser steps, plays, filters and finds an event's
causal past itself. The kernel is asked only for words: details, "Why?" chains (:func:`milvus_edu.why`) and forks
(:func:`milvus_edu.fork`).

Events are numbered for people from 1 (event ``n`` is the row with ``seq = n - 1``), as in the stepper, the
timeline, the checkers' explanations and the "Why?" chains.
"""

from __future__ import annotations

import html
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from ..check.violation import frame_rows
from ..config import BugSwitches, Config, did_you_mean
from ..explain import Chain, WhyError, why as ask_why
from ..explain.violation import explain_violation
from ..export.perfetto import Begin, row_items, rows, trace_mapping
from ..narrate import describe
from ..events.schema import EVENT_KINDS, detail_object
from ..registry import asker, get_scenario, mechanisms_in, scenario_mechanisms, scenarios
from ..sim.run import checks_report
from ..viz.data import as_frame
from ..viz.frontend import widget_bundle
from .payload import Payload, build_payload, causal_past

__all__ = ["Explorer", "explore", "FORK_ACTIONS"]

#: What the fork button changes at the cursor: a fault on a node, or ``"switch"``: a bug switch turned on.
FORK_ACTIONS = ("kill", "restart", "pause", "switch")
#: A fork's pause lasts this long (ms): long enough for a proxy's time tick to stop being reported.
FORK_PAUSE_MS = 2000.0
#: The visible time window a new explorer opens with (ms): a few time-tick rounds, so single messages show.
DEFAULT_SPAN_MS = 2000.0


def explore(run_or_path_or_frame, **opts) -> "Explorer":
    """Open the explorer on a run: a :class:`~milvus_edu.sim.run.RunResult`, a run folder (or its events file) or
    a run-log DataFrame. ``opts`` go to :class:`Explorer` (``span_s``, ``cursor``). In a notebook the returned
    explorer shows itself as the widget."""
    return Explorer(run_or_path_or_frame, **opts)


def _summary_and_source(obj):
    """The run's summary (``None`` when it has none at hand) and what :func:`milvus_edu.fork` can re-run."""
    if hasattr(obj, "summary") and hasattr(obj, "events") and not isinstance(obj, pd.DataFrame):
        return obj.summary, obj
    if isinstance(obj, (str, Path)):
        path = Path(obj)
        folder = path if path.is_dir() else path.parent
        found = folder / "summary.json"
        if found.is_file():
            return json.loads(found.read_text(encoding="utf-8")), folder
    return None, None


def _checks(frame: pd.DataFrame) -> dict:
    """The ``checks`` section a summary would have, for a run log that came without one: the checkers of the
    mechanisms its scenario exercises (named by its ``run.start`` event), or of every registered mechanism that owns
    one of its kinds, run over it with the parameters its ``run.start`` names (Milvus's defaults where it names none:
    a run on the defaults, or a log that is not a simulated run's)."""
    start = _start_detail(frame)
    config = _config_of(start)
    checkers = []
    rows = None  # the log's rows, made once for every checker
    for mech in _mechanisms_of(frame, start):
        if mech.checker is not None:
            checker = mech.checker()
            checker.configure(config)
            if rows is None:
                rows = frame_rows(frame)
            checker.check_rows(rows)
            checkers.append((mech.name, checker))
    return checks_report(checkers)


def _start_detail(frame: pd.DataFrame) -> dict:
    """The ``detail`` of the log's ``run.start`` as a dict (``{}`` when there is none or it is not an object)."""
    start = frame.loc[frame["kind"] == "run.start", "detail"]
    if len(start) and isinstance(start.iloc[0], str):
        detail = detail_object(start.iloc[0])
        return detail if isinstance(detail, dict) else {}
    return {}


def _config_of(start: dict) -> Config | None:
    """The run's parameters as a config, from its ``run.start``; None (Milvus's defaults) when it names none, or
    names some this milvus-edu does not know (a log of another version)."""
    params = start.get("params")
    if not isinstance(params, dict) or not params:
        return None
    try:
        return Config().with_params(params)
    except ValueError:
        return None


def _mechanisms_of(frame: pd.DataFrame, start: dict) -> tuple:
    scenario = start.get("scenario")
    if isinstance(scenario, str) and scenario in scenarios():
        return scenario_mechanisms(get_scenario(scenario))
    return mechanisms_in(frame["kind"].unique())


class Explorer:
    """The whole run on one cursor. See the module's doc for what it shows.

    ``source``: a run result, a run folder or events file, or a run-log DataFrame (violations and stalls then come
    from running the checkers over it; a fork needs a run result or folder). ``span_s``: the visible time window.
    ``cursor``: the first event shown (0-based).

    Headless, every button has a method: :meth:`goto`, :meth:`step_forward`, :meth:`jump_to_next`,
    :meth:`next_violation`, :meth:`next_stall`, :meth:`filter`, :meth:`influenced`, :meth:`why`, :meth:`fork`,
    :meth:`show`; :meth:`state` is what the state panel shows.
    """

    def __init__(self, source, *, span_s: float = DEFAULT_SPAN_MS / 1000, cursor: int = 0):
        try:
            span_ok = math.isfinite(float(span_s)) and float(span_s) > 0
        except (TypeError, ValueError):
            span_ok = False
        if not span_ok:
            raise ValueError(f"span_s must be a positive number of seconds (the visible time window), got {span_s!r}")
        self.events = as_frame(source).reset_index(drop=True)
        summary, self._source = _summary_and_source(source)
        self.summary = summary if summary is not None else {"checks": _checks(self.events)}
        self.payload = build_payload(self.events)
        self.violations = self._marks(self.summary, "violations")
        self.stalls = self._marks(self.summary, "stalls")
        self._fork_marks = {"violations": [], "stalls": []}
        self.forked = None  # the ForkResult of the last fork
        self._fork_payload: Payload | None = None
        self._showing = "original"
        self._mapping = trace_mapping()
        from .view import ExplorerView

        self.view = ExplorerView(span_ms=float(span_s) * 1000)
        self.view.on_msg(self._on_msg)
        self.view.observe(self._on_cursor, names="cursor")
        self._send_run()
        self.goto(cursor)

    # ------------------------------------------------------------------------------------ the run shown

    @staticmethod
    def _marks(summary: dict, what: str) -> list[dict]:
        """The run's violations or stalls as the browser jumps to them: the event (the last evidence event of a
        violation; the first of a stall, where the watermark stopped), a title and the checker's explanation."""
        out = []
        for number, item in enumerate((summary.get("checks") or {}).get(what) or (), start=1):
            seqs = sorted(int(s) for s in item.get("seqs") or ())
            if not seqs:
                continue
            seq = seqs[-1] if what == "violations" else seqs[0]
            title = (f"violation {number}: {item.get('invariant')}" if what == "violations"
                     else f"stall {number}: {item.get('what', 'progress')} held by {item.get('held_by', '?')}")
            mark = {"seq": seq, "number": number, "title": title, "text": str(item.get("explanation", "")),
                    "seqs": seqs}
            if item.get("to_ms") is not None:  # where a stalled watermark moved again (or the run ended)
                mark["to_ms"] = float(item["to_ms"])
            out.append(mark)
        return sorted(out, key=lambda m: m["seq"])

    def _meta(self, payload: Payload, events: pd.DataFrame, which: str) -> dict:
        fork = self.forked
        return {"which": which, "has_fork": fork is not None,
                "first_difference": None if fork is None else fork.first_difference,
                "fork_label": "" if fork is None else self._fork_label,
                "violations": self.violations if which == "original" else self._fork_marks["violations"],
                "stalls": self.stalls if which == "original" else self._fork_marks["stalls"],
                "fork_actions": list(FORK_ACTIONS), "can_fork": self._source is not None,
                "fork_switches": [n for n in BugSwitches.names() if n not in (self.summary.get("switches") or ())],
                "title": f"{payload.meta['run_id'] or 'run'} · {len(events):,} events"
                         + (f" · fork: {self._fork_label}" if which == "fork" else "")}

    def _send_run(self) -> None:
        payload, events = self._shown()
        data, meta = payload.pack()
        with self.view.hold_sync():
            self.view.arrays = data
            self.view.meta = {**meta, **self._meta(payload, events, self._showing)}

    def _shown(self) -> tuple[Payload, pd.DataFrame]:
        if self._showing == "fork":
            return self._fork_payload, self.forked.run.events
        return self.payload, self.events

    @property
    def widget(self):
        """The widget a notebook shows (the same as displaying the explorer itself)."""
        return self.view

    def _repr_mimebundle_(self, **kwargs):
        return widget_bundle(self.view, f"milvus-edu's explorer ({len(self):,} events)",
                             instead="export the run for Perfetto's trace viewer (milvus-edu export RUN --perfetto "
                                     "trace.json)", **kwargs)

    def close(self) -> None:
        """Close the widget: its views leave the notebook, and the explorer (with its run) is freed once nothing
        else refers to it. ipywidgets keeps every widget until it is closed."""
        self.view.close()

    # ------------------------------------------------------------------------------------ cursor and jumps

    def __len__(self) -> int:
        return len(self._shown()[1])

    @property
    def cursor(self) -> int:
        """The event at the cursor (0-based; people read ``cursor + 1``)."""
        return self.view.cursor

    def _on_cursor(self, change) -> None:
        n = len(self)
        if not 0 <= change["new"] < n:
            self.view.cursor = min(max(int(change["new"]), 0), n - 1)

    def goto(self, i: int) -> int:
        """Move the cursor to event ``i`` (0-based, clamped to the run); returns it."""
        self.view.message = ""
        self.view.cursor = min(max(int(i), 0), len(self) - 1)
        return self.cursor

    def goto_event(self, number: int) -> int:
        """Move to event ``number`` as people count it (1-based, as in the "Why?" chains); returns the cursor."""
        return self.goto(int(number) - 1)

    def step_forward(self) -> int:
        """One event on; returns the cursor."""
        return self.goto(self.cursor + 1)

    def step_back(self) -> int:
        """One event back; returns the cursor."""
        return self.goto(self.cursor - 1)

    def _jump(self, targets, forward: bool, what: str) -> int | None:
        targets = np.asarray(sorted(targets), dtype=np.int64)
        at = self.cursor
        pick = targets[targets > at] if forward else targets[targets < at][::-1]
        if not len(pick):
            self.view.message = f"no {what} {'after' if forward else 'before'} event {at + 1:,}"
            return None
        self.goto(int(pick[0]))
        return self.cursor

    def _shown_marks(self, what: str) -> list[dict]:
        """The violations or stalls of the run shown (the original's, or the fork's own checkers')."""
        return self._fork_marks[what] if self._showing == "fork" else getattr(self, what)

    def jump_to_next(self, kind: str) -> int | None:
        """Move to the next event of ``kind`` after the cursor; ``None`` (cursor kept, message set) if none.
        ``ValueError`` for a kind no run log has (a typo would otherwise read as "no such event left")."""
        kinds = self._shown()[1]["kind"].to_numpy()
        return self._jump(np.flatnonzero(kinds == _known_kind(kind, kinds)), True, kind)

    def jump_to_previous(self, kind: str) -> int | None:
        """Move to the previous event of ``kind`` before the cursor; ``None`` if none; ``ValueError`` for a kind no
        run log has."""
        kinds = self._shown()[1]["kind"].to_numpy()
        return self._jump(np.flatnonzero(kinds == _known_kind(kind, kinds)), False, kind)

    def next_violation(self) -> int | None:
        """Move to the next violation's event (the last event its checker cites); ``None`` if none is left."""
        return self._jump([v["seq"] for v in self._shown_marks("violations")], True, "violation")

    def previous_violation(self) -> int | None:
        """Move to the previous violation's event; ``None`` if none."""
        return self._jump([v["seq"] for v in self._shown_marks("violations")], False, "violation")

    def next_stall(self) -> int | None:
        """Move to where the next liveness stall began (the last event that moved the stalled watermark)."""
        return self._jump([s["seq"] for s in self._shown_marks("stalls")], True, "stall")

    def previous_stall(self) -> int | None:
        """Move to where the previous liveness stall began; ``None`` if none."""
        return self._jump([s["seq"] for s in self._shown_marks("stalls")], False, "stall")

    # ------------------------------------------------------------------------------------ filters

    def filter(self, *, lanes=None, kinds=None, channel: str | None = None) -> np.ndarray:
        """Show only some of the run: ``lanes`` (component or pchannel lanes to keep, as the diagram names them;
        ``None`` keeps all), ``kinds`` (event kinds to keep), ``channel`` (a channel's short name such as
        ``dml_0`` or ``dml_0_100v0``: only events on it, a vchannel counting as on its pchannel; ``""`` for all).
        Returns the mask of the events left, as the browser draws them. ``ValueError`` names the valid choices
        for a lane, kind or channel the run does not have."""
        meta = self._shown()[0].meta
        lanes_all, kinds_all = meta["lanes"], meta["kinds"]
        for given, valid, what in ((lanes, lanes_all, "lane"), (kinds, kinds_all, "kind")):
            bad = sorted(set(given or ()) - set(valid))
            if bad:
                raise ValueError(f"no {what} {bad[0]!r} in this run; its {what}s: {', '.join(valid)}")
        channel = channel or ""
        if channel and channel not in meta["channels"]:
            raise ValueError(f"no channel {channel!r} in this run; its channels: {', '.join(meta['channels'][1:])}")
        with self.view.hold_sync():
            self.view.hidden_lanes = [] if lanes is None else [lane for lane in lanes_all if lane not in lanes]
            self.view.hidden_kinds = [] if kinds is None else [k for k in kinds_all if k not in kinds]
            self.view.channel = channel
        return self.visible()

    def visible(self) -> np.ndarray:
        """The events the filters leave (a boolean mask); the browser computes the same."""
        payload = self._shown()[0]
        a, meta = payload.arrays, payload.meta
        hidden_lanes, hidden_kinds = set(self.view.hidden_lanes), set(self.view.hidden_kinds)
        keep_lane = np.asarray([lane not in hidden_lanes for lane in meta["lanes"]])
        keep_kind = np.asarray([k not in hidden_kinds for k in meta["kinds"]])
        mask = keep_lane[a["lane"]] & keep_kind[a["kind"]]
        if self.view.channel:
            names = np.asarray(meta["channels"], dtype=object)
            on = np.asarray([c == self.view.channel or c.startswith(self.view.channel + "_") for c in names])
            mask &= on[a["chan"]]
        return mask

    def _seq(self, seq) -> int:
        """``seq`` as the 0-based index of an event of the run shown; ``ValueError`` past either end (a negative
        index would count from the end, and pandas' and numpy's own errors do not say which run or range)."""
        seq, n = int(seq), len(self._shown()[1])
        if not 0 <= seq < n:
            raise ValueError(f"there is no event {seq + 1:,} in this run of {n:,} events (seq counts from 0: "
                             f"0 to {n - 1:,})")
        return seq

    def causal_past(self, seq: int | None = None) -> np.ndarray:
        """The events that could have influenced event ``seq`` (default: the cursor's), as a boolean mask: its
        node's earlier events and, transitively, every event that sent a message one of them received
        (:func:`~milvus_edu.explorer.payload.causal_past`)."""
        return causal_past(self._shown()[0], self.cursor if seq is None else self._seq(seq))

    def influenced(self, on: bool = True) -> np.ndarray | None:
        """ShiViz's "show only what influenced this": dim every event outside the cursor event's causal past
        (``on=False`` shows everything again). Returns the mask shown, or ``None``."""
        self.view.anchor = self.cursor if on else -1
        return self.causal_past() if on else None

    # ------------------------------------------------------------------------------------ words

    def state(self) -> dict:
        """What the state panel shows at the cursor: the event (``number``, ``kind``, ``node``, ``t_ms``,
        ``event`` in words), ``components`` (lane -> its last event at or before the cursor: kind, number,
        t_ms) and ``watermarks`` (track -> value in ms and lag behind the cursor's time, ``None`` before its first
        value)."""
        payload, events = self._shown()
        a, meta = payload.arrays, payload.meta
        i = self.cursor
        t_now = float(a["t"][i])
        components = {}
        # each lane's last event at or before the cursor, in one pass: its first place in the reversed prefix
        lanes_seen, first_back = np.unique(a["lane"][i::-1], return_index=True)
        for k, back in zip(lanes_seen.tolist(), first_back.tolist()):
            j = i - back
            components[meta["lanes"][k]] = {"kind": meta["kinds"][a["kind"][j]], "number": j + 1,
                                            "t_ms": float(a["t"][j])}
        watermarks = {}
        starts = meta["track_starts"]
        for k, track in enumerate(meta["tracks"]):
            seqs = a["cseq"][starts[k]:starts[k + 1]]
            at = int(np.searchsorted(seqs, i, side="right")) - 1
            label = f"{track['name']} @ {track['process']}"
            if at < 0:
                watermarks[label] = None
            else:
                value = float(a["cval"][starts[k] + at])
                watermarks[label] = {"value_ms": value, "lag_ms": t_now - value}
        row = events.iloc[i]
        return {"number": i + 1, "events": len(events), "kind": str(row["kind"]), "node": str(row["node"]),
                "t_ms": t_now, "event": describe(row), "components": components, "watermarks": watermarks}

    def details(self, seq: int) -> dict:
        """Event ``seq`` (0-based) in words and its non-empty columns."""
        events = self._shown()[1]
        seq = self._seq(seq)
        row = events.iloc[seq]
        columns = {k: (v.item() if hasattr(v, "item") else v) for k, v in row.items()
                   if k not in ("run_id",) and not (v is None or (not isinstance(v, str) and pd.isna(v)))}
        return {"number": seq + 1, "event": describe(row), "columns": columns}

    def slice_details(self, k: int) -> dict:
        """Request slice ``k`` (in the order the payload lists them): its name, begin and end events, duration,
        and the arguments its mechanism's trace gives it."""
        payload, events = self._shown()
        a, meta = payload.arrays, payload.meta
        begin, end = int(a["sbegin"][k]), int(a["send"][k])
        name = meta["slice_names"][a["sname"][k]]
        row = next(rows(events.iloc[begin:begin + 1]))
        args = next((item.args for item in row_items(row, self._mapping) if isinstance(item, Begin)
                     and item.name == name), {})
        finished = end < len(events)
        t_end = float(a["t"][end]) if finished else float(a["t"][-1])
        return {"name": name, "process": meta["slice_procs"][a["sproc"][k]], "begin": begin + 1,
                "end": end + 1 if finished else None, "duration_ms": t_end - float(a["t"][begin]),
                "args": {key: v for key, v in args.items() if v is not None}}

    # ------------------------------------------------------------------------------------ why and fork

    def question_at(self, seq: int | None = None) -> dict:
        """What "Why?" asks at event ``seq`` (default: the cursor): a violation that cites it, else the read it
        belongs to, else the client flush it is; ``WhyError`` (one line) for an event that is none of these."""
        seq = self.cursor if seq is None else self._seq(seq)
        if self._showing == "fork":
            raise WhyError("ask why in the original run (switch back to it): a fork's chains are not kept")
        for v in self.violations:
            if seq in v["seqs"]:
                return {"violation": v["number"]}
        row = self.events.iloc[seq]
        ask = asker(row["kind"])  # the lesson of the event's kind says what it asks
        question = ask(self.events, seq) if ask is not None else None
        if question is not None:
            return question
        raise WhyError(f"event {seq + 1:,} ({row['kind']}) is no read, flush or violation; move the cursor to one "
                       f"(a client.read, a client.flush, or Violation ▶) and ask again")

    def why(self, seq: int | None = None) -> Chain:
        """The causal chain of the read, flush or violation at event ``seq`` (default: the cursor), from
        :func:`milvus_edu.why`; each link is an event (:meth:`goto` ``(link.seq)`` jumps to it)."""
        question = self.question_at(seq)
        if "violation" in question:
            return explain_violation(self.events, self.summary, question["violation"])
        return ask_why(self.events, **question)

    def fork(self, action: str, target: str, at: int | None = None):
        """Re-run this run with one more change at event ``at`` (default: the cursor): ``action`` is ``"kill"``,
        ``"restart"`` or ``"pause"`` (for :data:`FORK_PAUSE_MS`) on component ``target``, or ``"switch"``: bug
        switch ``target`` turned on for every component from then on. Shows the forked run and returns the
        :class:`~milvus_edu.sim.run.ForkResult`; its ``first_difference`` is the first event where the two logs
        differ (marked in the diagram). ``ValueError`` (one line) for an action, node, switch or time the run cannot
        take; the explorer keeps showing what it showed."""
        from ..sim.interventions import Kill, Pause, Restart, SetSwitch
        from ..sim.run import fork as fork_run

        if self._source is None:
            raise ValueError("a fork re-runs the run: open the explorer on a run result or a run folder, not on "
                             "its events alone")
        makers = {"kill": Kill, "restart": Restart, "pause": lambda n: Pause(n, duration_ms=FORK_PAUSE_MS),
                  "switch": SetSwitch}
        if action not in makers:
            raise ValueError(f"a fork's action is one of {', '.join(FORK_ACTIONS)}, got {action!r}")
        change = makers[action](target)
        at = self.cursor if at is None else int(at)
        if not 0 <= at < len(self.events):
            raise ValueError(f"there is no event {at + 1:,} in this run of {len(self.events):,} events")
        at_ms = float(self.events["t_ms"].iloc[at])
        # the browser's message row counts the forked run's simulated time (sent every ~0.5 s of wall time)
        result = fork_run(self._source, at_ms, change, progress=self._send_progress)
        self.forked = result
        self._fork_label = f"{action} {target}{' on' if action == 'switch' else ''} at {at_ms / 1000:.3f} s"
        self._fork_payload = build_payload(as_frame(result.run.events).reset_index(drop=True))
        self._fork_marks = {what: self._marks(result.run.summary, what) for what in ("violations", "stalls")}
        self.show("fork")
        if result.first_difference is not None:
            self.goto(result.first_difference)
        return result

    def _send_progress(self, done_s: float, total_s: float) -> None:
        """Tell the browser how far a fork's run is: ``{"type": "progress", "done_s", "total_s"}``."""
        self.view.send({"type": "progress", "done_s": done_s, "total_s": total_s})

    def show(self, which: str) -> None:
        """Show the ``"original"`` run or the last ``"fork"``; the cursor keeps its event number (both runs are
        the same up to the first difference)."""
        if which not in ("original", "fork"):
            raise ValueError(f"show 'original' or 'fork', got {which!r}")
        if which == "fork" and self.forked is None:
            raise ValueError("there is no fork yet: call fork(action, target) first")
        cursor = self.cursor
        self._showing = which
        with self.view.hold_sync():
            self.view.anchor = -1
            self._send_run()
        self.goto(cursor)

    # ------------------------------------------------------------------------------------ the browser's asks

    def _on_msg(self, _widget, content, _buffers) -> None:
        if isinstance(content, dict):
            self.view.send(self.answer(content))

    def answer(self, ask: dict) -> dict:
        """Answer one message of the browser (returned, and sent back by the widget): ``{"type": "detail", "seq"}``
        or ``{"type": "slice", "index"}`` (HTML of the details), ``{"type": "why", "seq"}`` (the chain's title and
        links, or ``error``), ``{"type": "fork", "action", "node", "seq"}`` (``"switch"`` instead of ``"node"`` for the
        action ``"switch"``; the first difference, or ``error``),
        ``{"type": "show", "which"}``."""
        kind = ask.get("type")
        try:
            if kind == "detail":
                d = self.details(int(ask["seq"]))
                return {"type": "detail", "req": ask.get("req"), "html": _detail_html(d)}
            if kind == "slice":
                d = self.slice_details(int(ask["index"]))
                return {"type": "detail", "req": ask.get("req"), "html": _slice_html(d)}
            if kind == "why":
                chain = self.why(int(ask["seq"]))
                return {"type": "why", "req": ask.get("req"), "title": chain.question,
                        "links": [{"seq": link.seq, "t_ms": link.t_ms, "node": link.node, "text": link.text,
                                   "joint": link.joint} for link in chain.links]}
            if kind == "fork":
                action = str(ask["action"])
                target = ask["switch"] if action == "switch" else ask["node"]
                result = self.fork(action, str(target), int(ask["seq"]))
                return {"type": "fork", "req": ask.get("req"), "first_difference": result.first_difference}
            if kind == "show":
                self.show(str(ask["which"]))
                return {"type": "show", "req": ask.get("req")}
        except (WhyError, ValueError, KeyError, IndexError) as exc:
            return {"type": kind or "error", "req": ask.get("req"), "error": str(exc).splitlines()[0]}
        return {"type": "error", "req": ask.get("req"), "error": f"unknown request {kind!r}"}


def _known_kind(kind: str, in_run) -> str:
    """``kind`` if some run log may hold it (a registered kind, or one of ``in_run``, the kinds of the run shown);
    ``ValueError`` naming the closest kind otherwise."""
    if kind not in EVENT_KINDS and kind not in set(in_run):
        raise ValueError(f"no event kind is called {kind!r}{did_you_mean(kind, EVENT_KINDS)}; "
                         "milvus_edu.events.EVENT_KINDS lists them")
    return kind


def _detail_html(d: dict) -> str:
    esc = html.escape
    rows_html = "".join(f"<tr><td class='mex-key'>{esc(str(k))}</td><td>{esc(str(v))}</td></tr>"
                        for k, v in d["columns"].items() if k != "detail")
    detail = d["columns"].get("detail")
    extra = f"<div class='mex-json'>{esc(str(detail))}</div>" if detail else ""
    return (f"<div class='mex-head'>event {d['number']:,}</div><div class='mex-words'>{esc(d['event'])}</div>"
            f"<table>{rows_html}</table>{extra}")


def _slice_html(d: dict) -> str:
    esc = html.escape
    end = f"event {d['end']:,}" if d["end"] is not None else "not finished when the run ended"
    args = "".join(f"<tr><td class='mex-key'>{esc(str(k))}</td><td>{esc(str(v))}</td></tr>" for k, v in d["args"].items())
    return (f"<div class='mex-head'>{esc(d['name'])} on {esc(d['process'])}</div>"
            f"<div class='mex-words'>from event {d['begin']:,} to {end}: {d['duration_ms']:,.1f} ms</div>"
            f"<table>{args}</table>")
