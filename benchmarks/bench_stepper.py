"""Speed of the timeline stepper at 100,000 and 1,000,000 events: first draw, kernel window, browser step.

What is measured (prints figures; asserts nothing):

* **first draw**: ``TimelineStepper(events)`` from a run log in memory to a widget ready to display:
  the per-event index and panels, every lane set up and the background drawn once, every event's
  time and kind packed for the browser, and a short first window of events built (the browser asks
  for a full one at once). Also the bytes the browser receives for it.
* **kernel window**: ``window_payload`` for 512 events around a random cursor (what the kernel sends
  when the browser nears the edge of the events it holds; served when the kernel is free).
* **kernel answer to a scrub**: the browser's slider went to a random event it holds nothing for; the
  kernel's answer (``TimelineStepper.answer``: a short window, sent at once, then the page's picture
  if new), then its answer to the request that follows for the full window around the same event.
  The first message is the kernel's part of the time from a scrub to a filled panel;
  ``tests/test_browser.py`` prints the whole of it in a real JupyterLab ("details after ... ms").
* **browser step** (``--browser``, needs Debian's chromium and Playwright; never ``playwright
  install``): the real ``stepper.js`` in headless chromium on the data above, through a stand-in for
  the widget model (no kernel). One step = a click on "Step ▶" until the panel's HTML and the cursor
  overlay are redrawn and the layout is computed (``performance.now()`` around the synchronous click
  handler plus a forced layout). This is what a learner waits for after a click, busy kernel or not.

    python benchmarks/bench_stepper.py --events 100000 --browser
    python benchmarks/bench_stepper.py --events 1000000 --browser
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import statistics
import time
from pathlib import Path

import milvus_edu
from milvus_edu.viz import TimelineStepper

CHROMIUM = "/usr/bin/chromium"
JS = Path(milvus_edu.__file__).parent / "viz" / "stepper.js"
CSS = JS.with_suffix(".css")


def _p95(values: list[float]) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(0.95 * (len(s) - 1))))]


def _events(scenario: str, seed: int, target: int):
    """A run of about ``target`` events: the scenario's length scaled from a short calibration run."""
    duration = float(milvus_edu.simulate(scenario, seed).summary["duration_s"])
    for _ in range(3):  # the rate is not constant (a failover pauses allocations): correct twice
        probe = milvus_edu.simulate(scenario, seed, duration_s=duration, keep_events=False)
        count = int(probe.summary["events"])
        if abs(count - target) <= 0.05 * target:
            break
        duration = max(duration * target / count, 1.0)
    return milvus_edu.simulate(scenario, seed, duration_s=duration).events


_PAGE_JS = """async ({js, css, traits, steps, scrubs}) => {
  const style = document.createElement('style'); style.textContent = css; document.head.appendChild(style);
  const bytes = (b64) => { const s = atob(b64); const a = new Uint8Array(s.length);
    for (let i = 0; i < s.length; i++) a[i] = s.charCodeAt(i); return new DataView(a.buffer); };
  const state = {...traits, times: bytes(traits.times), kind_codes: bytes(traits.kind_codes),
                 window: bytes(traits.window), backgrounds: {}};
  for (const [k, v] of Object.entries(traits.backgrounds)) state.backgrounds[k] = bytes(v);
  const model = {get: (k) => state[k], set: (k, v) => { state[k] = v; }, save_changes() {},
                 on() {}, off() {}, send(m) { window.__wants = (window.__wants || 0) + 1; }};
  const mod = await import(URL.createObjectURL(new Blob([js], {type: 'text/javascript'})));
  const root = document.getElementById('root');
  const t0 = performance.now();
  mod.default.render({model, el: root});
  root.offsetHeight;
  const firstRender = performance.now() - t0;
  await new Promise((r) => setTimeout(r, 300));
  const fwd = root.querySelector('button[title="step forward"]');
  const panel = root.querySelector('.milvus-edu-state');
  const stepMs = [];
  for (let k = 0; k < steps; k++) {
    const before = panel.innerHTML;
    const a = performance.now();
    fwd.click();
    root.offsetHeight;
    stepMs.push(performance.now() - a);
    if (panel.innerHTML === before) throw new Error('the panel did not change at step ' + k);
  }
  const slider = root.querySelector('input[type=range]');
  const scrubMs = [];
  for (const v of scrubs) {
    const a = performance.now();
    slider.value = String(v); slider.dispatchEvent(new Event('input'));
    root.offsetHeight;
    scrubMs.push(performance.now() - a);
  }
  return {firstRender, stepMs, scrubMs, wants: window.__wants || 0, text: panel.innerText.slice(0, 80)};
}"""


def browser_steps(st: TimelineStepper, steps: int) -> dict:
    """Step and scrub in headless chromium with the real stepper.js (see the module docstring)."""
    from playwright.sync_api import sync_playwright

    v = st.widget
    win = json.loads(v.window)
    rnd = random.Random(1)
    scrubs = [rnd.randrange(win["start"] + 1, win["end"] + 1) for _ in range(steps)]  # slider values, 1-based
    traits = {
        "n": v.n, "title": v.title, "kind_names": v.kind_names, "geometry": v.geometry, "margin": v.margin,
        "cursor": v.cursor, "jump_kind": v.jump_kind, "speeds": v.speeds, "speed": v.speed, "message": "",
        "times": base64.b64encode(v.times).decode(), "kind_codes": base64.b64encode(v.kind_codes).decode(),
        "window": base64.b64encode(v.window).decode(),
        "backgrounds": {k: base64.b64encode(b).decode() for k, b in v.backgrounds.items()},
    }
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                     args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.set_content("<html><body><div id='root'></div></body></html>")
            return page.evaluate(_PAGE_JS, {"js": JS.read_text(), "css": CSS.read_text(), "traits": traits,
                                            "steps": steps, "scrubs": scrubs})
        finally:
            browser.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", default="tso-failover")
    ap.add_argument("--window-s", type=float, default=None, help="pages of this many seconds (as labs 2-4)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--events", type=int, default=100_000, help="about how many events the run has")
    ap.add_argument("--windows", type=int, default=20, help="kernel windows to time")
    ap.add_argument("--steps", type=int, default=300, help="browser steps (and scrubs) to time")
    ap.add_argument("--browser", action="store_true", help="also time steps in headless chromium")
    args = ap.parse_args()

    t0 = time.perf_counter()
    events = _events(args.scenario, args.seed, args.events)
    t1 = time.perf_counter()
    st = TimelineStepper(events, window_s=args.window_s)
    t2 = time.perf_counter()
    v = st.widget
    n = len(events)
    sent = len(v.times) + len(v.kind_codes) + len(v.window) + sum(len(b) for b in v.backgrounds.values())
    print(f"scenario {args.scenario} seed {args.seed}: {n:,} events (simulated in {t1 - t0:.1f} s)")
    print(f"first draw: TimelineStepper(events) {t2 - t1:.2f} s; sent to the browser {sent / 2**20:.1f} MiB "
          f"(times {len(v.times) / 2**20:.1f}, kinds {len(v.kind_codes) / 2**20:.1f}, background "
          f"{sum(len(b) for b in v.backgrounds.values()) / 1024:.0f} KiB, first window {len(v.window) / 1024:.0f} KiB)")

    rnd = random.Random(args.seed)
    times, sizes = [], []
    for _ in range(args.windows):
        c = rnd.randrange(n)
        start = max(0, min(c - 96, n - 512))
        a = time.perf_counter()
        payload, _pages = st.window_payload(start, min(n, start + 512))
        times.append((time.perf_counter() - a) * 1000)
        sizes.append(len(payload))
    print(f"kernel window (512 events around a random cursor, {args.windows} times): median "
          f"{statistics.median(times):.0f} ms, p95 {_p95(times):.0f} ms, {statistics.median(sizes) / 1024:.0f} KiB")

    # The first message of an answer fills the panel; the page's picture follows in a second one.
    sent = []

    def send(content, buffers=None):
        sent.append((content["type"], time.perf_counter()))

    st.view.send = send
    quick, panel, full = [], [], []
    for req in range(args.windows):
        c = rnd.randrange(n)
        a = time.perf_counter()
        sent.clear()
        h = st.answer({"req": 2 * req, "cursor": c, "have": None, "pages": []})
        b = time.perf_counter()
        panel.append((sent[0][1] - a) * 1000)
        st.answer({"req": 2 * req + 1, "cursor": c, "have": [h["start"], h["end"]], "pages": h["pictures_follow"]})
        quick.append((b - a) * 1000)
        full.append((time.perf_counter() - b) * 1000)
    print(f"kernel answer to a scrub ({args.windows} random events): panel sent after median "
          f"{statistics.median(panel):.0f} ms, p95 {_p95(panel):.0f} ms; with the page's picture median "
          f"{statistics.median(quick):.0f} ms, p95 {_p95(quick):.0f} ms; then the full window median "
          f"{statistics.median(full):.0f} ms, p95 {_p95(full):.0f} ms")
    del st.view.send

    if args.browser:
        # What the browser asks for right after the first draw (its first window is short on purpose).
        st._fill_window(0)
        r = browser_steps(st, args.steps)
        steps, scrubs = r["stepMs"], r["scrubMs"]
        print(f"browser: first render {r['firstRender']:.0f} ms; step ({len(steps)} clicks on Step ▶) median "
              f"{statistics.median(steps):.1f} ms, p95 {_p95(steps):.1f} ms, max {max(steps):.1f} ms; scrub "
              f"(slider to a random event of the window) median {statistics.median(scrubs):.1f} ms, p95 "
              f"{_p95(scrubs):.1f} ms; window requests sent {r['wants']}")


if __name__ == "__main__":
    main()
