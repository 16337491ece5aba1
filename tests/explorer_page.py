"""The explorer's JavaScript in a bare page: explorer.js rendered against a stand-in widget model that holds an
:class:`~milvus_edu.explorer.Explorer`'s traits, its messages to the kernel collected in ``window.__sent`` and the
kernel's answers delivered by the caller (``window.__deliver``). Used by tests/test_explorer_js.py and
benchmarks/bench_explorer.py; no JupyterLab (the browser test in tests/test_explorer_browser.py runs the real one).
"""

from __future__ import annotations

import base64
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
EXPLORER_JS = REPO_ROOT / "milvus_edu" / "explorer" / "explorer.js"
EXPLORER_CSS = REPO_ROOT / "milvus_edu" / "explorer" / "explorer.css"

#: Render explorer.js into #root with a stand-in model; resolves to the milliseconds render() took (the arrays'
#: views, the derived indexes, the first picture and panel).
STAND_IN_JS = """async ({js, traits, arrays}) => {
  const s = atob(arrays); const a = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) a[i] = s.charCodeAt(i);
  const state = {...traits, arrays: new DataView(a.buffer)};
  const handlers = {};
  window.__sent = [];
  window.__deliver = (content) => (handlers['msg:custom'] || []).forEach((cb) => cb(content, []));
  window.__set = (k, v) => { state[k] = v; (handlers['change:' + k] || []).forEach((cb) => cb()); };
  const model = {get: (k) => state[k], set: (k, v) => { state[k] = v; }, save_changes() {},
                 on(ev, cb) { (handlers[ev] = handlers[ev] || []).push(cb); }, off() {},
                 send(m) { window.__sent.push(m); }};
  window.__model = model;
  const mod = await import(URL.createObjectURL(new Blob([js], {type: 'text/javascript'})));
  window.__mod = mod;
  const t = performance.now();
  mod.default.render({model, el: document.getElementById('root')});
  return performance.now() - t;
}"""


def traits(explorer) -> tuple[dict, str]:
    """The explorer's synced traits as the stand-in model holds them, and its arrays as base64."""
    v = explorer.view
    plain = {"meta": v.meta, "cursor": v.cursor, "anchor": v.anchor, "span_ms": v.span_ms,
             "hidden_lanes": list(v.hidden_lanes), "hidden_kinds": list(v.hidden_kinds), "channel": v.channel,
             "message": v.message}
    return plain, base64.b64encode(v.arrays).decode()


def open_bare(page, explorer, width: int = 1000) -> float:
    """Render the explorer's JavaScript in ``page`` (a Playwright page) inside a box ``width`` px wide (JupyterLab's
    output area at 1280 x 800 with the file browser open); returns render()'s milliseconds."""
    css = EXPLORER_CSS.read_text(encoding="utf-8")
    page.set_content(f"<!DOCTYPE html><html><head><style>{css}</style></head><body>"
                     f"<div id='root' style='width:{width}px'></div></body></html>")
    plain, arrays = traits(explorer)
    return page.evaluate(STAND_IN_JS, {"js": EXPLORER_JS.read_text(encoding="utf-8"), "traits": plain,
                                       "arrays": arrays})
