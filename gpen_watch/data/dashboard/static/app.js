// The dashboard's only script: live updates over Server-Sent Events, the before/after slider,
// face boxes on the preview, and Pause/Resume without a page load. Every page works without it
// (forms post, links navigate); this makes it live.
"use strict";

const CSRF = { "X-GPEN-Watch": "1" };

function setConn(state, text) {
  const el = document.getElementById("conn");
  if (el) { el.dataset.liveState = state; el.textContent = text; }
}

// A line under a form: a refusal's sentence (an alert) or what was done (a status), replacing the
// form's earlier line of that kind.
function showLine(form, kind, text) {
  let note = form.parentElement.querySelector("." + kind);
  if (!note) {
    note = document.createElement("p");
    note.className = kind + " banner " + (kind === "refused" ? "bad" : "info");
    note.setAttribute("role", kind === "refused" ? "alert" : "status");
    form.parentElement.appendChild(note);
  }
  note.textContent = text;
}

function showError(form, text) { showLine(form, "refused", text); }

function showNote(form, text) { showLine(form, "queued", text); }

// The settings page's forms: posted with the CSRF header, and the page the server answers with,
// saved or refused with its sentence, shown in place.
async function postSettings(form) {
  const button = form.querySelector("button[type=submit]") || document.getElementById("save");
  if (button) button.disabled = true;
  try {
    const r = await fetch(form.action, {
      method: "POST",
      headers: { ...CSRF, "Content-Type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams(new FormData(form)),
      credentials: "same-origin",
    });
    const page = new DOMParser().parseFromString(await r.text(), "text/html");
    const fresh = page.getElementById("live");
    if (!fresh) { setConn("bad", "the service refused: " + r.status); return; }
    const main = document.getElementById("live");
    main.innerHTML = fresh.innerHTML;
    enhance(main);
    const banner = main.querySelector("#settings-error, #settings-saved");
    window.scrollTo(0, 0);
    if (banner) { banner.tabIndex = -1; banner.focus(); }
  } catch (e) {
    setConn("bad", "cannot reach the service");
  } finally {
    if (button && button.isConnected) button.disabled = false;
  }
}

function enhance(root) {
  enhanceReview(root);
  enhanceActivity(root);
  enhanceSettingsFilter(root);
  root.querySelectorAll("form[data-settings]").forEach((form) => {
    form.addEventListener("submit", (ev) => { ev.preventDefault(); postSettings(form); });
  });
  root.querySelectorAll("form[data-command]").forEach((form) => {
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const button = form.querySelector("button");
      if (button) button.disabled = true;
      try {
        const r = await fetch(form.action, { method: "POST", headers: CSRF, credentials: "same-origin" });
        let reply = {};
        try { reply = await r.json(); } catch (e) { /* not JSON */ }
        if (!r.ok) {
          showError(form, reply.error || "the service refused (" + r.status + ")");
          if (button) button.disabled = false;
        } else if (reply.changed === false && reply.said) {
          // Pause twice: the service says it already was; the button comes back.
          showNote(form, reply.said);
          if (button) button.disabled = false;
        }
      } catch (e) {
        setConn("bad", "cannot reach the service");
      }
    });
  });
  root.querySelectorAll("form[data-redo]").forEach((form) => {
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const data = new FormData(form);
      const settings = {};
      for (const [field, name] of [["strength", "restore.strength"], ["model", "restore.model"],
        ["faces", "restore.faces"], ["upscale", "restore.upscale"], ["format", "output.format"]]) {
        const v = data.get(field);
        if (v) settings[name] = field === "strength" ? Number(v) : field === "upscale" ? Number(v) : v;
      }
      let faceIds = null;
      if (ev.submitter && ev.submitter.dataset.keep !== undefined) faceIds = [];
      else if (data.get("pick")) faceIds = data.getAll("face").map(Number);
      const r = await fetch(form.action, {
        method: "POST", credentials: "same-origin",
        headers: { ...CSRF, "Content-Type": "application/json" },
        body: JSON.stringify({ settings: settings, face_ids: faceIds }),
      });
      let reply = {};
      try { reply = await r.json(); } catch (e) { /* not JSON */ }
      if (!r.ok) showError(form, reply.error || "the service refused (" + r.status + ")");
      else {
        showNote(form, "Queued as run " + reply.id + ", ahead of new arrivals." + (reply.note ? " " + reply.note : ""));
        rememberPending(reply.id);
      }
    });
  });
  root.querySelectorAll("[data-compare]").forEach((frame) => {
    const figure = frame.closest("figure");
    const range = figure.querySelector("[data-compare-range]");
    const clip = frame.querySelector(".before-clip");
    const after = frame.querySelector("img.after");
    const show = () => { clip.style.width = range.value + "%"; };
    range.addEventListener("input", show);
    show();
    const place = () => {
      const w = after.naturalWidth || after.width, h = after.naturalHeight || after.height;
      frame.querySelectorAll("[data-box]").forEach((box) => {
        const [x0, y0, x1, y1] = box.dataset.box.split(",").map(Number);
        box.style.left = (100 * x0 / w) + "%";
        box.style.top = (100 * y0 / h) + "%";
        box.style.width = (100 * (x1 - x0) / w) + "%";
        box.style.height = (100 * (y1 - y0) / h) + "%";
      });
    };
    if (after.complete) place(); else after.addEventListener("load", place);
    // The original keeps the frame's full width under its clip, so the two line up.
    const size = () => { frame.querySelector("img.before").style.width = frame.clientWidth + "px"; };
    size();
    window.addEventListener("resize", size);
  });
}

// What identifies a control across a re-render: its link, its form's action, or its role.
function focusKey(el) {
  if (!el || !document.getElementById("live").contains(el)) return null;
  if (el.tagName === "A") return "a " + el.getAttribute("href");
  if (el.tagName === "BUTTON") return "button " + (el.form ? el.form.getAttribute("action") : el.textContent);
  if (el.matches("[data-compare-range]")) return "range";
  if (el.tagName === "SUMMARY" && el.parentElement.dataset.key) return "summary " + el.parentElement.dataset.key;
  return null;
}

// The stream of the page's changing part. A page whose filters stay outside it (Results) names
// the element the stream fills (data-live-into); a new filter opens a new stream.
let source = null;

function live(url) {
  const main = document.getElementById("live");
  url = url || (main && main.dataset.live);
  if (source) { source.close(); source = null; }
  if (!url) { setConn("static", ""); return; }
  source = new EventSource(url);
  source.addEventListener("open", () => setConn("ok", "live"));
  source.addEventListener("error", () => setConn("bad", "reconnecting…"));
  source.addEventListener("page", (ev) => {
    const into = (main.dataset.liveInto && document.querySelector(main.dataset.liveInto)) || main;
    // Keep the slider where the person left it, and the keyboard focus where it was.
    const range = into.querySelector("[data-compare-range]");
    const kept = range ? range.value : null;
    const focus = focusKey(document.activeElement);
    into.innerHTML = ev.data;
    const again = into.querySelector("[data-compare-range]");
    if (again && kept !== null) again.value = kept;
    enhance(into);
    if (focus) {
      const el = Array.from(into.querySelectorAll("a, button, input, summary")).find((e) => focusKey(e) === focus);
      if (el) el.focus({ preventScroll: true });
    }
    setConn("ok", "live");
  });
}

document.addEventListener("DOMContentLoaded", () => { enhance(document); live(); });

// --- review: Results' filters and selection, a photo's keys, marks, zoom and face crops -------

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

// Results: the filters apply as the person types (the URL follows, so the view can be bookmarked);
// the grid and its stream are replaced, the form is not (the caret stays where it was).
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
  target.innerHTML = fresh.innerHTML;
  const main = document.getElementById("live");
  main.dataset.live = "/live/results" + q;
  enhance(target);
  selection.clear(); selection.all = false; showSelection();
  live("/live/results" + q);
}

const selection = new Set();
selection.all = false;
let lastPicked = null;

function showSelection() {
  const bar = document.querySelector("[data-bulk]");
  if (!bar) return;
  const total = Number((document.querySelector("[data-total]") || {}).dataset?.total || 0);
  const n = selection.all ? total : selection.size;
  // The bar stays while a bulk action's outcome or progress is shown, with nothing selected.
  bar.hidden = n === 0 && bar.querySelector("[data-bulk-progress]").hidden;
  bar.querySelector(".bulk-count").hidden = n === 0;
  bar.querySelector(".bulk-actions").hidden = n === 0;
  bar.querySelector("[data-bulk-count]").textContent = selection.all ? "All " + n.toLocaleString() + " matching" : String(n);
  document.querySelectorAll("[data-select]").forEach((box) => {
    box.checked = selection.all || selection.has(Number(box.value));
    box.closest("li").classList.toggle("selected", box.checked);
  });
}

async function bulk(action) {
  const bar = document.querySelector("[data-bulk]");
  const out = bar.querySelector("[data-bulk-progress]");
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
    out.textContent = ({ accept: "Accepted ", look: "Marked for another look: ", unmark: "Mark cleared: ", retry: "Sent back to their inbox: ", dismiss: "Dismissed: " })[action] + reply.done + "." + refused;
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

function enhanceResults(root) {
  const form = root.querySelector && root.querySelector("form[data-filters]");
  if (form && !form.dataset.ready) {
    form.dataset.ready = "1";
    let timer = null;
    const soon = () => { clearTimeout(timer); timer = setTimeout(() => applyFilters(form), 200); };
    form.addEventListener("input", soon);
    form.addEventListener("change", soon);
    form.addEventListener("submit", (ev) => { ev.preventDefault(); applyFilters(form); });
  }
  root.querySelectorAll("[data-select]").forEach((box) => {
    box.addEventListener("click", (ev) => {
      const boxes = Array.from(document.querySelectorAll("[data-select]"));
      if (selection.all) { selection.all = false; boxes.forEach((b) => selection.add(Number(b.value))); }
      const on = box.checked;
      if (ev.shiftKey && lastPicked !== null) {
        const [a, b] = [boxes.indexOf(lastPicked), boxes.indexOf(box)].sort((x, y) => x - y);
        boxes.slice(a, b + 1).forEach((x) => on ? selection.add(Number(x.value)) : selection.delete(Number(x.value)));
      } else if (on) selection.add(Number(box.value)); else selection.delete(Number(box.value));
      lastPicked = box;
      showSelection();
    });
  });
  const bar = root.querySelector && root.querySelector("[data-bulk]");
  if (bar && !bar.dataset.ready) {
    bar.dataset.ready = "1";
    bar.querySelector("[data-select-all]").addEventListener("click", () => { selection.all = true; showSelection(); });
    bar.querySelector("[data-select-none]").addEventListener("click", () => { selection.clear(); selection.all = false; showSelection(); });
    bar.querySelectorAll("[data-bulk-action]").forEach((b) => b.addEventListener("click", () => bulk(b.dataset.bulkAction)));
  }
  if (document.querySelector("[data-bulk]")) showSelection();
}

// A photo's page: the mark buttons post without a page load; "reviewed" is noted once the page
// has been seen for two seconds; after a redo asked here the page moves to the new run when done.
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

let reviewTimer = null;

function enhancePhoto(root) {
  root.querySelectorAll("form[data-mark]").forEach((form) => {
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const mark = ev.submitter ? ev.submitter.value : "accepted";
      await markPhoto(form, mark);
    });
  });
  root.querySelectorAll("[data-face-open]").forEach((link) => {
    link.addEventListener("click", (ev) => {
      const dialog = document.querySelector("[data-face-dialog]");
      if (!dialog || !dialog.showModal) return;
      ev.preventDefault();
      const li = link.closest("li");
      const before = li.querySelector("[data-face-open]").getAttribute("href");
      dialog.querySelector("[data-face-before]").src = before;
      const after = dialog.querySelector("[data-face-after]");
      after.closest("figure").hidden = !link.dataset.after;
      if (link.dataset.after) after.src = link.dataset.after;
      dialog.showModal();
    });
  });
  const help = root.querySelector && root.querySelector("[data-keys-help]");
  if (help) help.addEventListener("click", () => document.querySelector("[data-keys-dialog]").showModal());
  root.querySelectorAll("[data-zoomable]").forEach(zoomable);
  const st = document.querySelector(".photo-state");
  if (st && !st.dataset.reviewed && st.dataset.state === "done" && reviewTimer === null) {
    reviewTimer = setTimeout(() => {
      if (document.visibilityState === "visible") postJSON("/api/mark/" + st.dataset.run, { mark: "reviewed" });
    }, 2000);
  }
  followPending();
}

async function markPhoto(form, mark) {
  const note = form.querySelector("input[name=note]");
  const { ok, reply } = await postJSON(form.action, { mark, note: note && mark === "look" ? note.value : null });
  if (!ok) showError(form, reply.error);
}

// Zoom and pan: the same transform on the result, the original under its clip and the face boxes,
// so the two halves stay in register while the dividing line stays where the slider puts it.
const zoomState = { scale: 1, x: 0, y: 0 };

function zoomable(frame) {
  const layers = () => frame.querySelectorAll("img.after, img.before, .boxes");
  const level = frame.closest("figure").querySelector("[data-zoom-level]");
  const apply = () => {
    const w = frame.clientWidth, h = frame.clientHeight, s = zoomState.scale;
    zoomState.x = Math.min(0, Math.max(w - w * s, zoomState.x));
    zoomState.y = Math.min(0, Math.max(h - h * s, zoomState.y));
    layers().forEach((el) => {
      el.style.transformOrigin = "0 0";
      el.style.transform = s === 1 ? "" : "translate(" + zoomState.x + "px," + zoomState.y + "px) scale(" + s + ")";
    });
    frame.classList.toggle("zoomed", s > 1);
    if (level) level.textContent = Math.round(s * 100) + "%";
  };
  const zoomAt = (factor, cx, cy) => {
    const s0 = zoomState.scale, s1 = Math.min(8, Math.max(1, s0 * factor));
    if (cx === undefined) { cx = frame.clientWidth / 2; cy = frame.clientHeight / 2; }
    zoomState.x = cx - (cx - zoomState.x) * (s1 / s0);
    zoomState.y = cy - (cy - zoomState.y) * (s1 / s0);
    zoomState.scale = s1;
    apply();
  };
  frame.zoomBy = zoomAt;
  frame.zoomFit = () => { zoomState.scale = 1; zoomState.x = 0; zoomState.y = 0; apply(); };
  frame.addEventListener("wheel", (ev) => {
    ev.preventDefault();
    const r = frame.getBoundingClientRect();
    zoomAt(ev.deltaY < 0 ? 1.25 : 0.8, ev.clientX - r.left, ev.clientY - r.top);
  }, { passive: false });
  const pointers = new Map();
  let pinch = null;
  frame.addEventListener("pointerdown", (ev) => {
    if (ev.target.closest("a")) return;
    pointers.set(ev.pointerId, { x: ev.clientX, y: ev.clientY });
    frame.setPointerCapture(ev.pointerId);
    if (pointers.size === 2) {
      const [a, b] = Array.from(pointers.values());
      pinch = Math.hypot(a.x - b.x, a.y - b.y);
    }
  });
  frame.addEventListener("pointermove", (ev) => {
    const was = pointers.get(ev.pointerId);
    if (!was) return;
    const now = { x: ev.clientX, y: ev.clientY };
    pointers.set(ev.pointerId, now);
    if (pointers.size === 2 && pinch) {
      const [a, b] = Array.from(pointers.values());
      const d = Math.hypot(a.x - b.x, a.y - b.y);
      const r = frame.getBoundingClientRect();
      zoomAt(d / pinch, (a.x + b.x) / 2 - r.left, (a.y + b.y) / 2 - r.top);
      pinch = d;
    } else if (pointers.size === 1 && zoomState.scale > 1) {
      zoomState.x += now.x - was.x; zoomState.y += now.y - was.y;
      apply();
    }
  });
  const up = (ev) => { pointers.delete(ev.pointerId); if (pointers.size < 2) pinch = null; };
  frame.addEventListener("pointerup", up);
  frame.addEventListener("pointercancel", up);
  const tools = frame.closest("figure").querySelector(".zoom-tools");
  if (tools) tools.querySelectorAll("[data-zoom]").forEach((b) => b.addEventListener("click", () => {
    if (b.dataset.zoom === "in") zoomAt(1.5); else if (b.dataset.zoom === "out") zoomAt(1 / 1.5); else frame.zoomFit();
  }));
  // A live update renders new images: they take the zoom the person had.
  const after = frame.querySelector("img.after");
  if (after.complete) apply(); else after.addEventListener("load", apply);
}

// Failed's "Retry all" and "Dismiss all": the bulk command for every failure shown; the page's
// stream then shows what is left.
function enhanceFailed(root) {
  root.querySelectorAll("form[data-bulk-form]").forEach((form) => {
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

// Keys on a photo's page (not while typing in a field).
document.addEventListener("keydown", (ev) => {
  if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
  const t = ev.target;
  if (t && (t.isContentEditable || ["INPUT", "SELECT", "TEXTAREA"].includes(t.tagName))) return;
  if (!document.querySelector(".photo-state") && !document.querySelector("[data-zoomable]")) return;
  if (document.querySelector("dialog[open]") && ev.key !== "Escape") return;
  const go = (key) => { const a = document.querySelector('a[data-key="' + key + '"]'); if (a) { ev.preventDefault(); location.assign(a.href); } };
  const frame = document.querySelector("[data-zoomable]");
  const form = document.querySelector("form[data-mark]");
  switch (ev.key) {
    case "j": case "ArrowRight": go("j"); break;
    case "k": case "ArrowLeft": go("k"); break;
    case "u": go("u"); break;
    case "a": if (form) { ev.preventDefault(); markPhoto(form, "accepted"); } break;
    case "l": if (form) { ev.preventDefault(); markPhoto(form, "look"); } break;
    case "+": case "=": if (frame) { ev.preventDefault(); frame.zoomBy(1.5); } break;
    case "-": case "_": if (frame) { ev.preventDefault(); frame.zoomBy(1 / 1.5); } break;
    case "0": if (frame) { ev.preventDefault(); frame.zoomFit(); } break;
    case "?": { const d = document.querySelector("[data-keys-dialog]"); if (d) { ev.preventDefault(); d.showModal(); } break; }
    default: break;
  }
});

// --- activity and settings ------------------------------------------------------------------

// Activity: the steps a person unfolded stay unfolded when the live page is drawn again.
const openSteps = new Set();

function enhanceActivity(root) {
  root.querySelectorAll("details[data-key]").forEach((d) => {
    if (openSteps.has(d.dataset.key)) d.open = true;
    d.addEventListener("toggle", () => {
      if (d.open) openSteps.add(d.dataset.key); else openSteps.delete(d.dataset.key);
    });
  });
}

// Settings: the filter box shows only the settings whose label, key or note hold every word
// typed. Without the script the box stays hidden and every setting is shown.
let settingsFilter = "";

function filterSettings(form, words, count) {
  let shown = 0;
  form.querySelectorAll(".setting[data-search]").forEach((row) => {
    row.hidden = !words.every((w) => row.dataset.search.includes(w));
    if (!row.hidden) shown += 1;
  });
  form.querySelectorAll("details.profile, fieldset.inbox, .settings-section").forEach((box) => {
    const any = box.querySelector(".setting[data-search]:not([hidden])") !== null;
    box.hidden = words.length > 0 && !any;
    const heading = box.matches(".settings-section") && box.querySelector("h2[id]");
    const link = heading && document.querySelector('.toc a[href="#' + heading.id + '"]');
    if (link) link.hidden = box.hidden;  // no link to a section the filter hid
    if (box.tagName === "DETAILS") {
      if (words.length && any && !box.open) { box.open = true; box.dataset.filterOpened = "1"; }
      if (!words.length && box.dataset.filterOpened) { box.open = false; delete box.dataset.filterOpened; }
    }
  });
  count.textContent = !words.length ? "" : shown === 0 ? "No setting matches."
    : shown + (shown === 1 ? " setting matches." : " settings match.");
}

function enhanceSettingsFilter(root) {
  const bar = root.querySelector && root.querySelector("[data-filter-bar]");
  const form = document.getElementById("settings-form");
  if (!bar || !form) return;
  const input = bar.querySelector("input[type=search]");
  const count = bar.querySelector("[role=status]");
  const apply = () => {
    settingsFilter = input.value;
    filterSettings(form, input.value.toLowerCase().split(/\s+/).filter(Boolean), count);
  };
  bar.hidden = false;
  input.value = settingsFilter;  // the page drawn again after a save keeps the filter
  input.addEventListener("input", apply);
  apply();
}
