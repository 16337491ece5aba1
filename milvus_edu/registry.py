"""The mechanism registry: how TSO, TimeTick, DataNode and QueryNode plug into one pipeline.

A *mechanism* is one lesson's worth of Milvus: its event kinds, scenarios, checkers, summary
section, narration, stepper lanes and panel, Spark analyses, and optionally the demo. It describes
itself with one :class:`Mechanism` and calls :func:`register`; the pipeline (``sim/run.py``,
``cli.py``, ``narrate.py``, ``viz/``) only iterates over what is registered and never names a
mechanism. Adding a mechanism creates its files and registers them; it edits no other mechanism's
files.

This module sits at the bottom of the layers: it imports only the run-log schema. Pieces that need
heavy libraries (lanes need matplotlib, analyses need pyspark) are given as zero-argument factories,
so nothing heavy is imported until a view or an analysis asks for it.

Every mechanism registers itself when :mod:`milvus_edu.mechanisms` is imported, which ``import milvus_edu``
does: that package imports each of its folders and each module named under the ``milvus_edu.mechanisms`` entry
point, so a new mechanism is a new folder (or an installed package) and nothing else. The book's design page,
*Adding a lesson*, lists the files; ``tests/test_fifth_mechanism.py`` adds a fifth mechanism both ways.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from .config import did_you_mean, parse_flag
from .events.schema import Kind, register_kinds

_EMPTY: Mapping = MappingProxyType({})


@dataclass(frozen=True)
class Scenario:
    """A named, documented cluster set-up: who runs, with which clocks, which faults happen when.

    ``build(sim, **options)`` adds and starts nodes and schedules faults. ``mechanisms`` names the mechanisms
    the scenario exercises, the lesson's own first: their checkers run and their summary sections
    are written; the first one's lanes, panel and filmstrip are the stepper's defaults.
    ``gap``: see the field's note.
    """

    name: str
    description: str
    duration_s: float
    build: Callable
    story: str = ""
    mechanisms: tuple[str, ...] = ()
    options: Mapping[str, object] = field(default_factory=dict)
    """Knobs a user may turn (``milvus-edu simulate --option NAME=VALUE``), with their defaults; ``build``
    receives them as keyword arguments and raises ``ValueError`` for a value it cannot use."""
    gap: str = ""
    """When the scenario shows a hole in Milvus itself (not a bug switch), one sentence saying so: its
    checkers may then fail with the faithful rules, and the CLI reports that as the lesson, not an error."""


@dataclass(frozen=True)
class Mark:
    """How an event kind is marked across the stepper's lanes: a coloured vertical line and a label.

    ``label(row, detail)`` returns the label, or ``None`` to leave that event unmarked.
    """

    color: str
    linestyle: str
    label: Callable[[dict, dict], str | None]


@dataclass(frozen=True)
class Demo:
    """What ``milvus-edu demo`` runs: a scenario and seed, with words before and after the timeline."""

    scenario: str
    seed: int
    intro: tuple[str, ...]
    outro: Callable[[dict], list[str]] = lambda summary: []
    lab: str = ""  # the lab notebook to open next, relative to a clone of the repository
    story: Callable[[object], list[str]] | None = None
    """Given the run's result, the lines printed instead of the key-event timeline (the mechanism tells its run)."""
    pictures: Callable[[object], list[str]] | None = None
    """Given the run's result, writes pictures into its run folder and returns lines naming them."""
    products: tuple[str, ...] = ()
    """The names of the files ``pictures`` writes into the run folder: a demo into a reused folder removes an earlier
    run's and refuses to write over someone else's."""


@dataclass(frozen=True)
class Mechanism:
    """Everything one mechanism contributes. Only ``name`` and ``title`` are required.

    * ``kinds``: its event kinds (added to the run-log schema on registration).
    * ``scenarios``: its scenarios.
    * ``checker()``: a new streaming checker, a :class:`milvus_edu.check.violation.StreamingChecker` (a sink with
      ``write(row)``, ``close()``, ``invariants``, ``counts``, ``limit``, ``result() -> list[Violation]``,
      ``configure(config)``, ``vacuous()``, ``stalls`` and the class attribute ``progress``) plus ``promises``, a
      clause per invariant saying what its passing means.
    * ``summary()``: a new sink with ``write(row)``, ``close()`` and ``sections(counts) -> dict`` (its
      part of ``summary.json``). Checkers and summaries must pickle (plain attributes, no lambdas):
      a run that writes a folder runs them in a second process and brings them back
      (:mod:`milvus_edu.events.worker`).
    * ``describe``: kind -> ``f(row) -> str``, the event in words.
    * ``key_events()``: a new filter with ``show(row) -> bool`` and ``notes() -> list[str]`` picking the
      events ``milvus-edu timeline`` prints by default.
    * ``report(summary) -> list[str]``: its lines in the CLI's report of a run.
    * ``lanes()``: its stepper lanes (imports matplotlib when called); ``panel(frame)``: its part of the
      stepper's state panel; ``film_steps(index) -> list[int]``: events worth a filmstrip picture.
    * ``marks``: kind -> :class:`Mark` for the events lane.
    * ``analyses()``: name -> ``(spark_function, pandas_function)``, its Spark analyses and their twins.
    * ``demo``: at most one registered mechanism provides the demo.
    * ``trace``: kind -> ``f(row) -> list | None``, how its events show in a trace viewer and in the explorer: the
      trace items (:mod:`milvus_edu.export.perfetto`: slices from begin to end, watermark counters, instants, and
      the messages the event sends or receives as flows) a row becomes, or ``None`` for a plain instant.
    * ``explainers``: question kind -> ``f(events, subject) -> Answer``, the "why?" questions this lesson answers
      (:mod:`milvus_edu.explain`); one mechanism per question kind.
    * ``asks``: event kind -> ``f(events, i) -> dict | None``, the "why?" question an event of that kind poses, as
      the keyword arguments of :func:`milvus_edu.why` (``{"read": 7}``), for the event at position ``i`` of a run
      log; ``None`` when this one poses none. The explorer's Why? button asks it. One mechanism per kind.
    """

    name: str
    title: str
    kinds: tuple[Kind, ...] = ()
    scenarios: tuple[Scenario, ...] = ()
    checker: Callable[[], object] | None = None
    summary: Callable[[], object] | None = None
    describe: Mapping[str, Callable[[object], str]] = field(default_factory=dict)
    key_events: Callable[[], object] | None = None
    report: Callable[[dict], list[str]] | None = None
    lanes: Callable[[], list] | None = None
    panel: Callable[[object], object] | None = None
    film_steps: Callable[[object], list[int]] | None = None
    marks: Mapping[str, Mark] = field(default_factory=dict)
    analyses: Callable[[], dict] | None = None
    demo: Demo | None = None
    trace: Mapping[str, Callable[[dict], list | None]] = field(default_factory=dict)
    explainers: Mapping[str, Callable] = field(default_factory=dict)
    asks: Mapping[str, Callable] = field(default_factory=dict)


_MECHANISMS: dict[str, Mechanism] = {}
_SCENARIOS: dict[str, Scenario] = {}
_DESCRIBE: dict[str, Callable] = {}
_MARKS: dict[str, Mark] = {}
_EXPLAINERS: dict[str, Callable] = {}
_ASKS: dict[str, Callable] = {}


def register(mechanism: Mechanism) -> Mechanism:
    """Add ``mechanism`` (its kinds to the schema, its scenarios to the catalogue); returns it.

    Raises ``ValueError`` for a second mechanism of the same name, a scenario name already taken, a
    narration or mark for a kind another mechanism already narrates, a "why?" question another mechanism
    already answers, or a second demo.
    """
    if mechanism.name in _MECHANISMS:
        raise ValueError(f"mechanism {mechanism.name!r} is already registered")
    taken = [s.name for s in mechanism.scenarios if s.name in _SCENARIOS]
    if taken:
        raise ValueError(f"scenario {taken[0]!r} is already registered by another mechanism")
    for table, what in ((_DESCRIBE, mechanism.describe), (_MARKS, mechanism.marks), (_ASKS, mechanism.asks)):
        clash = [k for k in what if k in table]
        if clash:
            raise ValueError(f"kind {clash[0]!r} is already narrated, marked or asked about by another mechanism")
    clash = [q for q in mechanism.explainers if q in _EXPLAINERS]
    if clash:
        raise ValueError(f"question {clash[0]!r} is already answered by another mechanism")
    if mechanism.demo is not None and demo() is not None:
        raise ValueError(f"mechanism {mechanism.name!r} brings a demo, but another mechanism already does")
    register_kinds(mechanism.kinds)
    _MECHANISMS[mechanism.name] = mechanism
    for s in mechanism.scenarios:
        _SCENARIOS[s.name] = s if s.mechanisms else Scenario(**{**s.__dict__, "mechanisms": (mechanism.name,)})
    _DESCRIBE.update(mechanism.describe)
    _MARKS.update(mechanism.marks)
    _EXPLAINERS.update(mechanism.explainers)
    _ASKS.update(mechanism.asks)
    return mechanism


def mechanisms() -> tuple[Mechanism, ...]:
    """Every registered mechanism, in registration order."""
    return tuple(_MECHANISMS.values())


def get_mechanism(name: str) -> Mechanism:
    """The mechanism called ``name``; ``ValueError`` naming the registered ones otherwise."""
    try:
        return _MECHANISMS[name]
    except KeyError:
        raise ValueError(f"unknown mechanism {name!r}; registered: {', '.join(_MECHANISMS)}") from None


def scenarios() -> Mapping[str, Scenario]:
    """Every registered scenario by name, in registration order (read-only)."""
    return MappingProxyType(_SCENARIOS)


def get_scenario(name: str) -> Scenario:
    """The scenario called ``name``; ``ValueError`` naming the valid ones otherwise."""
    try:
        return _SCENARIOS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown scenario {name!r}{did_you_mean(name, _SCENARIOS)}; choose from "
                         f"{', '.join(sorted(_SCENARIOS))}") from None


def scenario_mechanisms(scenario: Scenario) -> tuple[Mechanism, ...]:
    """The mechanisms a scenario exercises, its own lesson's first."""
    return tuple(get_mechanism(n) for n in scenario.mechanisms)


def describer(kind: str) -> Callable | None:
    """The registered narration of ``kind``, or ``None``."""
    return _DESCRIBE.get(kind)


def asker(kind: str) -> Callable | None:
    """The function giving the "why?" question an event of ``kind`` poses (``Mechanism.asks``), if any."""
    return _ASKS.get(kind)


def explainer(question: str) -> Callable | None:
    """The registered answer to a "why?" question of kind ``question`` (``f(events, subject)``), or ``None``."""
    return _EXPLAINERS.get(question)


def marks() -> Mapping[str, Mark]:
    """Every registered events-lane mark by kind (read-only)."""
    return MappingProxyType(_MARKS)


def demo() -> Demo | None:
    """The demo of whichever registered mechanism brings one."""
    return next((m.demo for m in _MECHANISMS.values() if m.demo is not None), None)


def mechanisms_in(kinds) -> tuple[Mechanism, ...]:
    """The registered mechanisms that own at least one of ``kinds``, in registration order."""
    present = set(kinds)
    return tuple(m for m in _MECHANISMS.values() if any(k.name in present for k in m.kinds))


def scenario_options(scenario: Scenario, given: Mapping[str, object] | None) -> dict[str, object]:
    """The scenario's options with ``given`` applied, each converted to its default's type (a tuple default takes a
    list, or the path of a JSON file holding one).

    ``ValueError`` for an option the scenario does not have (naming those it has), a value of the wrong type, a
    number that is not finite, or a true/false option given another word.
    """
    out = dict(scenario.options)
    if given is not None and not isinstance(given, Mapping):
        raise ValueError(f"options are a dict of option name to value, e.g. {{'proxies': 3}}; got "
                         f"{type(given).__name__}")
    for name, raw in (given or {}).items():
        if name not in out:
            have = ", ".join(sorted(out)) or "none"
            raise ValueError(f"scenario {scenario.name} has no option {name!r}{did_you_mean(name, out)}; its "
                             f"options: {have}")
        default = out[name]
        if isinstance(default, tuple):  # a list of records (a workload): given in Python, or a JSON file's path
            out[name] = _records(name, raw)
            continue
        if isinstance(default, bool):
            out[name] = _flag(name, raw)
            continue
        try:
            if isinstance(default, int) and isinstance(raw, float) and not raw.is_integer():
                raise ValueError  # int(1.5) would quietly run with 1
            if isinstance(raw, bool):
                raise ValueError  # True would quietly run as 1
            out[name] = type(default)(raw)
        except (TypeError, ValueError, OverflowError):
            # a time or a delay (At, After) is a float of its own type: still "a number" to the user
            what = ("a whole number" if isinstance(default, int) else "a number" if isinstance(default, float)
                    else type(default).__name__)
            raise ValueError(f"option {name} takes {what}, got {raw!r}") from None
        # nan slips through every "must be positive" comparison and inf makes a run that never ends
        if isinstance(out[name], float) and not math.isfinite(out[name]):
            raise ValueError(f"option {name} takes a finite number, got {raw!r}; e.g. {name}={default:g}")
    return out


def _flag(name: str, raw) -> bool:
    """A true/false option from Python or the command line; a word that is neither is refused, not read as false."""
    flag = parse_flag(raw)
    if flag is None:
        raise ValueError(f"option {name} takes true or false, got {raw!r}")
    return flag


def _records(name: str, raw) -> tuple:
    """A list-valued option: a list or tuple given in Python, or the path of a JSON file holding a list."""
    if isinstance(raw, (list, tuple)):
        return tuple(raw)
    import json
    from pathlib import Path

    path = Path(str(raw))
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"option {name} takes a JSON file holding a list: cannot read {path} ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise ValueError(f"option {name}: {path} is not UTF-8 text; give a JSON file holding a list") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"option {name}: {path} is not valid JSON (line {exc.lineno}: {exc.msg})") from None
    if not isinstance(value, list):
        raise ValueError(f"option {name}: {path} must hold a JSON list, it holds a value of type {type(value).__name__}")
    return tuple(value)
