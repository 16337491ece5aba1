"""Speed of the timeline stepper: milliseconds per step on a run of 10,000+ events.

One step is ``TimelineStepper.step_forward()``: the cursor moves, the state panel's HTML is rebuilt,
the cached background is restored, the cursor artists are blitted and the picture is encoded as PNG
and assigned to the ``ipywidgets.Image`` (what goes to the front end). Prints figures; asserts nothing.

    python benchmarks/bench_stepper.py [--steps 300] [--duration-s 400]
    python benchmarks/bench_stepper.py --scenario timetick-basics --duration-s 9   # about 100,000 events
"""

from __future__ import annotations

import argparse
import statistics
import time

import milvus_edu
from milvus_edu.viz import TimelineStepper


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", default="tso-failover")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--duration-s", type=float, default=400.0)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--start", type=int, default=None, help="first cursor (default: a few steps before the kill)")
    args = ap.parse_args()

    t0 = time.perf_counter()
    run = milvus_edu.simulate(args.scenario, args.seed, duration_s=args.duration_s)
    events = run.events
    t1 = time.perf_counter()
    st = TimelineStepper(events)
    t2 = time.perf_counter()
    n = len(events)
    start = args.start
    if start is None:
        kill = st.index.next_of_kind("fault.kill", -1)
        start = max(0, (kill if kill is not None else n // 2) - args.steps // 2)
    st.goto(start)

    times = []
    for _ in range(args.steps):
        a = time.perf_counter()
        st.step_forward()
        _ = st.image.value  # the bytes the front end receives
        times.append((time.perf_counter() - a) * 1000.0)
    times.sort()
    p95 = times[min(len(times) - 1, int(round(0.95 * (len(times) - 1))))]
    w, h = st._renderer.size_px
    print(f"scenario {args.scenario} seed {args.seed} duration {args.duration_s:g} s: {n:,} events")
    print(f"simulate {1000 * (t1 - t0):.0f} ms, build stepper {1000 * (t2 - t1):.0f} ms, image {w}x{h} px, "
          f"{len(st.image.value) / 1024:.0f} KiB PNG")
    print(f"step_forward over {len(times)} steps from event {start}: median {statistics.median(times):.1f} ms, "
          f"p95 {p95:.1f} ms, max {times[-1]:.1f} ms")


if __name__ == "__main__":
    main()
