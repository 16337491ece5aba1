"""Simulator throughput: logged events per wall second, against bare SimPy's timeout rate.

For each scenario, runs ``simulate(scenario, out_dir=<tmp>, keep_events=False)`` as the CLI does
(``events.parquet``, ``events.jsonl`` and ``summary.json`` written, checkers and summaries on, the
sinks in their own process) and divides the events logged by the wall time of the whole call. It
also gives the CPU seconds of the simulating process and of the sink process (whichever is larger
bounds the rate), the same run with the sinks in process (``sink_process=False``, the baseline of
the sink process), the run kept in memory only (no folder), the wall time of a run of one simulated
second (what every run costs whatever its length: the sink process, opening and closing the files),
and in the same process a loop of bare ``env.timeout(1)`` in a few SimPy processes, the yardstick
the target is stated against: at least 200,000 events/s and at least 1/8 of bare SimPy's timeout
rate. Each written run is timed right after its own bare-SimPy loop, and the ratio given is the median over
the pairs (``--repeat``, 5 by default), with the best and the worst beside it: on a shared VM one pair's ratio
moves by a third from one minute to the next (1/11.9 to 1/19.1 for the same flush run on 2026-11-27), while the
median of several pairs repeats to within a few percent.

Prints figures only (no assertions). Run from the repo root:
``python benchmarks/bench_sim.py [--scenarios tso-basics timetick-basics] [--duration S] [--repeat 2]``.
A scenario that is not registered is skipped with a note. ``--profile`` prints the top of a cProfile
of one written run per scenario instead. ``--floor`` splits a run's wall time instead: the run with its
folder written; the same simulation whose one sink drops the recorder's batches (the nodes' own work, the
effect interpreter, SimPy, and the recorder buffering rows that nobody reads); and what SimPy alone takes for as many events as the run
scheduled, at the bare timeout rate. The last two bound the ratio that faster sinks, or a faster
simulation around the same components, could reach. ``--baseline REV`` instead sets this checkout beside
another revision of the project (a commit, a tag, a branch): it checks REV out in a temporary git worktree and
times the same pairs in both, alternating, each pair in a fresh Python process (a package cannot be imported
twice), and prints both medians and how many times faster this checkout is. That is the figure for "does not
regress": the yardstick and the machine's load are shared by the two sides of each round.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import pstats
import resource
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import simpy

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's milvus_edu, whatever is installed
import milvus_edu  # noqa: E402
from milvus_edu.config import Config  # noqa: E402
from milvus_edu.events import Recorder  # noqa: E402
from milvus_edu.registry import get_scenario, scenarios  # noqa: E402
from milvus_edu.sim.collector import collector_paused  # noqa: E402
from milvus_edu.sim.kernel import Simulation  # noqa: E402

TARGET_EVENTS_PER_S = 200_000
TARGET_RATIO = 1 / 8
#: Simulated seconds per run when --duration is not given: long enough that what every run costs
#: whatever its length (forking the sink process, opening and closing the files: ~20-30 ms, shown
#: by the run of 1 simulated second) is a small part of the time. tso-basics logs ~110 events per simulated second,
#: timetick-basics ~14,000.
DEFAULT_DURATION_S = {"tso-basics": 600.0, "timetick-basics": 60.0}


def bare_simpy_rate(processes: int = 4, timeouts: int = 1_000_000) -> float:
    """Timeouts per wall second of ``processes`` SimPy processes each looping on ``env.timeout(1)``."""
    env = simpy.Environment()
    each = timeouts // processes

    def loop():
        for _ in range(each):
            yield env.timeout(1)

    for _ in range(processes):
        env.process(loop())
    start = time.perf_counter()
    env.run()
    return each * processes / (time.perf_counter() - start)


def timed_run(scenario: str, seed: int, duration_s: float, write: bool,
              sink_process: bool | None = None) -> tuple[int, float]:
    """(events logged, wall seconds) of one ``simulate`` call; ``write`` puts the run folder in a temp dir."""
    events, wall, _, _ = timed_run_cpu(scenario, seed, duration_s, write, sink_process)
    return events, wall


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed_run_cpu(scenario: str, seed: int, duration_s: float, write: bool,
                  sink_process: bool | None = None) -> tuple[int, float, float, float]:
    """:func:`timed_run` plus the CPU seconds of this process and of the sink process it forked."""
    _collect_earlier_runs()
    with tempfile.TemporaryDirectory(prefix="bench-sim-") as tmp:
        out = Path(tmp) / "run" if write else None
        children, cpu, start = _children_cpu(), time.process_time(), time.perf_counter()
        result = milvus_edu.simulate(scenario, seed=seed, duration_s=duration_s, out_dir=out,
                                     keep_events=not write, sink_process=sink_process if write else None)
        wall = time.perf_counter() - start
        cpu, children = time.process_time() - cpu, _children_cpu() - children
    return result.summary["events"], wall, cpu, children


def _collect_earlier_runs() -> None:
    """Free the runs timed before, so that a run's time does not include freeing them.

    ``simulate`` frees most of a finished run itself (``Simulation.close``); what is left in reference cycles
    waits for a full collection."""
    gc.collect()
    gc.collect()


def best_rate(scenario: str, seed: int, duration_s: float, write: bool, repeat: int) -> tuple[int, float]:
    """(events, best events/s) over ``repeat`` runs (the least disturbed by the rest of the machine)."""
    runs = [timed_run(scenario, seed, duration_s, write) for _ in range(repeat)]
    events = runs[0][0]
    return events, max(events / wall for _, wall in runs)


def profile(scenario: str, seed: int, duration_s: float, top: int) -> None:
    """Print the ``top`` functions by own time and by cumulative time of one written run."""
    prof = cProfile.Profile()
    prof.enable()
    timed_run(scenario, seed, duration_s, write=True)
    prof.disable()
    stats = pstats.Stats(prof)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)


class DropBatches:
    """A batch sink that drops every batch: the recorder buffers rows as in a written run, and nobody reads them."""

    def write_batch(self, batch) -> None:
        pass

    def close(self) -> None:
        pass


def sinkless_run(scenario: str, seed: int, duration_s: float) -> tuple[int, int, float]:
    """(events logged, SimPy events scheduled, wall seconds) of the scenario's simulation with a recorder whose
    one sink drops its batches: what ``simulate`` costs without the run folder, the checkers and the summaries."""
    _collect_earlier_runs()
    with collector_paused():
        recorder = Recorder(f"{scenario}-s{seed}", sinks=[DropBatches()])
        sim = Simulation(seed, recorder, Config())
        get_scenario(scenario).build(sim)
        start = time.perf_counter()
        sim.run(duration_s * 1000.0)
        wall = time.perf_counter() - start
        scheduled = next(sim.env._eid)  # SimPy numbers every event it schedules
    return recorder.seq, scheduled, wall


def floor(scenario: str, seed: int, duration_s: float, repeat: int) -> None:
    """Print where a written run's wall time goes: sinks, simulation, SimPy (best of ``repeat`` each)."""
    bare = max(bare_simpy_rate() for _ in range(repeat))
    written = min(timed_run(scenario, seed, duration_s, write=True) for _ in range(repeat))
    events, wall = written
    sinkless = min((sinkless_run(scenario, seed, duration_s) for _ in range(repeat)), key=lambda run: run[2])
    logged, scheduled, sim_wall = sinkless
    simpy_s = scheduled / bare
    print(f"{scenario}: {events:,} events logged in {duration_s:g} simulated s, {scheduled:,} SimPy events "
          f"({scheduled / max(logged, 1):.2f} per logged event); bare SimPy {bare:,.0f} timeouts/s")
    print(f"  folder written {wall * 1000:.0f} ms (1/{bare / (events / wall):.1f} of bare); "
          f"no sinks {sim_wall * 1000:.0f} ms (1/{bare / (logged / sim_wall):.1f}); "
          f"SimPy alone for those events {simpy_s * 1000:.0f} ms (1/{bare / (logged / simpy_s):.1f})")
    print(f"  per logged event: {wall / events * 1e6:.1f} us written, {sim_wall / logged * 1e6:.1f} us simulating, "
          f"{simpy_s / logged * 1e6:.1f} us of it SimPy's own; 1/12 of bare is {12 / bare * 1e6:.1f} us")


REPO = Path(__file__).resolve().parents[1]

#: One pair in a fresh process, with only what every revision has: ``simulate`` with a run folder, and its summary's
#: event count. argv: checkout root, scenario, seed, simulated seconds. Prints [bare rate, events, wall s].
#: :func:`bare_simpy_rate`'s loop is written out here because importing this file would import this checkout's
#: package ahead of the one under test.
_PAIR = textwrap.dedent("""
    import gc, json, sys, tempfile, time
    from pathlib import Path
    sys.path.insert(0, sys.argv[1])
    import simpy, milvus_edu
    if not milvus_edu.__file__.startswith(sys.argv[1]):
        sys.exit(f"imported {milvus_edu.__file__}, not the package under {sys.argv[1]}")
    scenario, seed, duration = sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    with tempfile.TemporaryDirectory() as tmp:  # warm up: imports, bytecode, first-use caches
        milvus_edu.simulate(scenario, seed=seed, duration_s=min(duration, 2.0), out_dir=Path(tmp) / "warm")
    env = simpy.Environment()
    def loop():
        for _ in range(250_000):
            yield env.timeout(1)
    for _ in range(4):
        env.process(loop())
    gc.collect()
    start = time.perf_counter()
    env.run()
    bare = 1_000_000 / (time.perf_counter() - start)
    gc.collect()
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        result = milvus_edu.simulate(scenario, seed=seed, duration_s=duration, out_dir=Path(tmp) / "run")
        wall = time.perf_counter() - start
    print(json.dumps([bare, result.summary["events"], wall]))
""")


def pair_in(root: Path, scenario: str, seed: int, duration_s: float) -> float | str:
    """The ratio (bare SimPy's rate / the written run's events per second) of one pair timed in a fresh process on
    the package under ``root``; a one-line reason instead when that checkout cannot run it."""
    done = subprocess.run([sys.executable, "-c", _PAIR, str(root), scenario, str(seed), str(duration_s)],
                          capture_output=True, text=True, cwd=tempfile.gettempdir())
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines()
        return lines[-1] if lines else f"exit status {done.returncode}"
    bare, events, wall = json.loads(done.stdout.strip().splitlines()[-1])
    return bare / (events / wall)


def against(rev: str, todo: list[str], seed: int, duration_of, repeat: int) -> None:
    """Print this checkout's median ratio beside revision ``rev``'s, the pairs alternating (see the module docs)."""
    sha = subprocess.run(["git", "rev-parse", "--short", f"{rev}^{{commit}}"], cwd=REPO, capture_output=True,
                         text=True)
    if sha.returncode != 0:
        print(f"error: {rev} is not a commit of this repository; give a commit, tag or branch (git log --oneline)",
              file=sys.stderr)
        sys.exit(2)
    sha = sha.stdout.strip()
    with tempfile.TemporaryDirectory(prefix="bench-baseline-") as tmp:
        tree = Path(tmp) / sha
        subprocess.run(["git", "worktree", "add", "--detach", "-q", str(tree), sha], cwd=REPO, check=True)
        try:
            for name in todo:
                duration = duration_of(name)
                ratios: dict[str, list[float]] = {"here": [], sha: []}
                failed = None
                for _ in range(repeat):
                    for side, root in (("here", REPO), (sha, tree)):
                        ratio = pair_in(root, name, seed, duration)
                        if isinstance(ratio, str):
                            failed = f"{side}: {ratio}"
                            break
                        ratios[side].append(ratio)
                    if failed:
                        break
                if failed:
                    print(f"{name}: not compared ({failed})")
                    continue
                here, base = statistics.median(ratios["here"]), statistics.median(ratios[sha])
                print(f"{name}, {duration:g} simulated s, run folder written, median of {repeat} alternating pairs: "
                      f"this checkout 1/{here:.1f} of bare SimPy (1/{min(ratios['here']):.1f}-{max(ratios['here']):.1f}), "
                      f"{sha} 1/{base:.1f} (1/{min(ratios[sha]):.1f}-{max(ratios[sha]):.1f}); "
                      f"x{base / here:.2f} {'faster' if base >= here else 'as fast (slower)'}")
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=REPO, check=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", nargs="+", default=["tso-basics", "timetick-basics"])
    parser.add_argument("--duration", type=float, default=None,
                        help="simulated seconds per run (default: 600 for tso-basics, 60 otherwise)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=5,
                        help="pairs of bare SimPy and written run; the median ratio counts (default 5)")
    parser.add_argument("--profile", action="store_true", help="profile one written run per scenario instead")
    parser.add_argument("--top", type=int, default=25, help="rows of the profile to print (default 25)")
    parser.add_argument("--floor", action="store_true",
                        help="split each run's time into sinks, simulation and SimPy's own share instead")
    parser.add_argument("--baseline", metavar="REV",
                        help="time this checkout beside revision REV (checked out in a temporary worktree) instead")
    args = parser.parse_args()

    known = scenarios()
    todo = []
    for name in args.scenarios:
        if name in known:
            todo.append(name)
        else:
            print(f"note: scenario {name} is not registered yet; skipped")
    if args.baseline:
        against(args.baseline, todo, args.seed, lambda name: args.duration or DEFAULT_DURATION_S.get(name, 60.0),
                args.repeat)
        return
    if args.floor:
        for name in todo:
            floor(name, args.seed, args.duration or DEFAULT_DURATION_S.get(name, 60.0), max(args.repeat, 3))
        return
    if args.profile:
        for name in todo:
            duration = args.duration or DEFAULT_DURATION_S.get(name, 60.0)
            print(f"== profile of {name}, {duration:g} simulated s, run folder written")
            profile(name, args.seed, duration, args.top)
        return

    for name in todo:
        duration = args.duration or DEFAULT_DURATION_S.get(name, 60.0)
        runs = []  # (bare SimPy rate, written events/s, main CPU s, sink process CPU s, in-process events/s)
        for _ in range(args.repeat):
            bare_rate = bare_simpy_rate()
            events, wall, cpu, child = timed_run_cpu(name, args.seed, duration, write=True)
            _, home_wall, _, _ = timed_run_cpu(name, args.seed, duration, write=True, sink_process=False)
            runs.append((bare_rate, events / wall, cpu, child, events / home_wall))
        runs.sort(key=lambda run: run[0] / run[1])  # best ratio first
        bare, written, cpu, child, home = runs[(len(runs) - 1) // 2]  # the median pair (the lower one of two)
        best, worst = runs[0][0] / runs[0][1], runs[-1][0] / runs[-1][1]
        _, memory = best_rate(name, args.seed, duration, False, args.repeat)
        short = [timed_run(name, args.seed, 1.0, write=True) for _ in range(3)]
        short_events, fixed = short[0][0], min(wall for _, wall in short)
        ok = written >= TARGET_EVENTS_PER_S and written >= bare * TARGET_RATIO
        print(f"{name}: {events:,} events in {duration:g} simulated s; bare SimPy {bare:,.0f} timeouts/s; "
              f"folder written {written:,.0f} events/s (1/{bare / written:.1f} of bare, median of {len(runs)} pairs; "
              f"best 1/{best:.1f}, worst 1/{worst:.1f}; CPU: simulation "
              f"{cpu:.2f} s, sink process {child:.2f} s); sinks in process {home:,.0f} events/s "
              f"(x{written / home:.2f} with the sink process); in memory only {memory:,.0f} events/s "
              f"(1/{bare / memory:.1f}, best of {args.repeat}); a run of 1 simulated s ({short_events:,} events) takes "
              f"{fixed * 1000:.0f} ms; target (>= {TARGET_EVENTS_PER_S:,}/s and >= 1/8 of bare) "
              f"{'met' if ok else 'NOT met'}")

if __name__ == "__main__":
    main()
