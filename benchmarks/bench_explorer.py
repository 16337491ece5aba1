"""The explorer at 100,000 and 1,000,000 events: the kernel's cost of the payload, the browser's first draw and the
latency of a step, a scrub and a zoom to the whole run.

The runs: ``tsafe-stall-proxy-restart`` (its kill, restart and stall) with seeds 1, 2, ... one after another in
time until there are ~100,000 events; that log ten times over for ~1,000,000. The browser side is explorer.js in a
plain page of Debian's chromium at 1280 x 800 (tests/explorer_page.py: the widget's JavaScript and CSS against a
stand-in model holding the same traits a JupyterLab kernel sends), so the figures leave out the websocket transfer
(the payload's size is printed) and JupyterLab's own work. Times in the page are ``performance.now()`` around the
widget's handlers, then to the next animation frame (the paint the learner sees). Prints figures only.

``--jupyterlab`` measures the same in a real JupyterLab instead (tests/browser_support.py's server, Debian's
chromium at 1280 x 800): each log is written as a run folder, a notebook cell runs ``milvus_edu.explore(folder)``,
and the first draw is the time from Run All to the widget's panel showing event 1, so it holds the kernel's
loading and payload, the websocket transfer and the widget's render, all that a learner waits for.

    python benchmarks/bench_explorer.py [--sizes 100000 1000000] [--steps 200] [--jupyterlab]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's milvus_edu
sys.path.insert(0, str(ROOT / "tests"))  # the stand-in page

import pandas as pd  # noqa: E402

import milvus_edu  # noqa: E402
from milvus_edu.explorer import Explorer, build_payload  # noqa: E402

SCENARIO = "tsafe-stall-proxy-restart"

# In the page: each click's handler time, and the time to the next frame after it.
_CLICKS_JS = """async ([selector, count]) => {
  const button = document.querySelector(selector);
  const handler = [], frame = [];
  for (let k = 0; k < count; k++) {
    const t = performance.now();
    button.click();
    handler.push(performance.now() - t);
    await new Promise((r) => requestAnimationFrame(() => r()));
    frame.push(performance.now() - t);
  }
  return [handler, frame];
}"""
_SCRUB_JS = """async ([count, n]) => {
  const slider = document.querySelector('.mex-slider');
  const handler = [], frame = [];
  let x = 12345;
  for (let k = 0; k < count; k++) {
    x = (x * 1103515245 + 12345) % 2147483648;
    const t = performance.now();
    slider.value = String(1 + (x % n)); slider.dispatchEvent(new Event('input'));
    handler.push(performance.now() - t);
    await new Promise((r) => requestAnimationFrame(() => r()));
    frame.push(performance.now() - t);
  }
  return [handler, frame];
}"""


def concatenated(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Run logs one after another: times shifted past the previous log's end, ``seq`` numbered on."""
    out, shift, seq = [], 0.0, 0
    for frame in frames:
        f = frame.copy()
        f["t_ms"] = f["t_ms"] + shift
        f["seq"] = range(seq, seq + len(f))
        shift = float(f["t_ms"].iloc[-1]) + 1.0
        seq += len(f)
        out.append(f)
    return pd.concat(out, ignore_index=True)


def logs(sizes: list[int]) -> dict[int, pd.DataFrame]:
    base, seed = [], 1
    while sum(len(f) for f in base) < min(sizes):
        base.append(milvus_edu.simulate(SCENARIO, seed=seed).events)
        seed += 1
    first = concatenated(base)
    out = {}
    for size in sizes:
        copies = max(1, round(size / len(first)))
        out[size] = first if copies == 1 else concatenated([first] * copies)
    return out


def pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def line(name, pair):
    handler, frame = pair
    return (f"  {name:<22} handler median {statistics.median(handler):6.2f} ms p95 {pct(handler, 0.95):6.2f} ms; "
            f"to next frame median {statistics.median(frame):6.2f} ms p95 {pct(frame, 0.95):6.2f} ms")


def in_jupyterlab(frames: dict[int, pd.DataFrame], steps: int) -> None:
    """First draw and step latency of the explorer in a real JupyterLab, one notebook per log size."""
    import json
    import tempfile

    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook
    from playwright.sync_api import sync_playwright

    from browser_support import (JupyterLabServer, _kill_own_descendants_matching, _run_all_cells, _wait_for,
                                 _wait_kernel_idle, launch_chromium)
    import pyarrow as pa
    import pyarrow.parquet as pq

    from milvus_edu.events.schema import arrow_schema

    work = Path(tempfile.mkdtemp(prefix="bench-explorer-"))
    root = work / "lab"
    root.mkdir()
    for size, frame in frames.items():
        folder = root / f"run-{size}"
        folder.mkdir()
        schema = arrow_schema()
        pq.write_table(pa.Table.from_pandas(frame[schema.names], schema=schema, preserve_index=False),
                       folder / "events.parquet")
        (folder / "summary.json").write_text(json.dumps({"checks": {}}), encoding="utf-8")
        nb = new_notebook(cells=[new_code_cell(f"import milvus_edu\nex = milvus_edu.explore({folder.name!r})\nex")],
                          metadata={"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python",
                                                   "name": "python3"}})
        nbformat.write(nb, str(root / f"explore-{size}.ipynb"))
    with JupyterLabServer(root_dir=root, work_dir=work / "state") as server, sync_playwright() as pw:
        context = launch_chromium(pw, (work / "profile").resolve())
        try:
            for size, frame in frames.items():
                page = context.new_page()
                page.set_default_timeout(120_000)
                page.goto(server.lab_url(f"explore-{size}.ipynb"), wait_until="domcontentloaded", timeout=60_000)
                page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell").first.wait_for(timeout=60_000)
                _wait_kernel_idle(page, 60)
                t = time.perf_counter()
                _run_all_cells(page)
                head = page.locator(".jp-OutputArea-output .mex-root .mex-state .mex-head").first
                _wait_for(lambda: head.count() and head.inner_text().startswith("event 1 of "), 600,
                          "the explorer's first draw")
                first_s = time.perf_counter() - t
                print(f"{len(frame):,} events in JupyterLab: first draw {first_s:.2f} s after Run All (the kernel "
                      f"loads the folder and builds the payload, the websocket carries it, the widget renders)")
                print(line("step forward", page.evaluate(_CLICKS_JS, [".mex-fwd", steps])))
                print(line("step back", page.evaluate(_CLICKS_JS, [".mex-back", steps])))
                print(line("scrub (random event)", page.evaluate(_SCRUB_JS, [max(steps // 4, 10), len(frame)])))
                page.close()
        finally:
            context.close()
            _kill_own_descendants_matching(str((work / "profile").resolve()))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--jupyterlab", action="store_true", help="measure in a real JupyterLab instead of a bare page")
    args = ap.parse_args(argv)
    if args.jupyterlab:
        t = time.perf_counter()
        frames = logs(args.sizes)
        print(f"simulated and joined the logs in {time.perf_counter() - t:.1f} s")
        in_jupyterlab(frames, args.steps)
        return 0

    from playwright.sync_api import sync_playwright

    from explorer_page import open_bare

    t = time.perf_counter()
    frames = logs(args.sizes)
    print(f"simulated and joined the logs in {time.perf_counter() - t:.1f} s")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", headless=True,
                                     args=["--no-sandbox", "--disable-gpu"])
        try:
            for size, frame in frames.items():
                n = len(frame)
                t = time.perf_counter()
                payload = build_payload(frame)
                data, _ = payload.pack()
                build_s = time.perf_counter() - t
                t = time.perf_counter()
                # as a run result opens it: the summary comes with the run (the joined logs have none, and running
                # the checkers over a log is the checkers' cost, not the explorer's)
                ex = Explorer(SimpleNamespace(events=frame, summary={"checks": {}}))
                total_s = time.perf_counter() - t
                print(f"{n:,} events ({len(payload.arrays['fsend']):,} messages, {len(payload.arrays['cseq']):,} "
                      f"watermark points, {len(payload.arrays['sbegin']):,} requests):")
                print(f"  kernel: payload built and packed in {build_s:.2f} s ({len(data) / 1e6:.1f} MB); the "
                      f"whole Explorer (payload, widget, first traits) in {total_s:.2f} s")
                page = browser.new_page(viewport={"width": 1280, "height": 800})
                first = open_bare(page, ex)
                print(f"  browser: first draw {first:.0f} ms (arrays' views, lane index, the picture and the panel)")
                print(line("step forward", page.evaluate(_CLICKS_JS, [".mex-fwd", args.steps])))
                print(line("step back", page.evaluate(_CLICKS_JS, [".mex-back", args.steps])))
                print(line("scrub (random event)", page.evaluate(_SCRUB_JS, [max(args.steps // 4, 10), n])))
                print(line("zoom to the whole run", page.evaluate(_CLICKS_JS, [".mex-zoom-all", 3])))
                print(line("step, whole run shown", page.evaluate(_CLICKS_JS, [".mex-fwd", max(args.steps // 4, 10)])))
                page.close()
        finally:
            browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
