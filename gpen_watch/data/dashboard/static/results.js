// Results, beside app.js: the filters as you type, the tile size and what a tile shows, the
// selection and its bulk actions (and Failed's Retry all and Dismiss all); the choices a person
// makes on this browser (PREFS), and the one JSON post the review's pages make. A photo's page is
// photo.js, its before/after loupe.js.
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

// The search on its way. Each key starts one; on a busy machine an older one's reply may come
// after a newer one's, and would put the grid back to what was typed before: it is called off.
let searching = null;

async function applyFilters(form) {
  const q = filterQuery(form);
  history.replaceState(null, "", "/results" + q);
  if (searching) searching.abort();
  const mine = new AbortController();
  searching = mine;
  let text;
  try {
    const r = await fetch("/results" + q, { credentials: "same-origin", signal: mine.signal });
    text = await r.text();
  } catch (e) {
    if (!mine.signal.aborted) setConn("bad", "cannot reach the service");
    return;
  }
  if (searching !== mine) return;  // a newer search came meanwhile
  searching = null;
  const page = new DOMParser().parseFromString(text, "text/html");
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
  bar.querySelectorAll("[data-bulk-action], [data-select-none], [data-bulk-strength], [data-bulk-zip]").forEach((b) => { b.disabled = n === 0; });
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

// The selection's results as one zip, streamed by the server as it is built: the ticked tiles by id,
// or every photo of the view. The browser saves it; the page stays.
function downloadZip() {
  if (!selection.all && selection.size === 0) return;
  const matches = document.querySelector("[data-query]");
  const url = selection.all ? "/results.zip" + (matches ? matches.dataset.query : "")
    : "/results.zip?ids=" + Array.from(selection).join(",");
  window.location.assign(url);
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
    bar.querySelector("[data-bulk-zip]").addEventListener("click", downloadZip);
  }
  if (document.querySelector("[data-bulk]")) showSelection();
}

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
