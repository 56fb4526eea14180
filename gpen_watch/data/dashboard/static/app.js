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
        if (!r.ok) {
          let why = "the service refused (" + r.status + ")";
          try { why = (await r.json()).error || why; } catch (e) { /* not JSON */ }
          showError(form, why);
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
      else showNote(form, "Queued as run " + reply.id + ", ahead of new arrivals.");
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
  return null;
}

function live() {
  const main = document.getElementById("live");
  const url = main && main.dataset.live;
  if (!url) { setConn("static", ""); return; }
  const source = new EventSource(url);
  source.addEventListener("open", () => setConn("ok", "live"));
  source.addEventListener("error", () => setConn("bad", "reconnecting…"));
  source.addEventListener("page", (ev) => {
    // Keep the slider where the person left it, and the keyboard focus where it was.
    const range = main.querySelector("[data-compare-range]");
    const kept = range ? range.value : null;
    const focus = focusKey(document.activeElement);
    main.innerHTML = ev.data;
    const again = main.querySelector("[data-compare-range]");
    if (again && kept !== null) again.value = kept;
    enhance(main);
    if (focus) {
      const el = Array.from(main.querySelectorAll("a, button, input")).find((e) => focusKey(e) === focus);
      if (el) el.focus({ preventScroll: true });
    }
    setConn("ok", "live");
  });
}

document.addEventListener("DOMContentLoaded", () => { enhance(document); live(); });
