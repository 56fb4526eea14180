"""What each setting means, written once: ``config init``'s notes and the settings table of
docs/settings.md both come from ``DESCRIPTIONS``.

The schema (config.schema) says which settings exist and their defaults; this module only says
what they mean. A test holds the two to the same names, and docs/settings.md to what
``settings_table`` renders, so neither can drift. ``python -m gpen_watch.config.docs`` prints the
table; ``--write`` puts it into docs/settings.md between its markers.
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpen_watch.catalog import licences, registry
from gpen_watch.catalog.providers import PROVIDERS
from gpen_watch.config.schema import Config, InboxConfig


@dataclass(frozen=True)
class Description:
    """One setting in words. ``note`` is the one line ``config init`` writes above the setting and
    the table's first sentence; ``more`` follows it in the table only; ``default`` replaces the
    schema's default in the table where that depends on the machine (the user's Pictures folder)."""

    note: str
    more: str = ""
    default: str = ""


# Links are relative to docs/settings.md.
DESCRIPTIONS: dict[str, Description] = {
    "watch.inboxes": Description(
        "Watched folders; one [[watch.inboxes]] table each.",
        "Each inbox's `restore` and `output` are its own settings over the global ones "
        "([per-inbox profiles](#per-inbox-profiles)).",
        default="one: `~/Pictures/GPEN/inbox`",
    ),
    "watch.inboxes.path": Description("The folder to watch.", default="`~/Pictures/GPEN/inbox`"),
    "watch.inboxes.recursive": Description("Also watch its subfolders (results keep the same subfolders)."),
    "watch.inboxes.outbox": Description("Results of this inbox go here instead of watch.outbox."),
    "watch.inboxes.restore": Description(
        'This inbox\'s own restore settings, e.g. {model = "GPEN-BFR-256", strength = 0.8}.'
    ),
    "watch.inboxes.output": Description('This inbox\'s own output settings, e.g. {format = "tiff"}.'),
    "watch.outbox": Description(
        "Where results go (subfolders mirror the inbox).", default="`~/Pictures/GPEN/outbox`"
    ),
    "watch.settle_seconds": Description(
        "A file is taken once its size and mtime are unchanged this long (s).",
        "An empty file waits at least 30 s, in case its copy stalled before the first byte.",
    ),
    "watch.polling": Description(
        '"auto": poll inboxes on network shares and FUSE mounts, OS events elsewhere; "always"; "never".',
        "OS events (inotify, FSEvents, ReadDirectoryChangesW) see only this machine's writes, so a "
        "photo copied onto an SMB or NFS share from another computer raises none; `auto` finds "
        "the filesystem of each inbox and polls there, saying so in the log, `gpen-watch status` "
        "and the dashboard. An inbox whose OS watch cannot be made (the inotify watch limit) is "
        "polled too. Older files' `true` reads as `always`, `false` as `auto`.",
    ),
    "watch.poll_interval": Description("Seconds between two looks at a polled inbox."),
    "watch.rescan_seconds": Description(
        "Full rescan of each inbox about this often (s), for events that got lost.",
        "Each inbox's next rescan comes after this many seconds times a random factor between "
        "0.75 and 1.25 (Syncthing's practice), so inboxes on one share are not all listed at once.",
    ),
    "restore.model": Description(
        f"{registry.choices_text('face')}, or a GPEN generator's .pth file.",
        "GPEN-BFR-256 is about 13x faster on a CPU (0.14 against 1.8 s a face on 2 cores) and restores "
        "at 256 px; GPEN-BFR-1024 is about 1.5x slower on a CPU and restores at 1024 px, for faces "
        "larger than 512 px in the photo. GFPGAN and CodeFormer are other families of restorers, "
        "each aligned and pasted back as it was trained ([models](models.md#model-families)).",
    ),
    "restore.detector": Description(f"{registry.choices_text('detector')}."),
    "restore.use_parse": Description(
        "Face-parsing mask for paste-back; false: a feathered one (faster on CPU).",
        "On a CPU ParseNet costs about what GPEN-BFR-512 itself does (1.5-1.6 against 1.8 s a face on "
        "2 cores, 10x GPEN-BFR-256), so `false` there roughly halves a face's time with GPEN-BFR-512 and "
        "leaves about a tenth of it with GPEN-BFR-256 "
        "([measured](benchmarks.md#parsenets-upsampling-blocks-and-padding-rewritten-at-load-kept)).",
    ),
    "restore.parse_precision": Description(
        "ParseNet's number format: auto (as restore.precision: fp32 on every CPU), fp32, bf16, or int8 "
        "(CPU only).",
        "`auto` keeps ParseNet in fp32 on every CPU, whatever the CPU has: bf16 and int8 move the mask "
        "along the face's outline (on random weights they changed 2.1 % and 3.2-3.7 % of the output's "
        "pixels by more than 1 level), which has not yet been judged on the real weights "
        "([measured](benchmarks.md#int8-and-smaller-parsenet-passes-on-cpu)). Asked for, each runs only "
        "where the CPU computes in it; elsewhere ParseNet stays in fp32 and one sentence in `status`, "
        "the dashboard and the tray says why: `bf16` needs AVX-512 BF16 or AMX (emulated on an "
        "AVX2-only CPU it made a whole run 8.2x slower) and `int8` VNNI or AMX (without them it was no "
        "faster). With AMX (Intel Xeon of the 4th generation and later) both restore a photo 2.0-2.3x "
        "as fast; with AVX-512 BF16 and VNNI but no AMX int8 parses 1.5-1.7x as fast and bf16 "
        "0.7-1.3x, depending on the CPU ([by CPU](benchmarks.md#parsenets-number-format-on-each-kind-of-cpu)). "
        "`int8` (on a GPU taken as `auto`) quantizes ParseNet at load (4-7 s, calibrated on a fixed "
        "synthetic image, nothing downloaded).",
    ),
    "restore.parse_small_below": Description(
        "Faces pasted back smaller than this (px) are parsed at 256 px, not 512; 0: always 512.",
        "ParseNet at 256 px is a quarter of its arithmetic; `256` is the natural value (such a mask is "
        "shrunk below 256 px anyway): 3.1x per face end to end on the benchmark's Solvay photo (27 of its "
        "29 faces qualify), changing 0.8-3.9 % of the output's pixels by more than 1 level on random "
        "weights. 0 is upstream GPEN's way. Not yet checked on the real weights "
        "([measured](benchmarks.md#int8-and-smaller-parsenet-passes-on-cpu)).",
    ),
    "restore.detect_threshold": Description("Face detection score threshold, in (0, 1]."),
    "restore.detect_max_side": Description(
        "Photos longer than restore.detect_shrink_above are detected on a copy this long (px)."
    ),
    "restore.detect_shrink_above": Description(
        "Photos up to this long (px) are detected at their own size; longer ones on a smaller copy.",
        "As upstream GPEN: shrinking the 1328 px Solvay group photo to 1000 px loses one of its 29 faces "
        "([cost](benchmarks.md#detection-at-the-photos-own-size-up-to-1500-px)).",
    ),
    "restore.min_face": Description(
        "Faces whose eyes and mouth span fewer px are left alone; 0: restore every face.",
        "0 is upstream GPEN's way, except for two kinds of work that cannot change the result: a face "
        "whose box is under 8 px in the result, and a second detection of one face (boxes overlapping by "
        "IoU > 0.8). The photo's notes say how many faces were left out and why.",
    ),
    "restore.faces": Description(
        "Which faces are restored: all, largest, or center (the one nearest the middle).",
        "Of the faces at least `min_face`; the others are left as they are and not computed, and the "
        "photo's notes say how many faces were found and how many restored.",
    ),
    "restore.max_faces": Description("Restore at most this many faces a photo, the largest; 0: no limit."),
    "restore.strength": Description(
        "How much of the restored face replaces the original: 0 (none) to 1 (all).",
        "Upstream GPEN's `--alpha`. Blended in the aligned crop before paste-back, so it costs nothing; "
        "0 writes the photo's own pixels back (faces found, none restored).",
    ),
    "restore.fidelity": Description(
        "CodeFormer's fidelity weight w: 0 (the most restored) to 1 (the most faithful to the photo).",
        "Only for `restore.model = CodeFormer`, refused with another model. At 0 a face is the "
        "codebook's alone; higher values blend the photo's own features back in at four resolutions, "
        "which keeps a person's likeness at the cost of less repair. 0.5 is CodeFormer's own default; "
        "an inbox's profile may set its own ([models](models.md#codeformer)).",
    ),
    "restore.smooth_below": Description(
        "Restored faces with a box side under this (px) get a 3x3 smoothing; 0: never.",
        "As upstream GPEN: a face shrunk that much would alias its fine texture.",
    ),
    "restore.face_batch": Description(
        "Faces per generator pass; 0 picks from free GPU memory (CPU: 4, 1 with parsing).",
        "On a CPU with `restore.use_parse`, batching saves about 1 % and costs about 0.5 GB.",
    ),
    "restore.max_side": Description("Photos with a longer side are pre-scaled first (px; 0: never)."),
    "restore.precision": Description(
        "auto (fp32 on CPU and Apple GPU, bf16 on NVIDIA GPUs that have it), fp32, fp16 or bf16.",
        "fp16 needs a GPU. bf16 runs where the device computes in it (a CPU with AVX-512 BF16 or AMX, an "
        "NVIDIA GPU of compute capability 8.0 or later); elsewhere the generator stays in fp32 and one "
        "sentence in `status` says why "
        "([by CPU](benchmarks.md#parsenets-number-format-on-each-kind-of-cpu)). With "
        '`restore.engine = "onnx"`, auto, fp16 and bf16 run fp16 copies of the '
        "networks on a GPU's provider (not the detector), and fp32 everywhere else "
        "([how](models.md#onnx-runtime-engine)).",
    ),
    "restore.channels_last": Description(
        "Channels-last memory layout on GPUs (pays off with tensor cores; not used on CPU)."
    ),
    "restore.device": Description(
        "Device for `gpen-watch restore`: auto (CUDA, else Apple GPU, else CPU), cpu, cuda, cuda:N or mps.",
        "The service's workers use `workers.devices` instead.",
    ),
    "restore.model_dir": Description(
        "Folder searched for model files before the download cache.",
        "The `GPEN_WATCH_MODEL_DIR` environment variable does the same ([offline machines](models.md#offline-machines)).",
    ),
    "restore.accepted_terms": Description(
        f"Model terms you accepted ({', '.join(licences.ACCEPTABLE)}): models under them may be downloaded.",
        "A model whose terms do not allow paid work is downloaded only once its terms are here; "
        "`gpen-watch models accept NAME` or the dashboard's Accept adds them, and `gpen-watch models "
        "list` shows each model's terms and whether they allow paid work. A file copied into a model "
        "folder by hand is used either way ([licences](models.md#licences-before-downloads)).",
    ),
    "restore.max_megapixels": Description(
        "Larger images (megapixels) are refused before they are decoded.",
        "The size the file's header declares is checked, so a decompression bomb never reaches memory.",
    ),
    "restore.memory_mb": Description(
        "Resident memory (MB) each restorer process aims to stay under; 0: a quarter of RAM, at least 2048.",
        "Each daemon worker, or `gpen-watch restore`: photos are read ahead only while their decoded "
        "frames fit beside the models (one is always taken), and `status` shows each worker's memory per "
        "stage against it.",
    ),
    "restore.upscale": Description(
        "Background upscaling: 1 (off), 2 or 4; the result is at most max_side * upscale px.",
        "`2` or `4` upscales the whole photo (RRDBNet, upstream GPEN's `--use_sr`) and restores the faces "
        "into the upscaled photo. Pre-scaling comes first (8192 px at x2 with the defaults; a 600 px scan "
        "becomes 1200 px). A photo without faces is upscaled too (no byte copy then); DPI is scaled so the "
        'print size stays; the notes say "upscaled x2". Slow on a CPU: minutes per megapixel '
        "([models](models.md)); a worker that keeps finishing tiles is not taken for hung however long "
        "the photo takes.",
    ),
    "restore.upscale_model": Description(
        f"Empty: upstream GPEN's RealESRNet of that factor; or {', '.join(registry.UPSCALER_NAMES)}, "
        "or a .pth file.",
        "The RealESRGAN ones are sharper and invent texture; a `.pth` must be an RRDBNet of that factor.",
    ),
    "restore.engine": Description(
        "What runs the networks: torch (PyTorch), or onnx (ONNX Runtime on restore.provider).",
        "`onnx` exports the same weights files at first use (a minute or two, once; cached beside "
        "them) and needs the `onnx` extra. It gives the same faces within one level, and it is "
        "how AMD, Intel and Apple GPUs are used ([models](models.md#onnx-runtime-engine)).",
    ),
    "restore.provider": Description(
        f"ONNX Runtime's execution provider with restore.engine = onnx: {', '.join(PROVIDERS)}.",
        "One that is not installed or does not start falls back to `cpu`, with one line saying "
        "which package to install ([models](models.md#onnx-runtime-engine)).",
    ),
    "restore.identity_check": Description(
        "Measure how far each restored face moved from the person it was, with dlib's face descriptors.",
        "Runs where dlib's two model files are in a model folder (`gpen-watch models fetch "
        "dlib-face-recognition dlib-landmarks-5`); without them each photo is restored as before "
        "and its notes say the check did not run and why ([identity](identity.md)).",
    ),
    "restore.identity_threshold": Description(
        "A face whose descriptor moved further than this is flagged: it may not look like the same person.",
        "Faces of a batch closer than this are grouped as one person. 0.32 lies between the largest "
        "change a sharpened, denoised, JPEG-saved, shrunk or mirrored face made (0.23) and the closest "
        "two of the Solvay photo's 29 people came (0.41) ([identity](identity.md#the-threshold)).",
    ),
    "restore.skip_sharp": Description(
        "Leave faces that are already sharp as they are (decided before restoring, so their time is saved).",
        "Each face's detail measure is compared with restore.sharp_above; a redo that picks a face "
        "(the photo's page, `gpen-watch redo NAME --face-ids 0`) restores it "
        "([identity](identity.md#faces-already-sharp)).",
    ),
    "restore.sharp_above": Description(
        "The detail measure at or above which restore.skip_sharp leaves a face as it is.",
        "Fine detail over the next coarser band, less noise, at the face's own scale (a 512 px crop's "
        "for a larger face): 0.32-0.35 on two sharp portraits, at most 0.21 on the same blurred, shrunk "
        "and enlarged, at JPEG quality 10 or with noise, and on an old group photo "
        "([identity](identity.md#faces-already-sharp)).",
    ),
    "output.format": Description(
        "same, jpeg, png, webp or tiff.",
        "`same`: the input's format by the rule in [formats](formats.md#the-results-format).",
    ),
    "output.jpeg_quality": Description("JPEG/WebP quality, 1 to 100.", "AVIF results use it too."),
    "output.name_template": Description(
        "Result name: {stem} {ext} {name} {date} {model}.", "The name can never leave the outbox."
    ),
    "output.originals": Description("After success: archive, keep or delete the original."),
    "output.archive_dir": Description("Where archived originals go (unset: originals/ beside the outbox)."),
    "output.unkept_result": Description(
        "Of two results compared on a photo's page, the one not kept: remove, or keep it under its own name.",
        'A redo with another model puts its result beside the photo\'s ("portrait (GFPGAN-v1.4).jpg") '
        "until one of the two is kept ([compare](dashboard.md#two-results-side-by-side)); the one kept "
        "takes the photo's name. `keep` leaves the other in the outbox as a file of yours, no longer "
        "gpen-watch's result; neither is ever written over unasked.",
    ),
    "workers.devices": Description(
        'Devices for workers: ["auto"] (every NVIDIA GPU, else Apple GPU or CPU), or e.g. ["cuda:0"].',
        "Without an NVIDIA GPU, CPU workers take Apple's GPU where torch has it (`status` and the tray "
        'then say "Apple GPU (mps)" instead of CPU mode); `["cpu"]` uses the CPU only.',
    ),
    "workers.workers_per_device": Description("Restorer processes per GPU."),
    "workers.cpu_workers": Description("Restorer processes on a machine without a GPU."),
    "workers.images_in_flight": Description(
        "Photos handed to a worker at once; 0: what its engine asks for.",
        "So that its stages overlap: 4 on a 2-core CPU, up to 32 on a GPU, fewer when `restore.memory_mb` "
        "holds fewer 12 MP photos.",
    ),
    "workers.image_timeout": Description(
        "Seconds without progress on a photo before its worker is taken for hung and restarted.",
        "Progress is a result, or a detection, face batch or upscaling tile finished.",
    ),
    "workers.max_attempts": Description("Tries before a photo is set aside as failed."),
    "workers.schedule": Description(
        'Hours of the week when workers take photos, e.g. ["mon-fri 19:00-07:00", "sat,sun 00:00-24:00"].',
        "Empty: always. Each entry is DAYS HH:MM-HH:MM in this machine's local time; DAYS is `daily`, "
        "a day (`mon`..`sun`), a range (`mon-fri`, `fri-mon`) or a comma list (`sat,sun`); a window "
        "that ends before it starts runs into the next morning. Outside them new photos are recorded "
        "and wait; those being restored finish ([quiet hours](tray-and-login.md#quiet-hours-and-battery)). "
        "On the dashboard's Settings page, entries are separated by `;`.",
    ),
    "workers.pause_on_battery": Description(
        "Take no new photo while this machine runs on battery; go on when mains power is back.",
        "Checked every 30 s. A machine without a battery never pauses for it.",
    ),
    "cluster.address": Description(
        'Ray cluster for remote workers: "" (off), "auto" or host:port of its head.',
        "`auto` is the Ray node on this machine ([cluster](cluster.md)).",
    ),
    "cluster.token_file": Description(
        "The cluster's shared token (unset: ray-token in gpen-watch's config folder).",
        "`gpen-watch cluster head` makes it, mode 600.",
    ),
    "cluster.local_workers": Description(
        "This machine's GPUs (or CPU) keep their own workers beside the cluster's."
    ),
    "cluster.mb_in_flight": Description(
        "Photo bytes in flight per remote worker (MB); more wait on this machine."
    ),
    "dashboard.enabled": Description(
        "Serve the dashboard, a local web page of the queue, the workers and every result.",
        "`gpen-watch dashboard` opens it ([dashboard](dashboard.md)).",
    ),
    "dashboard.port": Description(
        "The dashboard's port (4736 spells GPEN on a phone keypad); 0: any free port.",
    ),
    "dashboard.address": Description(
        "The address it listens on; anything but loopback shows your photos to the network.",
        "Any other address is served over HTTPS only and lets every machine that can reach it try "
        "the token: see [dashboard](dashboard.md#from-another-machine).",
    ),
    "dashboard.views_mb": Description(
        "MB kept for the newest photos' before/after previews and face crops; 0 keeps none.",
        "The batch under way and the one before it keep all of theirs past this while the disk has "
        "2 GB free ([dashboard](dashboard.md#previews-and-face-crops)).",
    ),
    "api.enabled": Description(
        "Serve the HTTP API under /api/v1/ on the dashboard's address: photos sent by other programs.",
        "With the dashboard's own token or a token of `gpen-watch api token create` ([API](api.md)).",
    ),
    "api.address": Description(
        'Other machines: "" (none), or an address of this machine to serve the API on, over HTTPS.',
        '"0.0.0.0" listens on all of them. Always TLS, with api.certificate or the service\'s own '
        "certificate, whose fingerprint `gpen-watch status` and the dashboard show "
        "([API](api.md#other-machines)).",
    ),
    "api.port": Description("The API's HTTPS port for other machines; 0: any free port."),
    "api.certificate": Description(
        "Your own TLS certificate (PEM) for api.address; unset: the service's own, self-signed.",
        "Set api.private_key with it. The service's own is made at first start, in its state "
        "folder; other machines check it by its SHA-256 fingerprint, which `gpen-watch status`, the "
        "dashboard's Overview and its Settings page (API, Other machines) show "
        "([dashboard](dashboard.md#from-another-machine)).",
    ),
    "api.private_key": Description("The private key (PEM) of api.certificate."),
    "api.cors_origins": Description(
        'Web pages of other origins allowed to call the API from a browser, e.g. ["https://photos.example"].',
        "Empty: none (a browser lets no other site read the API's answers).",
    ),
    "api.requests_per_minute": Description(
        "Requests a token may make a minute; more are answered 429 with the seconds to wait.",
        "A token may have its own (`gpen-watch api token create --requests-per-minute`).",
    ),
    "api.mb_per_day": Description(
        "MB of photos a token may send in 24 hours; more are answered 429.",
        "Counted from the journal, so a restart does not reset it.",
    ),
    "api.max_file_mb": Description(
        "The largest photo one request may send (MB); larger ones are answered 413."
    ),
    "api.uploads_at_once": Description(
        "Photos one token may be sending at the same time; more are answered 429."
    ),
    "api.upload_idle_s": Description(
        "An upload that sends nothing for this many seconds is cut off (408); nothing of it is kept."
    ),
    "api.min_upload_kbs": Description(
        "Slowest upload kept up after its first 10 seconds (KB/s); 0: no floor.",
        "A client sending a byte a second holds its slot 10 seconds, not hours.",
    ),
    "notify.desktop": Description(
        "Without a tray, show the notices on the desktop where there is a desktop session.",
        "With a tray the tray shows them; on a server they go to the log ([notices](notices.md)).",
    ),
    "notify.webhook": Description(
        'An http(s) URL each finished batch, failure burst and problem is POSTed to as JSON; "": off.',
        "The body's fields: [notices](notices.md#the-webhook).",
    ),
    "notify.webhook_timeout": Description(
        "Seconds a webhook post waits for the server (more than 0, at most 60).",
        "One retry after a pause, then the notice is dropped; the queue never waits for it.",
    ),
}


def notes() -> dict[str, str]:
    """Dotted setting name -> the one line ``config init`` writes above it."""
    return {name: d.note for name, d in DESCRIPTIONS.items()}


def setting_names() -> list[str]:
    """Every setting the schema has, dotted, in the schema's order; an inbox's fields under
    ``watch.inboxes`` as ``watch.inboxes.FIELD``."""
    names: list[str] = []
    for section in dataclasses.fields(Config):
        for f in dataclasses.fields(getattr(Config(), section.name)):
            names.append(f"{section.name}.{f.name}")
            if f"{section.name}.{f.name}" == "watch.inboxes":
                names += [f"watch.inboxes.{g.name}" for g in dataclasses.fields(InboxConfig)]
    return names


def _schema_default(name: str) -> Any:
    section, _, rest = name.partition(".")
    if rest.startswith("inboxes."):
        inbox = InboxConfig(Path())
        return getattr(inbox, rest.removeprefix("inboxes."))
    return getattr(getattr(Config(), section), rest)


def _shown(value: Any) -> str:
    if value is None:
        return "(unset)"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if value == "":
        return '`""`'
    if isinstance(value, list):
        return "`[" + ", ".join(f'"{v}"' for v in value) + "]`"
    if isinstance(value, dict):
        return "`{}`" if not value else f"`{value}`"
    return f"`{value}`"


def settings_table() -> str:
    """The Markdown table of every setting: its dotted name, default and meaning."""
    rows = ["| setting | default | meaning |", "|---|---|---|"]
    for name in setting_names():
        d = DESCRIPTIONS[name]
        default = d.default or _shown(_schema_default(name))
        meaning = f"{d.note} {d.more}".strip().replace("|", "\\|")
        rows.append(f"| `{name}` | {default} | {meaning} |")
    return "\n".join(rows) + "\n"


BEGIN = "<!-- settings table: generated by `python -m gpen_watch.config.docs --write`; do not edit -->\n"
END = "<!-- end of the settings table -->\n"


def with_table(page: str) -> str:
    """``page`` with the text between its markers replaced by the current table."""
    head, sep, rest = page.partition(BEGIN)
    _, sep2, tail = rest.partition(END)
    if not sep or not sep2:
        raise ValueError("the page has no settings-table markers")
    return f"{head}{BEGIN}{settings_table()}{END}{tail}"


def main(argv: list[str]) -> int:
    if argv[:1] == ["--write"]:
        page = Path(argv[1]) if len(argv) > 1 else Path("docs/settings.md")
        page.write_text(with_table(page.read_text(encoding="utf-8")), encoding="utf-8")
        return 0
    sys.stdout.write(settings_table())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
