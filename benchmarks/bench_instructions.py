"""Instructions per logged event of the simulation, counted by valgrind: a speed figure that does not move
with the machine's load.

Timed runs on a shared 2-core VM vary by 20% from one minute to the next, which hides any change smaller
than that; the number of machine instructions a run executes varies by less than 0.01%. For each
scenario this runs the simulation alone (the scenario, its recorder, and a batch sink that drops every
batch: no files, no checkers, no sink process) under ``valgrind --tool=cachegrind`` for two durations,
and prints the instructions of the longer run minus the shorter one per event logged in between, so
start-up (imports, building the cluster) cancels out. The same count for bare SimPy's ``env.timeout``
loop is the yardstick (``bench_sim.py``'s, in instructions).

Fewer instructions is not the whole of speed (cache misses are not counted), but a change that removes
1% of them is seen as such. Needs ``valgrind`` on the PATH (Debian: ``apt-get install valgrind``); prints a
one-line note and exits 2 without it. Prints figures only. Run from the repo root:
``python benchmarks/bench_instructions.py [--scenarios timetick-basics tso-basics] [--seconds 1 5]``.
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


def instructions(what: str, amount: float) -> tuple[int, int]:
    """(instructions executed, events logged or timeouts) of one child run under cachegrind."""
    env = {**os.environ, "PYTHONHASHSEED": "0", "ARROW_DEFAULT_MEMORY_POOL": "system", "OMP_NUM_THREADS": "1"}
    cmd = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
           sys.executable, "-c", _CHILD, what, str(amount), str(ROOT)]
    if shutil.which("setarch"):  # the same addresses every run: the allocator's work does not vary
        cmd = ["setarch", "-R", *cmd]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    found = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"valgrind run of {what} failed: {done.stderr.strip().splitlines()[-1:]}")
    return int(found.group(1).replace(",", "")), int(done.stdout.split()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenarios", nargs="+", default=["timetick-basics", "tso-basics"])
    parser.add_argument("--seconds", nargs=2, type=float, default=None, metavar=("SHORT", "LONG"),
                        help="simulated seconds of the two runs (default: 1 and 5 for timetick-basics, "
                             "10 and 60 for the others)")
    args = parser.parse_args(argv)
    if shutil.which("valgrind") is None:
        print("valgrind is not installed; install it (Debian: apt-get install valgrind) to count instructions")
        return 2
    low, high = (ir for ir, _ in (instructions("simpy", 40_000), instructions("simpy", 200_000)))
    per_timeout = (high - low) / 160_000
    print(f"bare SimPy: {per_timeout:,.0f} instructions per timeout")
    for scenario in args.scenarios:
        short, long_ = args.seconds or ((1.0, 5.0) if scenario.startswith("timetick") else (10.0, 60.0))
        (ir_a, ev_a), (ir_b, ev_b) = instructions(scenario, short), instructions(scenario, long_)
        per_event = (ir_b - ir_a) / (ev_b - ev_a)
        print(f"{scenario}: {per_event:,.0f} instructions per logged event ({ev_b - ev_a:,} events between "
              f"{short:g} and {long_:g} simulated s; {per_event / per_timeout:.2f} bare-SimPy timeouts each)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
