"""The file `gpen-watch config init` writes: every setting at its default, each with a note.

Notes start with "## " and settings without a value (the unset paths) with "# ", so that a user
who removes a leading "# " from any line still has a valid file.
"""

from __future__ import annotations

from gpen_watch.catalog import registry
from gpen_watch.config import Config, to_toml

# One line per setting, for the file; README.md's "Configuration" table says the same at length.
NOTES: dict[str, str] = {
    "watch.inboxes": "Watched folders; one [[watch.inboxes]] table each.",
    "watch.inboxes.path": "The folder to watch.",
    "watch.inboxes.recursive": "Also watch its subfolders (results keep the same subfolders).",
    "watch.inboxes.outbox": "Results of this inbox go here instead of watch.outbox.",
    "watch.inboxes.restore": 'This inbox\'s own restore settings, e.g. {model = "GPEN-BFR-256", strength = 0.8}.',
    "watch.inboxes.output": 'This inbox\'s own output settings, e.g. {format = "tiff"}.',
    "watch.outbox": "Where results go (subfolders mirror the inbox).",
    "watch.settle_seconds": "A file is taken once its size and mtime are unchanged this long (s).",
    "watch.polling": "Poll instead of OS events: needed for network shares (events miss remote writes).",
    "watch.poll_interval": "Seconds between two looks at the inbox when polling.",
    "watch.rescan_seconds": "Full rescan of the inboxes this often (s), for events that got lost.",
    "restore.model": f"{registry.choices_text('gpen')}, or a .pth file.",
    "restore.detector": f"{registry.choices_text('detector')}.",
    "restore.use_parse": "Face-parsing mask for paste-back; false: a feathered one (faster on CPU).",
    "restore.parse_precision": "ParseNet's number format: auto (as restore.precision), fp32, bf16, or int8 (CPU only).",
    "restore.parse_small_below": "Faces pasted back smaller than this (px) are parsed at 256 px, not 512; 0: always 512.",
    "restore.detect_threshold": "Face detection score threshold, in (0, 1].",
    "restore.detect_max_side": "Photos longer than restore.detect_shrink_above are detected on a copy this long (px).",
    "restore.detect_shrink_above": "Photos up to this long (px) are detected at their own size; longer ones on a smaller copy.",
    "restore.min_face": "Faces whose eyes and mouth span fewer px are left alone; 0: restore every face.",
    "restore.faces": "Which faces are restored: all, largest, or center (the one nearest the middle).",
    "restore.max_faces": "Restore at most this many faces a photo, the largest; 0: no limit.",
    "restore.strength": "How much of the restored face replaces the original: 0 (none) to 1 (all).",
    "restore.smooth_below": "Restored faces with a box side under this (px) get a 3x3 smoothing; 0: never.",
    "restore.face_batch": "Faces per generator pass; 0 picks from free GPU memory (CPU: 4, 1 with parsing).",
    "restore.max_side": "Photos with a longer side are pre-scaled first (px; 0: never).",
    "restore.precision": "auto (fp32 on CPU and Apple GPU, bf16 on NVIDIA GPUs that have it), fp32, fp16 or bf16.",
    "restore.channels_last": "Channels-last memory layout on GPUs (pays off with tensor cores; not used on CPU).",
    "restore.device": "Device for `gpen-watch restore`: auto (CUDA, else Apple GPU, else CPU), cpu, cuda, cuda:N or mps.",
    "restore.model_dir": "Folder searched for model files before the download cache.",
    "restore.max_megapixels": "Larger images (megapixels) are refused before they are decoded.",
    "restore.memory_mb": "Resident memory (MB) each restorer process aims to stay under; 0: a quarter of RAM, at least 2048.",
    "restore.upscale": "Background upscaling: 1 (off), 2 or 4; the result is at most max_side * upscale px.",
    "restore.upscale_model": f"Empty: upstream GPEN's RealESRNet of that factor; or {', '.join(registry.UPSCALER_NAMES)}, or a .pth file.",
    "output.format": "same, jpeg, png, webp or tiff.",
    "output.jpeg_quality": "JPEG/WebP quality, 1 to 100.",
    "output.name_template": "Result name: {stem} {ext} {name} {date} {model}.",
    "output.originals": "After success: archive, keep or delete the original.",
    "output.archive_dir": "Where archived originals go (unset: originals/ beside the outbox).",
    "workers.devices": 'Devices for workers: ["auto"] (every NVIDIA GPU, else Apple GPU or CPU), or e.g. ["cuda:0"].',
    "workers.workers_per_device": "Restorer processes per GPU.",
    "workers.cpu_workers": "Restorer processes on a machine without a GPU.",
    "workers.images_in_flight": "Photos handed to a worker at once; 0: what its engine asks for.",
    "workers.image_timeout": "Seconds without progress on a photo before its worker is taken for hung and restarted.",
    "workers.max_attempts": "Tries before a photo is set aside as failed.",
    "cluster.address": 'Ray cluster for remote workers: "" (off), "auto" or host:port of its head.',
    "cluster.token_file": "The cluster's shared token (unset: ray-token in gpen-watch's config folder).",
    "cluster.local_workers": "This machine's GPUs (or CPU) keep their own workers beside the cluster's.",
    "cluster.mb_in_flight": "Photo bytes in flight per remote worker (MB); more wait on this machine.",
}

HEADER = """\
## gpen-watch settings, written by `gpen-watch config init` with every default.
## Lines starting with "## " are notes. A line starting with "# " is a setting without a value:
## remove the "# " and fill in the value to set it. `gpen-watch config show` prints what is in
## effect; the README's "Configuration" section says more about each setting.
"""


def commented_toml(cfg: Config) -> str:
    """``cfg`` as TOML with a note above each setting; unset settings commented out."""
    return to_toml(cfg, NOTES, HEADER)
