"""Run a scenario: build the cluster, simulate, write the run folder, summarise and check.

A run folder holds ``events.parquet`` (the run log), ``events.jsonl`` (the same rows, for reading
by eye) and ``summary.json`` (what ran, event counts, checks, headline numbers, and the run token
that :func:`milvus_edu.replay` runs again: :mod:`milvus_edu.sim.token`). Nothing in it depends on the wall
clock, so the same scenario, seed and config give byte-identical files.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import NamedTuple

import pandas as pd

from ..version import __version__
from ..config import BugSwitches, Config
from ..events import SCHEMA_VERSION, JsonlSink, ParquetSink, Recorder, load_run, table_to_frame
from ..events.io import RUN_FILES
from ..events.recorder import KeptBatches, json_line
from ..events import worker
from ..registry import get_scenario, scenario_mechanisms, scenario_options
from ..storage.objectstore import RUN_OBJECTS_DIR, RUN_OBJECTS_MARKER
from .token import PREFIX as TOKEN_PREFIX
from .token import TokenError, decode, encode, spec_of_run
from .collector import collector_paused
from .interventions import DOWN_KINDS, MAX_CLOCK_JUMP_MS, UP_KIND, Kill, Pause, Restart, SetSwitch, at as at_time
from .interventions import canonical
from .interventions import schedule as schedule_interventions, validate as validate_interventions
from .kernel import NetworkParams, Simulation
from .progress import resolve_progress
from .scenarios import warn_idle_switches, warn_times_after

#: The longest run, 100 years (as the largest clock jump): far below what a hybrid timestamp's 46-bit physical part
#: holds, so no clock of the run passes it. A run that long would take far longer to simulate than anyone waits.
MAX_DURATION_S = MAX_CLOCK_JUMP_MS / 1000.0
#: How often, in wall seconds, a run advanced in steps (``simulate(progress=...)``) reports: a step that took
#: longer makes the next one shorter in simulated time, so a slow run (a 1-µs tick interval) still shows progress.
PROGRESS_EVERY_S = 0.5
#: The steps of a run advanced in steps: at most 1/50 of the run each (so a fast run reports every 2%), the first
#: 1/1000 of it (a slow run reports within a second or so), never shorter than 1/100,000 of it.
PROGRESS_STEPS = (50, 1_000, 100_000)


def advance_in_steps(sim: Simulation, total_ms: float, report: Callable[[float], None],
                     clock: Callable[[], float] | None = None) -> None:
    """Run ``sim`` to ``total_ms`` in steps, calling ``report(done_ms)`` after each; the last reports ``total_ms``.

    A step is sized from the one before, to take about :data:`PROGRESS_EVERY_S` of ``clock`` time (wall seconds,
    ``time.perf_counter`` unless given) and at most four times the last one's simulated length;
    :data:`PROGRESS_STEPS` bounds it. The run log is the same however the
    run is cut into steps (``tests/test_paths_agree.py``): only how often ``report`` is called depends on the clock.
    """
    clock = clock or time.perf_counter
    most, first, least = (total_ms / n for n in PROGRESS_STEPS)
    done, step = 0.0, first
    while done < total_ms:
        until = total_ms if total_ms - done <= step else done + step
        started = clock()
        sim.run(until)
        took = clock() - started
        report(until)
        length, done = until - done, until
        fitting = length * PROGRESS_EVERY_S / took if took > 0 else most
        step = max(least, min(most, 4 * length, fitting))


class RunFolderError(ValueError):
    """The output folder cannot be used (exists and is not empty, not writable, ...). A ``ValueError``, as every bad
    input to milvus-edu's API. Its message names the Python arguments (``out_dir``, ``force=True``); :attr:`cli`
    says the same in the command line's words (``--out``, ``--force``)."""

    def __init__(self, template: str, arg: str = "out_dir"):
        super().__init__(template.replace("<out>", arg).replace("<force>", "pass force=True"))
        #: The message as the command line says it.
        self.cli = template.replace("<out>", "--out").replace("<force>", "add --force")


class ArgumentError(ValueError):
    """A bad value of an argument that the command line gives as an option. A ``ValueError`` whose message names the
    Python argument (``at_ms``); :attr:`cli` says the same naming the option (``--at``)."""

    def __init__(self, message: str, cli: str):
        super().__init__(message)
        #: The message as the command line says it.
        self.cli = cli


@dataclass(repr=False)
class RunResult:
    """The outcome of :func:`simulate`: the events (when kept in memory), the summary, the folder."""

    summary: dict
    out_dir: Path | None = None
    #: The run log kept in memory (``keep_events=True``), or None.
    log: KeptBatches | None = None

    @property
    def kept(self) -> bool:
        """Whether the run kept its events in memory."""
        return self.log is not None

    @property
    def rows(self) -> list[dict]:
        """The run log's rows as dicts, in ``seq`` order (empty when the run kept no events); do not change them."""
        return self.log.rows() if self.log is not None else []

    @property
    def events(self) -> pd.DataFrame:
        """The run log as a DataFrame (a new one at each call): from memory, or read back from ``out_dir`` when
        not kept."""
        if self.log is not None:
            return table_to_frame(self.log.table())
        if self.out_dir is not None:
            return load_run(self.out_dir)
        raise ValueError("this run kept no events: simulate with keep_events=True or with an out_dir")

    def __repr__(self) -> str:
        s = self.summary
        return (f"RunResult(run_id={s['run_id']!r}, events={s['events']}, checks_ok={s['checks']['ok']}, "
                f"out_dir={str(self.out_dir) if self.out_dir else None!r})")

    @property
    def token(self) -> str | None:
        """The run token: ``milvus_edu.replay(token, out_dir)`` makes this run folder again, byte for byte
        (``None`` for a summary written before tokens existed)."""
        return self.summary.get("token")

    @property
    def violations(self) -> list[dict]:
        """Every invariant violation found by the checkers."""
        return self.summary["checks"]["violations"]


def require_folder_name(out, arg: str = "out_dir") -> None:
    """Refuse an empty folder name (``Path("")`` is the current folder, which the user did not name): a
    :class:`RunFolderError` naming the Python argument ``arg``, or ``--out`` on the command line."""
    if not str(out).strip():
        raise RunFolderError("<out> is empty; give the name of a new folder", arg)


#: The list of the other files a command wrote into a run folder (``milvus-edu demo``'s pictures), each with its
#: SHA-256: ``force`` removes exactly those, so a reused folder never mixes two runs' files, and keeps a file of the
#: same name that someone else wrote or changed.
PRODUCTS_FILE = ".milvus-edu-products.json"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def record_products(out_dir: str | os.PathLike, paths) -> None:
    """Note ``paths``, files just written into the run folder ``out_dir`` beside its run files (a demo's pictures), as
    the run's own: a later run into the same folder with ``force`` removes them (:func:`prepare_out_dir`) unless their
    bytes changed since. Each path must be a file directly in ``out_dir``."""
    out = Path(out_dir)
    listed = {}
    for path in map(Path, paths):
        if path.parent.resolve() != out.resolve() or not path.is_file():
            raise ValueError(f"{path} is not a file in the run folder {out}")
        listed[path.name] = _sha256(path)
    (out / PRODUCTS_FILE).write_text(json.dumps(listed, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _earlier_products(out: Path) -> list[Path]:
    """The files an earlier run's :func:`record_products` listed in ``out`` whose bytes are still the ones it wrote."""
    try:
        listed = json.loads((out / PRODUCTS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):  # none, unreadable or not JSON: nothing is known to be a run's
        return []
    if not isinstance(listed, dict):
        return []
    found = []
    for name, digest in listed.items():
        path = out / str(name)
        # a bare file name only: the list never reaches outside the folder, whatever it was edited to say
        if Path(str(name)).name == name and name not in ("", ".", "..") and path.is_file() and not path.is_symlink():
            if _sha256(path) == digest:
                found.append(path)
    return found


def prepare_out_dir(out_dir: str | os.PathLike, force: bool, products: Sequence[str] = ()) -> Path:
    """Create ``out_dir`` or check it may be written; never touches files other than a run's own.

    An existing non-empty folder needs ``force``, which removes the earlier run's files, so that the folder holds only
    the new run's: its :data:`~milvus_edu.events.io.RUN_FILES` (``events.parquet``, ``events.jsonl``, ``summary.json``) and their unfinished
    ``.partial`` forms, the object store ``objects/`` a run wrote (it holds the marker file ``objects/.milvus-edu-run``)
    and the files :func:`record_products` listed (the demo's pictures) whose bytes are still the ones the run wrote.
    Every other file stays. An ``objects/`` folder without the marker is someone else's, and ``products``, the names
    of the files the coming run writes besides its run files, must not name a file that stays: both are refused
    before anything is removed.
    """
    require_folder_name(out_dir)
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise RunFolderError(f"{out} exists and is not a folder; choose another <out>")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise RunFolderError(f"{out} exists and is not empty; choose another <out> or <force> to replace its run files")
    if out.is_dir():
        objects = out / RUN_OBJECTS_DIR
        if objects.exists() and not (objects / RUN_OBJECTS_MARKER).is_file():
            raise RunFolderError(f"{objects} exists and was not written by a milvus-edu run; move it away or choose "
                                 "another <out>")
        earlier = _earlier_products(out)
        for name in products:
            # a link counts even when what it names is not there: a picture would be written through it, elsewhere
            if ((out / name).exists() or (out / name).is_symlink()) and out / name not in earlier:
                raise RunFolderError(f"{out / name} was not written by a milvus-edu run (or was changed since), and "
                                     "this run writes a file of that name; move it away or choose another <out>")
        try:
            for path in [out / f"{name}{tail}" for name in RUN_FILES for tail in ("", ".partial")] + earlier:
                if path.is_file() or path.is_symlink():
                    path.unlink()
            (out / PRODUCTS_FILE).unlink(missing_ok=True)
            if objects.exists():
                shutil.rmtree(objects)
        except OSError as exc:
            raise RunFolderError(f"cannot remove the earlier run's files from {out} ({exc.strerror}); choose a "
                                 "writable <out>") from None
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".milvus-edu-write-test"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise RunFolderError(f"cannot write to {out} ({exc.strerror}); choose a writable <out>") from None
    return out


def simulate(
    scenario: str,
    seed: int = 1,
    duration_s: float | None = None,
    out_dir: str | os.PathLike | None = None,
    force: bool = False,
    switches: BugSwitches | list[str] | str | None = None,
    keep_events: bool = True,
    network: NetworkParams | None = None,
    progress: Callable[[float, float], None] | bool | None = None,
    params: dict[str, object] | None = None,
    options: dict[str, object] | None = None,
    sink_process: bool | None = None,
    run_id: str | None = None,
    jsonl: bool = True,
    interventions=(),
) -> RunResult:
    """Simulate ``scenario`` with ``seed`` for ``duration_s`` simulated seconds (the scenario's default).

    * ``out_dir``: write the run folder (``events.parquet``, ``events.jsonl`` unless ``jsonl=False``, ``summary.json``);
      an existing non-empty folder needs ``force``, which removes the run it held and keeps every other file
      (:func:`prepare_out_dir`).
    * ``keep_events``: keep the rows in memory too (``result.events``, ``result.rows``), as the recorder's
      batches (:class:`~milvus_edu.events.recorder.KeptBatches`). With ``keep_events=False``
      memory stays bounded however long the run: rows stream to the files and the checkers and
      summary read them as they pass.
    * ``switches``: bug switches to turn on, by name (one string or a list) or a :class:`BugSwitches`.
    * ``network``: latency and loss model.
    * ``progress``: ``True`` shows the run's progress once it has taken a second (a bar under a notebook cell, a
      line on a terminal; :mod:`milvus_edu.sim.progress`), with about how long it has left; a function
      ``progress(done_s, total_s)`` is called instead. Either is called every 2% of the run, and about every half
      second of wall time when a step takes longer (:func:`advance_in_steps`); the run log is the same with or
      without it.
    * ``params``: Milvus parameters by dotted name, e.g. ``{"timetick.time_tick_interval_ns": 100_000_000}``
      (see :meth:`milvus_edu.config.Config.with_params`).
    * ``options``: the scenario's own knobs, e.g. ``{"proxies": 3}`` (``Scenario.options`` lists them).
    * ``sink_process``: write the files and run the checkers and summaries in a second process
      (:mod:`milvus_edu.events.worker`), so a long run uses two cores. ``None`` (the default) does so
      when a folder is written and the platform can fork (Linux; not inside a ``multiprocessing.Pool``
      worker), once the run has logged ``worker.HOLD_ROWS`` events (a shorter run is not worth a fork).
      The files and the summary are the same either way.
    * ``run_id``: the run's id in its events and summary; by default ``<scenario>-s<seed>`` followed by
      ``+<switch>`` for each switch on (a sweep gives ids that also name its options and parameters).
    * ``jsonl``: write ``events.jsonl`` beside ``events.parquet`` (18 times its size; a sweep leaves it out).
    * ``interventions``: faults to apply, and bug switches to flip, at given times on top of the scenario's own
      (:mod:`milvus_edu.sim.interventions`: ``Kill``, ``Restart``, ``Pause``, ``ClockJump``, ``SetSwitch``, or
      their dict forms); kept in summary.json and the token. The run log before the first one's time is the run log
      without them. The switches a ``SetSwitch`` flipped are listed in summary.json's ``switches_flipped``
      (``{"switch", "on", "t_ms"}``); its ``switches`` names those on from the start.

    Raises ``ValueError`` for an unknown scenario, switch, parameter or option, a value out of range,
    a bad seed or duration, an intervention on a node the run lacks or at or after its end, and :class:`RunFolderError` for an unusable ``out_dir``. A failure while
    writing (a full disk: ``OSError``) is raised as it happened, from the sink process too;
    :class:`~milvus_edu.events.worker.SinkProcessError` says the sink process died. ``TypeError`` for a ``network``
    that is not a ``NetworkParams``.
    """
    spec = get_scenario(scenario)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative whole number, got {seed!r}")
    if duration_s is None:
        duration_s = spec.duration_s
    if isinstance(duration_s, bool) or not (isinstance(duration_s, (int, float)) and 0 < duration_s < float("inf")):
        raise ValueError(f"duration must be a positive number of seconds, got {duration_s!r}")
    if duration_s > MAX_DURATION_S:
        raise ValueError(f"duration must be at most 100 years ({MAX_DURATION_S:.4g} s), got {duration_s:g} s")
    if isinstance(switches, BugSwitches):
        sw = switches
    elif switches is None or isinstance(switches, (str, list, tuple, set, frozenset)):
        sw = BugSwitches.from_names([switches] if isinstance(switches, str) else list(switches or []))
    else:
        raise ValueError(f"switches are a switch's name or a list of names, e.g. ['skip_wait_tsafe'], got {switches!r}")
    if network is not None and not isinstance(network, NetworkParams):  # else an AttributeError from mid-run
        raise TypeError(f"network is a milvus_edu.sim.kernel.NetworkParams, got {type(network).__name__}")
    progress = resolve_progress(progress)
    config = Config(switches=sw).with_params(params or {})
    opts = scenario_options(spec, options)
    if run_id is None:
        run_id = f"{scenario}-s{seed}" + "".join(f"+{n}" for n in sw.enabled())
    elif not isinstance(run_id, str) or not run_id:
        raise ValueError(f"run_id must be a non-empty string, got {run_id!r}")
    changes = canonical(interventions)
    memory = KeptBatches()
    mechs = scenario_mechanisms(spec)
    checkers = [m.checker() for m in mechs if m.checker is not None]
    for checker in checkers:
        checker.configure(config)
    summaries = [m.summary() for m in mechs if m.summary is not None]
    if sink_process and out_dir is None:
        raise ValueError("sink_process=True runs the sinks that write a run folder: give out_dir too, or leave it at None")
    if sink_process and not worker.available():
        raise ValueError("sink_process=True needs a platform that can fork (Linux) and a process that may start "
                         "children (not a multiprocessing.Pool worker); leave it at None")
    # The collector is paused from here (sim.collector: a run frees what it drops by itself), before
    # the sink process is forked, so that a collection due before the run is done before the fork.
    with collector_paused() as pause:
        local = [memory] if keep_events else []
        recorder = Recorder(run_id, sinks=local + checkers + summaries)
        sim = Simulation(seed, recorder, config, network)
        sim.until_ms = duration_s * 1000.0
        # Building emits nothing (processes start when the run does), so a bad option fails here,
        # before the run folder is even created.
        spec.build(sim, **opts)
        validate_interventions(sim, changes, duration_s * 1000.0)
        # only those given: a scenario's own crash cut off by a short run is no one's mistake (as its own steps)
        warn_times_after(opts, duration_s * 1000.0, given=list(options or {}))
        warn_idle_switches(scenario, sim.nodes.values(),
                           sw.enabled() + [c.name for c in changes if isinstance(c, SetSwitch) and c.on])
        out = prepare_out_dir(out_dir, force) if out_dir is not None else None
        remote = None
        if out is not None:
            meta = {"scenario": scenario, "seed": str(seed), "duration_s": repr(float(duration_s)),
                    "switches": ",".join(sw.enabled())}
            files = [partial(ParquetSink, out / "events.parquet", metadata=meta)]
            if jsonl:
                files.append(partial(JsonlSink, out / "events.jsonl"))
            hold = 0
            if sink_process is None:  # a short run keeps its sinks in process (worker.HOLD_ROWS)
                sink_process, hold = worker.available(), worker.HOLD_ROWS
            if sink_process:
                remote = worker.SinkProcess(files, checkers + summaries, hold_rows=hold)
                recorder.sinks = local + [remote]
            else:
                recorder.sinks += [open_sink() for open_sink in files]
        sim.out_dir = out
        start = {"scenario": scenario, "seed": seed, "duration_s": duration_s, "switches": sw.enabled(),
                 "version": __version__}
        if opts:
            start["options"] = opts
        params_set = config.changed_params()
        if params_set:  # a default run's log stays as it was; a bare log's checks use these
            start["params"] = params_set
        schedule_interventions(sim, changes)
        try:
            recorder.emit("run.start", "sim", detail=start)
            total_ms = duration_s * 1000.0
            if progress is None:
                sim.run(total_ms)
            else:
                def report(done_ms: float) -> None:
                    with pause.resumed():
                        progress(done_ms / 1000.0, duration_s)

                advance_in_steps(sim, total_ms, report)
            recorder.emit("run.end", "sim", detail={"events": recorder.seq + 1})
            recorder.close()
        except BaseException:
            if remote is not None:
                remote.abort()
            raise
        if remote is not None:  # the checkers and summaries as the sink process left them
            checkers, summaries = remote.kept[:len(checkers)], remote.kept[len(checkers):]

        named = [m.name for m in mechs if m.checker is not None]
        summary = _summary(spec, seed, duration_s, config, recorder, summaries, list(zip(named, checkers)), run_id)
        if opts:
            summary["options"] = opts
        if changes:
            summary["interventions"] = [i.to_dict() for i in changes]
        if sim.switches_flipped:  # ``switches`` keeps naming those on from the start
            summary["switches_flipped"] = sim.switches_flipped
        summary["token"] = encode(spec_of_run(scenario, seed, duration_s, sw.enabled(), opts, config,
                                              network or NetworkParams(), run_id, jsonl, changes))
        sim.close()
        if out is not None:
            with open(out / "summary.json", "w", encoding="utf-8") as fh:
                json.dump(summary, fh, indent=2, sort_keys=True)
                fh.write("\n")
        return RunResult(summary, out, memory if keep_events else None)


def _summary(spec, seed, duration_s, config, recorder, summaries, checkers, run_id) -> dict:
    out = {
        "run_id": run_id,
        "scenario": spec.name,
        "description": spec.description,
        "seed": seed,
        "duration_s": float(duration_s),
        "schema_version": SCHEMA_VERSION,
        "milvus_edu_version": __version__,
        "config": config.to_dict(),
        "switches": config.switches.enabled(),
        "events": recorder.seq,
        "events_by_kind": dict(sorted(recorder.counts.items())),
    }
    for section in summaries:
        out.update(section.sections(recorder.counts))
    out["checks"] = checks_report(checkers)
    return out


def checks_report(checkers: Sequence[tuple[str, object]]) -> dict:
    """The ``checks`` section of a run's summary from its checkers once they read the whole log, each named by
    its mechanism: whether the run passed, every invariant, the violations counted and kept, the vacuous
    invariants and the explained stalls. ``simulate`` writes it to ``summary.json``; the explorer computes it
    for a log that came without a summary."""
    violations = [v for _, c in checkers for v in c.result()]
    return {
        "ok": not violations,
        "invariants": [name for _, c in checkers for name in c.invariants],
        "violation_counts": {name: n for _, c in checkers for name, n in c.counts.items()},
        "violations": [v.to_dict() for v in violations],
        "violations_kept_per_invariant": min((c.limit for _, c in checkers), default=0),
        # what passing did not show: invariants nothing in this run could have broken, per mechanism
        "vacuous": {name: c.vacuous() for name, c in checkers},
        # stalls the checkers explained as the expected effect of an injected fault (not violations)
        "stalls": [{"mechanism": name, **stall} for name, c in checkers for stall in c.stalls],
    }


def replay(token: str, out_dir=None, force: bool = False, keep_events: bool = True, progress=None):
    """Run again the run that made ``token``; with ``out_dir``, its run folder byte for byte.

    The token is checked before anything is written: :class:`TokenError` for a damaged token, one of another format
    or version, or one naming a scenario this milvus-edu does not have. ``out_dir``, ``force`` and ``progress`` behave
    as in :func:`milvus_edu.simulate` (an existing non-empty folder is refused without ``force``). Returns the
    :class:`~milvus_edu.sim.run.RunResult`.
    """
    spec = decode(token)
    try:
        get_scenario(spec.scenario)
    except ValueError:
        raise TokenError(f"this token names scenario {spec.scenario!r}, which this milvus-edu does not have; replay it "
                         "with the milvus-edu version (and plug-ins) that made it") from None
    kwargs = spec.simulate_kwargs()
    if "network" in kwargs:
        kwargs["network"] = NetworkParams(**kwargs["network"])
    return simulate(spec.scenario, out_dir=out_dir, force=force, keep_events=keep_events, progress=progress, **kwargs)


class ForkResult(NamedTuple):
    """What :func:`fork` returns: the forked run and the ``seq`` of the first event where its log differs from the
    original's (``None`` when the two logs are the same)."""

    run: RunResult
    first_difference: int | None


def _lines(events) -> list[str]:
    """Run-log rows as their ``events.jsonl`` lines (the lines themselves are kept as they are)."""
    return [e if isinstance(e, str) else json_line(e) for e in events]


def first_difference(a_events, b_events) -> int | None:
    """The ``seq`` of the first event where two run logs differ, compared row by row as ``events.jsonl`` lines;
    ``None`` when they are the same. Each log is a list of row dicts (``RunResult.rows``) or of lines of
    ``events.jsonl``; a log that is a prefix of the other differs at the first row it lacks."""
    a, b = _lines(a_events), _lines(b_events)
    for seq, (x, y) in enumerate(zip(a, b)):
        if x.rstrip("\n") != y.rstrip("\n"):
            return seq
    return None if len(a) == len(b) else min(len(a), len(b))


def _source(run) -> tuple[str, list | None]:
    """The token of ``run`` (a RunResult, a run folder or a token) and its log's lines when they are at hand."""
    if isinstance(run, RunResult):
        if run.token is None:
            raise ValueError("this run has no token (it was made before tokens existed); simulate it again")
        if run.kept:
            return run.token, _lines(run.rows)
        if run.out_dir is None:
            return run.token, None
        run = run.out_dir
    if isinstance(run, str) and run.strip().startswith(TOKEN_PREFIX) and not Path(run).exists():
        return run.strip(), None
    folder = Path(run)
    summary = folder / "summary.json"
    if not summary.is_file():
        raise ValueError(f"{folder} is not a run folder (no summary.json); give the folder `milvus-edu simulate` "
                         "wrote, or the run's token")
    try:
        token = json.loads(summary.read_text(encoding="utf-8")).get("token")
    except (json.JSONDecodeError, UnicodeDecodeError, AttributeError):
        raise ValueError(f"{summary} is not a run's summary; simulate the run again") from None
    if not token:
        raise ValueError(f"{folder} holds a run without a token (made before tokens existed); simulate it again "
                         "with this milvus-edu and fork that folder")
    jsonl = folder / "events.jsonl"
    return token, (jsonl.read_text(encoding="ascii").splitlines() if jsonl.is_file() else None)


def _folder_of(run) -> Path | None:
    """The run folder ``run`` (a RunResult, a run folder or a token, as :func:`_source` takes it) names, if any."""
    if isinstance(run, RunResult):
        return run.out_dir
    if isinstance(run, str) and run.strip().startswith(TOKEN_PREFIX) and not Path(run).exists():
        return None
    return Path(run)


def _idle_flip(spec, added: tuple) -> str | None:
    """Why one of a fork's ``added`` switch flips would change nothing (the switch is so already then, after the run's
    own switches and flips in ``spec`` and the added ones before it), in one line; ``None`` when each changes
    something. The order is the one :func:`simulate` applies them in."""
    on = set(spec.switches)
    mine = {id(item) for item in added}
    for item in canonical(list(spec.interventions) + list(added)):
        if isinstance(item, SetSwitch):
            idle = item.idle(on) if id(item) in mine else None
            if idle is not None:
                return idle
            (on.add if item.on else on.discard)(item.name)
    return None


_LIFE_KINDS = tuple(f'"kind":"{kind}"' for kind in (*DOWN_KINDS, UP_KIND))


def _down(lines: list[str], node: str, t_ms: float) -> tuple[str | None, str | None]:
    """How the run log ``lines`` shows ``node`` at ``t_ms``: ``None`` for running, else how it went down (``killed at
    1.000 s``); first from the events before ``t_ms``, then with those at ``t_ms`` too."""
    mark = f'"node":{json.dumps(node)}'
    before = at = None
    for line in lines:
        if mark not in line or not any(kind in line for kind in _LIFE_KINDS):  # most lines: no JSON to parse
            continue
        row = json.loads(line)
        if row["t_ms"] > t_ms:
            break
        if row["node"] == node:
            at = (f"{DOWN_KINDS[row['kind']]} at {row['t_ms'] / 1000:.3f} s" if row["kind"] in DOWN_KINDS else None)
            if row["t_ms"] < t_ms:
                before = at
    return before, at


def fork(run, at_ms: float, interventions, out_dir=None, force: bool = False, progress=None) -> ForkResult:
    """Run ``run`` (a :class:`RunResult`, a run folder or a run token) again with ``interventions`` added at or after
    ``at_ms``; the run log before ``at_ms`` stays byte for byte the original's.

    ``interventions`` is one intervention or a list (:mod:`milvus_edu.sim.interventions`); one without a time
    (``Kill("proxy-1")``) happens at ``at_ms``. The original's own interventions are kept. ``out_dir``, ``force``
    and ``progress`` (of the forked run) behave as in :func:`simulate`. Returns a :class:`ForkResult`: the forked run
    (its token replays it) and the ``seq`` of the first event where the two logs differ. The original's log is read
    from the run or its folder's ``events.jsonl``, or, when neither holds it, made again from the token in memory.

    Raises :class:`~milvus_edu.sim.token.TokenError` for a token that cannot be replayed here, ``ValueError`` for a
    time outside the run, an intervention before ``at_ms`` or on a node the run lacks, one that would change nothing
    (a switch flipped to what it is then; the first intervention a restart of a node the original's log shows
    running then, a kill or pause of one it shows down), and
    :class:`RunFolderError` for an unusable ``out_dir`` (the folder of ``run`` itself, even with ``force``) — all
    before anything is written.
    """
    token, original = _source(run)
    folder = _folder_of(run)
    if out_dir is not None and folder is not None and Path(out_dir).resolve() == folder.resolve():
        # force would replace the original's files with the fork's: the run it was forked from would be lost
        raise RunFolderError(f"{out_dir} is the run folder being forked; choose another <out> for the fork")
    spec = decode(token)
    if isinstance(at_ms, bool) or not isinstance(at_ms, (int, float)):
        raise ValueError(f"a fork's time is a number of milliseconds, got {at_ms!r}")
    if not 0 <= at_ms < spec.duration_s * 1000:
        within = f"within the run (0 to {spec.duration_s:g} s, before its end), got {at_ms / 1000:g} s"
        raise ArgumentError(f"a fork's time must be {within}", f"--at must be a time {within}")
    if not isinstance(interventions, (list, tuple)):
        interventions = [interventions]
    if not interventions:
        raise ValueError("a fork changes something: give at least one intervention (Kill, Restart, Pause, ClockJump, "
                         "SetSwitch)")
    added = canonical(at_time(i, at_ms) if hasattr(i, "kind") else i for i in interventions)
    early = [i for i in added if i.t_ms < at_ms]
    if early:
        raise ValueError(f"{early[0].describe()} is before the fork's time ({at_ms / 1000:g} s); a fork changes "
                         "only what comes after it")
    idle = _idle_flip(spec, added)
    first = added[0]
    if idle is None and isinstance(first, (Kill, Restart, Pause)):
        if original is None:
            original = _lines(replay(token).rows)
        before, at = _down(original, first.node, first.t_ms)
        if (before is None) == (at is None):  # so whichever way the events at that very time fall
            idle = first.idle(at)
    if idle is not None:
        raise ValueError(idle)
    kwargs = spec.simulate_kwargs()
    if "network" in kwargs:
        kwargs["network"] = NetworkParams(**kwargs["network"])
    kwargs["interventions"] = list(kwargs.get("interventions", [])) + list(added)
    result = simulate(spec.scenario, out_dir=out_dir, force=force, keep_events=True, progress=progress, **kwargs)
    if original is None:
        original = _lines(replay(token).rows)
    seq = first_difference(original, result.rows)
    if seq is not None and seq < len(result.rows) and result.rows[seq]["t_ms"] < at_ms:
        # the log before at_ms is the original's by construction: a difference there means the folder's events.jsonl
        # is not the log its token makes (edited or damaged), so compare with the log the token makes
        seq = first_difference(_lines(replay(token).rows), result.rows)
    return ForkResult(result, seq)
