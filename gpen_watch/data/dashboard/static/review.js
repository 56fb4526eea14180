// The review, beside app.js: Results' grid (filters as you type, tile size, selection and bulk
// actions) and a photo's page (flags and stars with the keys Lightroom uses, the next photo after
// a mark, undo, the loupe fitted to the window with its zoom and real pixels, the filmstrip, swipes
// on a phone).
"use strict";

async function postJSON(url, body) {
  const r = await fetch(url, {
    method: "POST", credentials: "same-origin",
    headers: { ...CSRF, "Content-Type": "application/json" }, body: JSON.stringify(body),
  });
  let reply = {};
  try { reply = await r.json(); } catch (e) { /* not JSON */ }
  if (!r.ok && !reply.error) reply.error = "the service refused (" + r.status + ")";
  return { ok: r.ok, reply };
}

// A person's choices on this browser (tile size, the next photo after a mark): kept here, not in
// the service's settings, as each screen wants its own.
const PREFS = { tiles: "m", show: "faces", advance: "1" };

function pref(name) {
  try { return localStorage.getItem("gpen-watch:" + name) || PREFS[name]; } catch (e) { return PREFS[name]; }
}

function setPref(name, value) {
  try { localStorage.setItem("gpen-watch:" + name, value); } catch (e) { /* private mode: for this page only */ }
}

document.documentElement.dataset.tiles = pref("tiles");
document.documentElement.dataset.show = pref("show");

// --- Results ---------------------------------------------------------------------------------

// The filters apply as the person types (the URL follows, so the view can be bookmarked); the grid
// and its stream follow, the form stays (the caret stays where it was).
function filterQuery(form) {
  const params = new URLSearchParams();
  for (const [k, v] of new FormData(form)) if (String(v).trim()) params.append(k, String(v).trim());
  if (params.get("sort") === "newest") params.delete("sort");
  const q = params.toString();
  return q ? "?" + q : "";
}

async function applyFilters(form) {
  const q = filterQuery(form);
  history.replaceState(null, "", "/results" + q);
  const r = await fetch("/results" + q, { credentials: "same-origin" });
  const page = new DOMParser().parseFromString(await r.text(), "text/html");
  const fresh = page.getElementById("results-live");
  const target = document.getElementById("results-live");
  if (!fresh || !target) return;
  selection.clear(); selection.all = false;
  patch(target, fresh.innerHTML);
  const main = document.getElementById("live");
  main.dataset.live = "/live/results" + q;
  showSelection();
  live("/live/results" + q);
}

const selection = new Set();
selection.all = false;
let lastPicked = null;

// The bulk bar lies over the bottom of the window (the grid never moves under the pointer) while
// something is selected or an action's outcome is shown; its buttons act on nothing otherwise.
function showSelection() {
  const bar = document.querySelector("[data-bulk]");
  if (!bar) return;
  const total = Number((document.querySelector("[data-total]") || {}).dataset?.total || 0);
  const n = selection.all ? total : selection.size;
  bar.hidden = n === 0 && bar.querySelector("[data-bulk-progress]").hidden;
  bar.querySelector("[data-bulk-count]").textContent = selection.all ? "All " + n.toLocaleString() + " matching" : String(n);
  bar.querySelectorAll("[data-bulk-action], [data-select-none], [data-bulk-strength]").forEach((b) => { b.disabled = n === 0; });
  document.querySelectorAll("[data-select]").forEach((box) => {
    box.checked = selection.all || selection.has(Number(box.value));
    box.closest("li").classList.toggle("selected", box.checked);
  });
}

async function bulk(action) {
  const bar = document.querySelector("[data-bulk]");
  const out = bar.querySelector("[data-bulk-progress]");
  if (!selection.all && selection.size === 0) return;
  const body = { action };
  const matches = document.querySelector("[data-query]");
  if (selection.all) body.view = matches ? matches.dataset.query : ""; else body.ids = Array.from(selection);
  if (action === "redo") {
    const strength = bar.querySelector("[data-bulk-strength]").value;
    body.settings = strength ? { "restore.strength": Number(strength) } : {};
  }
  if (action === "look") {
    const note = window.prompt("What should be looked at again? (optional)", "");
    if (note === null) return;
    body.note = note;
  }
  out.hidden = false;
  out.textContent = "Working…";
  const { ok, reply } = await postJSON("/api/bulk", body);
  if (!ok) { out.textContent = reply.error; out.className = "bulk-progress banner bad"; return; }
  out.className = "bulk-progress banner info";
  const refused = reply.refused_count ? " " + reply.refused_count + " refused: " + (reply.refused || []).slice(0, 3).join("; ") : "";
  if (action === "redo") {
    out.textContent = "Queued " + reply.queued + " redo" + (reply.queued === 1 ? "" : "s") + "." + refused;
    if (reply.queued) followProgress(out, reply.first, reply.last, refused);
  } else {
    const did = { accept: "Picked", reject: "Rejected", look: "Marked for another look:", unmark: "Unflagged", retry: "Sent back to their inbox:", dismiss: "Dismissed:" }[action];
    out.textContent = did + " " + reply.done + "." + refused;
  }
  selection.clear(); selection.all = false; showSelection();
}

function followProgress(out, first, last, refused) {
  const tick = async () => {
    try {
      const r = await fetch("/api/progress?first=" + first + "&last=" + last, { credentials: "same-origin" });
      const p = await r.json();
      out.textContent = "Redo: " + p.ended + " of " + p.total + " done" + (p.failed ? " (" + p.failed + " failed)" : "") + "." + refused;
      if (p.ended < p.total) setTimeout(tick, 1000);
    } catch (e) { setTimeout(tick, 3000); }
  };
  tick();
}

function enhanceGridOptions(root) {
  const box = root.querySelector && root.querySelector("[data-grid-options]");
  if (!box || !once(box, "options")) return;
  box.hidden = false;
  for (const name of ["tiles", "show"]) {
    box.querySelectorAll("[data-" + name + "]").forEach((radio) => {
      radio.checked = radio.value === pref(name);
      radio.addEventListener("change", () => {
        setPref(name, radio.value);
        document.documentElement.dataset[name] = radio.value;
      });
    });
  }
}

function enhanceResults(root) {
  const form = root.querySelector && root.querySelector("form[data-filters]");
  if (form && once(form, "filters")) {
    // On a phone the filters fold under one line unless the view uses them.
    const more = form.querySelector("[data-more-filters]");
    const used = more && Array.from(more.querySelectorAll("select, input")).some((el) => el.value && el.name !== "sort");
    if (more && !used && window.matchMedia("(max-width: 600px)").matches) more.open = false;
    let timer = null;
    const soon = () => { clearTimeout(timer); timer = setTimeout(() => applyFilters(form), 200); };
    form.addEventListener("input", soon);
    form.addEventListener("change", soon);
    form.addEventListener("submit", (ev) => { ev.preventDefault(); applyFilters(form); });
  }
  enhanceGridOptions(root);
  root.querySelectorAll("[data-select]").forEach((box) => {
    if (!once(box, "select")) return;
    box.addEventListener("click", (ev) => {
      const boxes = Array.from(document.querySelectorAll("[data-select]"));
      if (selection.all) { selection.all = false; boxes.forEach((b) => selection.add(Number(b.value))); }
      const on = box.checked;
      if (ev.shiftKey && lastPicked !== null && lastPicked.isConnected) {
        const [a, b] = [boxes.indexOf(lastPicked), boxes.indexOf(box)].sort((x, y) => x - y);
        boxes.slice(a, b + 1).forEach((x) => on ? selection.add(Number(x.value)) : selection.delete(Number(x.value)));
      } else if (on) selection.add(Number(box.value)); else selection.delete(Number(box.value));
      lastPicked = box;
      showSelection();
    });
  });
  const bar = root.querySelector && root.querySelector("[data-bulk]");
  if (bar && once(bar, "bulk")) {
    bar.querySelector("[data-select-all]").addEventListener("click", () => { selection.all = true; showSelection(); });
    bar.querySelector("[data-select-none]").addEventListener("click", () => { selection.clear(); selection.all = false; showSelection(); });
    bar.querySelectorAll("[data-bulk-action]").forEach((b) => b.addEventListener("click", () => bulk(b.dataset.bulkAction)));
  }
  if (document.querySelector("[data-bulk]")) showSelection();
}

// --- a photo's page: marks -------------------------------------------------------------------

// After a redo asked here the page moves to the new run once it is done.
function pendingKey() {
  const st = document.querySelector(".photo-state");
  return st ? "gpen-watch:pending:" + st.dataset.photo : null;
}

function rememberPending(id) {
  const key = pendingKey();
  if (key) sessionStorage.setItem(key, String(id));
}

function followPending() {
  const st = document.querySelector(".photo-state");
  const key = pendingKey();
  const pending = key && sessionStorage.getItem(key);
  if (!st || !pending) return;
  if (st.dataset.latest === pending && ["done", "failed", "unsupported"].includes(st.dataset.latestState)) {
    sessionStorage.removeItem(key);
    if (st.dataset.run !== pending) location.assign("/photo/" + pending + location.search);
    return;
  }
  const form = document.querySelector("form[data-redo]");
  if (form) showNote(form, "Queued as run " + pending + ", ahead of new arrivals. This page moves to it when it is done.");
}

// Undo: each mark made here remembers what the photo had before, for this tab (Ctrl+Z).
const UNDO = "gpen-watch:undo";
const SAID = "gpen-watch:said";
const UNDO_MAX = 50;
const FLAG_WORDS = { accepted: "Picked", rejected: "Rejected", look: "Needs another look:", none: "Unflagged" };

function undoStack() {
  try { return JSON.parse(sessionStorage.getItem(UNDO) || "[]"); } catch (e) { return []; }
}

function say(text) {
  const line = document.querySelector("[data-undo-line]");
  if (line) { line.textContent = text; line.hidden = !text; }
}

function photoState() {
  const st = document.querySelector(".photo-state");
  return st && { el: st, run: st.dataset.run, name: st.dataset.name, mark: st.dataset.mark || "none",
    note: st.dataset.note || null, stars: Number(st.dataset.stars || 0) };
}

// Flag (``change.mark``) or rate (``change.stars``) this photo; then, when asked, the next one.
async function markPhoto(change, advance) {
  const now = photoState();
  const form = document.querySelector("form[data-mark]");
  if (!now || !form) return;
  const body = {};
  if (change.mark !== undefined) {
    body.mark = change.mark;
    body.note = change.mark === "look" ? (form.querySelector("input[name=note]").value || null) : null;
  }
  if (change.stars !== undefined) body.stars = change.stars;
  const { ok, reply } = await postJSON(form.action, body);
  if (!ok) { showError(form, reply.error); return; }
  const stack = undoStack();
  stack.push({ run: now.run, url: location.pathname + location.search, name: now.name,
    before: { mark: now.mark, note: now.note, stars: now.stars } });
  sessionStorage.setItem(UNDO, JSON.stringify(stack.slice(-UNDO_MAX)));
  // This page's own record at once (the live update says the same a moment later), so that a
  // second key before it comes is undone to the right state.
  if (body.mark !== undefined) { now.el.dataset.mark = body.mark === "none" ? "" : body.mark; now.el.dataset.note = body.note || ""; }
  if (body.stars !== undefined) now.el.dataset.stars = String(body.stars);
  const what = body.mark !== undefined
    ? FLAG_WORDS[body.mark] + (body.mark === "look" && body.note ? " " + body.note + "," : "")
    : (body.stars ? "Rated " + "★".repeat(body.stars) : "Stars cleared:");
  const said = what + " " + now.name + ". Ctrl+Z undoes it.";
  const next = document.querySelector('a[data-key="j"]');
  if (advance && next) {
    sessionStorage.setItem(SAID, said);
    location.assign(next.href);
  } else say(said);
}

async function undoMark() {
  const stack = undoStack();
  const last = stack.pop();
  if (!last) { say("Nothing to undo."); return; }
  sessionStorage.setItem(UNDO, JSON.stringify(stack));
  const b = last.before;
  const { ok, reply } = await postJSON("/api/mark/" + last.run, { mark: b.mark || "none", note: b.note, stars: b.stars || 0 });
  if (!ok) { say(reply.error); return; }
  const said = "Undone: " + last.name + " is as it was.";
  const st = photoState();
  if (st && st.run === String(last.run)) {
    st.el.dataset.mark = b.mark === "none" ? "" : b.mark; st.el.dataset.note = b.note || ""; st.el.dataset.stars = String(b.stars || 0);
    say(said);
  } else {
    sessionStorage.setItem(SAID, said);
    location.assign(last.url);
  }
}

function autoAdvance() { return pref("advance") === "1"; }

function enhancePhoto(root) {
  const form = root.querySelector && root.querySelector("form[data-mark]");
  if (form && once(form, "mark")) {
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      const b = ev.submitter;
      if (b && b.name === "stars") {
        const stars = Number(b.value);
        markPhoto({ stars: (photoState() || {}).stars === stars ? 0 : stars }, autoAdvance());
      } else markPhoto({ mark: b ? b.value : "look" }, autoAdvance());
    });
    // Enter in the note: "needs another look" with it (never the form's first button, Pick).
    form.querySelector("input[name=note]").addEventListener("keydown", (ev) => {
      if (ev.key === "Enter") { ev.preventDefault(); markPhoto({ mark: "look" }, autoAdvance()); }
    });
    const box = form.querySelector("[data-advance-box]");
    const tick = box.querySelector("[data-auto-advance]");
    box.hidden = false;
    tick.checked = autoAdvance();
    tick.addEventListener("change", () => setPref("advance", tick.checked ? "1" : "0"));
    const said = sessionStorage.getItem(SAID);
    if (said) { sessionStorage.removeItem(SAID); say(said); }
  }
  root.querySelectorAll("[data-face-open]").forEach((link) => {
    if (!once(link, "face")) return;
    link.addEventListener("click", (ev) => {
      const dialog = document.querySelector("[data-face-dialog]");
      if (!dialog || !dialog.showModal) return;
      ev.preventDefault();
      const li = link.closest("li");
      dialog.querySelector("[data-face-before]").src = li.querySelector("[data-face-open]").getAttribute("href");
      const after = dialog.querySelector("[data-face-after]");
      after.closest("figure").hidden = !link.dataset.after;
      if (link.dataset.after) after.src = link.dataset.after;
      dialog.showModal();
    });
  });
  const help = root.querySelector && root.querySelector("[data-keys-help]");
  if (help && once(help, "help")) help.addEventListener("click", () => document.querySelector("[data-keys-dialog]").showModal());
  root.querySelectorAll("[data-zoomable]").forEach(zoomable);
  const strip = root.querySelector && root.querySelector(".filmstrip");
  if (strip && once(strip, "centre")) {
    const here = strip.querySelector('[aria-current="page"]');
    if (here) strip.scrollLeft = here.offsetLeft - (strip.clientWidth - here.offsetWidth) / 2;
  }
  followPending();
}

// --- the loupe: fitted to the window, zoomed, real pixels --------------------------------------

const MIN_LOUPE = 220;

// The before/after at the largest size that leaves its slider and the filmstrip on screen.
function fitLoupe(frame) {
  const after = frame.querySelector("img.after");
  const before = frame.querySelector("img.before");
  const figure = frame.closest("figure");
  const fit = () => {
    if (!frame.isConnected) return;
    const w = Number(after.getAttribute("width")), h = Number(after.getAttribute("height"));
    if (!w || !h) return;
    const top = frame.getBoundingClientRect().top + window.scrollY;
    // What follows it and must stay on screen with it: its bar and caption, then the filmstrip.
    let below = 8;
    for (const el of [...figure.querySelectorAll(".loupe-bar, figcaption"), document.querySelector(".filmstrip")]) {
      if (el) below += el.getBoundingClientRect().height + 6;
    }
    const room = Math.max(MIN_LOUPE, window.innerHeight - top - below);
    const scale = Math.min(figure.clientWidth / w, room / h);
    const fw = Math.max(1, Math.floor(w * scale)), fh = Math.max(1, Math.floor(h * scale));
    if (frame.style.width === fw + "px" && frame.style.height === fh + "px") return;
    for (const el of [frame, after, before]) { el.style.width = fw + "px"; el.style.height = fh + "px"; }
    frame.classList.add("fitted");
    frame.dispatchEvent(new Event("fitted"));
  };
  fit();
  window.addEventListener("resize", fit);
  document.addEventListener("patched", fit);  // a banner that came or went above it
}

// Zoom and pan: the same transform on the result, the original under its clip and the face boxes,
// so the two halves stay in register while the dividing line stays where the slider puts it. At
// real pixels (1:1) and beyond, crops of the full-size original and result replace the previews
// over the part in view: the same region of both, as the service cut it from the files.
function zoomable(frame) {
  if (!once(frame, "zoom")) return;
  const state = { scale: 1, x: 0, y: 0 };
  frame.zoom = state;
  const figure = frame.closest("figure");
  const level = figure.querySelector("[data-zoom-level]");
  const layers = () => frame.querySelectorAll("img.after, img.before, .boxes");
  let real = null;  // the result's and the original's pixel sizes, once asked for
  let asking = null;
  let pointer = null;  // where the pointer last was over the frame
  const realScale = () => (real ? real.after[0] / frame.clientWidth : null);
  const maxScale = () => Math.max(8, 2 * (realScale() || 0));
  const crops = makeCrops(frame);
  const apply = () => {
    const w = frame.clientWidth, h = frame.clientHeight, s = state.scale;
    state.x = Math.min(0, Math.max(w - w * s, state.x));
    state.y = Math.min(0, Math.max(h - h * s, state.y));
    layers().forEach((el) => {
      el.style.transformOrigin = "0 0";
      el.style.transform = s === 1 ? "" : "translate(" + state.x + "px," + state.y + "px) scale(" + s + ")";
    });
    frame.classList.toggle("zoomed", s > 1);
    const rs = realScale();
    frame.classList.toggle("real-pixels", rs !== null && s >= rs * 0.999);
    if (level) level.textContent = s === 1 ? "fit" : rs ? Math.round(100 * s / rs) + "%" : "×" + s.toFixed(2).replace(/\.?0+$/, "");
    crops.update(state, real);
  };
  const zoomTo = (s1, cx, cy) => {
    if (cx === undefined) { cx = frame.clientWidth / 2; cy = frame.clientHeight / 2; }
    const s0 = state.scale;
    s1 = Math.min(maxScale(), Math.max(1, s1));
    state.x = cx - (cx - state.x) * (s1 / s0);
    state.y = cy - (cy - state.y) * (s1 / s0);
    state.scale = s1;
    apply();
  };
  const askReal = () => {
    if (!frame.dataset.real) return Promise.resolve(null);
    if (!asking) {
      asking = fetch(frame.dataset.real, { credentials: "same-origin" })
        .then((r) => (r.ok ? r.json() : null)).catch(() => null)
        .then((got) => { real = got; if (!got) asking = null; apply(); return got; });
    }
    return asking;
  };
  frame.zoomBy = (factor, cx, cy) => { askReal(); zoomTo(state.scale * factor, cx, cy); };
  frame.zoomFit = () => { state.scale = 1; state.x = 0; state.y = 0; apply(); };
  // Real pixels where the pointer is (the middle without one), or back to fit from there.
  frame.zoomReal = async () => {
    const got = await askReal();
    if (!got) return;
    const at = pointer || { x: frame.clientWidth / 2, y: frame.clientHeight / 2 };
    if (Math.abs(state.scale - realScale()) < 1e-3) frame.zoomFit(); else zoomTo(realScale(), at.x, at.y);
  };
  frame.addEventListener("wheel", (ev) => {
    ev.preventDefault();
    const r = frame.getBoundingClientRect();
    frame.zoomBy(ev.deltaY < 0 ? 1.25 : 0.8, ev.clientX - r.left, ev.clientY - r.top);
  }, { passive: false });
  const pointers = new Map();
  let pinch = null;
  let swipe = null;
  frame.addEventListener("pointerdown", (ev) => {
    if (ev.target.closest("a")) return;
    pointers.set(ev.pointerId, { x: ev.clientX, y: ev.clientY });
    frame.setPointerCapture(ev.pointerId);
    swipe = pointers.size === 1 && ev.pointerType === "touch" && state.scale === 1
      ? { x: ev.clientX, y: ev.clientY, t: performance.now() } : null;
    if (pointers.size === 2) {
      const [a, b] = Array.from(pointers.values());
      pinch = Math.hypot(a.x - b.x, a.y - b.y);
      swipe = null;
    }
  });
  frame.addEventListener("pointermove", (ev) => {
    const r = frame.getBoundingClientRect();
    pointer = { x: ev.clientX - r.left, y: ev.clientY - r.top };
    const was = pointers.get(ev.pointerId);
    if (!was) return;
    const now = { x: ev.clientX, y: ev.clientY };
    pointers.set(ev.pointerId, now);
    if (pointers.size === 2 && pinch) {
      const [a, b] = Array.from(pointers.values());
      const d = Math.hypot(a.x - b.x, a.y - b.y);
      frame.zoomBy(d / pinch, (a.x + b.x) / 2 - r.left, (a.y + b.y) / 2 - r.top);
      pinch = d;
    } else if (pointers.size === 1 && state.scale > 1) {
      state.x += now.x - was.x; state.y += now.y - was.y;
      apply();
    }
  });
  frame.addEventListener("pointerleave", () => { if (!pointers.size) pointer = null; });
  const up = (ev) => {
    if (swipe && ev.type === "pointerup") {
      // A quick sideways swipe on a phone: the next photo (to the left) or the previous one.
      const dx = ev.clientX - swipe.x, dy = ev.clientY - swipe.y;
      if (Math.abs(dx) > 50 && Math.abs(dx) > 1.5 * Math.abs(dy) && performance.now() - swipe.t < 1000) {
        const a = document.querySelector('a[data-key="' + (dx < 0 ? "j" : "k") + '"]');
        if (a) location.assign(a.href);
      }
    }
    swipe = null;
    pointers.delete(ev.pointerId);
    if (pointers.size < 2) pinch = null;
  };
  frame.addEventListener("pointerup", up);
  frame.addEventListener("pointercancel", up);
  figure.querySelectorAll("[data-zoom]").forEach((b) => b.addEventListener("click", () => {
    const what = b.dataset.zoom;
    if (what === "in") frame.zoomBy(1.5);
    else if (what === "out") frame.zoomBy(1 / 1.5);
    else if (what === "real") { pointer = null; frame.zoomReal(); }
    else frame.zoomFit();
  }));
  frame.addEventListener("fitted", apply);
  const after = frame.querySelector("img.after");
  if (after.complete) apply(); else after.addEventListener("load", apply);
}

// The two crops of real pixels over the frame: the result's beside the preview, the original's in
// the before half's clip, each the region in view, asked for once the view stops moving.
function makeCrops(frame) {
  const made = (cls, parent, before) => {
    const img = document.createElement("img");
    img.className = "crop " + cls;
    img.alt = "";
    img.hidden = true;
    img.setAttribute("data-js-made", "");
    parent.insertBefore(img, before);
    return img;
  };
  let imgs = null;
  let timer = null;
  let asked = "";
  const update = (state, real) => {
    if (!frame.dataset.crop) return;
    if (!imgs) {
      const clip = frame.querySelector(".before-clip");
      imgs = { after: made("after-crop", frame, clip), before: made("before-crop", clip, null) };
    }
    const fw = frame.clientWidth, fh = frame.clientHeight;
    const rs = real ? real.after[0] / fw : null;
    clearTimeout(timer);
    if (!rs || state.scale < rs * 0.999) { asked = ""; imgs.after.hidden = imgs.before.hidden = true; return; }
    const [rw, rh] = real.after;
    const kx = rw / fw, ky = rh / fh;
    let x = Math.round(-state.x / state.scale * kx), y = Math.round(-state.y / state.scale * ky);
    const w = Math.max(1, Math.min(rw, Math.round(fw / state.scale * kx)));
    const h = Math.max(1, Math.min(rh, Math.round(fh / state.scale * ky)));
    x = Math.max(0, Math.min(rw - w, x)); y = Math.max(0, Math.min(rh - h, y));
    const q = "?x=" + x + "&y=" + y + "&w=" + w + "&h=" + h;
    if (q === asked) return;
    imgs.after.hidden = imgs.before.hidden = true;  // the old region is out of place now
    timer = setTimeout(() => {
      asked = q;
      for (const side of ["after", "before"]) {
        const img = imgs[side];
        img.style.width = fw + "px";
        img.style.height = fh + "px";
        img.onload = () => { if (asked === q) img.hidden = false; };
        img.src = frame.dataset.crop + side + ".jpg" + q;
        img.dataset.region = q;
      }
    }, 150);
  };
  return { update };
}

// --- keys ------------------------------------------------------------------------------------

const TEXT_INPUTS = ["text", "search", "number", "date", "email", "url", "password", "tel"];

function typingIn(t) {
  if (!t) return false;
  if (t.isContentEditable || t.tagName === "TEXTAREA" || t.tagName === "SELECT") return true;
  return t.tagName === "INPUT" && TEXT_INPUTS.includes(t.type);
}

// A key pressed on a touch screen: it has a keyboard after all, so the keys are listed.
document.addEventListener("keydown", (ev) => {
  if (ev.key && ev.key.length === 1 && !ev.ctrlKey && !ev.metaKey) document.documentElement.classList.add("keyboard");
}, true);

// Keys on a photo's page, as Lightroom Classic has them (not while typing in a field).
document.addEventListener("keydown", (ev) => {
  if (!document.querySelector(".photo-state") && !document.querySelector("[data-zoomable]")) return;
  const t = ev.target;
  if (typingIn(t)) return;
  if (document.querySelector("dialog[open]")) return;
  if ((ev.ctrlKey || ev.metaKey) && !ev.altKey && !ev.shiftKey && ev.key.toLowerCase() === "z") {
    if (document.querySelector("form[data-mark]") || undoStack().length) { ev.preventDefault(); undoMark(); }
    return;
  }
  if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
  const onRange = t && t.matches && t.matches("input[type=range]");
  const go = (key) => { const a = document.querySelector('a[data-key="' + key + '"]'); if (a) { ev.preventDefault(); location.assign(a.href); } };
  const frame = document.querySelector("[data-zoomable]");
  const marks = document.querySelector("form[data-mark]");
  const advance = autoAdvance() || ev.shiftKey;
  const mark = (change) => { if (marks) { ev.preventDefault(); markPhoto(change, advance); } };
  const digit = /^(Digit|Numpad)([0-5])$/.exec(ev.code || "");
  if (digit) { mark({ stars: Number(digit[2]) }); return; }
  switch (ev.key.length === 1 ? ev.key.toLowerCase() : ev.key) {
    case "j": go("j"); break;
    case "k": go("k"); break;
    case "ArrowRight": if (!onRange) go("j"); break;
    case "ArrowLeft": if (!onRange) go("k"); break;
    case "g": go("g"); break;
    case "p": mark({ mark: "accepted" }); break;
    case "x": mark({ mark: "rejected" }); break;
    case "u": mark({ mark: "none" }); break;
    case "l": mark({ mark: "look" }); break;
    case "z": if (frame) { ev.preventDefault(); frame.zoomReal(); } break;
    case "+": case "=": if (frame) { ev.preventDefault(); frame.zoomBy(1.5); } break;
    case "-": case "_": if (frame) { ev.preventDefault(); frame.zoomBy(1 / 1.5); } break;
    case "?": { const d = document.querySelector("[data-keys-dialog]"); if (d) { ev.preventDefault(); d.showModal(); } break; }
    default: break;
  }
});

// --- Failed ----------------------------------------------------------------------------------

// "Retry all" and "Dismiss all": the bulk command for every failure shown; the page's stream then
// shows what is left.
function enhanceFailed(root) {
  root.querySelectorAll("form[data-bulk-form]").forEach((form) => {
    if (!once(form, "bulk-form")) return;
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const data = new FormData(form);
      const { ok, reply } = await postJSON(form.action, { action: data.get("action"), view: data.get("view") });
      if (!ok) showError(form, reply.error);
      else if (reply.refused_count) showError(form, reply.refused_count + " refused: " + reply.refused.slice(0, 3).join("; "));
    });
  });
}

function enhanceReview(root) {
  enhanceResults(root);
  enhancePhoto(root);
  enhanceFailed(root);
}
