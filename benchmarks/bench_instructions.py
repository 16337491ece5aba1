"""Instructions per logged event of the simulation, counted by valgrind: a speed figure that does not move
with the machine's load.

Timed runs on a shared 2-core VM vary by 20% from one minute to the next, which hides any change smaller
than that; the number of machine instructions a run executes varies by less than 0.01%. For each
scenario this runs the simulation alone (the scenario, its recorder, and a batch sink that drops every
batch: no files, no checkers, no sink process) under ``valgrind --tool=cachegrind`` for two durations,
and prints the instructions of the longer run minus the shorter one per event logged in between, so
start-up (imports, building the cluster) cancels out. The same count for bare SimPy's ``env.timeout``
loop is the yardstick (``bench_sim.py``'s, in instructions).

Fewer instructions is not the whole of speed, but a change that removes 1% of them is seen as such.
``--misses`` adds what else a logged event costs: cachegrind's simulated level-1 data and instruction cache
misses, last-level data misses and branch mispredictions, per event and as a multiple of bare SimPy's per timeout
where that is at least one (about three times slower to run). That is where a wall-time ratio and an instruction
ratio part. On 2026-11-27 (``--scenarios flush-basics insert-then-search --misses``), per logged event against bare
SimPy's per timeout: flush-basics 7.9 times the instructions, but 1,201 L1 data misses against 30, 10 times the
instruction-cache misses and 9.2 times the mispredictions; insert-then-search 9.7 times the instructions, 1,575 L1
data misses, 17 and 13.5 times. Bare SimPy's loop is a few lines of code on four objects, which stay in the caches
and predict well; a run's event passes through many functions and objects. So a run's wall-time ratio to bare SimPy
is two to three times its instruction ratio: that evening ``bench_sim.py --floor`` gave the simulations alone (the
runs counted here) 1/15.6 and 1/23.3, against 1/7.9 and 1/9.7 in instructions.

Needs ``valgrind`` on the PATH (Debian: ``apt-get install valgrind``); prints a one-line note and exits 2 without
it. Prints figures only. Run from the repo root:
``python benchmarks/bench_instructions.py [--scenarios timetick-basics tso-basics] [--seconds 1 5] [--misses]``.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Run in the child under valgrind: argv = scenario, simulated seconds (or "simpy", timeouts).
_CHILD = r"""
import sys
sys.path.insert(0, sys.argv[3])
if sys.argv[1] == "simpy":
    import simpy
    env = simpy.Environment()
    def loop(n):
        for _ in range(n):
            yield env.timeout(1)
    for _ in range(4):
        env.process(loop(int(sys.argv[2]) // 4))
    env.run()
    print(int(sys.argv[2]) // 4 * 4)
else:
    from milvus_edu.config import Config
    from milvus_edu.events import Recorder
    from milvus_edu.sim import run as RUN
    from milvus_edu.sim.collector import collector_paused
    from milvus_edu.sim.kernel import Simulation

    class Drop:
        def write_batch(self, batch):
            pass

        def close(self):
            pass

    spec = RUN.get_scenario(sys.argv[1])
    recorder = Recorder("bench", sinks=[Drop()])
    sim = Simulation(1, recorder, Config())
    spec.build(sim, **RUN.scenario_options(spec, None))
    recorder.emit("run.start", "sim")
    with collector_paused():
        sim.run(float(sys.argv[2]) * 1000.0)
    recorder.close()
    print(recorder.seq)
"""


#: The counters :func:`counts` reads from cachegrind's summary (the instructions always, the rest with ``--misses``):
#: the name printed here, and cachegrind's own label.
COUNTERS = {
    "instructions": "I refs",
    "L1 data misses": "D1 misses",
    "L1 instruction misses": "I1 misses",
    "last-level data misses": "LLd misses",
    "branch mispredictions": "Mispredicts",
}


def counts(what: str, amount: float, misses: bool = False) -> tuple[dict[str, int], int]:
    """(cachegrind's counters, events logged or timeouts) of one child run: the instructions executed, and with
    ``misses`` the simulated cache misses and branch mispredictions too (:data:`COUNTERS`)."""
    env = {**os.environ, "PYTHONHASHSEED": "0", "ARROW_DEFAULT_MEMORY_POOL": "system", "OMP_NUM_THREADS": "1"}
    sim = "yes" if misses else "no"
    cmd = ["valgrind", "--tool=cachegrind", f"--cache-sim={sim}", f"--branch-sim={sim}",
           "--cachegrind-out-file=/dev/null", sys.executable, "-c", _CHILD, what, str(amount), str(ROOT)]
    if shutil.which("setarch"):  # the same addresses every run: the allocator's work does not vary
        cmd = ["setarch", "-R", *cmd]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    found = {}
    for name, label in COUNTERS.items():
        match = re.search(r"\s+".join(map(re.escape, label.split())) + r":\s+([\d,]+)", done.stderr)
        if match is not None:
            found[name] = int(match.group(1).replace(",", ""))
    if done.returncode != 0 or "instructions" not in found or (misses and len(found) != len(COUNTERS)):
        raise SystemExit(f"valgrind run of {what} failed: {done.stderr.strip().splitlines()[-1:]}")
    return found, int(done.stdout.split()[-1])


def per_unit(short: tuple[dict[str, int], int], long_: tuple[dict[str, int], int]) -> dict[str, float]:
    """Each counter of the longer run minus the shorter one, per event (or timeout) in between."""
    (a, n_a), (b, n_b) = short, long_
    return {name: (b[name] - a[name]) / (n_b - n_a) for name in b}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenarios", nargs="+", default=["timetick-basics", "tso-basics"])
    parser.add_argument("--seconds", nargs=2, type=float, default=None, metavar=("SHORT", "LONG"),
                        help="simulated seconds of the two runs (default: 1 and 5 for timetick-basics, "
                             "10 and 60 for the others)")
    parser.add_argument("--misses", action="store_true",
                        help="also count cache misses and branch mispredictions per event (about 3x slower)")
    args = parser.parse_args(argv)
    if shutil.which("valgrind") is None:
        print("valgrind is not installed; install it (Debian: apt-get install valgrind) to count instructions")
        return 2
    bare = per_unit(counts("simpy", 40_000, args.misses), counts("simpy", 200_000, args.misses))
    per_timeout = bare["instructions"]
    print(f"bare SimPy: {per_timeout:,.0f} instructions per timeout")
    if args.misses:
        print("  " + ", ".join(f"{max(value, 0):,.0f} {name}" for name, value in bare.items() if name != "instructions"))
    for scenario in args.scenarios:
        short, long_ = args.seconds or ((1.0, 5.0) if scenario.startswith("timetick") else (10.0, 60.0))
        (found_a, ev_a), (found_b, ev_b) = counts(scenario, short, args.misses), counts(scenario, long_, args.misses)
        event = per_unit((found_a, ev_a), (found_b, ev_b))
        per_event = event["instructions"]
        print(f"{scenario}: {per_event:,.0f} instructions per logged event ({ev_b - ev_a:,} events between "
              f"{short:g} and {long_:g} simulated s; {per_event / per_timeout:.2f} bare-SimPy timeouts each)")
        if args.misses:
            print("  " + ", ".join(f"{value:,.0f} {name} ({value / bare[name]:.1f}x bare SimPy's per timeout)"
                                   if bare[name] >= 1 else f"{value:,.0f} {name}"
                                   for name, value in event.items() if name != "instructions"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
