// A photo's page, beside app.js: flags and stars with the keys Lightroom Classic uses, the next
// photo after a mark, undo, the face view, the filmstrip, and the keys themselves. Its
// before/after (fit, zoom, real pixels, swipes) is loupe.js.
"use strict";

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

// Marks and undos go to the service one at a time, in the order the keys were pressed: two sent
// at once may be answered in either order, and the photo would keep the earlier key's mark.
let marking = Promise.resolve();

function inTurn(work) {
  marking = marking.then(work, work);
  return marking;
}

// Flag (``change.mark``) or rate (``change.stars``; ``change.star``, as its buttons do) this
// photo; then, when asked, the next one.
function markPhoto(change, advance) { return inTurn(() => markNow(change, advance)); }

function undoMark() { return inTurn(undoNow); }

async function markNow(change, advance) {
  const now = photoState();
  const form = document.querySelector("form[data-mark]");
  if (!now || !form) return;
  // A star clicked again clears the rating: told from the photo's rating when its turn comes.
  if (change.star !== undefined) change = { stars: now.stars === change.star ? 0 : change.star };
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

async function undoNow() {
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
        markPhoto({ star: Number(b.value) }, autoAdvance());
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

