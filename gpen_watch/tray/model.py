"""What the tray shows, as plain data: service status + GPU samples -> state, badge, title, menu.

Nothing here touches pystray or Pillow, so every rule is a unit test away: app.py turns a
TrayView into pixels and native menu items.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gpen_watch.gpu.nvml import GpuSample
from gpen_watch.service.status import NodeStatus, PhotoStatus, Status

# idle/working/paused/error are what the user cares about; starting/stopping are the moments around
# them (models loading, images in flight finishing after Quit). waiting: no new photo is taken, not
# because the user paused but outside workers.schedule or on battery (service.standby), or while
# the workers wait for their model files (a download under way).
State = Literal["starting", "idle", "working", "paused", "waiting", "error", "stopping"]

# Badge fill and text colours per state: green idle, blue working, amber paused, red error, grey
# for the transient ones. Chosen to be told apart at 16 px and by most colour-blind users (blue and
# amber differ in lightness, not only hue).
BADGE_COLOURS: dict[State, tuple[str, str]] = {
    "idle": ("#2e7d32", "#ffffff"),
    "working": ("#1565c0", "#ffffff"),
    "paused": ("#f9a825", "#000000"),
    # Amber as paused: not working on purpose either way; the words say whose purpose.
    "waiting": ("#f9a825", "#000000"),
    "error": ("#c62828", "#ffffff"),
    "starting": ("#757575", "#ffffff"),
    "stopping": ("#757575", "#ffffff"),
}

STATE_WORDS: dict[State, str] = {
    "starting": "starting",
    "idle": "idle",
    "working": "working",
    "paused": "paused",
    "waiting": "waiting",
    "error": "needs attention",
    "stopping": "stopping",
}

MAX_TITLE = 63  # Windows truncates tooltips at 63 characters (pystray's win32 backend: 64 with NUL)
MAX_LINE = 64  # a menu line wider than this makes the whole menu too wide
# The note line is cut shorter: the whole text is in the title and the log.
MAX_NOTE = 48
# Photos in progress the menu lists one a line; more are counted on one line.
MAX_PHOTO_LINES = 3
# Worker device names (restore.runtime.device.device_label) of GPUs that NVML does not list.
OTHER_GPU_PREFIXES = ("Apple GPU",)


@dataclass(frozen=True)
class TrayView:
    state: State
    queue_depth: int  # waiting + being restored
    paused: bool = False
    # Why the service waits though not paused, as the status says it ("" when it does not), and
    # the headline's short form of it: "waiting until Mon 19:00", "paused on battery".
    standby: str = ""
    standby_word: str = ""
    problem: str | None = None
    # Worth knowing, not a fault (originals a read-only inbox keeps): a menu line, the state stays.
    notice: str | None = None
    # Inboxes whose drive or share is away (their photos wait, nothing is wrong with the service).
    inboxes_away: tuple[str, ...] = ()
    done: int = 0  # photos with restored faces today (journal)
    no_face: int = 0  # photos today without a face: done, but nothing was restored
    restored_total: int = 0  # since start, for "batch finished" notifications
    failed_total: int = 0
    flagged_total: int = 0  # faces flagged since start (restore.identity_threshold)
    gpus: tuple[GpuSample, ...] = ()
    # Devices workers report that NVML does not see ("Apple GPU (mps)"): shown by name.
    other_devices: tuple[str, ...] = ()
    # What runs this machine's workers' networks, each once ("ONNX Runtime 1.32.0, CPU provider").
    engines: tuple[str, ...] = ()
    cpu_mode: bool = True
    login_enabled: bool = False
    # Cluster nodes whose workers the service drives, each listed with its GPUs under its host.
    nodes: tuple[NodeStatus, ...] = ()
    # The dashboard's URL (no token), "" when the service serves none.
    dashboard: str = ""
    # The batch under way, (ended, total): every photo added since the queue was last empty, as
    # the Overview's bar counts it (``batch_of``); (0, 0) for none, or a batch of one photo.
    batch: tuple[int, int] = (0, 0)
    # The photos the workers are on, each with its stage ("restoring faces 7 of 29"), as `status`
    # says them; those waiting their turn in a worker are left out.
    photos: tuple[PhotoStatus, ...] = ()


@dataclass(frozen=True)
class Badge:
    text: str  # "" draws a plain dot
    fill: str
    ink: str


@dataclass(frozen=True)
class Entry:
    """One menu item. ``action`` names what app.py does on click (None: an information line)."""

    text: str
    action: str | None = None
    checked: bool | None = None  # None: not a checkbox
    default: bool = False  # what a plain click on the icon does
    separator: bool = False
    live: bool = False  # a reading that changes on every poll (GPU lines)


SEPARATOR = Entry("", separator=True)


def view_from_status(
    status: Status | None,
    gpus: list[GpuSample] | tuple[GpuSample, ...] = (),
    *,
    login_enabled: bool = False,
    stopping: bool = False,
) -> TrayView:
    """Build the view from a `status` reply (None while the service starts)."""
    gpus = tuple(gpus)
    if status is None:
        return TrayView(
            "stopping" if stopping else "starting",
            0,
            gpus=gpus,
            cpu_mode=not gpus,
            login_enabled=login_enabled,
        )
    depth = status.queue.depth
    # One short line that says where the rest is read: the whole text is a block of lines.
    problem = status.problem_line()
    if stopping or status.stopping:
        state: State = "stopping"
    elif problem:
        state = "error"
    elif status.paused:
        state = "paused"
    elif status.standby_text or (status.models is not None and status.models.held):
        state = "waiting"
    elif depth > 0:
        state = "working"
    else:
        state = "idle"
    # This machine's workers; a cluster node's are listed under it (node_entries).
    workers = tuple(w for w in status.workers if not w.node)
    named = [w.device for w in workers]
    # A worker's device as it reported it: Apple's GPU is no NVML device, and is no CPU either.
    other = tuple(dict.fromkeys(d for d in named if d.startswith(OTHER_GPU_PREFIXES)))
    # CPU mode: no GPU to show, or every worker runs on the CPU (workers.devices = ["cpu"]).
    cpu_mode = not other and (not gpus or (bool(workers) and all(d.startswith("cpu") for d in named)))
    photos = tuple(p for w in status.workers for p in w.photos if p.stage != "waiting")
    return TrayView(
        state=state,
        queue_depth=depth,
        paused=status.paused,
        standby=status.standby_text,
        standby_word=standby_word(status),
        problem=problem,
        notice=status.notice or None,
        inboxes_away=tuple(i.path for i in status.inbox_states if not i.watched),
        done=status.restored_today,
        no_face=status.no_face_today,
        restored_total=status.throughput.images,
        failed_total=status.throughput.failed,
        flagged_total=status.throughput.flagged,
        gpus=gpus,
        other_devices=other,
        engines=tuple(dict.fromkeys(w.engine for w in workers if w.engine)),
        cpu_mode=cpu_mode,
        login_enabled=login_enabled,
        nodes=tuple(n for n in status.nodes if not n.local),
        dashboard=status.dashboard,
        batch=batch_of(status, photos),
        photos=photos,
    )


def batch_of(status: Status, photos: tuple[PhotoStatus, ...]) -> tuple[int, int]:
    """(ended, total) of a batch of two photos or more once it is under way (a photo through or
    in hand); before that the queue's count says as much."""
    b = status.batch
    if b is None or b.total < 2 or not (b.ended or photos):
        return (0, 0)
    return (b.ended, b.total)


def badge(view: TrayView) -> Badge:
    fill, ink = BADGE_COLOURS[view.state]
    return Badge(badge_text(view.queue_depth), fill, ink)


def badge_text(depth: int) -> str:
    """Queue depth as at most three characters: 0 shows no number, over 99 shows 99+."""
    if depth <= 0:
        return ""
    return str(depth) if depth <= 99 else "99+"


def icon_key(view: TrayView) -> tuple[State, str]:
    """What the icon image depends on: it is redrawn only when this changes."""
    return view.state, badge_text(view.queue_depth)


def standby_word(status: Status) -> str:
    """A standby, or the wait for model files, short enough for the tooltip's 63 characters with
    the queue beside it."""
    if status.standby == "schedule" and status.standby_until:
        return f"waiting until {status.standby_until}"
    if status.standby == "battery":
        return "paused on battery"
    if not status.standby_text and status.models is not None and status.models.held:
        return "waiting for model files"
    return STATE_WORDS["waiting"]


def state_word(view: TrayView) -> str:
    return view.standby_word if view.state == "waiting" and view.standby_word else STATE_WORDS[view.state]


def headline(view: TrayView) -> str:
    """State in words, with the queue: "working: 12 in the queue"."""
    word = state_word(view)
    if view.state in ("starting", "stopping"):
        return word
    if view.queue_depth == 0:
        return f"{word}: queue empty" if view.state != "error" else word
    return f"{word}: {view.queue_depth} in the queue"


def progress(view: TrayView) -> str:
    """How far the work is, for the tooltip: "3 of 12 photos, faces 7 of 29"; "" when no photo is
    being worked on. The photo said is the first one whose stage counts (faces, tiles)."""
    parts = [f"{view.batch[0]} of {view.batch[1]} photos"] if view.batch[1] else []
    if view.photos:
        counted = [p for p in view.photos if p.total]
        parts.append((counted or list(view.photos))[0].short)
    return ", ".join(parts)


def progress_lines(view: TrayView) -> list[str]:
    """The menu's lines of it: the batch, then each photo the workers are on (a few)."""
    lines = [f"Batch: {view.batch[0]} of {view.batch[1]} photos"] if view.batch[1] else []
    lines += [_clip(p.text, MAX_LINE) for p in view.photos[:MAX_PHOTO_LINES]]
    more = len(view.photos) - MAX_PHOTO_LINES
    if more > 0:
        lines.append(f"and {more} more photo{'s' if more > 1 else ''} in hand")
    return lines


def title(view: TrayView) -> str:
    """Tooltip / window name. On the xorg backend this is the only text the user can get."""
    text = f"gpen-watch: {headline(view)}"
    if view.problem:
        text += f" - {view.problem}"
    elif view.batch[1]:
        # The batch says what the queue's count would, and leaves room for the photo's faces.
        text = f"gpen-watch: {state_word(view)}: {progress(view)}"
    elif view.photos:
        text += f" - {progress(view)}"
    elif view.inboxes_away:
        text += f" - inbox away: {', '.join(view.inboxes_away)}"
    elif view.notice:
        text += f" - note: {view.notice}"
    return _clip(text, MAX_TITLE)


def gpu_line(g: GpuSample) -> str:
    """ "NVIDIA H200: 87%, 12.3/139.8 GiB, 64 °C"."""
    return _clip(f"{g.name}: {g.readings}", MAX_LINE)


def summary_entries(view: TrayView) -> list[Entry]:
    """The menu's first lines: the state, what is being done now, why it waits or what is wrong,
    and today's count."""
    entries = [Entry(headline(view).capitalize())]
    # Changes with every face batch: rebuilt as seldom as the GPU readings (``live``).
    entries += [Entry(line, live=True) for line in progress_lines(view)]
    if view.standby:
        entries.append(Entry(_clip(view.standby[0].upper() + view.standby[1:], MAX_LINE)))
    if view.problem:
        # Short already (Status.problem_line), after the "Needs attention" line: no prefix. A
        # click opens where the whole of it is said: the dashboard's problems, else the log.
        entries.append(Entry(_clip(view.problem, MAX_LINE), "open_problem"))
    entries += [Entry(_clip(f"Inbox away: {path}", MAX_LINE)) for path in view.inboxes_away]
    if view.notice:
        entries.append(Entry(_clip(f"Note: {view.notice}", MAX_NOTE)))
    restored = f"Restored today: {view.done}"
    entries.append(Entry(restored + (f"; {view.no_face} without a face" if view.no_face else "")))
    return entries


def summary_lines(view: TrayView) -> list[str]:
    return [e.text for e in summary_entries(view)]


def device_lines(view: TrayView) -> list[str]:
    if view.cpu_mode:
        lines = ["CPU mode" + ("" if view.gpus else " (no NVIDIA GPU)")]
    else:
        lines = [gpu_line(g) for g in view.gpus] + [_clip(d, MAX_LINE) for d in view.other_devices]
    return lines


def engine_line(view: TrayView) -> str | None:
    """Under the devices, what runs on them: "Engine: PyTorch 2.14.1"; None when no worker says."""
    if not view.engines:
        return None
    return _clip(f"Engine{'s' if len(view.engines) > 1 else ''}: {'; '.join(view.engines)}", MAX_LINE)


def node_entries(nodes: tuple[NodeStatus, ...]) -> list[Entry]:
    """Each cluster node, then its GPUs indented under it:
    "studio-b (192.168.1.12): 3 done, 1 in flight" / "    NVIDIA RTX 4090: 87%, ..."."""
    entries = []
    for n in nodes:
        state = f"{n.done} done, {n.in_flight} in flight" if n.up else f"away, {n.done} done"
        entries.append(Entry(_clip(f"{n.name}: {state}", MAX_LINE)))
        entries += [Entry(_clip(NODE_INDENT + gpu_line(g), MAX_LINE), live=True) for g in n.gpus]
        if not n.gpus and n.up:
            # No readings: a CPU node, or GPUs on a machine without NVML (nothing to show).
            entries += [Entry(f"{NODE_INDENT}CPU")] if n.cpu_only else []
    return entries


NODE_INDENT = "    "


def menu(
    view: TrayView,
    *,
    inbox_names: list[str] | tuple[str, ...] = ("inbox",),
    has_menu: bool = True,
    click_pauses: bool | None = None,
) -> list[Entry]:
    """The menu, top to bottom. The default item is what a plain click on the icon does: Pause where
    ``click_pauses`` (xorg, and any backend without a menu), else Open outbox."""
    if click_pauses is None:
        click_pauses = not has_menu
    entries = summary_entries(view)
    entries += [Entry(line, live=not view.cpu_mode) for line in device_lines(view)]
    if (engine := engine_line(view)) is not None:
        entries.append(Entry(engine))
    entries += node_entries(view.nodes)
    entries.append(SEPARATOR)
    entries.append(Entry("Pause", "toggle_pause", checked=view.paused, default=click_pauses))
    if view.dashboard:
        entries.append(Entry("Open dashboard", "open_dashboard"))
    entries.append(SEPARATOR)
    if len(inbox_names) == 1:
        entries.append(Entry("Open inbox", "open_inbox:0"))
    else:
        entries += [
            Entry(_clip(f"Open inbox: {name}", MAX_LINE), f"open_inbox:{i}")
            for i, name in enumerate(inbox_names)
        ]
    entries += [
        Entry("Open outbox", "open_outbox", default=not click_pauses),
        Entry("Open failed folder", "open_failed"),
        Entry("Open log", "open_log"),
        SEPARATOR,
        Entry("Start at login", "toggle_login", checked=view.login_enabled),
        Entry("Quit", "quit"),
    ]
    return entries


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + ELLIPSIS


ELLIPSIS = "…"
# Stand-ins for the characters our own texts use that narrow encodings (X11's Latin-1 WM_NAME) lack.
PLAIN = {
    ELLIPSIS: "...",
    "\u2013": "-",
    "\u2014": "-",
    "\u2018": "'",
    "\u2019": "'",
    "\u201c": '"',
    "\u201d": '"',
}


def encodable(text: str, encoding: str) -> str:
    """``text`` with every character ``encoding`` cannot write replaced: the plain stand-ins above,
    "?" for anything else (a file name in a problem message can hold any character)."""
    try:
        text.encode(encoding)
        return text
    except UnicodeEncodeError:
        pass
    for char, plain in PLAIN.items():
        text = text.replace(char, plain)
    return text.encode(encoding, "replace").decode(encoding)
