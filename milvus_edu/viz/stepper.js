// The timeline stepper's browser side (see milvus_edu/viz/frontend.py).
// Everything a click needs is here already, so stepping works while the kernel is busy:
// every event's time and kind (sent once), the pages' background pictures, and for a window of
// events around the cursor the panel's HTML and the cursor drawing operations. Near the window's
// edge the browser asks the kernel for the next one ({type: "want"}); until it comes, the panel
// still shows the event's number, kind and time.

const NUM = new Intl.NumberFormat("en-US");

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

function typed(v, Kind) {
  const b = asBytes(v);
  const copy = new Uint8Array(b.length);
  copy.set(b);
  return new Kind(copy.buffer, 0, Math.floor(b.length / Kind.BYTES_PER_ELEMENT));
}

function escapeHtml(s) {
  return String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}

// ---------------------------------------------------------------------------------- drawing ops

function marker(ctx, sym, x, y, size, face, edge, ew) {
  const h = size / 2;
  ctx.beginPath();
  if (sym === "D" || sym === "d") {
    const w = sym === "d" ? h * 0.6 : h;
    ctx.moveTo(x, y - h); ctx.lineTo(x + w, y); ctx.lineTo(x, y + h); ctx.lineTo(x - w, y); ctx.closePath();
  } else if (sym === "s") {
    ctx.rect(x - h, y - h, size, size);
  } else if (sym === "X" || sym === "x") {
    const t = h * 0.35;
    ctx.moveTo(x - h, y - h + t); ctx.lineTo(x - h + t, y - h); ctx.lineTo(x, y - t); ctx.lineTo(x + h - t, y - h);
    ctx.lineTo(x + h, y - h + t); ctx.lineTo(x + t, y); ctx.lineTo(x + h, y + h - t); ctx.lineTo(x + h - t, y + h);
    ctx.lineTo(x, y + t); ctx.lineTo(x - h + t, y + h); ctx.lineTo(x - h, y + h - t); ctx.lineTo(x - t, y);
    ctx.closePath();
  } else if (sym === "_") {
    ctx.moveTo(x - h, y); ctx.lineTo(x + h, y); face = null;
  } else if (sym === "|") {
    ctx.moveTo(x, y - h); ctx.lineTo(x, y + h); face = null;
  } else {
    ctx.arc(x, y, h, 0, 2 * Math.PI);
  }
  if (face) { ctx.fillStyle = face; ctx.fill(); }
  if (edge && ew > 0) { ctx.strokeStyle = edge; ctx.lineWidth = ew; ctx.stroke(); }
}

function withClip(ctx, clip, draw) {
  ctx.save();
  if (clip) { ctx.beginPath(); ctx.rect(clip[0], clip[1], clip[2] - clip[0], clip[3] - clip[1]); ctx.clip(); }
  draw();
  ctx.restore();
}

const VA = { center: "middle", center_baseline: "middle", top: "top", bottom: "bottom", baseline: "alphabetic" };

function drawOp(ctx, op) {
  const kind = op[0];
  if (kind === "L") {
    const [, pts, line, mk, clip] = op;
    withClip(ctx, clip, () => {
      if (line && line[0]) {
        ctx.beginPath();
        pts.forEach(([x, y], k) => (k ? ctx.lineTo(x, y) : ctx.moveTo(x, y)));
        ctx.strokeStyle = line[0]; ctx.lineWidth = line[1]; ctx.stroke();
      }
      if (mk) for (const [x, y] of pts) marker(ctx, mk[0], x, y, mk[1], mk[2], mk[3], mk[4]);
    });
  } else if (kind === "T") {
    const [, x, y, text, color, size, weight, ha, va, bg, clip] = op;
    withClip(ctx, clip, () => {
      ctx.font = `${weight} ${size}px "DejaVu Sans", Verdana, sans-serif`;
      ctx.textAlign = ha === "center" ? "center" : ha;
      ctx.textBaseline = VA[va] || "middle";
      if (bg) {
        const w = ctx.measureText(text).width;
        const x0 = ha === "right" ? x - w : ha === "center" ? x - w / 2 : x;
        const y0 = ctx.textBaseline === "top" ? y : ctx.textBaseline === "bottom" ? y - size : y - size * 0.6;
        ctx.fillStyle = bg; ctx.fillRect(x0 - 1, y0 - 1, w + 2, size * 1.2 + 2);
      }
      ctx.fillStyle = color || "#000"; ctx.fillText(text, x, y);
    });
  } else if (kind === "R") {
    const [, x0, y0, x1, y1, face, clip] = op;
    if (face) withClip(ctx, clip, () => { ctx.fillStyle = face; ctx.fillRect(x0, y0, x1 - x0, y1 - y0); });
  } else if (kind === "C") {
    const [, pts, radius, faces, clip] = op;
    withClip(ctx, clip, () => pts.forEach(([x, y], k) => marker(ctx, "o", x, y, 2 * radius, faces[k % faces.length], null, 0)));
  }
}

// ---------------------------------------------------------------------------------- the widget

function render({ model, el: root }) {
  const n = model.get("n");
  const times = typed(model.get("times"), Float32Array);
  const codes = typed(model.get("kind_codes"), Uint16Array);
  const kindNames = model.get("kind_names");
  const geo = model.get("geometry");
  let cursor = Math.min(Math.max(model.get("cursor"), 0), n - 1);
  let win = null; // {start, end, frags, panel, ops, draw, page, xlims, t_ms}
  let wanted = false;
  let timer = null;
  const pictures = {}; // page -> object URL

  // -- DOM
  const title = el("div", { class: "mes-title", text: model.get("title") });
  const toStart = el("button", { class: "mes-btn milvus-edu-to-start", title: "back to the first event", text: "|◀ Start" });
  const play = el("button", { class: "mes-btn mes-play milvus-edu-play", title: "play", text: "▶ Play" });
  const back = el("button", { class: "mes-btn milvus-edu-step-back", title: "step back", text: "◀ Step" });
  const fwd = el("button", { class: "mes-btn milvus-edu-step-forward", title: "step forward", text: "Step ▶" });
  const speed = el("select", { class: "mes-speed", title: "play speed" });
  for (const [label] of model.get("speeds")) speed.appendChild(el("option", { value: label, text: label }));
  speed.value = model.get("speed");
  const slider = el("input", { class: "mes-slider milvus-edu-slider", type: "range", min: "1", max: String(n), step: "1",
                               title: "event number" });
  const number = el("span", { class: "mes-number milvus-edu-number" });
  const kindSel = el("select", { class: "mes-kind", title: "kind of event to jump to" });
  for (const k of kindNames) kindSel.appendChild(el("option", { value: k, text: k }));
  kindSel.value = model.get("jump_kind");
  const jump = el("button", { class: "mes-btn milvus-edu-jump", title: "jump to next event of this kind", text: "Jump ▶" });
  const message = el("span", { class: "mes-message" });
  const img = el("img", { class: "mes-bg", alt: "lanes of the run", width: String(geo.width), height: String(geo.height) });
  const canvas = el("canvas", { class: "mes-overlay", width: String(geo.width), height: String(geo.height) });
  const plot = el("div", { class: "mes-plot" }, [img, canvas]);
  plot.style.maxWidth = `${geo.width}px`;
  const panel = el("div", { class: "mes-panel milvus-edu-state" });
  const controls = el("div", { class: "mes-controls" }, [toStart, play, back, fwd, speed, slider, number]);
  const jumpRow = el("div", { class: "mes-jump" }, [el("span", { class: "mes-label", text: "next" }), kindSel, jump, message]);
  const body = el("div", { class: "mes-body" }, [plot, panel]);
  const box = el("div", { class: "mes-root" }, [title, controls, jumpRow, body]);
  root.appendChild(box);
  const ctx = canvas.getContext("2d");
  // The panel is as tall as the picture beside it (it scrolls inside), so its box stays in view.
  const fit = new ResizeObserver(() => {
    const sameRow = panel.offsetTop === plot.offsetTop;
    panel.style.maxHeight = sameRow ? `${Math.max(plot.offsetHeight, 200)}px` : "60vh";
  });
  fit.observe(plot);

  // -- data from the kernel
  function loadWindow() {
    const bytes = asBytes(model.get("window"));
    if (!bytes.length) return;
    win = JSON.parse(new TextDecoder().decode(bytes));
    wanted = false;
  }
  function loadPictures() {
    for (const url of Object.values(pictures)) URL.revokeObjectURL(url);
    for (const k of Object.keys(pictures)) delete pictures[k];
    for (const [page, png] of Object.entries(model.get("backgrounds") || {})) {
      pictures[page] = URL.createObjectURL(new Blob([asBytes(png)], { type: "image/png" }));
    }
  }

  function inWindow(i) { return win && i >= win.start && i < win.end; }

  function maybeWant() {
    const m = model.get("margin");
    const near = !win || cursor < win.start || cursor >= win.end
      || (win.start > 0 && cursor - win.start < m) || (win.end < n && win.end - cursor <= m);
    if (near && !wanted) { wanted = true; model.send({ type: "want", cursor }); }
  }

  // -- drawing
  function pageXlim(i) {
    if (!geo.window_s) return ["0", geo.xlim];
    if (inWindow(i)) { const p = String(win.page[i - win.start]); return [p, win.xlims[p]]; }
    const p = String(Math.floor(Math.max(times[i] - geo.xlim[0], 0) / geo.window_s));
    const lo = geo.xlim[0] + Number(p) * geo.window_s;
    return [p, [lo, lo + geo.window_s]];
  }

  function drawCursor(i) {
    ctx.clearRect(0, 0, canvas.width, canvas.height);
    const [page, xlim] = pageXlim(i);
    if (pictures[page] && img.dataset.page !== page) { img.src = pictures[page]; img.dataset.page = page; }
    const t = inWindow(i) ? win.t_ms[i - win.start] / 1000 : times[i];
    for (const [x0, y0, x1, y1] of geo.axes) {
      const x = x0 + ((t - xlim[0]) / (xlim[1] - xlim[0])) * (x1 - x0);
      const cx = Math.min(Math.max(x, x0), x1);
      ctx.fillStyle = "rgba(255,255,255,0.62)";
      ctx.fillRect(cx, y0, x1 - cx, y1 - y0);
      if (x >= x0 && x <= x1) {
        ctx.beginPath(); ctx.moveTo(x, y0); ctx.lineTo(x, y1);
        ctx.strokeStyle = "#444444"; ctx.lineWidth = 1.25; ctx.stroke();
      }
    }
    if (inWindow(i)) for (const id of win.draw[i - win.start]) drawOp(ctx, win.ops[id]);
  }

  function drawPanel(i) {
    if (inWindow(i)) {
      panel.innerHTML = win.panel[i - win.start].map((id) => win.frags[id]).join("");
      panel.classList.remove("mes-waiting");
    } else {
      panel.innerHTML = `<div class='mes-panel-body'><div class='mes-head'><b>event ${NUM.format(i + 1)}</b> of ${NUM.format(n)}`
        + ` &middot; <code>${escapeHtml(kindNames[codes[i]])}</code></div><div class='mes-event'>at ${times[i].toFixed(3)} s`
        + ` simulated. <i>The details of this event come as soon as the kernel is free.</i></div></div>`;
      panel.classList.add("mes-waiting");
    }
  }

  function show(i, { sync = true } = {}) {
    cursor = Math.min(Math.max(i, 0), n - 1);
    slider.value = String(cursor + 1);
    number.textContent = `event ${NUM.format(cursor + 1)} of ${NUM.format(n)}`;
    drawPanel(cursor);
    drawCursor(cursor);
    if (sync && model.get("cursor") !== cursor) { model.set("cursor", cursor); model.save_changes(); }
    maybeWant();
  }

  function stop() {
    if (timer !== null) { clearInterval(timer); timer = null; }
    play.textContent = "▶ Play"; play.title = "play";
  }
  function start() {
    if (cursor >= n - 1) show(0);
    const perS = Object.fromEntries(model.get("speeds"))[speed.value] || 10;
    const interval = Math.max(1000 / perS, 40);
    const step = Math.max(1, Math.round((perS * interval) / 1000));
    play.textContent = "■ Pause"; play.title = "pause (keeps the position)";
    timer = setInterval(() => {
      if (cursor >= n - 1) { stop(); return; }
      show(cursor + step);
    }, interval);
  }

  // -- controls
  toStart.addEventListener("click", () => { stop(); message.textContent = ""; show(0); });
  play.addEventListener("click", () => (timer === null ? start() : stop()));
  back.addEventListener("click", () => { message.textContent = ""; show(cursor - 1); });
  fwd.addEventListener("click", () => { message.textContent = ""; show(cursor + 1); });
  slider.addEventListener("input", () => { message.textContent = ""; show(Number(slider.value) - 1); });
  speed.addEventListener("change", () => {
    model.set("speed", speed.value); model.save_changes();
    if (timer !== null) { stop(); start(); }
  });
  kindSel.addEventListener("change", () => { model.set("jump_kind", kindSel.value); model.save_changes(); });
  jump.addEventListener("click", () => {
    const code = kindNames.indexOf(kindSel.value);
    for (let j = cursor + 1; j < n; j++) {
      if (codes[j] === code) { message.textContent = ""; show(j); return; }
    }
    message.textContent = `no ${kindSel.value} after event ${NUM.format(cursor + 1)}`;
  });

  // -- changes from the kernel
  const onWindow = () => { loadWindow(); show(cursor, { sync: false }); };
  const onPictures = () => { loadPictures(); img.dataset.page = ""; drawCursor(cursor); };
  const onCursor = () => { const c = model.get("cursor"); if (c !== cursor) show(c, { sync: false }); };
  const onMessage = () => { message.textContent = model.get("message"); };
  const onJumpKind = () => { kindSel.value = model.get("jump_kind"); };
  model.on("change:window", onWindow);
  model.on("change:backgrounds", onPictures);
  model.on("change:cursor", onCursor);
  model.on("change:message", onMessage);
  model.on("change:jump_kind", onJumpKind);

  loadPictures();
  loadWindow();
  onMessage();
  show(cursor, { sync: false });

  return () => {
    stop();
    fit.disconnect();
    model.off("change:window", onWindow);
    model.off("change:backgrounds", onPictures);
    model.off("change:cursor", onCursor);
    model.off("change:message", onMessage);
    model.off("change:jump_kind", onJumpKind);
    for (const url of Object.values(pictures)) URL.revokeObjectURL(url);
  };
}

export default { render };
