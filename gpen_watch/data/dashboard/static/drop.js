// Files into the upload panel (upload.js sends them): the panel's two pickers, and a drop of files
// or whole folders anywhere on any page, with a veil over the page while files are dragged over it.
// A folder is walked through its entries; each file keeps its path inside what was dropped.
"use strict";

// Everything of a drop, folders walked (their entries are read while the drop lasts, the rest after).
function dropped(dt) {
  const entries = [], loose = [];
  for (const item of Array.from(dt.items || [])) {
    if (item.kind !== "file") continue;
    const entry = item.webkitGetAsEntry ? item.webkitGetAsEntry() : null;
    if (entry) entries.push(entry);
    else { const f = item.getAsFile(); if (f) loose.push({ file: f, path: f.webkitRelativePath || f.name }); }
  }
  if (!entries.length && !loose.length) {
    for (const f of Array.from(dt.files || [])) loose.push({ file: f, path: f.webkitRelativePath || f.name });
  }
  return (async () => {
    const out = loose.slice();
    for (const entry of entries) await walk(entry, out);
    return out;
  })();
}

async function walk(entry, out) {
  if (entry.isFile) {
    const file = await new Promise((resolve, reject) => entry.file(resolve, reject));
    out.push({ file, path: entry.fullPath.replace(/^\/+/, "") || file.name });
  } else if (entry.isDirectory) {
    const reader = entry.createReader();
    for (;;) {
      const some = await new Promise((resolve, reject) => reader.readEntries(resolve, reject));
      if (!some.length) break;
      for (const e of some) await walk(e, out);
    }
  }
}

function carriesFiles(ev) {
  return ev.dataTransfer && Array.from(ev.dataTransfer.types || []).includes("Files");
}

function enhanceDrop() {
  if (!up.panel) return;
  for (const name of ["files", "folder"]) {
    const input = upEl(name);
    input.addEventListener("change", () => {
      const found = Array.from(input.files).map((f) => ({ file: f, path: f.webkitRelativePath || f.name }));
      input.value = "";  // the same files may be picked again
      add(found);
    });
  }
  const veil = document.querySelector("[data-drop-here]");
  let depth = 0;
  document.addEventListener("dragenter", (ev) => {
    if (!carriesFiles(ev)) return;
    ev.preventDefault();
    depth += 1;
    veil.hidden = false;
  });
  document.addEventListener("dragover", (ev) => {
    if (!carriesFiles(ev)) return;
    ev.preventDefault();
    ev.dataTransfer.dropEffect = "copy";
  });
  document.addEventListener("dragleave", (ev) => {
    if (!carriesFiles(ev)) return;
    depth = Math.max(0, depth - 1);
    if (depth === 0) veil.hidden = true;
  });
  document.addEventListener("drop", (ev) => {
    if (!carriesFiles(ev)) return;
    ev.preventDefault();
    depth = 0;
    veil.hidden = true;
    dropped(ev.dataTransfer).then(add);
  });
}

document.addEventListener("DOMContentLoaded", enhanceDrop);
