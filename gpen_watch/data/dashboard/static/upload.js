// Sending photos from the browser, on every page: files and whole folders dropped anywhere, or
// picked with the panel's buttons (drop.js finds them), go one request each (a few at once) to the API's
// POST /api/v1/photos, under the page's own sign-in (its session cookie, and the header that says
// it is the page's own request). Each file's progress and the total show as they go; then the
// batch's stream says how many are restored, with a link to them in Results and to their zip.
// A file's subfolders go with it where its inbox takes subfolders. A file sent again (after a
// break, or Stop) goes under the same Idempotency-Key: a photo the service already took is not
// taken twice.
"use strict";

const UPLOAD_AT_ONCE = 3;   // requests at once (the API's uploads_at_once bounds it too)
const UPLOAD_TRIES = 5;     // a "too many at once" or "busy" answer is tried again, this often
const up = {
  panel: null, index: null, batch: "", files: [], sending: 0, next: 0,
  following: null, listed: 0,
};

function upEl(name) { return up.panel.querySelector("[data-upload-" + name + "]"); }

function mbText(bytes) {
  if (bytes === 0) return "0 KB";
  if (bytes < 1e6) return (bytes / 1e3).toFixed(bytes < 1e4 ? 1 : 0) + " KB";
  return (bytes / 1e6).toFixed(bytes < 1e8 ? 1 : 0) + " MB";
}

// A batch names the files of one list: "upload-20261206-143005-7f3a" (the API's batch names).
function newBatch() {
  const t = new Date(), p = (n) => String(n).padStart(2, "0");
  const rand = Math.floor(Math.random() * 0x10000).toString(16).padStart(4, "0");
  return "upload-" + t.getFullYear() + p(t.getMonth() + 1) + p(t.getDate()) + "-" + p(t.getHours())
    + p(t.getMinutes()) + p(t.getSeconds()) + "-" + rand;
}

// --- the service's inboxes ---------------------------------------------------------------------

async function loadIndex() {
  if (up.index) return up.index;
  const problem = upEl("problem");
  try {
    const r = await fetch("/api/v1/", { credentials: "same-origin" });
    const reply = await r.json().catch(() => ({}));
    if (!r.ok) throw new Error(reply.error || "the service refused (" + r.status + ")");
    up.index = reply;
  } catch (e) {
    problem.textContent = "Photos cannot be sent now: " + e.message;
    problem.hidden = false;
    return null;
  }
  problem.hidden = true;
  const select = upEl("inbox");
  select.replaceChildren(...up.index.inboxes.map((inbox) => {
    const o = document.createElement("option");
    o.value = String(inbox.number);
    o.textContent = inbox.path || inbox.name;
    return o;
  }));
  let kept = null;
  try { kept = localStorage.getItem("gpen-watch:upload-inbox"); } catch (e) { /* private mode */ }
  if (kept !== null && up.index.inboxes.some((i) => String(i.number) === kept)) select.value = kept;
  showInbox();
  return up.index;
}

function chosenInbox() {
  const number = Number(upEl("inbox").value || 0);
  return (up.index.inboxes.find((i) => i.number === number)) || up.index.inboxes[0];
}

function showInbox() {
  const inbox = chosenInbox();
  upEl("where").textContent = inbox.subfolders ? "folders keep their subfolders there"
    : "this inbox takes no subfolders: a folder's files go in by their names alone";
}

// --- files in (drop.js finds them) -----------------------------------------------------------

async function add(found) {
  openPanel();
  const index = await loadIndex();
  if (!index || !found.length) return;
  const inbox = chosenInbox();
  if (!up.files.length) { up.batch = newBatch(); up.listed = 0; }
  let hidden = 0;
  for (const { file, path } of found) {
    const parts = path.split("/").filter(Boolean);
    // Hidden files (.DS_Store, ._IMG_1.jpg, a folder's .thumbnails) are never photos to restore.
    if (parts.some((p) => p.startsWith("."))) { hidden += 1; continue; }
    const name = inbox.subfolders ? parts.join("/") : parts[parts.length - 1];
    const item = { file, name, inbox: inbox.number, n: up.files.length, state: "waiting", loaded: 0, tries: 0 };
    up.files.push(item);
    upEl("list").appendChild(row(item));
  }
  up.hidden = (up.hidden || 0) + hidden;
  pump();
  draw();
}

// --- sending -------------------------------------------------------------------------------------

function pump() {
  const most = Math.max(1, Math.min(UPLOAD_AT_ONCE, (up.index && up.index.limits.uploads_at_once) || UPLOAD_AT_ONCE));
  while (up.sending < most) {
    const item = up.files.find((f) => f.state === "waiting" && !f.later);
    if (!item) break;
    send(item);
  }
}

function send(item) {
  const xhr = new XMLHttpRequest();
  const query = new URLSearchParams({ name: item.name, inbox: String(item.inbox), batch: up.batch });
  item.xhr = xhr; item.state = "sending"; item.loaded = 0; item.error = "";
  up.sending += 1;
  xhr.open("POST", "/api/v1/photos?" + query.toString());
  xhr.setRequestHeader("X-GPEN-Watch", "1");
  xhr.setRequestHeader("Content-Type", "application/octet-stream");
  xhr.setRequestHeader("Idempotency-Key", up.batch + "-" + item.n);
  xhr.upload.addEventListener("progress", (ev) => { item.loaded = ev.loaded; drawSoon(item); });
  const done = (state, error) => {
    up.sending -= 1; item.xhr = null; item.state = state; item.error = error || "";
    if (state !== "sent") item.loaded = 0;
    drawRow(item); draw(); pump();
  };
  xhr.addEventListener("load", () => {
    let reply = {};
    try { reply = JSON.parse(xhr.responseText); } catch (e) { /* not JSON */ }
    if (xhr.status === 200 || xhr.status === 201) {
      item.loaded = item.file.size; item.photo = reply; item.name = reply.name || item.name;
      done("sent", reply.note || "");
      follow();
    } else if ((xhr.status === 429 || xhr.status === 503) && item.tries < UPLOAD_TRIES) {
      // Other uploads hold the service's slots: this one waits its turn, then goes again.
      item.tries += 1; item.later = true;
      const wait = Math.min(30, Number(xhr.getResponseHeader("Retry-After")) || 2);
      done("waiting", "waiting " + wait + " s: " + (reply.error || "the service is busy"));
      setTimeout(() => { item.later = false; pump(); }, wait * 1000);
    } else {
      done("refused", reply.error || "the service refused it (" + xhr.status + ")");
    }
  });
  xhr.addEventListener("error", () => done("broken", "the connection broke off before the service answered; nothing half-sent is kept: send it again"));
  xhr.addEventListener("abort", () => done("stopped", "stopped; nothing of it was kept"));
  xhr.send(item.file);
}

function stop() {
  for (const item of up.files) {
    if (item.state === "waiting") { item.state = "stopped"; item.error = "stopped before it was sent"; drawRow(item); }
  }
  for (const item of up.files) if (item.xhr) item.xhr.abort();
  draw();
}

function sendAgain() {
  for (const item of up.files) {
    if (item.state === "stopped" || item.state === "broken") { item.state = "waiting"; item.tries = 0; drawRow(item); }
  }
  pump();
  draw();
}

function clearList() {
  if (up.files.some((f) => f.state === "sending" || f.state === "waiting")) return;
  up.files = []; up.hidden = 0; up.batch = "";
  if (up.following) { up.following.close(); up.following = null; }
  upEl("list").replaceChildren();
  draw();
}

// --- the batch restored: its counts as they change, and each file's state -----------------------

function follow() {
  if (up.following || !up.batch) return;
  const source = new EventSource("/api/v1/batches/" + up.batch + "/events");
  up.following = source;
  source.addEventListener("batch", (ev) => {
    const counts = JSON.parse(ev.data);
    showRestored(counts);
    refreshRows();
    const busy = up.files.some((f) => f.state === "sending" || f.state === "waiting");
    if (counts.final && !busy) { source.close(); if (up.following === source) up.following = null; }
  });
  source.addEventListener("error", () => {
    if (source.readyState === EventSource.CLOSED && up.following === source) up.following = null;
  });
}

function showRestored(summary) {
  const c = summary.counts || {};
  const failed = (c.failed || 0) + (c.unsupported || 0);
  const ended = summary.total - summary.waiting;
  upEl("restored").textContent = "Restored " + (c.done || 0) + (c.duplicate ? " (and " + c.duplicate + " already restored before)" : "")
    + " of " + summary.total + " sent" + (failed ? "; " + failed + " failed" : "")
    + (summary.waiting ? "; " + summary.waiting + " waiting or being restored" : ended ? "; all done" : "");
}

// Each file's state from the batch's list; a change that comes while it is read is read next.
let refreshing = false, refreshAgain = false;
async function refreshRows() {
  if (refreshing) { refreshAgain = true; return; }
  refreshing = true;
  do {
    refreshAgain = false;
    try {
      let after = 0;
      for (let page = 0; page < 3; page++) {
        const r = await fetch("/api/v1/batches/" + up.batch + "?after=" + after, { credentials: "same-origin" });
        if (!r.ok) break;
        const batch = await r.json();
        for (const photo of batch.photos) {
          const item = up.files.find((f) => f.photo && f.photo.id === photo.id);
          if (item) { item.photo = photo; drawRow(item); }
        }
        if (batch.next === null) break;
        after = batch.next;
      }
    } catch (e) { /* the next change reads it again */ }
    if (refreshAgain) await new Promise((resolve) => setTimeout(resolve, 500));
  } while (refreshAgain);
  refreshing = false;
}

// --- drawing -------------------------------------------------------------------------------------

function row(item) {
  const li = document.createElement("li");
  li.className = "upload-file";
  const name = document.createElement("span");
  name.className = "upload-name";
  const bar = document.createElement("progress");
  bar.max = 100; bar.value = 0;
  const what = document.createElement("span");
  what.className = "upload-what";
  li.append(name, bar, what);
  item.row = li;
  drawRow(item);
  return li;
}

const PHOTO_WORDS = { queued: "waiting to be restored", running: "being restored", done: "restored",
  failed: "failed", unsupported: "not a photo it can restore", duplicate: "restored before",
  gone: "taken back" };

function drawRow(item) {
  const li = item.row;
  if (!li) return;
  const [name, bar, what] = li.children;
  name.textContent = item.name + " · " + mbText(item.file.size);
  const pct = item.file.size ? Math.floor(100 * item.loaded / item.file.size) : (item.state === "sent" ? 100 : 0);
  bar.value = item.state === "sent" ? 100 : pct;
  bar.setAttribute("aria-label", item.name + " sent");
  li.dataset.state = item.photo && item.state === "sent" ? item.photo.state : item.state;
  what.replaceChildren();
  if (item.state === "sent" && item.photo) {
    const link = document.createElement("a");
    link.href = "/photo/" + item.photo.id;
    link.textContent = PHOTO_WORDS[item.photo.state] || item.photo.state;
    what.append(link);
    if (item.photo.result) {
      const get = document.createElement("a");
      get.href = item.photo.result.url;
      get.setAttribute("download", item.photo.result.name);
      get.textContent = "download";
      what.append(" · ", get);
    }
    if (item.error) what.append(" · " + item.error);
    if (item.photo.state === "failed" && item.photo.error) what.append(": " + item.photo.error);
  } else if (item.state === "sending") {
    what.textContent = pct + " %";
  } else if (item.state === "refused") {
    what.textContent = "refused: " + item.error;
  } else {
    what.textContent = item.error || item.state;
  }
}

let drawQueued = false;
function drawSoon(item) {
  drawRow(item);
  if (drawQueued) return;
  drawQueued = true;
  requestAnimationFrame(() => { drawQueued = false; draw(); });
}

function draw() {
  const summary = upEl("summary");
  const files = up.files;
  summary.hidden = files.length === 0 && !up.hidden;
  const total = files.reduce((n, f) => n + f.file.size, 0);
  const count = (s) => files.filter((f) => f.state === s).length;
  const sent = count("sent"), refused = count("refused"), stopped = count("stopped") + count("broken");
  // Bytes dealt with: sent, refused (nothing more will go), and what the requests under way sent.
  const handled = files.reduce((n, f) => n + (f.state === "sent" || f.state === "refused" ? f.file.size : f.state === "sending" ? f.loaded : 0), 0);
  const pct = total ? Math.floor(100 * handled / total) : (files.length && sent + refused === files.length ? 100 : 0);
  upEl("bar").value = pct;
  const parts = [sent + " of " + files.length + " file" + (files.length === 1 ? "" : "s") + " sent"];
  if (refused) parts.push(refused + " refused");
  if (stopped) parts.push(stopped + " not sent");
  parts.push(mbText(handled) + " of " + mbText(total), pct + " %");
  if (up.hidden) parts.push(up.hidden + " hidden file" + (up.hidden === 1 ? "" : "s") + " left out");
  upEl("status").textContent = parts.join(" · ");
  const busy = up.sending > 0 || files.some((f) => f.state === "waiting");
  upEl("stop").hidden = !busy;
  upEl("again").hidden = stopped === 0 || busy;
  upEl("clear").hidden = busy;
  upEl("results").href = "/results?batch=" + encodeURIComponent(up.batch);
  upEl("zip").href = "/results.zip?batch=" + encodeURIComponent(up.batch);
  up.panel.querySelector(".upload-links").hidden = sent === 0;
  const label = document.querySelector("[data-upload-label]");
  if (label) { label.textContent = busy ? pct + " %" : "Upload"; label.classList.toggle("busy", busy); }
}

// --- the panel, the picker and the drop ----------------------------------------------------------

function openPanel() {
  up.panel.hidden = false;
  const open = document.querySelector("[data-upload-open]");
  if (open) open.setAttribute("aria-expanded", "true");
  loadIndex();
}

function hidePanel() {
  up.panel.hidden = true;
  const open = document.querySelector("[data-upload-open]");
  if (open) { open.setAttribute("aria-expanded", "false"); open.focus(); }
}

function enhanceUpload() {
  up.panel = document.querySelector("[data-upload]");
  const open = document.querySelector("[data-upload-open]");
  if (!up.panel || !open) return;
  open.hidden = false;
  open.addEventListener("click", () => { if (up.panel.hidden) openPanel(); else hidePanel(); });
  upEl("hide").addEventListener("click", hidePanel);
  upEl("stop").addEventListener("click", stop);
  upEl("again").addEventListener("click", sendAgain);
  upEl("clear").addEventListener("click", clearList);
  upEl("inbox").addEventListener("change", () => {
    try { localStorage.setItem("gpen-watch:upload-inbox", upEl("inbox").value); } catch (e) { /* private mode */ }
    showInbox();
  });
  // Leaving the page would cut off what is being sent: the browser asks first.
  window.addEventListener("beforeunload", (ev) => {
    if (up.sending > 0 || up.files.some((f) => f.state === "waiting")) { ev.preventDefault(); ev.returnValue = ""; }
  });
  draw();
}

document.addEventListener("DOMContentLoaded", enhanceUpload);
