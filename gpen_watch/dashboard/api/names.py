"""The name a photo is sent under, made a safe place in its inbox, or refused with a sentence.

The name may carry subfolders ("trip/day 1/IMG_1.jpg", with "/") into an inbox that takes them.
Each part is made one harmless component exactly as a result's name is (``outbox.naming``: this
OS's forbidden characters and device names defused, at most 200 bytes with its extension kept),
and the whole is then held to the watcher's own rules (``watch.filters``): a name the watcher
would leave alone (hidden, temporary, a partial download, the service's own folders) is refused,
since it would never be restored. A name that tries to leave the inbox, or holds a control
character, is refused outright rather than guessed at.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from gpen_watch.config import Config, InboxConfig
from gpen_watch.imaging.formats import denied_name
from gpen_watch.outbox import naming
from gpen_watch.platform.api import Platform
from gpen_watch.watch.filters import InboxFilter, ignored_name

# A name longer than this (in characters, before any part is shortened) is refused whole.
MAX_NAME_CHARS = 4096
MAX_DEPTH = 16
# A batch's name: what a client groups its photos under (and Results filters by, ``?batch=``).
BATCH_PATTERN = r"[A-Za-z0-9._-]{1,64}"
_BATCH_RE = re.compile(f"^{BATCH_PATTERN}$")


def batch_name_ok(text: str) -> bool:
    return _BATCH_RE.match(text) is not None


class Refusal(Exception):
    """A request the API refuses: its HTTP status and the sentence for the client."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(text)
        self.status = status
        self.text = text


@dataclass(frozen=True)
class PlacedName:
    rel: PurePosixPath  # where in the inbox, "/" between folders
    note: str = ""  # what was changed, in words ("" when the name is kept as sent)


def place(cfg: Config, inbox: InboxConfig, name: str, *, platform: Platform | None = None) -> PlacedName:
    """Where ``name`` goes in ``inbox`` (``platform``: whose naming rules, this OS's by default)."""
    if not name or not name.strip():
        raise Refusal(400, "name: empty; send the photo's file name (name=IMG_1.jpg)")
    if len(name) > MAX_NAME_CHARS:
        raise Refusal(400, f"name: {len(name)} characters; at most {MAX_NAME_CHARS} are taken")
    bad = next((ch for ch in name if ord(ch) < 32 or ord(ch) == 127), None)
    if bad is not None:
        what = "NUL" if bad == "\0" else f"U+{ord(bad):04X}"
        raise Refusal(400, f"name: holds a control character ({what}), which no file name may hold")
    parts = name.replace("\\", "/").split("/")
    if (
        name.startswith(("/", "\\"))
        or any(p in (".", "..") for p in parts)
        or (parts and ":" in parts[0][1:2])
    ):
        raise Refusal(
            400, f"name: {name[:200]!r} leads out of the inbox; send a file name, or folders inside it"
        )
    raw = [p for p in name.split("/") if p]
    if len(raw) > MAX_DEPTH:
        raise Refusal(400, f"name: {len(raw)} folders deep; at most {MAX_DEPTH}")
    if len(raw) > 1 and not inbox.recursive:
        raise Refusal(
            400,
            f"name: this inbox does not take subfolders (recursive = false); send the file name alone ({raw[-1][:200]})",
        )
    made = [naming.truncate_name(naming.sanitize_component(p, fallback="", platform=platform)) for p in raw]
    if not made or not all(made):
        raise Refusal(400, f"name: {name[:200]!r} has no letters a file name can keep")
    # As sent, too: making a part a file name drops a leading dot, and ".DS_Store" is no photo.
    for part in (*raw, *made):
        why = ignored_name(part)
        if why:
            raise Refusal(
                400,
                f"name: {part[:200]!r} is a {why}, which the inbox's watcher leaves alone; send it under another name",
            )
    if denied_name(made[-1]):
        raise Refusal(
            415,
            f"{made[-1][:200]}: not a photo (its type, {os.path.splitext(made[-1])[1]}, is never restored)",
        )
    rel = PurePosixPath(*made)
    root = Path(os.path.abspath(inbox.path))
    rules = InboxFilter(root, inbox.recursive, naming.service_dirs(cfg))
    why = rules.name_reason(root.joinpath(*rel.parts))
    if why is not None:
        raise Refusal(400, f"name: {rel.as_posix()[:200]!r} is not taken there: {why}")
    note = "" if made == raw else f"saved as {rel.as_posix()} (the name as sent cannot be a file name here)"
    return PlacedName(rel, note)
