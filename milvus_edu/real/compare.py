"""The same workload on the model and on a real Milvus, call by call (``milvus-edu compare``).

:func:`compare` runs a workload's steps as the ``workload`` scenario on the model and through pymilvus on a real
Milvus 2.3.5 (:mod:`.workload`) and lines the calls up: one row per step with what each side returned and how long
the call took. A read at Strong must return the same rows on both (as a multiset: neither side promises an order);
a Strong read that differs, or fails on one side only, is a failure (``agree`` is False). Strong promises every
write acknowledged before the read was sent, and may or may not show a write that was in flight while the read
waited (the read returns at the tsafe its wait ended at, which may be past that write). Each side also runs on
its own clock: a read that waits longer on the real server makes its client's next call later, so a write can
come before a read on one side and after it on the other. The keys of writes to the collection that were in
flight during the read on either side, or that lie on different sides of it, are left out of the comparison and
named in ``note`` (:func:`set_aside_reasons`). The real server's Strong wait is longer than the model's (about
200-350 ms against 100-200 ms), so in a workload that writes 200 ms after a read this happens often. For the other
levels the rows each side returned and the waits are shown side by side: they depend on where a read lands between
two time ticks, on each side's own timing, and may differ without anything being wrong.

The model's call of a step is found as the demo finds it: each client runs its steps in order, so its n-th event of
a kind is its n-th step of that kind. The real run tags each event with its step (``detail.step``).
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..client.workload import KIND_OF_OP, READ_OPS, SEED_STEPS, parse_steps
from ..narrate import detail_dict, plural
from ..sim.run import RunFolderError, require_folder_name
from .server import RealMilvus, RealMilvusError
from .workload import run_workload

#: Simulated seconds the model runs past the workload's last step (a flush takes a second or two, a read a tick).
MODEL_MARGIN_S = 10.0

COLUMNS = ["step", "label", "at_s", "client", "op", "level", "model", "real", "model_ms", "real_ms", "agree", "note"]


@dataclass
class Comparison:
    """:func:`compare`'s answer: ``table`` (one row per step, :data:`COLUMNS`), the two run folders' events, and
    the real server's figures (``server``)."""

    table: pd.DataFrame
    model_events: pd.DataFrame
    real_events: pd.DataFrame
    server: dict
    real_dir: Path | None = None

    @property
    def ok(self) -> bool:
        """Whether every Strong read agreed."""
        return not (self.table["agree"] == False).any()  # noqa: E712  (None: not compared)

    def failures(self) -> pd.DataFrame:
        """The Strong reads that did not agree."""
        return self.table[self.table["agree"] == False]  # noqa: E712


class RealSideFailed(RealMilvusError):
    """The real server could not be used; the model's side ran: ``comparison`` holds it (the real column empty)."""

    def __init__(self, message: str, comparison: "Comparison"):
        super().__init__(message)
        self.comparison = comparison


def _sorted(rows) -> list:
    return sorted(rows or [], key=lambda v: (isinstance(v, str), v))


def _model_calls(events: pd.DataFrame, steps) -> list[dict | None]:
    """Each step's model outcome: ``{"rows" | "count", "error", "ms", "level"}`` (None: the model logged no answer)."""
    ev = events.sort_values("seq")
    queues: dict[tuple[str, str], list[dict]] = {}
    starts: dict[int, float] = {}
    for row in ev.to_dict("records"):
        kind = str(row["kind"])
        d = detail_dict(row["detail"])
        if kind == "client.read_start":
            starts[int(row["request"])] = float(row["t_ms"])
            continue
        if kind == "client.flush" and not d.get("flushed") and row["error"] is None:
            continue  # the first of a flush's two events: flushTs known, not flushed yet
        queues.setdefault((str(row["node"]), kind), []).append(row)
    out: list[dict | None] = []
    client_free: dict[str, float] = {}
    for step in steps:
        queue = queues.get((step.client, KIND_OF_OP[step.op]), [])
        if not queue:
            out.append(None)
            continue
        row = queue.pop(0)
        d = detail_dict(row["detail"])
        t = float(row["t_ms"])
        error = row["error"] if isinstance(row["error"], str) else None
        if step.op in READ_OPS:
            began = starts.get(int(row["request"]), t)
            res = {"rows": _sorted(d.get("pks")), "level": row["level"] if isinstance(row["level"], str) else None}
        else:
            began = max(step.at * 1000.0, client_free.get(step.client, 0.0))
            res = {"count": None if pd.isna(row["count"]) else int(row["count"]), "pks": d.get("pks")}
        client_free[step.client] = t
        out.append({**res, "error": error, "ms": round(t - began, 1), "span": (began, t)})
    return out


def _real_calls(events: pd.DataFrame, n: int) -> list[dict | None]:
    """Each step's real outcome, found by ``detail.step``."""
    out: list[dict | None] = [None] * n
    for row in events.to_dict("records"):
        kind = str(row["kind"])
        if not kind.startswith("client.") or kind == "client.read_start":
            continue
        d = detail_dict(row["detail"])
        i = d.get("step")
        if not isinstance(i, int) or not 0 <= i < n:
            continue
        error = row["error"] if isinstance(row["error"], str) else None
        res = ({"rows": _sorted(d.get("pks")), "level": row["level"] if isinstance(row["level"], str) else None}
               if kind == "client.read" else {"count": None if pd.isna(row["count"]) else int(row["count"]),
                                              "pks": d.get("pks")})
        ms = d.get("latency_ms") or 0.0
        out[i] = {**res, "error": error, "ms": d.get("latency_ms"), "span": (float(row["t_ms"]) - ms, float(row["t_ms"]))}
    return out


def _order(read: dict, write: dict) -> str:
    """Where a write's call lies against a read's on one side: ``before`` (acknowledged before the read was sent),
    ``after`` (sent after the read returned) or ``during``."""
    if write["span"][1] < read["span"][0]:
        return "before"
    if write["span"][0] > read["span"][1]:
        return "after"
    return "during"


#: The verb of a write, as a set-aside note says what happened to a key.
_VERB = {"insert": "written", "delete": "deleted"}


def set_aside_reasons(i: int, steps, model: list[dict | None], real: list[dict | None]) -> dict | None:
    """The keys Strong read ``i`` cannot be compared on: those of writes to its collection that were in flight while
    it waited, on either side, or that came before it on one side and after it on the other (each side runs on its
    own clock: a read that waits longer on the real server makes a client's next call later).

    Each key maps to what happened to it around the read, in words: ``written while the read waited on the real
    server``, ``deleted before the read on the model and after it on the real server``, ... (several writes of one
    key: their reasons joined by semicolons). None: such a write was a delete by filter, whose keys the real server
    does not return."""
    why: dict = {}
    for j, step in enumerate(steps):
        if j == i or step.op not in ("insert", "delete") or step.collection != steps[i].collection:
            continue
        m, r = model[j], real[j]
        if m is None and r is None:
            continue
        order = {}
        for side, call, read in (("the model", m, model[i]), ("the real server", r, real[i])):
            order[side] = None if call is None or read is None else _order(read, call)
        orders = set(order.values())
        if orders in ({"before"}, {"after"}):
            continue
        pks = [c.get("pks") for c in (m, r) if c is not None]
        if any(p is None for p in pks):
            return None
        verb = _VERB[step.op]
        during = [side for side, o in order.items() if o == "during"]
        if len(during) == 2:
            reason = f"{verb} while the read waited on both sides"
        elif during:
            reason = f"{verb} while the read waited on {during[0]}"
        elif "before" in orders and "after" in orders:
            first = next(side for side, o in order.items() if o == "before")
            other = next(side for side, o in order.items() if o == "after")
            reason = f"{verb} before the read on {first} and after it on {other}"
        else:
            reason = f"{verb} with no answer on one side"
        for p in pks:
            for k in p:
                if reason not in why.setdefault(k, []):
                    why[k].append(reason)
    return {k: "; ".join(v) for k, v in why.items()}


def _rows_text(rows) -> str:
    return ", ".join(map(str, rows)) if rows else "none"


def _judge_strong(m: dict | None, r: dict | None, why: dict | None) -> tuple[bool, str]:
    """A Strong read's verdict (the same rows on both sides once the keys in ``why`` are left out, or the same error)
    and its note: the verdict, the rows compared on each side and why each key was set aside."""
    if m is None or r is None:
        return False, "Strong results differ"
    failed_alike = (m["error"] is None) == (r["error"] is None)
    if why is None:  # a delete by filter in flight: only whether each side failed is compared
        return failed_alike, ("Strong: the same rows" if failed_alike else "Strong results differ") + \
            " (a delete by filter was in flight: not compared)"
    errors = m["error"] is not None or r["error"] is not None
    km = None if errors else [k for k in m["rows"] if k not in why]
    kr = None if errors else [k for k in r["rows"] if k not in why]
    same = failed_alike and (errors or km == kr)
    if not why:
        return same, "Strong: the same rows" if same else "Strong results differ"
    kept = "" if errors else (f"compared {_rows_text(km)} on both" if km == kr else
                              f"compared {_rows_text(km)} (model) with {_rows_text(kr)} (real)") + "; "
    aside = "; ".join(f"{k} {why[k]}" for k in _sorted(why))
    head = "Strong: the same rows once set-aside keys are left out" if same else "Strong results differ"
    return same, f"{head} ({kept}set aside: {aside})"


def _shown(call: dict | None, op: str):
    if call is None:
        return "(no answer)"
    if call["error"]:
        return f"error: {call['error']}"
    if op in READ_OPS:
        return call["rows"]
    return call["count"] if op in ("insert", "delete") else "done"


def line_up(steps, model_events: pd.DataFrame, real_events: pd.DataFrame) -> pd.DataFrame:
    """The comparison table of one workload's two runs (:data:`COLUMNS`); with no real events (the server did not
    run) nothing is compared."""
    parsed = parse_steps(steps)
    compared = not real_events.empty
    model = _model_calls(model_events, parsed)
    real = _real_calls(real_events, len(parsed))
    rows = []
    for i, (step, m, r) in enumerate(zip(parsed, model, real)):
        read = step.op in READ_OPS
        level = None
        if read:
            level = (r or {}).get("level") or (m or {}).get("level") or step.args.get("consistency_level")
        agree, note = None, ""
        if read and level == "Strong" and compared:
            agree, note = _judge_strong(m, r, set_aside_reasons(i, parsed, model, real))
        elif read and m is not None and r is not None and not m["error"] and not r["error"]:
            note = ("the same rows" if m["rows"] == r["rows"] else
                    "different rows: each read at the tsafe it found, between two time ticks")
        rows.append({"step": i, "label": step.label, "at_s": step.at, "client": step.client, "op": step.op,
                     "level": level, "model": _shown(m, step.op), "real": _shown(r, step.op),
                     "model_ms": None if m is None else m["ms"], "real_ms": None if r is None else r["ms"],
                     "agree": agree, "note": note})
    return pd.DataFrame(rows, columns=COLUMNS)


def compare(steps=(), server: RealMilvus | None = None, seed: int = 1, params: dict | None = None,
            out_dir=None) -> Comparison:
    """Run ``steps`` (the seed example's when empty) on the model (scenario ``workload``, ``seed``, ``params``) and on
    a real Milvus (``server``, or one started for this call with the same ``params`` where Milvus has them) and line
    the calls up. ``out_dir``: keep both run folders there (``model/`` and ``real/``, with the server's logs in
    ``real/server/logs``; ``model/`` and ``real/`` must be new or empty). Raises ``ValueError`` for a bad workload or
    :class:`~milvus_edu.sim.run.RunFolderError` for an ``out_dir`` that holds a comparison, and
    :class:`RealSideFailed` (a :class:`~milvus_edu.real.server.RealMilvusError` holding the model's side) when the
    real server cannot be used.
    """
    from .. import simulate

    if out_dir is not None:  # Path("") would put model/ and real/ in the current folder
        require_folder_name(out_dir)
        for side in ("model", "real"):
            folder = Path(out_dir) / side
            if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
                # compare has no force: a folder that holds a comparison is never replaced, so say only what to do
                raise RunFolderError(f"{folder} exists and is not empty: {out_dir} holds a comparison already; choose "
                                     "another <out>")
    steps = list(steps) or [dict(s) for s in SEED_STEPS]
    parsed = parse_steps(steps)
    duration = max(10.0, (parsed[-1].at if parsed else 0.0) + MODEL_MARGIN_S)
    out = Path(out_dir) if out_dir is not None else None
    model = simulate("workload", seed=seed, duration_s=duration, options={"steps": steps}, params=params,
                     out_dir=None if out is None else out / "model")
    try:
        real = run_workload(steps, server=server, out_dir=None if out is None else out / "real",
                            params=params if server is None else None)
    except RealMilvusError as exc:
        empty = model.events.iloc[0:0]
        raise RealSideFailed(str(exc), Comparison(line_up(steps, model.events, empty), model.events, empty, {})) \
            from None
    table = line_up(steps, model.events, real.events)
    return Comparison(table, model.events, real.events, real.server, real.out_dir)


#: Characters of one line of :func:`report`: what a notebook shows whole at 1280 px (the lab's own code lines are
#: held to 95, and an output line wider than about 105 wraps), so a row never breaks in the middle.
REPORT_WIDTH = 100
#: How the call column names the DDL ops (the others fit as they are).
_CALL_NAMES = {"create_collection": "create", "drop_collection": "drop"}


def _cut(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters, with an ellipsis where it was cut."""
    return text if len(text) <= width else text[: width - 1] + "…"


def report(result: Comparison) -> list[str]:
    """The comparison in words: one line per step, both sides and both timings, the step's note on an indented
    line under it, then the verdict; no line is longer than :data:`REPORT_WIDTH`."""
    s = result.server
    head = (f"the model (Milvus 2.5, simulated) beside a real Milvus {s.get('version')} (started in "
            f"{s.get('start_s', 0):.1f} s, {s.get('rss_mb_at_start', 0):.0f} MiB resident)" if s else
            "the model (Milvus 2.5, simulated); the real server did not run")
    lines = textwrap.wrap(head, REPORT_WIDTH)
    lines.append(f"{'step':<5}{'label':<13}{'client':<9}{'call':<8}{'level':<11}{'model':<18}{'ms':>6}  "
                 f"{'real':<18}{'ms':>6}")
    for r in result.table.itertuples(index=False):
        def cell(v):
            return _cut((", ".join(map(str, v)) or "(empty)") if isinstance(v, list) else str(v), 17)
        mm = "" if r.model_ms is None or pd.isna(r.model_ms) else f"{r.model_ms:.0f}"
        rm = "" if r.real_ms is None or pd.isna(r.real_ms) else f"{r.real_ms:.0f}"
        call = _CALL_NAMES.get(r.op, r.op)
        lines.append(f"{r.step:<5}{_cut(str(r.label or ''), 12):<13}{_cut(r.client, 8):<9}{call:<8}"
                     f"{str(r.level or '')[:10]:<11}{cell(r.model):<18}{mm:>6}  {cell(r.real):<18}{rm:>6}")
        if r.note:
            lines += textwrap.wrap(r.note, REPORT_WIDTH, initial_indent=" " * 5, subsequent_indent=" " * 7)
    lines.append("")
    lines += textwrap.wrap("ms: how long the call took (a read: from sending it to its answer); the model's are "
                           "simulated milliseconds, the real ones wall-clock. A create or drop on the real server "
                           "takes seconds (create, index, load); the real schedule after it is shifted by as much.",
                           REPORT_WIDTH)
    bad = result.failures()
    strong = int((result.table["level"] == "Strong").sum())
    if not s:
        return lines
    if bad.empty:
        lines.append(f"Strong agrees: {'the' if strong == 1 else 'all'} {plural(strong, 'Strong read')} returned the same rows on both.")
    else:
        lines.append(f"FAILED: {len(bad)} of {plural(strong, 'Strong read')} {'differs' if len(bad) == 1 else 'differ'}:")
        for r in bad.itertuples(index=False):
            lines += textwrap.wrap(f"step {r.step} ({r.client} {r.op} {r.label}): model {r.model}, real {r.real}",
                                   REPORT_WIDTH, initial_indent="  ", subsequent_indent="    ")
    return lines
