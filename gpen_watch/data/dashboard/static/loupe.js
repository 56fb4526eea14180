// The loupe, beside app.js: a photo's before/after fitted to the window with its slider and the
// filmstrip, zoomed both halves together, at real pixels (1:1) from crops of the full-size files,
// and swiped on a phone to the next photo or the one before.
"use strict";

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
    // Of real pixels where they are known ("fit (35%)", "100%"), else of the fitted size ("×1.5").
    if (level) level.textContent = s === 1 ? "fit" + (rs ? " (" + Math.round(100 / rs) + "%)" : "") : rs ? Math.round(100 * s / rs) + "%" : "×" + s.toFixed(2).replace(/\.?0+$/, "");
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

