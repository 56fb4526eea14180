// The dashboard's script (results.js, photo.js and loupe.js beside it for the review): live
// updates over Server-Sent Events that patch only what changed, the before/after slider, face
// boxes on the preview, Pause/Resume and the forms without a page load. Every page works without
// it (forms post, links navigate); this makes it live.
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

// An enhancer runs again on the part of a page a live update patched: each control is set up once.
const enhanced = new WeakMap();

function once(el, name) {
  let names = enhanced.get(el);
  if (!names) { names = new Set(); enhanced.set(el, names); }
  if (names.has(name)) return false;
  names.add(name);
  return true;
}

function enhance(root) {
  enhanceReview(root);
  enhanceActivity(root);
  enhanceSettingsFilter(root);
  root.querySelectorAll("form[data-settings]").forEach((form) => {
    if (!once(form, "settings")) return;
    form.addEventListener("submit", (ev) => { ev.preventDefault(); postSettings(form); });
  });
  root.querySelectorAll("form[data-command]").forEach((form) => {
    if (!once(form, "command")) return;
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
    if (!once(form, "redo")) return;
    // Fidelity only for a model whose family takes one (CodeFormer's w).
    const model = form.querySelector("select[data-fidelity-models]");
    const fidelity = form.querySelector("[data-fidelity]");
    if (model && fidelity) {
      const takes = model.dataset.fidelityModels.split(",");
      const show = () => { fidelity.hidden = !takes.includes(model.value); };
      model.addEventListener("change", show);
      show();
    }
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const data = new FormData(form);
      const settings = {};
      const numbers = ["strength", "fidelity", "upscale"];
      for (const [field, name] of [["strength", "restore.strength"], ["model", "restore.model"],
        ["fidelity", "restore.fidelity"], ["faces", "restore.faces"], ["upscale", "restore.upscale"],
        ["format", "output.format"]]) {
        const v = data.get(field);
        if (v && !(field === "fidelity" && fidelity && fidelity.hidden)) {
          settings[name] = numbers.includes(field) ? Number(v) : v;
        }
      }
      let faceIds = null;
      if (ev.submitter && ev.submitter.dataset.keep !== undefined) faceIds = [];
      else if (data.get("pick")) faceIds = data.getAll("face").map(Number);
      const body = { settings: settings, face_ids: faceIds };
      if (data.get("beside") === "1") body.beside = true;  // beside the result, to compare
      const r = await fetch(form.action, {
        method: "POST", credentials: "same-origin",
        headers: { ...CSRF, "Content-Type": "application/json" },
        body: JSON.stringify(body),
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
    // Boxes a live update added take their place too.
    if (after.complete) place(); else after.addEventListener("load", place);
    if (!once(frame, "compare")) return;
    range.addEventListener("input", show);
    fitLoupe(frame);
  });
}

// What identifies a control across a re-render: its link, its form's action, or its role.
function focusKey(el) {
  const main = document.getElementById("live");
  if (!el || !main || !main.contains(el)) return null;
  if (el.tagName === "A") return "a " + el.getAttribute("href");
  if (el.tagName === "BUTTON") return "button " + (el.form ? el.form.getAttribute("action") : "") + " " + el.textContent;
  if (el.tagName === "INPUT" && el.name) return "input " + el.name;
  if (el.matches("[data-compare-range]")) return "range";
  if (el.tagName === "SUMMARY" && el.parentElement.dataset.key) return "summary " + el.parentElement.dataset.key;
  return null;
}

// --- live updates: only what changed is patched ------------------------------------------------
// A live update is the page's changing part rendered again by the server. It is laid over the
// page node by node: text and attributes that changed are set, nodes that came are added and
// nodes that went are removed, and everything else stays the very node it was. So a field being
// typed in keeps its focus, caret and text (a value typed is the field's own, whatever the
// update's value attribute says), an open dialog stays open, a slider being dragged stays under
// the pointer, and what the script set (zoom, sizes, the slider's clip) stays set. While a pointer
// is down (a drag) an update waits until it is lifted.
const SCRIPT_ATTRS = new Set(["style", "open"]);  // set by the script or the person, never by the server
const SCRIPT_CLASSES = new Set(["zoomed", "selected", "real-pixels", "fitted"]);

// What an element is across two renders: its id, data-id or data-key, a link's target; a list's
// row by the first of those inside it (a new row on top must not turn every row into the next).
function identity(el) {
  const own = el.id || el.getAttribute("data-id") || el.getAttribute("data-key") || (el.tagName === "A" ? el.getAttribute("href") : "");
  if (own) return own;
  if (el.tagName === "LI" || el.tagName === "TR") {
    const inner = el.querySelector("[id], [data-id], [data-key], a[href]");
    if (inner) return "~" + identity(inner);
  }
  return "";
}

function nodeKey(node) {
  if (node.nodeType !== 1) return "#" + node.nodeType;
  const cls = node.classList.length ? node.classList[0] : "";
  return node.tagName + "#" + identity(node) + "." + cls + "/" + (node.getAttribute("name") || "");
}

function scriptMade(node) { return node.nodeType === 1 && node.hasAttribute("data-js-made"); }

function syncAttributes(live, fresh) {
  for (const { name, value } of Array.from(fresh.attributes)) {
    if (SCRIPT_ATTRS.has(name) || name === "class") continue;
    if (live.getAttribute(name) !== value) live.setAttribute(name, value);
  }
  for (const { name } of Array.from(live.attributes)) {
    if (!SCRIPT_ATTRS.has(name) && name !== "class" && !fresh.hasAttribute(name)) live.removeAttribute(name);
  }
  const kept = Array.from(live.classList).filter((c) => SCRIPT_CLASSES.has(c));
  const want = Array.from(new Set([...fresh.classList, ...kept])).join(" ");
  if ((live.getAttribute("class") || "") !== want) {
    if (want) live.setAttribute("class", want); else live.removeAttribute("class");
  }
}

function morphNode(live, fresh) {
  if (live.nodeType !== 1) {
    if (live.nodeValue !== fresh.nodeValue) live.nodeValue = fresh.nodeValue;
    return;
  }
  if (live.hasAttribute("data-js")) return;  // the script's own: left as it is
  syncAttributes(live, fresh);
  if (live.tagName === "TEXTAREA") return;  // its text is its value: the person's
  morphChildren(live, fresh);
}

function morphChildren(live, fresh) {
  const wanted = Array.from(fresh.childNodes);
  let cursor = live.firstChild;
  const skipMade = () => { while (cursor && scriptMade(cursor)) cursor = cursor.nextSibling; };
  for (let i = 0; i < wanted.length; i++) {
    const n = wanted[i];
    const key = nodeKey(n);
    skipMade();
    while (cursor && nodeKey(cursor) !== key && !wanted.slice(i + 1).some((w) => nodeKey(w) === nodeKey(cursor))) {
      // Not in the update at all: it went.
      const gone = cursor;
      cursor = cursor.nextSibling;
      live.removeChild(gone);
      skipMade();
    }
    if (cursor && nodeKey(cursor) === key) {
      morphNode(cursor, n);
      cursor = cursor.nextSibling;
      continue;
    }
    let later = cursor ? cursor.nextSibling : null;
    while (later && nodeKey(later) !== key) later = later.nextSibling;
    if (later) {
      live.insertBefore(later, cursor);  // moved (a tile that went up the list)
      morphNode(later, n);
    } else {
      live.insertBefore(document.importNode(n, true), cursor);  // came
    }
  }
  while (cursor) {
    const next = cursor.nextSibling;
    if (!scriptMade(cursor)) live.removeChild(cursor);
    cursor = next;
  }
}

// The update's HTML laid over ``into``; what the person was on keeps the focus.
function patch(into, html) {
  const fresh = new DOMParser().parseFromString("<body>" + html + "</body>", "text/html").body;
  const focus = focusKey(document.activeElement);
  const had = document.activeElement;
  morphChildren(into, fresh);
  enhance(into);
  if (focus && !had.isConnected) {
    const el = Array.from(into.querySelectorAll("a, button, input, summary")).find((e) => focusKey(e) === focus);
    if (el) el.focus({ preventScroll: true });
  }
  into.dispatchEvent(new CustomEvent("patched", { bubbles: true }));
}

// The stream of the page's changing part. A page whose filters stay outside it (Results) names
// the element the stream fills (data-live-into); a new filter opens a new stream.
let source = null;
const pointersDown = new Set();
let waiting = null;  // an update that came during a drag

document.addEventListener("pointerdown", (ev) => { pointersDown.add(ev.pointerId); }, true);
const lifted = (ev) => {
  if (ev && ev.pointerId !== undefined) pointersDown.delete(ev.pointerId); else pointersDown.clear();
  if (pointersDown.size === 0 && waiting) { const w = waiting; waiting = null; w(); }
};
document.addEventListener("pointerup", lifted, true);
document.addEventListener("pointercancel", lifted, true);
window.addEventListener("blur", () => lifted(null));

function live(url) {
  const main = document.getElementById("live");
  url = url || (main && main.dataset.live);
  if (source) { source.close(); source = null; }
  if (!url) { setConn("static", ""); return; }
  source = new EventSource(url);
  source.addEventListener("open", () => setConn("ok", "live"));
  source.addEventListener("error", () => setConn("bad", "reconnecting…"));
  source.addEventListener("page", (ev) => {
    const apply = () => {
      const into = (main.dataset.liveInto && document.querySelector(main.dataset.liveInto)) || main;
      patch(into, ev.data);
      main.dataset.updates = String(Number(main.dataset.updates || 0) + 1);
      setConn("ok", "live");
    };
    if (pointersDown.size > 0) waiting = apply; else apply();
  });
}

document.addEventListener("DOMContentLoaded", () => { enhance(document); live(); });

// --- activity and settings ------------------------------------------------------------------

// Activity: the steps a person unfolded stay unfolded when the live page is drawn again.
const openSteps = new Set();

function enhanceActivity(root) {
  root.querySelectorAll("details[data-key]").forEach((d) => {
    if (openSteps.has(d.dataset.key)) d.open = true;
    if (!once(d, "steps")) return;
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
  if (once(input, "filter")) {
    input.value = settingsFilter;  // the page drawn again after a save keeps the filter
    input.addEventListener("input", apply);
  }
  apply();
}
