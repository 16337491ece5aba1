// The explorer's browser side (see milvus_edu/explorer/view.py and explorer.py).
// The run arrives once as column arrays (meta.layout says where each lies in `arrays`); everything a click
// needs is computed here from them: the space-time diagram and the watermark tracks of the visible time window
// (drawn once per window into a background canvas, so a step only draws the cursor over it), the state panel
// (binary searches per lane and per track), jumps, filters and the causal past of an event. The kernel is asked
// only for words: an event's or request's details, a "Why?" chain, a fork.

const NUM = new Intl.NumberFormat("en-US");
const TYPES = { f8: Float64Array, u4: Uint32Array, i4: Int32Array, u2: Uint16Array, u1: Uint8Array };
const SPEEDS = [["5 events/s", 5], ["25 events/s", 25], ["100 events/s", 100], ["500 events/s", 500],
                ["2,000 events/s", 2000], ["10,000 events/s", 10000]];
const LABEL_W = 146;   // px of lane labels on the left: "checkpoint dml_0_100v0" and "TSO saved window end" whole
const AXIS_H = 16;     // px of the time axis on top
const LANE_H = 17;     // px per component or pchannel lane
const TRACK_H = 22;    // px per watermark track
const GAP = 10;        // px between the diagram and the tracks
const MAX_ARROWS = 6000; // messages drawn in one window at most (zoom in for the rest)
const HIT_PX = 6;      // how near a click must be to an event or an arrow

// el and asBytes are also in viz/stepper.js: anywidget loads each widget as one self-contained ES module (no bundler,
// no sibling imports), so the two widgets cannot share a file.
function el(tag, attrs = {}, children = []) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = v;
    else e.setAttribute(k, v);
  }
  for (const c of children) e.appendChild(c);
  return e;
}

function asBytes(v) {
  if (!v) return new Uint8Array(0);
  if (v instanceof DataView) return new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
  if (v instanceof ArrayBuffer) return new Uint8Array(v);
  if (ArrayBuffer.isView(v)) return new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
  return new Uint8Array(0);
}

function escapeHtml(s) {
  return String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}

// Last index i in [lo, hi) with key(i) <= x, or lo - 1.
function lastAtMost(key, lo, hi, x) {
  let a = lo, b = hi;
  while (a < b) { const m = (a + b) >> 1; if (key(m) <= x) a = m + 1; else b = m; }
  return a - 1;
}

// A kind's colour: by the component its name starts with, faults red.
const FAMILY = { client: "#1f77b4", proxy: "#2ca02c", rootcoord: "#9467bd", tso: "#8c564b", mq: "#ff7f0e",
                 datanode: "#17becf", datacoord: "#0b7285", querynode: "#d6336c", session: "#7f7f7f",
                 fault: "#d62728", run: "#999999" };
function kindColor(kind) { return FAMILY[kind.split(".")[0]] || "#555555"; }

// The run's arrays and what is derived from them once.
export function loadRun(meta, bytes) {
  const raw = asBytes(bytes);
  const buf = new ArrayBuffer(raw.length + 8);
  new Uint8Array(buf).set(raw);
  const A = {};
  for (const [name, [code, off, len]] of Object.entries(meta.layout)) A[name] = new TYPES[code](buf, off, len);
  const n = meta.n;
  const nl = meta.lanes.length;
  // events of each lane, in order (a counting sort by lane)
  const counts = new Int32Array(nl + 1);
  for (let i = 0; i < n; i++) counts[A.lane[i] + 1]++;
  for (let k = 0; k < nl; k++) counts[k + 1] += counts[k];
  const laneEvents = new Int32Array(n);
  const fill = counts.slice(0, nl);
  for (let i = 0; i < n; i++) laneEvents[fill[A.lane[i]]++] = i;
  const laneOf = {};
  meta.lanes.forEach((name, k) => { laneOf[meta.lane_full[k]] = k; });
  const sliceLane = Int32Array.from(meta.slice_procs, (p) => (p in laneOf ? laneOf[p] : -1));
  return { meta, A, n, laneStart: counts, laneEvents, sliceLane,
           faults: new Set(meta.fault_kinds), nodes: meta.nodes.length };
}

// The causal past of event e: e's node's earlier events and, closed under both rules, every event that sent a
// message one of them received. The past on a node is a prefix of its events, so one backward sweep finds it.
export function causalPast(run, e) {
  const { A, n } = run;
  const past = new Uint8Array(n);
  const hi = new Int32Array(run.nodes).fill(-1);
  hi[A.node[e]] = e;
  let k = lastAtMost((j) => A.frecv[j], 0, A.frecv.length, e);
  for (let i = e; i >= 0; i--) {
    while (k >= 0 && A.frecv[k] > i) k--;
    if (i > hi[A.node[i]]) continue;
    past[i] = 1;
    while (k >= 0 && A.frecv[k] === i) {
      const s = A.fsend[k];
      if (s > hi[A.node[s]]) hi[A.node[s]] = s;
      k--;
    }
  }
  return past;
}

// The events the filters leave: hidden lanes and kinds out; with a channel, only events on it.
export function visibleMask(run, hiddenLanes, hiddenKinds, channel) {
  const { A, n, meta } = run;
  const laneOk = Uint8Array.from(meta.lanes, (l) => (hiddenLanes.includes(l) ? 0 : 1));
  const kindOk = Uint8Array.from(meta.kinds, (k) => (hiddenKinds.includes(k) ? 0 : 1));
  const chanOk = Uint8Array.from(meta.channels, (c) => (!channel || c === channel || c.startsWith(channel + "_") ? 1 : 0));
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i++) out[i] = laneOk[A.lane[i]] & kindOk[A.kind[i]] & chanOk[A.chan[i]];
  return out;
}

function render({ model, el: root }) {
  let run = loadRun(model.get("meta"), model.get("arrays"));
  let cursor = 0;
  let t0 = 0;                 // start of the visible window (ms)
  let span = model.get("span_ms");
  let visible = null;         // Uint8Array: the filters' mask
  let past = null;            // Uint8Array: the causal past shown, or null
  let bgValid = false;
  let timer = null;
  let drawn = { arrows: [], slices: [] }; // what the last background drew, for clicks
  let req = 0;

  // -- DOM
  const title = el("div", { class: "mex-title" });
  const btn = (cls, text, tip) => el("button", { class: `mex-btn ${cls}`, title: tip, text });
  const toStart = btn("mex-start", "|◀", "first event");
  const back = btn("mex-back", "◀ Step", "step back");
  const fwd = btn("mex-fwd", "Step ▶", "step forward");
  const play = btn("mex-play", "▶ Play", "play");
  const speed = el("select", { class: "mex-speed", title: "play speed" });
  SPEEDS.forEach(([label, v]) => speed.appendChild(el("option", { value: String(v), text: label })));
  speed.value = "100";
  const slider = el("input", { class: "mex-slider", type: "range", min: "1", step: "1", title: "event number" });
  const number = el("span", { class: "mex-number" });
  const kindSel = el("select", { class: "mex-kind", title: "kind of event to jump to" });
  const kindPrev = btn("mex-kind-prev", "◀", "previous event of this kind");
  const kindNext = btn("mex-kind-next", "▶", "next event of this kind");
  const violPrev = btn("mex-viol-prev", "◀", "previous violation");
  const violNext = btn("mex-viol-next", "Violation ▶", "next violation");
  const stallPrev = btn("mex-stall-prev", "◀", "previous liveness stall");
  const stallNext = btn("mex-stall-next", "Stall ▶", "next liveness stall");
  const zoomIn = btn("mex-zoom-in", "+", "zoom in (half the time window)");
  const zoomOut = btn("mex-zoom-out", "−", "zoom out (twice the time window)");
  const zoomAll = btn("mex-zoom-all", "All", "the whole run");
  const filterBtn = btn("mex-filter-btn", "Filters", "filter by component, channel, kind");
  const influenced = el("input", { type: "checkbox", class: "mex-influenced" });
  const influencedLabel = el("label", { class: "mex-check", title: "dim every event that could not have influenced the cursor's event" },
                             [influenced, el("span", { text: " only what influenced this" })]);
  const whyBtn = btn("mex-why", "Why?", "the causal chain of the read, flush or violation at the cursor");
  const forkAction = el("select", { class: "mex-fork-action", title: "fault to inject, or a bug switch to turn on, at the cursor" });
  const forkNode = el("select", { class: "mex-fork-node", title: "component to inject it on" });
  const forkSwitch = el("select", { class: "mex-fork-switch", title: "bug switch to turn on for every component" });
  const forkBtn = btn("mex-fork", "Fork here", "re-run with this change at the cursor's time");
  const showBtn = btn("mex-show", "", "switch between the original run and the fork");
  const message = el("span", { class: "mex-message" });
  const laneBox = el("div", { class: "mex-filter-group" });
  const kindBox = el("div", { class: "mex-filter-group" });
  const chanSel = el("select", { class: "mex-channel", title: "only events on this channel" });
  const filters = el("div", { class: "mex-filters" }, [
    el("div", { class: "mex-filter-row" }, [el("b", { text: "lanes " }), laneBox]),
    el("div", { class: "mex-filter-row" }, [el("b", { text: "channel " }), chanSel]),
    el("div", { class: "mex-filter-row" }, [el("b", { text: "kinds " }), kindBox])]);
  filters.style.display = "none";
  const canvas = el("canvas", { class: "mex-canvas" });
  const plot = el("div", { class: "mex-plot" }, [canvas]);
  const state = el("div", { class: "mex-state milvus-edu-explorer-state" });
  const details = el("div", { class: "mex-details" });
  // A shadow at a panel's foot while lines are hidden below it, as the stepper's: browsers that hide scroll bars until
  // one scrolls (macOS, headless Chromium) otherwise give no sign that the state list goes on under the Why? chain.
  const markMore = (box) => box.classList.toggle("mex-more", box.scrollTop + box.clientHeight < box.scrollHeight - 1);
  const panelWatchers = [];  // disconnected with the view (the cleanup render returns)
  for (const box of [state, details]) {
    box.addEventListener("scroll", () => markMore(box));
    const changed = new MutationObserver(() => markMore(box));
    changed.observe(box, { childList: true, subtree: true, characterData: true });
    const resized = new ResizeObserver(() => markMore(box));
    resized.observe(box);
    panelWatchers.push(changed, resized);
  }
  const side = el("div", { class: "mex-side" }, [state, details]);
  const row1 = el("div", { class: "mex-row" }, [toStart, back, fwd, play, speed, slider, number]);
  const row2 = el("div", { class: "mex-row" }, [el("span", { class: "mex-label", text: "jump:" }), kindSel, kindPrev, kindNext, el("span", { class: "mex-sep" }), violPrev, violNext,
                                                stallPrev, stallNext, el("span", { class: "mex-sep" }), zoomOut, zoomIn, zoomAll, filterBtn]);
  const row3 = el("div", { class: "mex-row" }, [influencedLabel, whyBtn, el("span", { class: "mex-sep" }),
                                                el("span", { class: "mex-label", text: "fork:" }), forkAction, forkNode, forkSwitch, forkBtn, showBtn, message]);
  const box = el("div", { class: "mex-root" }, [title, row1, row2, row3, filters, el("div", { class: "mex-body" }, [plot, side])]);
  root.appendChild(box);
  const ctx = canvas.getContext("2d");
  const bg = document.createElement("canvas");
  const bctx = bg.getContext("2d");

  // -- geometry
  function shownLanes() {
    const hidden = model.get("hidden_lanes");
    return run.meta.lanes.map((_, k) => k).filter((k) => !hidden.includes(run.meta.lanes[k]));
  }
  let laneY = new Float32Array(0);  // lane -> y (NaN when hidden)
  let tracksTop = 0;
  function layout() {
    const w = Math.max(420, Math.floor(plot.clientWidth || 640));
    const lanes = shownLanes();
    laneY = new Float32Array(run.meta.lanes.length).fill(NaN);
    lanes.forEach((k, r) => { laneY[k] = AXIS_H + LANE_H * (r + 0.5); });
    tracksTop = AXIS_H + LANE_H * lanes.length + GAP;
    const h = tracksTop + TRACK_H * run.meta.tracks.length + 4;
    if (canvas.width !== w || canvas.height !== h) {
      canvas.width = w; canvas.height = h; bg.width = w; bg.height = h;
      canvas.style.height = `${h}px`;
    }
    side.style.height = `${Math.max(h, 380)}px`; // the panels as tall as the picture, each scrolling inside
  }
  const x0 = () => LABEL_W;
  const x1 = () => canvas.width - 6;
  const xOf = (t) => x0() + ((t - t0) / span) * (x1() - x0());
  const tOf = (x) => t0 + ((x - x0()) / (x1() - x0())) * span;

  // -- the background: everything in the window but the cursor
  function drawBackground() {
    const { A, n, meta } = run;
    const w = bg.width, h = bg.height;
    const ta = t0, tb = t0 + span;
    bctx.clearRect(0, 0, w, h);
    bctx.fillStyle = "#ffffff"; bctx.fillRect(0, 0, w, h);
    bctx.font = '11px "DejaVu Sans", Verdana, sans-serif';
    bctx.textBaseline = "middle";
    // axis
    bctx.fillStyle = "#555"; bctx.textAlign = "center";
    const step = niceStep(span / 6);
    for (let t = Math.ceil(ta / step) * step; t <= tb; t += step) {
      const x = xOf(t);
      bctx.fillRect(x, AXIS_H - 4, 1, 4);
      bctx.fillText(`${(t / 1000).toFixed(step < 10 ? 3 : step < 100 ? 2 : 1)} s`, x, AXIS_H / 2);
      bctx.fillStyle = "#f0f0f0"; bctx.fillRect(x, AXIS_H, 1, h - AXIS_H); bctx.fillStyle = "#555";
    }
    // lanes
    bctx.textAlign = "right";
    meta.lanes.forEach((name, k) => {
      const y = laneY[k];
      if (Number.isNaN(y)) return;
      bctx.fillStyle = meta.lane_is_channel[k] ? "#fff4e6" : (k % 2 ? "#fafafa" : "#ffffff");
      bctx.fillRect(x0(), y - LANE_H / 2, x1() - x0(), LANE_H);
      bctx.fillStyle = "#dddddd"; bctx.fillRect(x0(), y, x1() - x0(), 1);
      bctx.fillStyle = meta.lane_is_channel[k] ? "#b35900" : "#222";
      bctx.fillText(fit(bctx, name, LABEL_W - 8), LABEL_W - 6, y);
    });
    const dim = (i) => (past && !past[i]) || !visible[i];
    // stalls: a band over the tracks from where the watermark stopped to where it moved again
    for (const s of meta.stalls || []) {
      const xa = Math.max(xOf(A.t[s.seq]), x0()), xb = Math.min(xOf(s.to_ms ?? A.t[n - 1]), x1());
      if (xb > xa) { bctx.fillStyle = "rgba(255,165,0,0.14)"; bctx.fillRect(xa, AXIS_H, xb - xa, h - AXIS_H); }
    }
    // requests: bars on their component's lane
    drawn = { arrows: [], slices: [] };
    const sEnd = lastAtMost((j) => A.t[A.sbegin[j]], 0, A.sbegin.length, tb);
    for (let j = 0; j <= sEnd; j++) {
      const lane = run.sliceLane[A.sproc[j]];   // sliceLane is per process, not per request
      if (lane < 0 || Number.isNaN(laneY[lane])) continue;
      const b = A.sbegin[j], e = A.send[j];
      const te = e < n ? A.t[e] : A.t[n - 1];
      if (te < ta) continue;
      const xa = Math.max(xOf(A.t[b]), x0()), xb = Math.min(Math.max(xOf(te), xa + 2), x1());
      const y = laneY[lane] - LANE_H / 2 + 2;
      bctx.fillStyle = dim(b) ? "rgba(120,120,120,0.12)" : (e < n ? "rgba(31,119,180,0.6)" : "rgba(214,39,40,0.6)");
      bctx.fillRect(xa, y, xb - xa, 4);
      drawn.slices.push([j, xa, y - 2, xb, y + 6]);
    }
    // messages: arrows from sender to receiver (those received in the window)
    const fa = lastAtMost((j) => A.t[A.frecv[j]], 0, A.frecv.length, ta - 1e-9) + 1;
    const fb = lastAtMost((j) => A.t[A.frecv[j]], 0, A.frecv.length, tb);
    if (fb - fa + 1 > MAX_ARROWS) {
      bctx.fillStyle = "#888"; bctx.textAlign = "left";
      bctx.fillText(`${NUM.format(fb - fa + 1)} messages: zoom in to see them`, x0() + 4, AXIS_H + 6);
    } else {
      for (let j = fa; j <= fb; j++) {
        const s = A.fsend[j], r = A.frecv[j];
        const ys = laneY[A.lane[s]], yr = laneY[A.lane[r]];
        if (Number.isNaN(ys) || Number.isNaN(yr) || !visible[s] || !visible[r]) continue;
        const xs = xOf(A.t[s]), xr = xOf(A.t[r]);
        const faded = past && !(past[s] && past[r]);
        bctx.strokeStyle = faded ? "rgba(150,150,150,0.15)" : "rgba(60,60,60,0.55)";
        bctx.lineWidth = 1;
        arrow(bctx, Math.max(xs, x0() - 2), xs < x0() ? ys + (yr - ys) * ((x0() - xs) / Math.max(xr - xs, 1e-9)) : ys, xr, yr);
        drawn.arrows.push([j, xs, ys, xr, yr]);
      }
    }
    // events: dots, at most one per lane and pixel (enough when zoomed out), faults as red crosses
    const ia = lastAtMost((i) => A.t[i], 0, n, ta - 1e-9) + 1;
    const ib = lastAtMost((i) => A.t[i], 0, n, tb);
    const W = Math.ceil(x1()) + 2;
    const seen = new Uint8Array(W * meta.lanes.length);
    for (let i = ia; i <= ib; i++) {
      const lane = A.lane[i], y = laneY[lane];
      if (Number.isNaN(y) || !visible[i]) continue;
      const x = xOf(A.t[i]);
      if (run.faults.has(A.kind[i])) {
        bctx.strokeStyle = "#d62728"; bctx.lineWidth = 2;
        bctx.beginPath(); bctx.moveTo(x - 5, y - 5); bctx.lineTo(x + 5, y + 5); bctx.moveTo(x + 5, y - 5); bctx.lineTo(x - 5, y + 5); bctx.stroke();
        bctx.fillStyle = "rgba(214,39,40,0.35)"; bctx.fillRect(x, AXIS_H, 1, h - AXIS_H);
        continue;
      }
      const cell = lane * W + Math.round(x);
      if (seen[cell]) continue;
      seen[cell] = 1;
      bctx.fillStyle = dim(i) ? "rgba(180,180,180,0.35)" : kindColor(meta.kinds[A.kind[i]]);
      bctx.fillRect(x - 2, y - 2, 4, 4);
    }
    // violations: a magenta mark on the axis
    for (const v of meta.violations || []) {
      const x = xOf(A.t[v.seq]);
      if (x < x0() || x > x1()) continue;
      bctx.fillStyle = "#c2255c";
      bctx.beginPath(); bctx.moveTo(x, AXIS_H); bctx.lineTo(x - 5, AXIS_H - 8); bctx.lineTo(x + 5, AXIS_H - 8); bctx.fill();
    }
    if (meta.first_difference !== null && meta.first_difference !== undefined && meta.first_difference < n) {
      const x = xOf(A.t[meta.first_difference]);
      if (x >= x0() && x <= x1()) {
        bctx.strokeStyle = "#7048e8"; bctx.setLineDash([4, 3]); bctx.lineWidth = 1.5;
        bctx.beginPath(); bctx.moveTo(x, AXIS_H); bctx.lineTo(x, h); bctx.stroke(); bctx.setLineDash([]);
        bctx.fillStyle = "#7048e8"; bctx.textAlign = "left"; bctx.fillText("runs differ from here", x + 3, AXIS_H + 6);
      }
    }
    drawTracks(ta, tb);
    bgValid = true;
  }

  // Watermark tracks: each value drawn against the true time, so a watermark that keeps up runs along the
  // dashed diagonal and a stalled one falls away from it (values older than the window lie on the floor).
  function drawTracks(ta, tb) {
    const { A, meta } = run;
    const starts = meta.track_starts;
    bctx.textAlign = "right";
    meta.tracks.forEach((track, k) => {
      const top = tracksTop + TRACK_H * k, bottom = top + TRACK_H - 3;
      bctx.fillStyle = k % 2 ? "#f7f9fc" : "#ffffff"; bctx.fillRect(x0(), top, x1() - x0(), TRACK_H);
      bctx.fillStyle = "#333"; bctx.fillText(fit(bctx, track.name, LABEL_W - 8), LABEL_W - 6, top + TRACK_H / 2);
      bctx.strokeStyle = "#c8c8c8"; bctx.setLineDash([3, 3]); bctx.lineWidth = 1;
      bctx.beginPath(); bctx.moveTo(x0(), bottom); bctx.lineTo(x1(), top + 2); bctx.stroke(); bctx.setLineDash([]);
      const yOf = (v) => Math.min(Math.max(bottom - ((v - ta) / span) * (bottom - top - 2), top + 2), bottom);
      const first = starts[k], end = starts[k + 1];
      let j = Math.max(lastAtMost((m) => A.t[A.cseq[m]], first, end, ta), first);
      if (j >= end) return;
      bctx.strokeStyle = "#1864ab"; bctx.lineWidth = 1.5;
      bctx.beginPath();
      // a step line, at most a few segments per pixel column: values that fall in one column draw its range
      let px = Math.round(Math.max(xOf(A.t[A.cseq[j]]), x0())), y = yOf(A.cval[j]);
      let low = y, high = y;
      bctx.moveTo(px, y);
      for (j += 1; j < end && A.t[A.cseq[j]] <= tb; j++) {
        const x = Math.round(xOf(A.t[A.cseq[j]])), v = yOf(A.cval[j]);
        if (x === px) { low = Math.min(low, v); high = Math.max(high, v); y = v; continue; }
        if (low !== high) { bctx.lineTo(px, low); bctx.lineTo(px, high); bctx.lineTo(px, y); }
        bctx.lineTo(x, y);
        bctx.lineTo(x, v);
        px = x; y = v; low = v; high = v;
      }
      if (low !== high) { bctx.lineTo(px, low); bctx.lineTo(px, high); bctx.lineTo(px, y); }
      bctx.lineTo(x1(), y);
      bctx.stroke();
    });
  }

  // -- the cursor over the background, and the panels
  function keepInView() {
    const t = run.A.t[cursor];
    if (t < t0 || t > t0 + span) { t0 = t - span * 0.25; bgValid = false; }
  }

  function drawCursor() {
    if (!bgValid) drawBackground();
    ctx.drawImage(bg, 0, 0);
    const { A } = run;
    const x = xOf(A.t[cursor]);
    ctx.fillStyle = "rgba(255,255,255,0.55)";
    ctx.fillRect(Math.max(x, x0()), AXIS_H, x1() - Math.max(x, x0()), canvas.height - AXIS_H);
    ctx.strokeStyle = "#222"; ctx.lineWidth = 1.25;
    ctx.beginPath(); ctx.moveTo(x, AXIS_H); ctx.lineTo(x, canvas.height); ctx.stroke();
    const y = laneY[A.lane[cursor]];
    // where the cursor's event is drawn, in canvas pixels (tests click there)
    canvas.dataset.cursorX = String(x); canvas.dataset.cursorY = String(y);
    if (!Number.isNaN(y)) {
      ctx.strokeStyle = "#000"; ctx.lineWidth = 2;
      ctx.beginPath(); ctx.arc(x, y, 6, 0, 2 * Math.PI); ctx.stroke();
    }
  }

  function drawState() {
    const { A, meta, n } = run;
    const i = cursor, t = A.t[i];
    const head = `<div class='mex-head'><b>event ${NUM.format(i + 1)}</b> of ${NUM.format(n)} &middot; `
      + `<code>${escapeHtml(meta.kinds[A.kind[i]])}</code> &middot; ${escapeHtml(meta.nodes[A.node[i]])} &middot; ${(t / 1000).toFixed(3)} s</div>`;
    let marks = "<tr><th colspan='3'>watermarks: value, lag behind now</th></tr>";
    meta.tracks.forEach((track, k) => {
      const lo = meta.track_starts[k], hi = meta.track_starts[k + 1];
      const j = lastAtMost((m) => A.cseq[m], lo, hi, i);
      const label = `<span title='on ${escapeHtml(track.process)}'>${escapeHtml(track.name)}</span>`;
      if (j < lo) { marks += `<tr><td class='mex-key'>${label}</td><td>–</td><td></td></tr>`; return; }
      const lag = t - A.cval[j];
      // a watermark may run ahead of now by design (the TSO's saved window end is a promise about the future)
      const gap = lag >= 0 ? `${NUM.format(Math.round(lag))} ms` : `${NUM.format(Math.round(-lag))} ms ahead`;
      marks += `<tr><td class='mex-key'>${label}</td><td class='mex-num'>${(A.cval[j] / 1000).toFixed(3)} s</td>`
        + `<td class='mex-num${lag > 1000 ? " mex-late" : ""}'>${gap}</td></tr>`;
    });
    let comps = "<tr><th colspan='3'>components: last event, how long ago</th></tr>";
    meta.lanes.forEach((name, k) => {
      const a = run.laneStart[k], b = run.laneStart[k + 1];
      const j = lastAtMost((m) => run.laneEvents[m], a, b, i);
      if (j < a) return;
      const e = run.laneEvents[j];
      comps += `<tr><td class='mex-key'>${escapeHtml(name)}</td><td class='mex-kindcell'>${escapeHtml(meta.kinds[A.kind[e]])}</td>`
        + `<td class='mex-num'>${NUM.format(Math.round(t - A.t[e]))} ms</td></tr>`;
    });
    state.innerHTML = `${head}<table>${marks}</table><table>${comps}</table>`;
  }

  function show(i, { sync = true } = {}) {
    cursor = Math.min(Math.max(i, 0), run.n - 1);
    slider.value = String(cursor + 1);
    number.textContent = `event ${NUM.format(cursor + 1)} of ${NUM.format(run.n)}`;
    keepInView();
    drawCursor();
    drawState();
    if (sync && model.get("cursor") !== cursor) { model.set("cursor", cursor); model.save_changes(); }
  }

  function ask(content) { req += 1; model.send({ ...content, req }); return req; }

  // -- run-dependent controls
  function setupRun() {
    const meta = run.meta;
    title.textContent = meta.title || "";
    slider.max = String(run.n);
    kindSel.replaceChildren(...meta.kinds.map((k) => el("option", { value: k, text: k })));
    // a fault if the run has one, else the kind of the event the explorer opens on (not the alphabet's first kind)
    kindSel.value = meta.kinds.find((k) => k.startsWith("fault.")) || meta.kinds[run.A.kind[Math.min(cursor, run.n - 1)]]
      || meta.kinds[0];
    forkAction.replaceChildren(...(meta.fork_actions || []).map((a) => el("option", { value: a, text: a })));
    const forkable = meta.lanes.filter((_, k) => !meta.lane_is_channel[k] && meta.lane_node[k] >= 0 && !/^(sim|etcd)$|^client/i.test(meta.lanes[k])); // the workload's clients are no node of the cluster
    forkNode.replaceChildren(...forkable.map((l) => el("option", { value: l, text: l })));
    forkNode.value = forkable.find((l) => l.startsWith("proxy")) || forkable[0] || "";
    forkSwitch.replaceChildren(...(meta.fork_switches || []).map((n) => el("option", { value: n, text: n })));
    showForkTarget();
    for (const c of [forkAction, forkNode, forkSwitch, forkBtn]) c.disabled = !meta.can_fork;
    showBtn.style.display = meta.has_fork ? "" : "none";
    showBtn.textContent = meta.which === "fork" ? "Show original" : "Show fork";
    const none = !(meta.violations || []).length;
    violPrev.disabled = none; violNext.disabled = none;
    const noStall = !(meta.stalls || []).length;
    stallPrev.disabled = noStall; stallNext.disabled = noStall;
    laneBox.replaceChildren(...meta.lanes.map((l) => checkbox(l, "hidden_lanes")));
    kindBox.replaceChildren(...meta.kinds.map((k) => checkbox(k, "hidden_kinds")));
    chanSel.replaceChildren(...meta.channels.map((c) => el("option", { value: c, text: c || "all channels" })));
    chanSel.value = model.get("channel");
    past = null; influenced.checked = false;
    refilter();
  }

  function checkbox(name, trait) {
    const input = el("input", { type: "checkbox" });
    input.checked = !model.get(trait).includes(name);
    input.dataset.name = name;
    input.addEventListener("change", () => {
      const now = new Set(model.get(trait));
      if (input.checked) now.delete(name); else now.add(name);
      model.set(trait, [...now]); model.save_changes(); refilter();
    });
    return el("label", { class: "mex-check" }, [input, el("span", { text: ` ${name}` })]);
  }

  function refilter() {
    visible = visibleMask(run, model.get("hidden_lanes"), model.get("hidden_kinds"), model.get("channel"));
    for (const input of laneBox.querySelectorAll("input")) input.checked = !model.get("hidden_lanes").includes(input.dataset.name);
    for (const input of kindBox.querySelectorAll("input")) input.checked = !model.get("hidden_kinds").includes(input.dataset.name);
    chanSel.value = model.get("channel");
    layout();
    bgValid = false;
    show(cursor, { sync: false });
  }

  function setAnchor(a) {
    past = a >= 0 && a < run.n ? causalPast(run, a) : null;
    influenced.checked = past !== null;
    bgValid = false;
    show(cursor, { sync: false });
  }

  // -- jumps
  function jumpTo(targets, forward, what) {
    const list = [...targets].sort((a, b) => a - b);
    const pick = forward ? list.find((s) => s > cursor) : [...list].reverse().find((s) => s < cursor);
    if (pick === undefined) {
      // say where the others are: a stall that began just before the cursor is the usual reason for "none after"
      const other = list.length ? (forward ? "; ◀ goes back to the one before" : "; ▶ goes on to the next") : "";
      message.textContent = `no ${what} ${forward ? "after" : "before"} event ${NUM.format(cursor + 1)}${other}`;
      return null;
    }
    message.textContent = "";
    show(pick);
    return pick;
  }
  function jumpKind(forward) {
    const code = run.meta.kinds.indexOf(kindSel.value);
    const { A, n } = run;
    if (forward) { for (let j = cursor + 1; j < n; j++) if (A.kind[j] === code) { message.textContent = ""; show(j); return; } }
    else { for (let j = cursor - 1; j >= 0; j--) if (A.kind[j] === code) { message.textContent = ""; show(j); return; } }
    message.textContent = `no ${kindSel.value} ${forward ? "after" : "before"} event ${NUM.format(cursor + 1)}`;
  }
  function markJump(list, forward, what) {
    const pick = jumpTo(list.map((m) => m.seq), forward, what);
    if (pick === null) return;
    const m = list.find((x) => x.seq === pick);
    details.innerHTML = `<div class='mex-head'>${escapeHtml(m.title)}</div><div class='mex-words'>${escapeHtml(m.text)}</div>`;
  }

  // -- play
  function stop() { if (timer !== null) { clearInterval(timer); timer = null; } play.textContent = "▶ Play"; }
  function start() {
    if (cursor >= run.n - 1) show(0);
    const perS = Number(speed.value);
    const interval = Math.max(1000 / perS, 40);
    const stepBy = Math.max(1, Math.round((perS * interval) / 1000));
    play.textContent = "■ Pause";
    timer = setInterval(() => { if (cursor >= run.n - 1) { stop(); return; } show(cursor + stepBy); }, interval);
  }

  // -- clicks on the picture: an event, else a message, else a request
  canvas.addEventListener("click", (ev) => {
    const r = canvas.getBoundingClientRect();
    const x = (ev.clientX - r.left) * (canvas.width / r.width), y = (ev.clientY - r.top) * (canvas.height / r.height);
    const { A, meta } = run;
    let best = -1, bestD = HIT_PX;
    meta.lanes.forEach((_, k) => {
      if (Number.isNaN(laneY[k]) || Math.abs(laneY[k] - y) > LANE_H / 2) return;
      const a = run.laneStart[k], b = run.laneStart[k + 1];
      const j = lastAtMost((m) => A.t[run.laneEvents[m]], a, b, tOf(x));
      for (const m of [j - 1, j, j + 1, j + 2]) {
        if (m < a || m >= b) continue;
        const e = run.laneEvents[m];
        const d = Math.abs(xOf(A.t[e]) - x);
        if (visible[e] && d < bestD) { best = e; bestD = d; }
      }
    });
    if (best >= 0) { stop(); show(best); ask({ type: "detail", seq: best }); return; }
    for (const [j, xs, ys, xr, yr] of drawn.arrows) {
      if (segmentDistance(x, y, xs, ys, xr, yr) < 4) {
        const s = A.fsend[j], rcv = A.frecv[j];
        details.innerHTML = `<div class='mex-head'>message: ${escapeHtml(meta.flow_names[A.fname[j]])}</div>`
          + `<div class='mex-words'>from ${escapeHtml(meta.nodes[A.node[s]])} (event ${NUM.format(s + 1)}, ${escapeHtml(meta.kinds[A.kind[s]])}, `
          + `${(A.t[s] / 1000).toFixed(3)} s) to ${escapeHtml(meta.nodes[A.node[rcv]])} (event ${NUM.format(rcv + 1)}, `
          + `${escapeHtml(meta.kinds[A.kind[rcv]])}, ${(A.t[rcv] / 1000).toFixed(3)} s): ${NUM.format(Math.round((A.t[rcv] - A.t[s]) * 1000) / 1000)} ms in flight</div>`;
        return;
      }
    }
    for (const [j, xa, ya, xb, yb] of drawn.slices) {
      if (x >= xa - 2 && x <= xb + 2 && y >= ya && y <= yb) { ask({ type: "slice", index: j }); return; }
    }
  });

  // -- controls
  toStart.addEventListener("click", () => { stop(); message.textContent = ""; show(0); });
  back.addEventListener("click", () => { message.textContent = ""; show(cursor - 1); });
  fwd.addEventListener("click", () => { message.textContent = ""; show(cursor + 1); });
  play.addEventListener("click", () => (timer === null ? start() : stop()));
  speed.addEventListener("change", () => { if (timer !== null) { stop(); start(); } });
  slider.addEventListener("input", () => { message.textContent = ""; show(Number(slider.value) - 1); });
  kindPrev.addEventListener("click", () => jumpKind(false));
  kindNext.addEventListener("click", () => jumpKind(true));
  violPrev.addEventListener("click", () => markJump(run.meta.violations || [], false, "violation"));
  violNext.addEventListener("click", () => markJump(run.meta.violations || [], true, "violation"));
  stallPrev.addEventListener("click", () => markJump(run.meta.stalls || [], false, "stall"));
  stallNext.addEventListener("click", () => markJump(run.meta.stalls || [], true, "stall"));
  const zoom = (f) => {
    const t = run.A.t[cursor];
    const frac = (t - t0) / span;
    span = Math.max(f === 0 ? run.A.t[run.n - 1] - run.A.t[0] + 1 : span * f, 1);
    t0 = f === 0 ? run.A.t[0] : t - frac * span;
    model.set("span_ms", span); model.save_changes();
    bgValid = false; show(cursor, { sync: false });
  };
  zoomIn.addEventListener("click", () => zoom(0.5));
  zoomOut.addEventListener("click", () => zoom(2));
  zoomAll.addEventListener("click", () => zoom(0));
  filterBtn.addEventListener("click", () => { filters.style.display = filters.style.display === "none" ? "" : "none"; });
  chanSel.addEventListener("change", () => { model.set("channel", chanSel.value); model.save_changes(); refilter(); });
  influenced.addEventListener("change", () => {
    const a = influenced.checked ? cursor : -1;
    model.set("anchor", a); model.save_changes(); setAnchor(a);
  });
  whyBtn.addEventListener("click", () => {
    details.innerHTML = "<div class='mex-words'>asking the kernel why…</div>";
    ask({ type: "why", seq: cursor });
  });
  // the action "switch" takes a bug switch, the faults a component: one selector shows at a time
  function showForkTarget() {
    const isSwitch = forkAction.value === "switch";
    forkNode.style.display = isSwitch ? "none" : "";
    forkSwitch.style.display = isSwitch ? "" : "none";
  }
  forkAction.addEventListener("change", showForkTarget);
  forkBtn.addEventListener("click", () => {
    const target = forkAction.value === "switch" ? `${forkSwitch.value} on` : forkNode.value;
    message.textContent = `forking: ${forkAction.value} ${target} at ${(run.A.t[cursor] / 1000).toFixed(3)} s…`;
    ask({ type: "fork", action: forkAction.value, node: forkNode.value, switch: forkSwitch.value, seq: cursor });
  });
  showBtn.addEventListener("click", () => ask({ type: "show", which: run.meta.which === "fork" ? "original" : "fork" }));

  // -- the kernel's answers and changes
  function onAnswer(content) {
    if (!content || typeof content !== "object") return;
    if (content.error) {
      // a refused Why? is said once, in the details panel (in the message row too, it pushed the picture down)
      if (content.type === "why") details.innerHTML = `<div class='mex-words'>${escapeHtml(content.error)}</div>`;
      else message.textContent = content.error;
      return;
    }
    if (content.type === "progress") {   // a fork's run, part-way: "forking: kill proxy-1 at 1.234 s… 40%"
      const head = message.textContent.startsWith("forking") ? message.textContent.replace(/….*$/, "") : "forking";
      message.textContent = `${head}… ${Math.floor(100 * content.done_s / content.total_s)}%`;
    } else if (content.type === "detail") details.innerHTML = content.html;
    else if (content.type === "why") {
      const list = el("ol", { class: "mex-chain" });
      content.links.forEach((link, k) => {
        const go = el("button", { class: "mex-link", title: "move the cursor to this event",
                                  text: `event ${NUM.format(link.seq + 1)} · ${(link.t_ms / 1000).toFixed(3)} s · ${link.node}` });
        go.addEventListener("click", () => { stop(); show(link.seq); });
        list.appendChild(el("li", {}, [go, el("div", { class: "mex-words", text: (k ? `${link.joint || "because"} ` : "") + link.text })]));
      });
      details.replaceChildren(el("div", { class: "mex-head", text: content.title }), list);
    } else if (content.type === "fork") {
      message.textContent = content.first_difference === null ? "the fork's run log is the same as the original's"
        : `the fork differs from event ${NUM.format(content.first_difference + 1)} on`;
      details.innerHTML = `<div class='mex-head'>${escapeHtml(run.meta.title)}</div><div class='mex-words'>`
        + `${escapeHtml(message.textContent)}: every event before it is the original's, byte for byte. The dashed line `
        + `marks it; <b>Show original</b> switches back, with the cursor on the same event number.</div>`;
    }
  }
  const onRun = () => {
    run = loadRun(model.get("meta"), model.get("arrays"));
    cursor = Math.min(cursor, run.n - 1);
    details.replaceChildren(); // its words were about the other run
    setupRun();
  };
  const onCursor = () => { const c = model.get("cursor"); if (c !== cursor) show(c, { sync: false }); };
  const onAnchor = () => setAnchor(model.get("anchor"));
  const onMessage = () => { message.textContent = model.get("message"); };
  const onSpan = () => { const s = model.get("span_ms"); if (s !== span) { span = s; t0 = run.A.t[cursor] - span * 0.25; bgValid = false; show(cursor, { sync: false }); } };
  model.on("change:meta", onRun);
  model.on("change:cursor", onCursor);
  model.on("change:anchor", onAnchor);
  model.on("change:hidden_lanes", refilter);
  model.on("change:hidden_kinds", refilter);
  model.on("change:channel", refilter);
  model.on("change:message", onMessage);
  model.on("change:span_ms", onSpan);
  model.on("msg:custom", onAnswer);
  const resize = new ResizeObserver(() => { const w = canvas.width; layout(); if (canvas.width !== w) { bgValid = false; drawCursor(); } });
  resize.observe(plot);

  cursor = Math.min(Math.max(model.get("cursor"), 0), run.n - 1);
  t0 = run.A.t[cursor] - span * 0.25;
  setupRun();
  if (model.get("anchor") >= 0) setAnchor(model.get("anchor"));
  onMessage();

  return () => {
    stop();
    resize.disconnect();
    for (const watcher of panelWatchers) watcher.disconnect();
    model.off("change:meta", onRun);
    model.off("change:cursor", onCursor);
    model.off("change:anchor", onAnchor);
    model.off("change:hidden_lanes", refilter);
    model.off("change:hidden_kinds", refilter);
    model.off("change:channel", refilter);
    model.off("change:message", onMessage);
    model.off("change:span_ms", onSpan);
    model.off("msg:custom", onAnswer);
  };
}

function niceStep(raw) {
  const p = 10 ** Math.floor(Math.log10(Math.max(raw, 1e-6)));
  for (const m of [1, 2, 5, 10]) if (m * p >= raw) return m * p;
  return 10 * p;
}

function fit(c, text, width) {
  if (c.measureText(text).width <= width) return text;
  let s = text;
  while (s.length > 3 && c.measureText(`…${s}`).width > width) s = s.slice(1);
  return `…${s}`;
}

function arrow(c, xa, ya, xb, yb) {
  c.beginPath(); c.moveTo(xa, ya); c.lineTo(xb, yb); c.stroke();
  const a = Math.atan2(yb - ya, xb - xa);
  c.beginPath();
  c.moveTo(xb, yb); c.lineTo(xb - 6 * Math.cos(a - 0.4), yb - 6 * Math.sin(a - 0.4));
  c.moveTo(xb, yb); c.lineTo(xb - 6 * Math.cos(a + 0.4), yb - 6 * Math.sin(a + 0.4));
  c.stroke();
}

function segmentDistance(px, py, ax, ay, bx, by) {
  const dx = bx - ax, dy = by - ay;
  const len = dx * dx + dy * dy;
  const u = len ? Math.min(Math.max(((px - ax) * dx + (py - ay) * dy) / len, 0), 1) : 0;
  return Math.hypot(px - (ax + u * dx), py - (ay + u * dy));
}

export default { render };
