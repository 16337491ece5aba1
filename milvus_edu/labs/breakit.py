"""The break-it lab (``notebooks/08_break_it.ipynb``): every bug switch, run where it breaks, with its self-checks.

For each switch of :class:`~milvus_edu.config.BugSwitches` the lab asks the student to predict which checker
fires (:func:`check_prediction`), runs the scenario that shows it (:func:`run_break`), prints what the checkers
found (:func:`report`) and the causal chain (:func:`show_chain` of :func:`milvus_edu.why`), and asks which of a
few lines is Milvus 2.5's rule (:data:`RULES`, :func:`show_rule`, :func:`check_go_rule`). :func:`summary_table`
is the table at the end, computed from the runs; :func:`summary_style` shows it, a name broken only where it may be.

Why the checks live here, in one shared module, and not in each lesson's ``labs.py``: the lab is a tour across
every lesson, and its questions have the same shape for every switch (which checker fires, which line is
faithful), so one set of checks serves all of them; split per lesson they would be the same code four times.
The module keeps to the plug-in contract (``tests/test_plugin_contract.py``): it names no mechanism. Which
scenario breaks which switch is the reliability sweep's grid file (``milvus_edu/sweep/grids/reliability-switches.json``,
the scenario each lesson's "break it" section runs), read as it is; the lesson a switch belongs to is its
scenario's first mechanism and the checkers are those of the run, both from :mod:`milvus_edu.registry` and the
run's summary. What is keyed here is keyed by switch: the Go rule each one breaks.
"""

from __future__ import annotations

import ast
import inspect
import json
import re
import textwrap
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from ..config import BugSwitches
from ..narrate import times
from ..registry import Mechanism, get_mechanism, get_scenario, mechanisms
from .feedback import Feedback, name_answer, pending, right, shown, wrong

if TYPE_CHECKING:
    from pandas.io.formats.style import Styler

# The reliability sweep's switch grids: one per scenario that breaks a switch (benchmarks/reliability.py sweeps them).
GRID = Path(__file__).resolve().parents[1] / "sweep" / "grids" / "reliability-switches.json"
#: The Milvus 2.5 commit the line numbers of :data:`RULES` refer to (the branch head the reference read).
MILVUS_COMMIT = "9d8edf9"
#: Answers that say "no checker fires", once normalised by :func:`~milvus_edu.labs.feedback.name_answer`.
NONE_ANSWERS = ("none", "nothing", "no-checker", "no-checkers", "no-check", "no-one", "no")
WIDTH = 100  # characters per printed line: JupyterLab at 1280 px with the file browser open shows 107 (the book 110)


@dataclass(frozen=True)
class Break:
    """One grid of the reliability sweep, at its first seed: a scenario run with some switches on."""

    scenario: str
    switches: tuple[str, ...]
    seed: int

    @property
    def label(self) -> str:
        """``switch + switch in scenario``, for tables."""
        return f"{' + '.join(self.switches)} in {self.scenario}"


def breaks() -> tuple[Break, ...]:
    """Every switch grid of the reliability sweep, in the file's order, each at its first seed.

    The grids sweep seeds 1-200; the first seed catches every switch that can be caught (book/reliability.md),
    and the lab runs only that one.
    """
    grids = json.loads(GRID.read_text(encoding="utf-8"))
    out = []
    for grid in grids:  # each a grid of one scenario, seeds "1-200" (tests/test_reliability.py holds the file to it)
        first_seed = int(str(grid["seeds"]).split("-")[0])
        for switches in grid["switches"]:
            out.append(Break(grid["scenario"], tuple(sorted(switches)), first_seed))
    return tuple(out)


def breaks_of(switch: str) -> tuple[Break, ...]:
    """The grids that turn ``switch`` on, the one where it is alone first; ``ValueError`` for an unknown switch."""
    BugSwitches.from_names([switch])
    mine = [b for b in breaks() if switch in b.switches]
    if not mine:
        raise ValueError(f"no grid of {GRID.name} turns {switch} on; add one (benchmarks/reliability.py)")
    return tuple(sorted(mine, key=lambda b: len(b.switches)))


def lesson_of(switch: str) -> Mechanism:
    """The mechanism (lesson) whose scenario breaks ``switch``: its alone grid's scenario's first mechanism."""
    return get_mechanism(get_scenario(breaks_of(switch)[0].scenario).mechanisms[0])


def tour() -> list[tuple[Mechanism, list[str]]]:
    """Every switch grouped by lesson, the lessons in registration order, switches in the grid file's order."""
    order = [b.switches[0] for b in breaks() if len(b.switches) == 1]
    order += [s for s in BugSwitches.names() if s not in order]
    groups = OrderedDict((m.name, (m, [])) for m in mechanisms())
    for switch in order:
        groups[lesson_of(switch).name][1].append(switch)
    return [group for group in groups.values() if group[1]]


def wrong_rule(switch: str) -> str:
    """The switch's docstring in :class:`BugSwitches`: the wrong rule it puts in, and what that lets happen."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(BugSwitches)))
    body = tree.body[0].body
    for field, note in zip(body, body[1:]):
        if (isinstance(field, ast.AnnAssign) and getattr(field.target, "id", None) == switch
                and isinstance(note, ast.Expr) and isinstance(note.value, ast.Constant)):
            return " ".join(str(note.value.value).split())
    raise ValueError(f"bug switch {switch!r} has no docstring in milvus_edu/config.py; write one under its field")


def rule_sentence(switch: str) -> str:
    """The first sentence of :func:`wrong_rule`, its reST markup (````code````, ``*emphasis*``) taken out."""
    first = re.split(r"(?<=[.!?])\s+(?=[A-Z])", wrong_rule(switch), maxsplit=1)[0]
    return re.sub(r"``(.+?)``|\*(\S(?:.*?\S)?)\*", lambda m: m.group(1) or m.group(2), first)


# ---- the runs ----------------------------------------------------------------------------------------------------
_RUNS: OrderedDict = OrderedDict()  # Break -> RunResult, the few most recent (a DataNode run keeps 60,000 events)
_KEEP = 2
_COUNTS: dict[Break, dict[str, int]] = {}  # Break -> violation counts, for every run made (the table at the end)


def run_break(what: str | Break):
    """``milvus_edu.simulate(scenario, seed, switches=...)`` for a switch (its alone grid) or a :class:`Break`,
    without writing a folder. The last two runs are kept, so a self-check and the cell after it share one run."""
    from ..sim.run import simulate

    b = what if isinstance(what, Break) else breaks_of(what)[0]
    if b not in _RUNS:
        _RUNS[b] = simulate(b.scenario, seed=b.seed, switches=list(b.switches))
        _COUNTS[b] = {k: int(v) for k, v in _RUNS[b].summary["checks"]["violation_counts"].items()}
        while len(_RUNS) > _KEEP:
            _RUNS.popitem(last=False)
    _RUNS.move_to_end(b)
    return _RUNS[b]


def counts_of(b: Break) -> dict[str, int]:
    """Violations per checker (every checker of the run, 0 for those that held) of ``b``'s run."""
    if b not in _COUNTS:
        run_break(b)
    return _COUNTS[b]


def failed(counts: dict[str, int]) -> list[str]:
    """The checkers with at least one violation, in report order."""
    return [name for name, n in counts.items() if n]


def _listing(counts: dict[str, int]) -> str:
    names = failed(counts)
    return ", ".join(f"{n} ({counts[n]:,})" for n in names) if names else "none"


def report(run) -> None:
    """Print what a run shows: what ran, the checkers that failed and how often, and the first violation's
    explanation ("Let ... Then ... because ...")."""
    s = run.summary
    counts = s["checks"]["violation_counts"]
    switches = " + ".join(s["switches"]) or "none"
    print(_wrap(f"{s['scenario']}, seed {s['seed']}, switches: {switches}; {s['events']:,} events, "
                f"{s['duration_s']:g} s simulated"))
    print(_wrap(f"checkers that failed (violations): {_listing(counts)}"))
    if run.violations:
        first = run.violations[0]
        print(_wrap(f"violation 1, {first['invariant']}: {first['explanation']}", indent="  "))
    else:
        print("every checker held: no violation to explain")


def show_chain(chain) -> None:
    """Print a :func:`milvus_edu.why` chain one link a paragraph, wrapped to the page."""
    lines = chain.lines()
    print(_wrap(lines[0]))
    for line in lines[1:]:
        print(_wrap(line.strip(), indent="      ", first="  "))


def _wrap(text: str, indent: str = "  ", first: str = "") -> str:
    return textwrap.fill(text, WIDTH, initial_indent=first, subsequent_indent=indent, break_on_hyphens=False)


def brief(switch: str) -> None:
    """Print what the student predicts from: the wrong rule (the first sentence of the switch's docstring, as plain
    text: the rule and what it lets happen, never which checker notices; a later sentence may say what a run shows,
    as reset_flush_ts_inclusive's says that alone it changes no answer, which is the student's to predict), the
    scenario that breaks it and the checkers that watch that scenario (by lesson)."""
    b = breaks_of(switch)[0]
    scenario = get_scenario(b.scenario)
    print(_wrap(f"wrong rule ({switch}): {rule_sentence(switch)}"))
    print(_wrap(f"scenario {b.scenario} (seed {b.seed}): {scenario.description}"))
    print("checkers watching it:")
    for name in scenario.mechanisms:
        m = get_mechanism(name)
        print(_wrap(f"{m.title}: {', '.join(m.checker().invariants)}", indent="      ", first="  "))


# ---- exercise: predict -----------------------------------------------------------------------------------------
def check_prediction(answer, switch: str) -> Feedback:
    """Exercise: which checker fires when ``switch`` is on in its scenario (one checker's name), or ``'none'``.

    Judged on the run itself (:func:`run_break`, made here if it was not yet): any checker that failed is a right
    prediction; ``'none'`` is right only when every checker held.
    """
    b = breaks_of(switch)[0]
    if answer is None:
        return pending("a string: the name of one checker (invariant) you expect to fail, or 'none'")
    counts = counts_of(b)
    a, verdict = name_answer(answer, list(counts) + ["none"])
    if verdict is not None:
        return verdict
    fired = failed(counts)
    if a in NONE_ANSWERS:
        if not fired:
            return right(f"Right: in {b.scenario} every checker held with {switch} on. The wrong rule changes what "
                         "happens inside the cluster, but no promise the checkers hold Milvus to breaks: read on "
                         "for what it does change.")
        return wrong(f"Some checker does fail in {b.scenario} ({len(fired)} of them). Read the wrong rule again: "
                     "which promise does it let the cluster break?")
    if a in {s.replace("_", "-") for s in BugSwitches.names()}:
        return wrong(f"{shown(answer)} is a bug switch; name a checker (an invariant) of the list above, or 'none'.")
    if a not in counts:
        return wrong(f"{shown(answer)} is not a checker of this run; choose one of {', '.join(counts)}, or 'none'.")
    if a in fired:
        others = [n for n in fired if n != a]
        more = f" It is not alone: {', '.join(f'{n} ({counts[n]:,})' for n in others)} failed too." if others else ""
        return right(f"Right: {a} failed {times(counts[a])} in {b.scenario}, seed {b.seed}.{more}")
    if not fired:
        return wrong(f"{a} held, and so did every other checker: in {b.scenario} the switch breaks no promise "
                     "a checker holds Milvus to. Would a client see anything different?")
    lessons = sorted({lesson_title(b, n) for n in fired})
    some = "one checker" if len(fired) == 1 else f"{len(fired)} checkers"
    return wrong(f"{a} held in this run (its promise: {promise_of(b, a)}); {some} of {' and '.join(lessons)} "
                 "failed. Which promise does the wrong rule let the cluster break?")


def _checker_of(b: Break, invariant: str):
    """The checker class among ``b``'s scenario's mechanisms that holds ``invariant``, and its mechanism."""
    for name in get_scenario(b.scenario).mechanisms:
        m = get_mechanism(name)
        if m.checker is not None and invariant in m.checker.invariants:
            return m.checker, m
    raise ValueError(f"no checker of {b.scenario} holds {invariant!r}")


def lesson_title(b: Break, invariant: str) -> str:
    """The title of the mechanism among ``b``'s scenario's whose checker holds ``invariant``."""
    return _checker_of(b, invariant)[1].title


def promise_of(b: Break, invariant: str) -> str:
    """What ``invariant`` holding means, in the words of its checker (``promises``)."""
    return _checker_of(b, invariant)[0].promises[invariant]


# ---- exercise: find the rule in Milvus's code ------------------------------------------------------------------
@dataclass(frozen=True)
class GoRule:
    """Where Milvus 2.5 states the rule a switch breaks, and the lines a student chooses the faithful one from.

    ``choices`` maps a letter to a line in pseudo-code (our words, not Milvus's code); ``faithful`` is Milvus's
    rule, ``switch`` the switch's; ``hints`` says what is wrong with each other choice; ``why`` why the faithful
    line keeps the promise.
    """

    file: str
    function: str
    lines: str
    choices: dict[str, str]
    faithful: str
    switch: str
    why: str
    hints: dict[str, str]
    where: str = ""  # what else to read, when the rule is outside the Go server


RULES: dict[str, GoRule] = {
    "tso_skip_load_on_init": GoRule(
        "internal/tso/tso.go", "timestampOracle.InitTimestamp", "104-131",
        {"a": "next = now(); save(next + 3s); TSO = {next, 0}",
         "b": "last = loadTimestamp(); next = last + 3s; save(next + 3s); TSO = {next, 0}",
         "c": "last = loadTimestamp(); next = now(); if next - last < 1ms { next = last + 1ms }; save(next + 3s); "
              "TSO = {next, 0}"},
        faithful="c", switch="a",
        why="the new active starts at least 1 ms past the window end the old active saved, and the old active never "
            "handed out a physical part at or past that end: every new timestamp is above every old one.",
        hints={"b": "That is always above the old timestamps, but it is not Milvus's rule: it ignores the clock even "
                    "when the clock is ahead of the window. Milvus takes the clock, unless the clock is not at least "
                    "1 ms past the saved window end."}),
    "tso_no_window_save": GoRule(
        "internal/tso/tso.go", "timestampOracle.UpdateTimestamp", "172-215",
        {"a": "TSO = {next, 0}; if lastSaved - next <= 1ms { save(next + 3s) }",
         "b": "if lastSaved - next <= 1ms { save(next + 3s), and on an error return without moving }; TSO = {next, 0}",
         "c": "TSO = {next, 0}   (only InitTimestamp saves a window)"},
        faithful="b", switch="c",
        why="before the physical part comes within 1 ms of the saved end, a new end 3 s ahead is saved, and only then "
            "does the physical part move: every timestamp handed out stays below a saved end, which is where a new "
            "active starts.",
        hints={"a": "Close, but the order matters: if the save fails (etcd unreachable), the physical part has already "
                    "moved up to the saved end. Milvus saves first and leaves the TSO as it was when the save fails."}),
    "allocate_outside_enqueue_lock": GoRule(
        "internal/proxy/task_scheduler.go", "dmTaskQueue.Enqueue", "268-295",
        {"a": "ts = AllocOne(); lock(statsLock); enqueue(task, ts); commitPChanStats(task); unlock(statsLock)",
         "b": "lock(statsLock); ts = AllocOne(); enqueue(task, ts); commitPChanStats(task); unlock(statsLock)",
         "c": "lock(statsLock); ts = AllocOne(); unlock(statsLock); enqueue(task, ts); commitPChanStats(task)"},
        faithful="b", switch="a",
        why="the time ticker reads the pchannel statistics under the same statsLock, so it cannot read them between "
            "a task's timestamp and the moment the statistics hold it: a tick never passes a task still on its way.",
        hints={"c": "The lock is released before the statistics hold the task, so the ticker can read them in "
                    "between and report a tick above the task's timestamp: the same hole as allocating outside "
                    "the lock."}),
    "reset_flush_ts_inclusive": GoRule(
        "internal/flushcommon/writebuffer/manager.go", "bufferManager.NotifyCheckpointUpdated", "241-251",
        {"a": "if flushTs != 0 && checkpointTs >= flushTs { flushTs = 0 }",
         "b": "if flushTs != 0 && checkpointTs > flushTs { flushTs = 0 }"},
        faithful="b", switch="a",
        why="flushTs is cleared only once a stored checkpoint has passed it; while the checkpoint sits exactly on "
            "flushTs, GetCheckpoint's needUpdate (which does use >=, line 238) keeps sending it. With Milvus's "
            "GetCheckpoint either comparison loses nothing (quirk P23).",
        hints={}),
    "checkpoint_ignores_syncing_segments": GoRule(
        "internal/flushcommon/writebuffer/write_buffer.go", "writeBufferBase.GetCheckpoint", "252-279",
        {"a": "checkpoint = the last consumed position",
         "b": "checkpoint = the earliest start position among the buffers, or the last consumed position if they "
              "are all empty",
         "c": "checkpoint = the earliest of the buffers' start positions and the start positions of the syncs still "
              "running, or the last consumed position if there is none"},
        faithful="c", switch="b",
        why="a segment whose sync has begun is no longer in a buffer, but its rows are not in a binlog until the sync "
            "ends; keeping the sync's start among the candidates holds the checkpoint before those rows.",
        hints={"a": "That ignores the buffers too: the checkpoint would jump past every row still in memory, and a "
                    "crash would lose all of them."}),
    "skip_recovery_filter": GoRule(
        "internal/flushcommon/pipeline/flow_graph_dd_node.go", "ddNode.tryToFilterSegmentInsertMessages", "294-324",
        {"a": "drop an insert of another vchannel or of a dropped segment; keep every other insert",
         "b": "drop an insert whose end timestamp is at or below the channel checkpoint",
         "c": "drop an insert of another vchannel or of a dropped segment, an insert of a flushed segment until a "
              "message passes its DmlPosition, and an insert of a growing segment at or below its DmlPosition"},
        faithful="c", switch="a",
        why="each segment's DmlPosition says how far its rows are already in binlogs; a replayed insert at or below "
            "it is dropped, so every acknowledged row ends up in the binlogs once.",
        hints={"b": "The seek already starts at the channel checkpoint, so this drops nothing. The rows written twice "
                    "are above the channel checkpoint but at or below their own segment's DmlPosition."}),
    "drop_failed_checkpoint_tasks": GoRule(
        "internal/flushcommon/util/checkpoint_updater.go", "ChannelCheckpointUpdater.updateCheckpoints", "107-153",
        {"a": "the RPC failed: log it and return; the group's tasks stay in the map",
         "b": "the RPC failed: send it again at once, until it succeeds",
         "c": "the RPC failed: delete the group's tasks from the map"},
        faithful="a", switch="c",
        why="a task leaves the map only after DataCoord stored its position (and no newer task replaced it), so a "
            "failed one goes out again on the updater's next tick, 10 s later.",
        hints={"b": "Milvus does not retry in a loop: each RPC may take up to its 20 s timeout, and the other groups "
                    "of the wave wait for it. The task waits in the map for the next tick."}),
    "update_tsafe_before_delete": GoRule(
        "internal/querynodev2/pipeline/delete_node.go", "deleteNode.Operate", "64-82",
        {"a": "UpdateTSafe(pack.EndTs); ProcessDelete(deletes, pack.EndTs)",
         "b": "ProcessDelete(deletes, pack.EndTs); UpdateTSafe(pack.EndTs)"},
        faithful="b", switch="a",
        why="tsafe promises that every message up to it is applied; publishing it only after the pack's deletes are "
            "applied means a read woken by the new tsafe never sees a row deleted at or below it.",
        hints={}),
    "skip_wait_tsafe": GoRule(
        "internal/querynodev2/delegator/delegator.go", "shardDelegator.Query (line 536) and waitTSafe", "769-825",
        {"a": "readTs = waitTSafe(guarantee): tsafe at once if it is at or above the guarantee, else the tsafe that "
              "first reaches it",
         "b": "readTs = the guarantee, at once",
         "c": "readTs = the current tsafe, at once"},
        faithful="a", switch="c",
        why="the shard reads only once tsafe (everything applied up to it) has reached the guarantee, and reads at "
            "that tsafe: a Strong read sees every write acknowledged before it began.",
        hints={"b": "Reading at the guarantee before tsafe reaches it reads a snapshot the shard does not have yet: "
                    "messages below the guarantee may still be on their way. Milvus waits, and reads at tsafe."}),
    "delete_ignores_timestamps": GoRule(
        "internal/core/src/segcore/DeletedRecord.h", "DeletedRecord::InternalPush", "111-160",
        {"a": "for every row of the key: hide it",
         "b": "for every row of the key inserted at or before the delete (search_pk(pk, deleteTs)), except a row "
              "inserted with the delete's own timestamp: record (deleteTs, row)"},
        faithful="b", switch="a",
        why="a delete hides only rows inserted before it, and a read at T applies only the deletes at or below T: "
            "insert A, delete A, insert A gives A back, whatever order a pack applies them in.",
        hints={}),
    "session_uses_zero_ts": GoRule(
        "pymilvus/client/ts_utils.py (the SDK, not the server)", "construct_guarantee_ts", "(pymilvus 2.5)",
        {"a": "Session: guarantee_timestamp = 0",
         "b": "Session: guarantee_timestamp = 2",
         "c": "Session: guarantee_timestamp = this client's last write timestamp on the collection, or 1 if it has "
              "written nothing"},
        faithful="c", switch="a",
        why="the SDK keeps the largest write timestamp each collection returned to this client, and a Session read "
            "asks for it; the proxy passes a Session guarantee on as it is, so the shard waits for the client's own "
            "last write.",
        hints={"b": "2 is the SDK's marker for Bounded. At level Session the proxy passes it on as it is: a guarantee "
                    "at the very start of time, which every tsafe has passed, so the read waits for nothing."},
        where="internal/proxy/util.go, parseGuaranteeTsFromConsistency (lines 1172-1183): only Strong, Bounded and "
              "Eventually get a guarantee from the proxy; Session keeps the SDK's"),
}


def show_rule(switch: str) -> None:
    """Print where Milvus states the rule ``switch`` breaks, and the lines to choose the faithful one from."""
    rule = RULES[switch]
    print(_wrap(f"{rule.file}, {rule.function}, lines {rule.lines} (Milvus 2.5 @{MILVUS_COMMIT})"
                if rule.lines[0].isdigit() else f"{rule.file}, {rule.function} {rule.lines}"))
    if rule.where:
        print(_wrap(f"and {rule.where}", first="  "))  # the location goes on: indented as its own lines
    for letter, line in sorted(rule.choices.items()):
        print(_wrap(f"({letter}) {line}", indent="      ", first="  "))


def check_go_rule(answer, switch: str) -> Feedback:
    """Exercise: the letter of the line of :data:`RULES` that is Milvus's rule for what ``switch`` breaks."""
    rule = RULES[switch]
    letters = sorted(rule.choices)
    said = ", ".join(f"'{x}'" for x in letters)
    if answer is None:
        return pending(f"a string: one letter, {said}")
    if not isinstance(answer, str):
        return wrong(f"Got a value of type {type(answer).__name__}; answer with one letter as a string: {said}.")
    a = answer.strip().strip("'\"`()").strip().lower()
    if a not in rule.choices:
        return wrong(f"`{shown(answer)}` is not one of the choices; answer with one letter: {said}.")
    if a == rule.faithful:
        return right(f"Right: {rule.function} in {rule.file}. Why it is safe: {rule.why}")
    if a == rule.switch:
        return wrong(f"({a}) is the wrong rule the switch puts in, the one you just saw break. Which line keeps the "
                     "promise the checker holds?")
    return wrong(rule.hints[a])


# ---- the table at the end --------------------------------------------------------------------------------------
def summary_table() -> pd.DataFrame:
    """One row per grid of the sweep (a switch, or switches together, in its scenario): the lesson, the checkers
    that failed with their violations (from the runs; runs not made yet are made here) and the Go rule."""
    rows = []
    for b in breaks():
        counts = counts_of(b)
        rules = [RULES[s] for s in b.switches]
        rows.append({"switches": " + ".join(b.switches), "scenario": b.scenario, "seed": b.seed,
                     "lesson": get_mechanism(get_scenario(b.scenario).mechanisms[0]).title,
                     "checkers that failed (violations)": _listing(counts),
                     "rule in Milvus 2.5": "; ".join(f"{r.file.split(' ')[0].rsplit('/', 1)[-1]}: {_short(r.function)}"
                                              for r in rules)})
    return pd.DataFrame(rows)


def _short(function: str) -> str:
    return re.sub(r"\s*\(.*?\)", "", function)


#: Where a name in the summary table may break at a line's end besides its spaces: after an underscore
#: (``checkpoint_ignores_syncing_segments``) and after the dot of a ``Type.method`` (``ddNode.tryToFilter...``;
#: not a file's ``.go``). Between two letters, or at a hyphen, a name never breaks.
_NAME_BREAK = re.compile(r"(?<=_)|(?<=[a-z]\.)(?=[A-Za-z]{3})")
#: The table's cells: the browser breaks a word nowhere of its own (JupyterLab would break at a hyphen, and
#: ``overflow-wrap``/``word-break`` anywhere), text reads from the left; the rule's column, the longest text, is
#: held to 14em so the switches' column gets the room to keep most names on one line at 1280 px.
_SUMMARY_CSS = [
    {"selector": "th, td", "props": "word-break: normal; overflow-wrap: normal; hyphens: manual; text-align: left;"},
    {"selector": "th.row_heading", "props": "min-width: 14em;"},
]
_RULE_COLUMN = "rule in Milvus 2.5"


def _breakable(text) -> str:
    """One cell's text (already HTML-escaped by the Styler) as HTML whose lines break only at its spaces and at the
    places of :data:`_NAME_BREAK` (a ``<wbr>``: no character, so a name copied from the table is the name); a
    hyphenated name (a scenario, a checker) is kept whole (``white-space: nowrap``)."""
    out = []
    for word in re.split(r"(\s+)", str(text)):
        if not word or word.isspace():
            out.append(word)
            continue
        parts = _NAME_BREAK.split(word)
        if "-" in word:
            parts = [f"<span style='white-space: nowrap'>{p}</span>" for p in parts]
        out.append("<wbr>".join(parts))
    return "".join(out)


def summary_style(table: pd.DataFrame) -> Styler:
    """``table`` (the :func:`summary_table`, or a view of it: columns dropped, ``switches`` as the index) as a pandas
    ``Styler`` for a notebook: every name (switch, scenario, checker, Go function) breaks only at a space, after an
    underscore or after a ``Type.`` prefix, never inside a word or at a hyphen, and reads from the left; the cells'
    text is the table's own (copied from the page, a name is the name). The data stays ``table``'s: only the display
    changes (the Styler needs jinja2, which JupyterLab brings)."""
    styler = table.style.format(_breakable, escape="html").format_index(_breakable, escape="html")
    styler = styler.set_table_styles(_SUMMARY_CSS)
    # classed as pandas classes a DataFrame's table: the book sets such tables at JupyterLab's 12 px for them, so this
    # one fits the book's column (at the 16 px of an unclassed table it ran 200 px past it, its last column cut off)
    styler = styler.set_table_attributes('class="dataframe"')
    if _RULE_COLUMN in table.columns:
        styler = styler.set_properties(subset=[_RULE_COLUMN], width="14em")
    return styler


def violation_matrix() -> pd.DataFrame:
    """Violations per grid (rows, as :attr:`Break.label`) and checker (columns: those that failed in some run)."""
    table = {b.label: counts_of(b) for b in breaks()}
    columns = [name for name in dict.fromkeys(n for counts in table.values() for n in counts)
               if any(counts.get(name) for counts in table.values())]
    return pd.DataFrame([[table[label].get(c, 0) for c in columns] for label in table], index=list(table),
                        columns=columns)
