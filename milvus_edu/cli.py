"""The ``milvus-edu`` command: ``simulate``, ``scenarios``, ``timeline``, ``why``, ``demo``, ``sweep``, ``compare``,
``replay``, ``fork``, ``export``.

User mistakes (unknown scenario, bad duration, an occupied or unwritable output folder) print one
line on stderr and exit with status 2; no traceback.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import sys
import warnings
from contextlib import contextmanager
from pathlib import Path

from .version import __version__

EXIT_USAGE = 2


class UserError(Exception):
    """A mistake in what the user asked for; reported in one line, exit status 2."""


class RunFailed(Exception):
    """The run could not finish for a reason outside the command (a full disk); one line, exit status 1."""


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors that name the command's own ``--help`` and the name a typo most likely meant."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._given: list[str] = []  # this parser's own: a class-level list would be shared by every parser

    def parse_known_args(self, args=None, namespace=None):
        # what this parser was given (a command's parser: the words after the command), for error()
        self._given = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def parse_args(self, args=None, namespace=None):
        parsed, extra = self.parse_known_args(args, namespace)
        if extra:  # argparse would blame the top parser: the command's parser knows what was meant
            command = next((a.choices.get(getattr(parsed, a.dest, None)) for a in self._actions
                            if isinstance(a, argparse._SubParsersAction)), None)
            (command or self).error(f"unrecognized arguments: {' '.join(extra)}")
        return parsed

    def error(self, message):  # one line, not usage + message
        from .config import did_you_mean

        unknown = self._unknown_options()
        if unknown and (message.startswith(("the following arguments are required", "one of the arguments",
                                            "unrecognized arguments"))
                        or "expected one argument" in message):
            # a misspelled option is the mistake to name, not the required option it was meant to be (export --chrome)
            options = sorted({o for o in self._option_string_actions if o.startswith("--") and o != "--help"})
            close = difflib.get_close_matches(unknown[0], options, n=1, cutoff=0.7)
            message = (f"{self.prog} has no option {unknown[0]}" +
                       (f" (did you mean {close[0]}?)" if close else f"; its options: {', '.join(options)}"))
        command = re.fullmatch(r"argument COMMAND: invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if command:
            names = re.findall(r"'([^']*)'", command.group(2))
            message = f"unknown command {command.group(1)!r}{did_you_mean(command.group(1), names)}; choose from " \
                      f"{', '.join(names)}"
        raise UserError(f"{message} (see `{self.prog} --help`)")

    def _unknown_options(self) -> list[str]:
        """The options given that this parser does not know, abbreviations of its own aside."""
        known = list(self._option_string_actions)
        unknown = []
        for word in self._given:
            if word == "--":
                break
            name = word.split("=", 1)[0]
            if not name.startswith("-") or name == "-" or re.fullmatch(r"-\d+|-\d*\.\d+", name):  # -1 is a value
                continue
            if name not in known and not (name.startswith("--") and any(o.startswith(name) for o in known)):
                unknown.append(name)
        return unknown


def _duration(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not value > 0 or value != value or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text}")
    from .sim.run import MAX_DURATION_S

    if value > MAX_DURATION_S:  # here, not in simulate: its message names the Python argument, not --duration
        raise argparse.ArgumentTypeError(f"must be at most 100 years ({MAX_DURATION_S:.4g} s), got {text}")
    return value


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {value}")
    return value


def _pair(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    return name.strip(), value.strip()


def _at_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a time in the run, in seconds from its start, got {text}")
    return value


def _node_ms(text: str) -> tuple[str, float]:
    node, sep, ms = text.rpartition(":")
    try:
        value = float(ms)
    except ValueError:
        value = float("nan")
    if not sep or not node or value != value or value in (float("inf"), float("-inf")):
        raise argparse.ArgumentTypeError(f"expected NODE:MS such as proxy-1:500, got {text!r}")
    return node, value


def _pause(text: str) -> tuple[str, float]:
    node, ms = _node_ms(text)
    if not ms > 0:  # a pause lasts some time (a clock jump can go back: _clock_jump)
        raise argparse.ArgumentTypeError(f"a pause lasts more than 0 ms, such as proxy-1:500, got {text!r}")
    return node, ms


def _clock_jump(text: str) -> tuple[str, float]:
    # checked here, so that the message names --clock-jump and not ClockJump's delta_ms
    from .sim.interventions import MAX_CLOCK_JUMP_MS

    node, ms = _node_ms(text)
    if ms == 0 or abs(ms) > MAX_CLOCK_JUMP_MS:
        raise argparse.ArgumentTypeError(f"a clock jump is a non-zero step of at most 100 years "
                                         f"({MAX_CLOCK_JUMP_MS:.4g} ms) either way, such as rootcoord-1:-8000, "
                                         f"got {text!r}")
    return node, ms


_SPARK_MASTER = re.compile(r"local(\[[^\]]+\])?|local-cluster\[[^\]]+\]|yarn|(spark|k8s|mesos)://\S+")


def _master(text: str) -> str:
    # checked here, before the sweep folder is written and a JVM started only to fail on it
    if not _SPARK_MASTER.fullmatch(text.strip()):
        raise argparse.ArgumentTypeError(f"expected a Spark master such as local[2] or spark://host:7077, got {text!r}")
    return text.strip()


#: What ``--force`` removes, said in every command that writes a run folder (``prepare_out_dir`` does it).
FORCE_HELP = ("reuse an existing --out folder: remove the run in it (its events, summary, binlogs and the demo's "
              "pictures) and keep every other file")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (also used by the docs)."""
    from .config import BugSwitches

    parser = _Parser(prog="milvus-edu", description="Simulate and explore how Milvus 2.5 keeps order.")
    parser.add_argument("--version", action="version", version=f"milvus-edu {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    def command(name: str, text: str) -> argparse.ArgumentParser:
        # the same words head the command's own --help
        return sub.add_parser(name, help=text, description=f"{text[0].upper()}{text[1:]}.")

    sim = command("simulate", "run a scenario and write a run folder")
    sim.add_argument("--scenario", required=True, help="scenario name (see `milvus-edu scenarios`)")
    sim.add_argument("--seed", type=_seed, default=1, help="random seed (default 1)")
    sim.add_argument("--duration", type=_duration, default=None, help="simulated seconds (default: the scenario's)")
    sim.add_argument("--out", required=True, help="run folder to write (new or empty; see --force)")
    sim.add_argument("--force", action="store_true", help=FORCE_HELP)
    sim.add_argument("--switch", action="append", default=[], metavar="NAME",
                     help=f"turn a bug switch on (repeatable): {', '.join(BugSwitches.names())}")
    sim.add_argument("--option", action="append", default=[], metavar="NAME=VALUE", type=_pair,
                     help="set one of the scenario's options (repeatable), e.g. proxies=3; "
                          "`milvus-edu scenarios` lists them")
    sim.add_argument("--param", action="append", default=[], metavar="GROUP.NAME=VALUE", type=_pair,
                     help="override a Milvus parameter (repeatable), e.g. timetick.time_tick_interval_ns=100000000")
    command("scenarios", "list scenarios with one-line descriptions")
    tl = command("timeline", "print the key events of a run folder in words")
    tl.add_argument("run", help="run folder (or events.parquet / events.jsonl)")
    tl.add_argument("--all", action="store_true", help="every event, not only the key ones")
    wy = command("why", "explain why a read waited, a flush took long or a checker reported a violation: "
                        "a causal chain back to its root cause, event by event")
    wy.add_argument("run", help="run folder (or events.parquet / events.jsonl)")
    asked = wy.add_mutually_exclusive_group(required=True)
    asked.add_argument("--read", type=int, metavar="N", help="the read's request number (see `timeline`)")
    asked.add_argument("--flush", type=int, metavar="N", help="the N-th client flush of the run, from 1")
    asked.add_argument("--violation", type=int, metavar="N",
                       help="the N-th violation in the run's summary.json, from 1 (needs the run folder)")
    demo = command("demo", "run the guided tour: the design documents' Client1/Client2 example as a table, "
                           "every consistency level beside Strong, and two pictures")
    demo.add_argument("--out", default=None, help="run folder (default: ./milvus-edu-demo, or when that holds an "
                                                 "earlier run, a new ./milvus-edu-demo-N; with --force, "
                                                 "./milvus-edu-demo again)")
    demo.add_argument("--force", action="store_true", help=FORCE_HELP)
    sw = command("sweep", "run a grid of scenarios, switches, options, parameters and seeds as a Spark job")
    sw.add_argument("grid", help="grid file (.json, .yaml or .yml); see the README's Sweeps section")
    sw.add_argument("--out", required=True, help="sweep folder (new or empty; the same grid's folder resumes it)")
    sw.add_argument("--master", default=None, type=_master,
                    help="Spark master, e.g. spark://host:7077 (default: $MILVUS_EDU_SPARK_MASTER, else local[2])")
    sw.add_argument("--jsonl", action="store_true", help="write each run's events.jsonl too (18x the Parquet's size)")
    cmp = command("compare", "run a workload on the model and on a real Milvus 2.3.5, call by call "
                             "(needs pip install 'milvus-edu[real]')")
    cmp.add_argument("--workload", default=None, metavar="FILE",
                     help="a JSON file holding a list of steps (default: the seed example)")
    cmp.add_argument("--seed", type=_seed, default=1, help="the model's random seed (default 1)")
    cmp.add_argument("--out", default=None, help="keep both run folders here (model/, real/ with the server's logs)")
    cmp.add_argument("--param", action="append", default=[], metavar="GROUP.NAME=VALUE", type=_pair,
                     help="a Milvus parameter for both sides (repeatable), e.g. timetick.time_tick_interval_ns=100000000")
    rp = command("replay", "run again, byte for byte, the run a token names (`simulate` prints it)")
    rp.add_argument("token", help="the run token, me1-... (also in the run's summary.json)")
    rp.add_argument("--out", required=True, help="run folder to write (new or empty; see --force)")
    rp.add_argument("--force", action="store_true", help=FORCE_HELP)
    fk = command("fork", "run a run folder again with a fault or a bug switch flipped at a time; the log "
                         "before it stays byte for byte the same")
    fk.add_argument("run", help="run folder written by `milvus-edu simulate` (its summary.json holds the token)")
    fk.add_argument("--at", type=_at_seconds, required=True, metavar="SECONDS",
                    help="simulated time of the fault or the switch's flip")
    change = fk.add_mutually_exclusive_group(required=True)
    change.add_argument("--kill", metavar="NODE", help="crash NODE (e.g. proxy-1, datanode-1)")
    change.add_argument("--restart", metavar="NODE", help="start a killed proxy or DataNode again (one running then "
                                                          "is refused: a restart does not kill it first)")
    change.add_argument("--pause", type=_pause, metavar="NODE:MS", help="freeze NODE for MS milliseconds")
    change.add_argument("--clock-jump", type=_clock_jump, metavar="NODE:MS",
                        help="step a rootcoord's wall clock by MS milliseconds (negative goes back)")
    change.add_argument("--switch", metavar="NAME",
                        help=f"turn a bug switch on for every component from then on: {', '.join(BugSwitches.names())}")
    change.add_argument("--switch-off", metavar="NAME", help="turn a bug switch that is on then off from then on")
    fk.add_argument("--out", required=True, help="run folder to write (new or empty; see --force)")
    fk.add_argument("--force", action="store_true", help=FORCE_HELP)
    ex = command("export", "export a run folder to a trace viewer's format (Chrome/Perfetto trace-event JSON)")
    ex.add_argument("run", help="run folder (or events.parquet / events.jsonl)")
    ex.add_argument("--perfetto", required=True, metavar="OUT.json",
                    help="write Chrome/Perfetto trace-event JSON (open it at ui.perfetto.dev or chrome://tracing)")
    ex.add_argument("--force", action="store_true", help="replace OUT.json if it exists")
    return parser


#: Where ``milvus-edu demo`` writes when no ``--out`` is given (when it holds something: the first free
#: ``milvus-edu-demo-N``, unless ``--force`` says to reuse it).
DEMO_DIR = Path("milvus-edu-demo")


def _free_demo_dir() -> Path:
    base = DEMO_DIR
    if not base.exists() or (base.is_dir() and not any(base.iterdir())):
        return base
    n = 2
    while Path(f"milvus-edu-demo-{n}").exists():
        n += 1
    return Path(f"milvus-edu-demo-{n}")


LEGEND = ("events are numbered from 1, as in the stepper and the checks; times: the column after the number is "
          "simulated time since the run started; clock values such as "
          "00:00:12.001+3 are a hybrid timestamp's physical part (wall clock, since the run's time zero, "
          "negative before it) + its logical counter")


def _print_timeline(events, key_only: bool = True, out=None) -> None:
    from .narrate import describe
    from .viz.data import run_mechanisms

    out = sys.stdout if out is None else out
    print(LEGEND, file=out)
    filters = [m.key_events() for m in run_mechanisms(events) if m.key_events is not None] if key_only else []
    for row in events.to_dict("records"):
        # Every filter sees every row: they count what they skip.
        votes = [f.show(row) for f in filters]
        if not key_only or str(row["kind"]).startswith("fault.") or any(votes):
            print(f"  event {int(row['seq']) + 1:<7,} {row['t_ms'] / 1000:9.3f} s  {describe(row)}", file=out)
    for f in filters:
        for note in f.notes():
            print(f"  {note}", file=out)


def _cmd_scenarios(args) -> int:
    from .registry import scenarios

    catalogue = scenarios()
    width = max(len(n) for n in catalogue)
    for name, spec in catalogue.items():
        print(f"{name:<{width}}  {spec.description} (default {spec.duration_s:g} s)")
        if spec.options:
            knobs = ", ".join(_option_text(k, v) for k, v in spec.options.items())
            print(f"{'':<{width}}  options: {knobs}")
    return 0


def _user_text(exc: Exception) -> str:
    """A user's mistake as the command line says it: a run folder's error in ``--out``/``--force`` words."""
    cli = getattr(exc, "cli", None)
    if isinstance(cli, str):
        return cli
    return exc.args[0] if exc.args else str(exc)


def _option_text(name: str, default) -> str:
    """How ``scenarios`` shows an option and its default: a list option as what it takes (its default is empty)."""
    if isinstance(default, tuple):
        return f"{name}=FILE.json (a JSON list; none by default)"
    return f"{name}={default:g}" if isinstance(default, float) else f"{name}={default}"


def _progress_printer():
    """The progress line on stderr for runs long enough to notice, with their time left (terminals only)."""
    from .sim.progress import terminal_line

    return terminal_line()


def _run(scenario, seed, duration, out, force, switches, options=(), params=()):
    from .events.worker import SinkProcessError
    from .sim.run import simulate

    try:
        return simulate(scenario, seed=seed, duration_s=duration, out_dir=out, force=force, switches=switches,
                        keep_events=False, progress=_progress_printer(), options=dict(options), params=dict(params))
    except ValueError as exc:  # RunFolderError is one
        raise UserError(_user_text(exc)) from None
    except OSError as exc:  # the disk filled up, the folder vanished, ...: the machine's trouble, not the command's
        raise RunFailed(f"could not write the run folder {out}: {exc.strerror or exc}") from None
    except SinkProcessError as exc:
        raise RunFailed(str(exc)) from None


def _report(result) -> None:
    from .narrate import plural
    from .registry import get_scenario, scenario_mechanisms

    s = result.summary
    mechs = scenario_mechanisms(get_scenario(s["scenario"]))
    print(f"wrote {result.out_dir}/events.parquet ({s['events']:,} events), events.jsonl and summary.json")
    print(f"token (`milvus-edu replay TOKEN --out DIR` makes this run again): {s['token']}")
    for m in mechs:
        for line in (m.report(s) if m.report is not None else []):
            print(line)
    checks = s["checks"]
    if checks["ok"]:
        # only what the run tested: a promise over invariants nothing could break would be a claim the run never made
        vacuous = checks.get("vacuous", {})
        tested = {m.name: [n for n in m.checker.invariants if n not in vacuous.get(m.name, ())]
                  for m in mechs if m.checker is not None}
        promises = "; ".join(", ".join(m.checker.promises[n] for n in tested[m.name])
                             for m in mechs if m.checker is not None and tested[m.name])
        names = [n for m in mechs if m.checker is not None for n in tested[m.name]]
        print(f"checks passed ({', '.join(names)}): {promises}" if names else
              "checks passed: nothing in this run gave an invariant a chance to fail (see below)")
    else:
        broken = {name: n for name, n in checks["violation_counts"].items() if n}
        counts = ", ".join(f"{n:,} {name}" for name, n in broken.items())
        print(f"checks FAILED: {counts} violation{'' if sum(broken.values()) == 1 else 's'}; the first:")
        print(f"  {checks['violations'][0]['explanation']}")
    untested = "; ".join(f"{name}: {', '.join(names)}" for name, names in checks.get("vacuous", {}).items() if names)
    if untested:
        print(f"not tested in this run (nothing gave them a chance to fail): {untested}")
    stalls = checks.get("stalls", [])
    if stalls:
        print(f"{plural(len(stalls), 'stall')} explained, not {'a violation' if len(stalls) == 1 else 'violations'}; "
              "the first:")
        print(f"  {stalls[0]['explanation']}")


def _cmd_simulate(args) -> int:
    result = _run(args.scenario, args.seed, args.duration, args.out, args.force, args.switch, args.option, args.param)
    _report(result)
    return _exit_status(result, "the --param or --option values you gave keep this run from making progress"
                        if args.param or args.option else None)


def _exit_status(result, knobs: str | None) -> int:
    """0, or 1 for a violation that neither a bug switch (on from the start or flipped part-way), the scenario's
    documented gap nor what the user changed account for. ``knobs`` is the clause that names the user's change (the
    ``--param`` and ``--option`` values, a fork's fault) as what stops progress, ``None`` when nothing was changed."""
    from .registry import get_scenario, scenario_mechanisms

    summary = result.summary
    if not summary["checks"]["ok"] and not _acting_switches(summary):
        spec = get_scenario(summary["scenario"])
        if spec.gap:
            print(f"(expected: this scenario shows a gap in Milvus itself: {spec.gap})")
            return 0
        broken = {name for name, n in summary["checks"]["violation_counts"].items() if n}
        progress = {name for m in scenario_mechanisms(spec) if m.checker is not None
                    for name in m.checker.progress}
        if knobs is not None and broken <= progress:
            print(f"(expected: {knobs}; the progress checks above say what is stuck)")
            return 0
        return 1  # a violation without a bug switch is a model bug worth a non-zero status
    return 0


def _acting_switches(summary: dict) -> list[str]:
    """The bug switches on in the run (from the start or flipped on part-way) that can act in its scenario: one whose
    component the cluster lacks (``simulate`` warned of it) accounts for no violation."""
    from .sim.scenarios import cluster_of, idle_switches

    names = list(summary["switches"]) + [f["switch"] for f in summary.get("switches_flipped") or () if f.get("on")]
    if not names:
        return []
    idle = set(idle_switches(cluster_of(summary["scenario"]), names))
    return [name for name in names if name not in idle]


def _cmd_timeline(args) -> int:
    from .events import RunLogError, load_run

    try:
        events = load_run(args.run)
    except RunLogError as exc:
        raise UserError(str(exc)) from None
    _print_timeline(events, key_only=not args.all)
    last = events.iloc[-1]
    if last["kind"] != "run.end":  # every run's log ends with run.end: this one was cut short (head, a copy, an edit)
        print(f"  (the log stops at event {int(last['seq']) + 1:,}, {last['t_ms'] / 1000:.3f} s, without the run's end: "
              "it was cut short, so what the run did after that is missing)")
    return 0


def _cmd_why(args) -> int:
    from .explain import WhyError, why

    try:
        chain = why(args.run, read=args.read, flush=args.flush, violation=args.violation)
    except WhyError as exc:
        raise UserError(str(exc)) from None
    print("\n".join(chain.lines()))
    return 0


def _cmd_demo(args) -> int:
    from .registry import demo
    from .sim.run import RunFolderError, prepare_out_dir, record_products

    tour = demo()
    if tour is None:
        raise UserError("no registered mechanism brings a demo")
    try:
        if args.out is not None:
            out = args.out
        elif args.force:  # reuse the default folder, as --force says
            out = DEMO_DIR
        else:
            out = _free_demo_dir()
        out = prepare_out_dir(out, args.force, tour.products)
    except RunFolderError as exc:
        raise UserError(_user_text(exc)) from None
    if args.out is None and out != DEMO_DIR:
        print(f"{DEMO_DIR} is not an empty folder, so this run goes to {out} "
              f"(`milvus-edu demo --force` reuses {DEMO_DIR} instead)\n")
    for line in tour.intro:
        print(line)
    result = _run(tour.scenario, tour.seed, None, out, True, [])
    if tour.story is not None:
        for line in tour.story(result):
            print(line)
    else:
        _print_timeline(result.events)
    print()
    _report(result)
    for line in tour.outro(result.summary):
        print(line)
    if tour.pictures is not None:
        for line in tour.pictures(result):
            print(line)
        record_products(out, [out / name for name in tour.products if (out / name).is_file()])
    lab = f"the lab notebook {tour.lab}" if tour.lab else "the lab notebooks in notebooks/"
    print(f"\nNext: `milvus-edu timeline {out} --all` for every event, or {lab} "
          f"(in a clone of the repository) in JupyterLab.")
    return 0


def _cmd_sweep(args) -> int:
    import pyarrow.parquet as pq

    from .analysis.session import SparkUnavailableError
    from .sim.run import RunFolderError
    from .sweep import GridError, SweepFolderError, run_sweep

    try:
        sweep = run_sweep(args.grid, args.out, master=args.master, jsonl=args.jsonl)
    except (GridError, SweepFolderError, RunFolderError) as exc:
        raise UserError(_user_text(exc)) from None
    except SparkUnavailableError as exc:
        raise RunFailed(str(exc)) from None
    except OSError as exc:
        raise RunFailed(f"could not write the sweep folder {args.out}: {exc.strerror or exc}") from None
    tables = sweep.out / "tables"
    runs = pq.read_table(tables / "runs.parquet", columns=["status", "error"]).to_pylist()
    failed = [r["error"] for r in runs if r["status"] != "ok"]
    print(f"{len(runs) - len(failed):,} runs ok, {len(failed):,} failed" + (f"; the first: {failed[0]}" if failed else ""))
    counts: dict[tuple[str, str], dict[str, int]] = {}
    for v in pq.read_table(tables / "verdicts.parquet", columns=["mechanism", "check", "verdict", "expected"]).to_pylist():
        tally = counts.setdefault((v["mechanism"], v["check"]), {"pass": 0, "fail": 0, "vacuous": 0, "expected": 0})
        tally[v["verdict"]] += 1
        tally["expected"] += v["verdict"] == "fail" and v["expected"]
    if counts:
        print("verdicts per check (pass / fail / vacuous):")
        width = max(len(f"{m}/{c}") for m, c in counts)
        for (mech, check), t in counts.items():
            note = f"  ({t['expected']:,} of the fails in a scenario's documented gap)" if t["expected"] else ""
            print(f"  {mech + '/' + check:<{width}}  {t['pass']:>7,} / {t['fail']:>7,} / {t['vacuous']:>7,}{note}")
    print(f"tables: {tables / 'runs.parquet'} and {tables / 'verdicts.parquet'}; run folders in {sweep.out / 'runs'}")
    sweep.spark.stop()
    return 0


def _cmd_compare(args) -> int:
    from .real.server import RealMilvusError
    from .registry import _records
    from .sim.run import RunFolderError

    from .real.compare import RealSideFailed, compare, report

    try:
        steps = list(_records("workload", args.workload)) if args.workload else []
        if sys.stderr.isatty():  # nothing else shows for the seconds a real server takes to start and to answer
            print("compare: the model runs the workload, then a real Milvus 2.3.5 server starts and runs it too "
                  "(this takes a few seconds) ...", file=sys.stderr, flush=True)
        result = compare(steps, seed=args.seed, params=dict(args.param) or None, out_dir=args.out)
    except RealSideFailed as exc:  # the model's side ran: show it, then say why the real one did not
        for line in report(exc.comparison):
            print(line)
        raise UserError(str(exc)) from None
    except (ValueError, RunFolderError, RealMilvusError) as exc:
        raise UserError(_user_text(exc).replace("option workload", "--workload")) from None
    for line in report(result):
        print(line)
    if args.out:
        print(f"run folders: {args.out}/model and {args.out}/real (the server's logs in {args.out}/real/server/logs)")
    return 0 if result.ok else 1


@contextmanager
def _run_errors(out):
    """A run's failures as the CLI reports them: a bad token, run folder or argument is the user's (exit 2), a
    folder that cannot be written or a sink process that died is the run's (exit 1)."""
    from .events.worker import SinkProcessError

    try:
        yield
    except ValueError as exc:  # TokenError and RunFolderError are ValueErrors
        raise UserError(_user_text(exc)) from None
    except OSError as exc:
        raise RunFailed(f"could not write the run folder {out}: {exc.strerror or exc}") from None
    except SinkProcessError as exc:
        raise RunFailed(str(exc)) from None


def _cmd_replay(args) -> int:
    from .sim.run import replay
    from .sim.token import decode

    with _run_errors(args.out):
        result = replay(args.token, args.out, force=args.force, keep_events=False, progress=_progress_printer())
    _report(result)
    spec = decode(args.token)
    return _exit_status(result, "the --param or --option values the token holds keep this run from making progress"
                        if spec.params or spec.options else None)


def _cmd_fork(args) -> int:
    from .narrate import describe
    from .sim.interventions import ClockJump, Kill, Pause, Restart, SetSwitch
    from .sim.run import fork

    at_ms = args.at * 1000.0
    with _run_errors(args.out):
        # `is not None`: an empty --kill "" is a node name to refuse, not a missing option
        if args.kill is not None:
            change = Kill(args.kill, at_ms)
        elif args.restart is not None:
            change = Restart(args.restart, at_ms)
        elif args.pause is not None:
            change = Pause(args.pause[0], at_ms, duration_ms=args.pause[1])
        elif args.clock_jump is not None:
            change = ClockJump(args.clock_jump[0], at_ms, delta_ms=args.clock_jump[1])
        elif args.switch is not None:
            change = SetSwitch(args.switch, True, at_ms)
        else:
            change = SetSwitch(args.switch_off, False, at_ms)
        if not Path(args.run).is_dir():
            raise ValueError(f"{args.run} is not a folder; give a run folder written by `milvus-edu simulate`")
        result = fork(args.run, at_ms, change, out_dir=args.out, force=args.force, progress=_progress_printer())
    run, seq = result
    print(f"forked {args.run} with {change.describe()}")
    _report(run)
    if seq is None:
        print("the runs do not differ: the change had no effect on the run log")
    elif seq < len(run.rows):
        row = run.rows[seq]
        print(f"the runs first differ at event {seq + 1:,} ({row['t_ms'] / 1000:.3f} s): {describe(row)}")
    else:
        print(f"the runs first differ at event {seq + 1:,}: the forked run ends there, the original goes on")
    # the fault given is a knob like --param: progress it stops is the fork's lesson, not a model bug (a switch
    # flipped on is listed in the summary's switches_flipped, which accounts for its violations)
    return _exit_status(run, f"the fork's {change.describe()} keeps this run from making progress")


def _cmd_export(args) -> int:
    from .events import RunLogError
    from .export import ExportError, export_perfetto

    if not args.perfetto.strip():  # Path("") is the current folder, which the user did not name
        raise UserError("--perfetto is empty; give the name of the file to write, such as trace.json")
    try:
        written = export_perfetto(args.run, args.perfetto, force=args.force)
    except (RunLogError, ExportError) as exc:
        raise UserError(str(exc)) from None
    except OSError as exc:
        raise RunFailed(f"could not write {args.perfetto}: {exc.strerror or exc}") from None
    print(f"wrote {args.perfetto} ({written:,} trace events); open it at https://ui.perfetto.dev or chrome://tracing")
    return 0


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """A warning of a command (a workload step after the run's end), in one line: no file name, no source line."""
    _end_progress_line()
    print(f"milvus-edu: warning: {message}", file=sys.stderr)


def _end_progress_line() -> None:
    """End the progress line of a run that stopped part-way, if one is open."""
    progress = sys.modules.get("milvus_edu.sim.progress")  # not imported: no line was shown
    if progress is not None:
        progress.end_open_line()


def _unfinished(args) -> str:
    """What an interrupted command left in its ``--out`` folder, said after "interrupted" (or nothing)."""
    out = getattr(args, "out", None)
    try:
        left = sorted(p.name for p in Path(out).glob("*.partial")) if out else []
    except OSError:
        return ""
    if not left:
        return ""
    return (f"; {out} holds the unfinished {' and '.join(left)} (reuse the folder with --force, which replaces "
            "them, or delete it)")


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``milvus-edu`` command."""
    parser = build_parser()
    args = None
    try:
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help()
            return EXIT_USAGE
        handler = {"simulate": _cmd_simulate, "scenarios": _cmd_scenarios, "timeline": _cmd_timeline,
                   "why": _cmd_why,
                   "demo": _cmd_demo, "sweep": _cmd_sweep, "compare": _cmd_compare,
                   "replay": _cmd_replay, "fork": _cmd_fork, "export": _cmd_export}[args.command]
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            try:
                return handler(args)
            except BaseException:
                _end_progress_line()  # what is printed next starts a line of its own
                raise
    except UserError as exc:
        print(f"milvus-edu: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except RunFailed as exc:
        print(f"milvus-edu: error: {exc}", file=sys.stderr)
        return 1
    except MemoryError:  # a run or a log larger than the machine: its limit, said in one line, not a traceback
        print("milvus-edu: error: out of memory; choose a shorter --duration or smaller --option values, or a "
              "machine with more memory", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"milvus-edu: interrupted{_unfinished(args)}", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader (e.g. `| head`) went away: stop quietly, like other Unix tools.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
