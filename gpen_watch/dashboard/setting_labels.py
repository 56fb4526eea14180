"""The Settings page's words beside the settings' own names: a heading and one line for each
section, and a label a person reads for each setting (the dotted key stays beside it: it is what
the TOML file, `--set` and the docs call it). config.docs says what a setting does; this says what
it is called. A test holds the labels to the schema's settings, so a new one cannot go unlabelled.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SectionWords:
    heading: str
    line: str


SECTIONS: dict[str, SectionWords] = {
    "watch": SectionWords(
        "Inboxes and outbox", "Which folders are watched, where results go, how files are noticed."
    ),
    "restore": SectionWords(
        "Restoring faces", "The model, which faces are restored and how strongly, and what a photo may cost."
    ),
    "output": SectionWords(
        "Results", "The format and name of each result, and what becomes of the original."
    ),
    "workers": SectionWords("Workers", "The restorer processes: on which devices, how many, how patient."),
    "cluster": SectionWords(
        "Cluster", "Workers on other machines, through Ray (off unless an address is set)."
    ),
    "dashboard": SectionWords(
        "Dashboard", "This page: whether it is served, where, and the room its previews get."
    ),
    "api": SectionWords(
        "API", "Photos sent by other programs and machines: where it listens, TLS, and each token's limits."
    ),
    "notify": SectionWords(
        "Notices", "Notices beyond the tray: on the desktop without a tray, and posted to a webhook."
    ),
}

LABELS: dict[str, str] = {
    "watch.outbox": "Outbox folder",
    "watch.settle_seconds": "Wait before taking a file (s)",
    "watch.polling": "Poll the inboxes",
    "watch.poll_interval": "Poll every (s)",
    "watch.rescan_seconds": "Full rescan every (s)",
    "watch.inboxes.path": "Folder",
    "watch.inboxes.recursive": "Include subfolders",
    "watch.inboxes.outbox": "Its own outbox",
    "restore.model": "Face model",
    "restore.detector": "Face detector",
    "restore.use_parse": "Face-parsing mask",
    "restore.parse_precision": "Parsing number format",
    "restore.parse_small_below": "Parse small faces at 256 px below (px)",
    "restore.detect_threshold": "Detection threshold",
    "restore.detect_max_side": "Detect on a copy this long (px)",
    "restore.detect_shrink_above": "Shrink for detection above (px)",
    "restore.min_face": "Smallest face restored (px)",
    "restore.faces": "Which faces",
    "restore.max_faces": "Most faces a photo",
    "restore.strength": "Strength",
    "restore.fidelity": "Fidelity (CodeFormer)",
    "restore.accepted_terms": "Model terms accepted",
    "restore.identity_check": "Check each face is still the same person",
    "restore.identity_threshold": "Same-person distance",
    "restore.skip_sharp": "Leave sharp faces as they are",
    "restore.sharp_above": "Sharp at detail above",
    "restore.smooth_below": "Smooth faces smaller than (px)",
    "restore.face_batch": "Faces per pass",
    "restore.max_side": "Pre-scale photos longer than (px)",
    "restore.precision": "Number format",
    "restore.channels_last": "Channels-last layout (GPU)",
    "restore.device": "Device for `restore`",
    "restore.model_dir": "Model folder",
    "restore.max_megapixels": "Largest photo (megapixels)",
    "restore.memory_mb": "Memory per worker (MB)",
    "restore.upscale": "Upscale the background",
    "restore.upscale_model": "Upscaling model",
    "restore.engine": "Engine",
    "restore.provider": "ONNX Runtime provider",
    "output.unkept_result": "The other result, once one is kept",
    "output.format": "File format",
    "output.jpeg_quality": "JPEG and WebP quality",
    "output.name_template": "Result name",
    "output.originals": "Originals after success",
    "output.archive_dir": "Archive folder",
    "workers.devices": "Devices",
    "workers.workers_per_device": "Workers per GPU",
    "workers.cpu_workers": "Workers without a GPU",
    "workers.images_in_flight": "Photos handed at once",
    "workers.image_timeout": "Hung after (s) without progress",
    "workers.max_attempts": "Tries before giving up",
    "workers.schedule": "Working hours (entries separated by ;)",
    "workers.pause_on_battery": "Pause on battery power",
    "cluster.address": "Ray cluster address",
    "cluster.token_file": "Cluster token file",
    "cluster.local_workers": "Keep this machine's workers",
    "cluster.mb_in_flight": "MB in flight per remote worker",
    "dashboard.enabled": "Serve the dashboard",
    "dashboard.port": "Port",
    "dashboard.address": "Listen on address",
    "dashboard.views_mb": "Room for previews (MB)",
    "api.enabled": "Serve the API",
    "api.address": "Listen for other machines on (HTTPS)",
    "api.port": "HTTPS port",
    "api.certificate": "Your own certificate (PEM)",
    "api.private_key": "Its private key (PEM)",
    "api.cors_origins": "Other web pages allowed (CORS)",
    "api.requests_per_minute": "Requests a minute, per token",
    "api.mb_per_day": "MB a day, per token",
    "api.max_file_mb": "Largest photo (MB)",
    "api.uploads_at_once": "Uploads at once, per token",
    "api.upload_idle_s": "Cut off an upload idle for (s)",
    "api.min_upload_kbs": "Slowest upload kept (KB/s)",
    "notify.desktop": "Desktop notices without a tray",
    "notify.webhook": "Webhook URL",
    "notify.webhook_timeout": "Webhook timeout (s)",
}


def label(name: str) -> str:
    """The label of a dotted setting (an inbox's own: ``watch.inboxes[0].restore.strength`` is
    labelled as ``restore.strength``, ``watch.inboxes[0].path`` as ``watch.inboxes.path``)."""
    if name.startswith("watch.inboxes["):
        rest = name.partition("].")[2]
        name = rest if "." in rest else f"watch.inboxes.{rest}"
    return LABELS.get(name, name.rpartition(".")[2].replace("_", " ").capitalize())
