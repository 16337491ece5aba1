// The timeline stepper's browser side (see milvus_edu/viz/frontend.py).
// Everything a click needs is here already, so stepping works while the kernel is busy:
// every event's time and kind (sent once), the pages' background pictures, and for a window of
// events around the cursor the panel's HTML and the cursor drawing operations. When the cursor
// leaves the window or nears its edge, the browser asks the kernel for one around the cursor
// ({type: "want", req, cursor, have, pages, ahead}); until it comes, the panel still shows the
// event's number, kind and time. One request is in flight at a time; the kernel answers each
// ({type: "window", req, ...} with the window, then {type: "pictures", ...} with the pictures of
// its pages the browser lacks, so the panel fills before a new page is drawn), an answer
// older than one already shown is not shown, and a request unanswered for a while is sent again,
// so the browser never waits for a reply that will not come.

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

// A request unanswered this long is sent again (the kernel may have restarted); the wait doubles
// each time, up to RESEND_MAX_MS, while the kernel runs a long cell.
const RESEND_MS = 3000;
const RESEND_MAX_MS = 24000;
// Play waits this long at the end of the events it holds for the next window (so it shows details,
// not placeholders); a kernel silent for longer is busy, and Play goes on without details.
const PLAY_WAIT_MS = 1500;
// Page pictures kept in the browser (those of the window shown are never dropped).
const PICTURES_KEPT = 48;
// Height of JupyterLab's bars around a notebook at 1280 x 800 (menu, tabs, notebook toolbar, status bar) with a
// margin: the screen's height less this is what a stepper scrolled to the top of the notebook has.
const APP_BARS_PX = 150;

function render({ model, el: root }) {
  const n = model.get("n");
  const times = typed(model.get("times"), Float32Array);
  const codes = typed(model.get("kind_codes"), Uint16Array);
  const kindNames = model.get("kind_names");
  const geo = model.get("geometry");
  let cursor = Math.min(Math.max(model.get("cursor"), 0), n - 1);
  let win = null; // {start, end, frags, panel, ops, draw, page, xlims, t_ms}
  let timer = null;
  const pictures = new Map(); // page (string) -> object URL, oldest first
  let lastReq = 0; // id of the last request sent
  let shownReq = 0; // id of the request whose answer is shown (0: the window the view started with)
  let pending = null; // the request in flight: {id, key} (key: its cursor, and whether Play asked)
  let answered = null; // key of the request whose full window is shown
  let waitingSince = null; // when the kernel last went silent on a request (null: it answered)
  let resendMs = RESEND_MS;
  let resendTimer = null;

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
  plot.style.flex = `0 1 ${geo.width}px`; // its own size (its text is sized for it), less only on a narrow page
  plot.style.maxWidth = `${geo.width}px`;
  const panel = el("div", { class: "mes-panel milvus-edu-state" });
  const controls = el("div", { class: "mes-controls" }, [toStart, play, back, fwd, speed, slider, number]);
  const jumpRow = el("div", { class: "mes-jump" }, [el("span", { class: "mes-label", text: "next" }), kindSel, jump, message]);
  const body = el("div", { class: "mes-body" }, [plot, panel]);
  const box = el("div", { class: "mes-root" }, [title, controls, jumpRow, body]);
  root.appendChild(box);
  const ctx = canvas.getContext("2d");
  // The panel beside the picture has one height whatever the event, so the widget's height never changes as
  // one steps (a panel that grew and shrank with its text moved the cells below it up and down): the picture's
  // height, or more, up to what the screen leaves below the controls when the stepper is scrolled to its top
  // (the window less JupyterLab's bars, APP_BARS_PX), so long panels (lab 3's DataCoord lines) show whole where
  // the screen allows; a longer text scrolls inside, and its box stays in view. Below the picture (a narrow
  // page) it is 60% of the window.
  const fitPanel = () => {
    const sameRow = panel.offsetTop === plot.offsetTop;
    const controlsPx = body.getBoundingClientRect().top - box.getBoundingClientRect().top;
    const roomPx = window.innerHeight - APP_BARS_PX - controlsPx;
    const px = sameRow ? `${Math.max(plot.offsetHeight, roomPx, 200)}px` : "60vh";
    panel.style.height = px;
    panel.style.maxHeight = px;
    markMore();
  };
  // A shadow at the panel's foot while lines are hidden below it: browsers that hide scroll bars until one
  // scrolls (macOS, headless Chromium) otherwise give no sign that there is more.
  const markMore = () => panel.classList.toggle("mes-more", panel.scrollTop + panel.clientHeight < panel.scrollHeight - 1);
  const fit = new ResizeObserver(fitPanel);
  fit.observe(plot);
  window.addEventListener("resize", fitPanel);
  panel.addEventListener("scroll", markMore);

  // -- data from the kernel
  function useWindow(bytes) {
    const b = asBytes(bytes);
    if (b.length) win = JSON.parse(new TextDecoder().decode(b));
  }
  function addPicture(page, png) {
    const old = pictures.get(page);
    if (old) { URL.revokeObjectURL(old); pictures.delete(page); }
    pictures.set(page, URL.createObjectURL(new Blob([asBytes(png)], { type: "image/png" })));
    const keep = new Set(win ? win.page.map(String) : []);
    for (const [p, url] of pictures) {
      if (pictures.size <= PICTURES_KEPT) break;
      if (!keep.has(p) && p !== page) { URL.revokeObjectURL(url); pictures.delete(p); }
    }
  }
  function addTraitPictures() {
    for (const [page, png] of Object.entries(model.get("backgrounds") || {})) {
      if (!pictures.has(page)) addPicture(page, png);
    }
  }

  function inWindow(i) { return !!win && i >= win.start && i < win.end; }

  // Does the browser lack something for event i: its details, those of the events a step or two
  // away (near the window's edge), or its page's picture?
  function lacks(i) {
    if (!inWindow(i)) return true;
    const m = model.get("margin");
    const playing = timer !== null;
    if (!playing && win.start > 0 && i - win.start < m) return true; // Play moves forward only
    const ahead = playing ? Math.max(m, (win.end - win.start) >> 1) : m;
    if (win.end < n && win.end - i <= ahead) return true;
    return !pictures.has(pageXlim(i)[0]);
  }

  function request() {
    clearTimeout(resendTimer);
    const id = ++lastReq;
    pending = { id, key: askKey() };
    if (waitingSince === null) waitingSince = performance.now();
    model.send({ type: "want", req: id, cursor, have: win ? [win.start, win.end] : null,
                 pages: [...pictures.keys()], ahead: timer !== null });
    resendTimer = setTimeout(() => {
      if (pending === null || pending.id !== id) return;
      pending = null;
      resendMs = Math.min(resendMs * 2, RESEND_MAX_MS);
      maybeWant();
    }, resendMs);
  }

  function askKey() { return `${cursor}:${timer !== null}`; }

  function maybeWant() {
    // One request at a time: a cursor that moved on while it was in flight is asked for when the
    // answer comes. A full answer to this very request that still lacks something is not asked again.
    if (pending === null && lacks(cursor) && answered !== askKey()) request();
  }

  function onAnswer(content, buffers) {
    if (!content || (content.type !== "window" && content.type !== "pictures")) return;
    let last = true; // the last message of its answer
    if (content.type === "pictures") {
      content.pages.forEach((page, k) => addPicture(String(page), buffers[k]));
    } else {
      last = !(content.pictures_follow || []).length;
      if (content.req >= shownReq) { // an answer older than the one shown would take the learner back
        shownReq = content.req;
        useWindow(buffers[0]);
        const full = content.end - content.start > 2 * model.get("margin") || (content.start === 0 && content.end === n);
        answered = full && pending !== null && pending.id === content.req ? pending.key : null;
      }
    }
    if (last && pending !== null && content.req >= pending.id) { pending = null; clearTimeout(resendTimer); }
    waitingSince = null;
    resendMs = RESEND_MS;
    img.dataset.page = "";
    show(cursor, { sync: false });
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
    const picture = pictures.get(page);
    // Without its page's picture the old page would show the cursor at a wrong time: fade it, draw nothing.
    img.classList.toggle("mes-stale", !picture);
    if (!picture) return;
    if (img.dataset.page !== page) { img.src = picture; img.dataset.page = page; }
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
    markMore();
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
    maybeWant(); // stopped: the window may now be asked for around the cursor rather than ahead of it
  }
  function start() {
    if (cursor >= n - 1) show(0);
    const perS = Object.fromEntries(model.get("speeds"))[speed.value] || 10;
    const interval = Math.max(1000 / perS, 40);
    const step = Math.max(1, Math.round((perS * interval) / 1000));
    play.textContent = "■ Pause"; play.title = "pause (keeps the position)";
    timer = setInterval(() => {
      if (cursor >= n - 1) { stop(); return; }
      const next = Math.min(cursor + step, n - 1);
      const waiting = waitingSince !== null && performance.now() - waitingSince < PLAY_WAIT_MS;
      if (!inWindow(next) && waiting) {
        // The next window is on its way: play up to the last event held, then wait for it.
        if (inWindow(cursor) && cursor < win.end - 1) show(win.end - 1);
        return;
      }
      show(next);
    }, interval);
    maybeWant();
  }

  // -- controls
  toStart.addEventListener("click", () => { stop(); message.textContent = ""; show(0); });
  play.addEventListener("click", () => (timer === null ? start() : stop()));
  back.addEventListener("click", () => { message.textContent = ""; show(cursor - 1); });
  fwd.addEventListener("click", () => { message.textContent = ""; show(cursor + 1); });
  slider.addEventListener("input", () => { message.textContent = ""; show(Number(slider.value) - 1); });
  speed.addEventListener("change", () => {
    model.set("speed", speed.value); model.save_changes();
    if (timer !== null) { clearInterval(timer); timer = null; start(); }
  });
  kindSel.addEventListener("change", () => { model.set("jump_kind", kindSel.value); model.save_changes(); });
  jump.addEventListener("click", () => {
    const code = kindNames.indexOf(kindSel.value);
    for (let j = cursor + 1; j < n; j++) {
      if (codes[j] === code) { message.textContent = ""; show(j); return; }
    }
    message.textContent = `no ${kindSel.value} after event ${NUM.format(cursor + 1)}`;
  });

  // -- changes from the kernel (a window in the trait: the kernel moved the cursor itself, e.g. goto_event)
  const onWindow = () => { useWindow(model.get("window")); img.dataset.page = ""; show(cursor, { sync: false }); };
  const onPictures = () => { addTraitPictures(); img.dataset.page = ""; drawCursor(cursor); maybeWant(); };
  const onCursor = () => { const c = model.get("cursor"); if (c !== cursor) show(c, { sync: false }); };
  const onMessage = () => { message.textContent = model.get("message"); };
  const onJumpKind = () => { kindSel.value = model.get("jump_kind"); };
  model.on("change:window", onWindow);
  model.on("change:backgrounds", onPictures);
  model.on("change:cursor", onCursor);
  model.on("change:message", onMessage);
  model.on("change:jump_kind", onJumpKind);
  model.on("msg:custom", onAnswer);

  useWindow(model.get("window"));
  addTraitPictures();
  onMessage();
  show(cursor, { sync: false });

  return () => {
    if (timer !== null) { clearInterval(timer); timer = null; }
    clearTimeout(resendTimer);
    fit.disconnect();
    window.removeEventListener("resize", fitPanel);
    model.off("change:window", onWindow);
    model.off("change:backgrounds", onPictures);
    model.off("change:cursor", onCursor);
    model.off("change:message", onMessage);
    model.off("change:jump_kind", onJumpKind);
    model.off("msg:custom", onAnswer);
    for (const url of pictures.values()) URL.revokeObjectURL(url);
  };
}

export default { render };
