"""The stepper's state panel at its narrowest, laid out by Debian's chromium: no word cut in two, nothing wider than
the panel.

The panel beside the lanes is 319 px wide in JupyterLab at 1280 x 800 with the file browser open (the width the
labs are checked at, tests/browser_support.py VIEWPORT). The panel's CSS lets a word break anywhere rather than run
past its edge, so a column too narrow shows as words cut mid-letter: at 240 px (the panel's CSS minimum) the
TimeTick panel's "last ticks" table reads "afte" / "r". Here the panels of a TimeTick run and of a run whose
checkpoint RPCs fail (the longest word a panel shows: "UpdateChannelCheckpoint") are put in a page with the
stepper's own stylesheet, each in a box of that width, and the browser says where each word of two or more letters
lies. The page declares its doctype, as JupyterLab's does: in quirks mode a table does not inherit the panel's font
size, and every TimeTick step's table cuts its words even at 319 px.
"""

from __future__ import annotations

import html
from pathlib import Path

import pytest

import milvus_edu
from browser_support import CHROMIUM, CHROMIUM_ARGS
from milvus_edu.viz.stepper import TimelineStepper

pytestmark = pytest.mark.browser

#: The state panel's width (px) in JupyterLab at 1280 x 800 with the file browser open.
NARROWEST_PANEL_PX = 319
#: Steps sampled evenly through each run, besides those the test picks for what they show.
SAMPLES = 24

#: For every panel: [its id, "overflow" and by how many px] when its content is wider than it, and [its id,
#: "cut", the word] for each word whose letters lie on more than one line.
_FIND_CUTS = r"""
() => {
  const found = [];
  for (const panel of document.querySelectorAll('.mes-panel')) {
    const id = panel.dataset.id;
    if (panel.scrollWidth > panel.clientWidth + 1) found.push([id, 'overflow', panel.scrollWidth - panel.clientWidth]);
    const walker = document.createTreeWalker(panel, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      const words = /[A-Za-z]{2,}/g;
      for (let m = words.exec(node.textContent); m; m = words.exec(node.textContent)) {
        const range = document.createRange();
        range.setStart(node, m.index);
        range.setEnd(node, m.index + m[0].length);
        const lines = new Set(Array.from(range.getClientRects()).filter(r => r.width > 0).map(r => Math.round(r.top)));
        if (lines.size > 1) found.push([id, 'cut', m[0]]);
      }
    }
  }
  return found;
}
"""


def _panels(scenario: str, duration_s: float, also_after_kind: str | None = None) -> list[tuple[str, str]]:
    """(id, panel HTML) for steps spread through a short run of ``scenario``, and each step logging ``also_after_kind``
    with an error (the panel right after it shows that error)."""
    run = milvus_edu.simulate(scenario, seed=1, duration_s=duration_s)
    stepper = TimelineStepper(run)
    n = len(stepper)
    picks = {int(n * k / SAMPLES) for k in range(SAMPLES)} | {n - 1}
    if also_after_kind is not None:
        events = run.events.reset_index(drop=True)
        failed = events.index[(events["kind"] == also_after_kind) & events["error"].notna()]
        assert len(failed), f"{scenario} logged no failed {also_after_kind} in {duration_s} s: pick another run"
        picks |= set(int(i) for i in failed[:SAMPLES])
    # the panel at each step as panel_html gives it at the cursor, without moving the cursor (a move draws the
    # widget's window of pictures: 0.3 s a step)
    out = [(f"{scenario}#{i + 1}", "".join(stepper._panel_parts(i))) for i in sorted(picks)]
    stepper.goto(max(picks))  # the same HTML as the cursor shows
    assert stepper.panel_html == out[-1][1]
    stepper.close()
    return out


def test_state_panels_cut_no_word_and_fit_at_the_narrowest_width(tmp_path):
    assert Path(CHROMIUM).exists(), f"{CHROMIUM} is missing: run `bash tests/run.sh` (apt-get install chromium)"
    from playwright.sync_api import sync_playwright

    panels = _panels("timetick-basics", 3.0) + _panels("checkpoint-rpc-failures", 20.0, "datanode.cp_rpc")
    assert any("last ticks" in body for _, body in panels) and any("UpdateChannel" in body for _, body in panels)
    css = (Path(milvus_edu.__file__).parent / "viz" / "stepper.css").read_text()
    boxes = "".join(
        f"<div class='mes-root'><div class='mes-panel' data-id='{html.escape(ident)}' "
        f"style='width: {NARROWEST_PANEL_PX}px; max-width: {NARROWEST_PANEL_PX}px; flex: none'>{body}</div></div>"
        for ident, body in panels)
    page_path = tmp_path / "panels.html"
    page_path.write_text(f"<!doctype html><html><head><meta charset='utf-8'><style>{css}</style></head>"
                         f"<body>{boxes}</body></html>", encoding="utf-8")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.goto(page_path.as_uri())
            found = page.evaluate(_FIND_CUTS)
            laid_out = page.evaluate("() => document.querySelectorAll('.mes-panel table').length")
        finally:
            browser.close()
    assert laid_out >= len(panels)
    assert found == [], f"{len(found)} of {len(panels)} panels' words cut or overflowing, e.g. {found[:8]}"
