"""Where results, failures and archived originals go, and what they are called.

Layout for an inbox whose outbox is ``O`` (its own, else ``watch.outbox``)::

    O/<subfolders of the inbox>/<name from output.name_template>
    O/../failed/<subfolders>/<original name> + <original name>.error.txt
    <output.archive_dir or O/../originals>/<subfolders>/<original name>

Every name is one sanitised path component and every folder is checked to stay inside its root,
so nothing a user (or a template) puts in a file name can place a file outside the outbox. Names
never overwrite: ``free_name`` returns ``name (1).jpg``, ``name (2).jpg``... and the journal records
the chosen output so it is not chosen again after a restart.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import unicodedata
from collections.abc import Callable, Iterable
from pathlib import Path

from gpen_watch import platform as platforms
from gpen_watch.base.errors import ConfigError, OutputError
from gpen_watch.config import Config, InboxConfig, NameSource, check_name_template, inbox_config, name_fields
from gpen_watch.imaging.formats import EXPLICIT_FORMATS, OUTPUT_SUFFIXES
from gpen_watch.platform.api import Platform

# A final name leaves room for the temp name around it (".<name>.gpen-tmp-<job id>") and for
# "<name>.error.txt" within the 255-byte limit of common file systems.
MAX_NAME_BYTES = 200
MAX_COLLISIONS = 10_000
TMP_MARK = ".gpen-tmp-"
# The worker's temp output, and the image writer's own temp beside it while it writes that one
# (imaging.save: ".<dst name>.tmp-<8 hex>"), which a killed worker can leave behind.
_TMP_RE = re.compile(r"^\..+\.gpen-tmp-(\d+)(?:\.tmp-[0-9a-f]{8})?$", re.DOTALL)

# --- folders ------------------------------------------------------------------------------------


def outbox_root(cfg: Config, inbox: InboxConfig) -> Path:
    return Path(os.path.abspath(inbox.outbox if inbox.outbox is not None else cfg.watch.outbox))


def failed_root(outbox: Path) -> Path:
    """``failed/`` beside the outbox."""
    return Path(os.path.abspath(outbox)).parent / "failed"


def archive_root(cfg: Config, inbox: InboxConfig) -> Path:
    archive_dir = inbox_config(cfg, inbox).output.archive_dir
    if archive_dir is not None:
        return Path(os.path.abspath(archive_dir))
    return outbox_root(cfg, inbox).parent / "originals"


def service_dirs(cfg: Config) -> list[Path]:
    """Every folder the service writes to: the watcher never takes files from these."""
    dirs: list[Path] = []
    for inbox in cfg.watch.inboxes:
        out = outbox_root(cfg, inbox)
        dirs += [out, failed_root(out), archive_root(cfg, inbox)]
    out = Path(os.path.abspath(cfg.watch.outbox))
    dirs += [out, failed_root(out)]
    return list(dict.fromkeys(dirs))


def find_inbox(cfg: Config, inbox: os.PathLike[str] | str) -> InboxConfig:
    """The configured inbox a journal row came from (a plain one if it was removed from the config)."""
    key = os.path.normcase(os.path.abspath(inbox))
    for candidate in cfg.watch.inboxes:
        if os.path.normcase(os.path.abspath(candidate.path)) == key:
            return candidate
    return InboxConfig(Path(inbox))


# --- names --------------------------------------------------------------------------------------


def output_suffix(src_suffix: str, fmt: str) -> str:
    """The output's extension: the input's own for "same", else the format's usual one."""
    if fmt == "same":
        return src_suffix
    try:
        return OUTPUT_SUFFIXES[EXPLICIT_FORMATS[fmt]]
    except KeyError:
        raise ConfigError(f"output.format: unknown format {fmt!r}") from None


def sanitize_component(name: str, fallback: str = "_", *, platform: Platform | None = None) -> str:
    """Make ``name`` a single harmless path component.

    Separators, NUL and control characters become "_"; leading dots and spaces are dropped (a name
    may not be "..", hidden, or look like our temp files); characters and names this OS forbids
    (Windows: ``<>:"|?*``, device names) are defused too.
    """
    here = platform or platforms.current()
    name = unicodedata.normalize("NFC", name)
    out = []
    for ch in name:
        if ch in ("/", "\\", "\0") or ord(ch) < 32 or ord(ch) == 127 or ch in here.name_forbidden:
            out.append("_")
        else:
            out.append(ch)
    return here.defuse_name("".join(out).lstrip(". ")) or fallback


def truncate_name(name: str, limit: int = MAX_NAME_BYTES) -> str:
    """Shorten ``name`` to ``limit`` UTF-8 bytes, keeping its extension."""
    if len(name.encode("utf-8")) <= limit:
        return name
    stem, ext = os.path.splitext(name)
    if len(ext.encode("utf-8")) > 16:
        stem, ext = name, ""
    room = limit - len(ext.encode("utf-8"))
    cut = stem.encode("utf-8")[:room].decode("utf-8", errors="ignore")
    return cut + ext


def render_name(
    template: str,
    src_name: str,
    *,
    fmt: str = "same",
    model: str = "",
    today: dt.date | None = None,
) -> str:
    """The output file name for input ``src_name``: one sanitised component, at most 200 bytes.

    Fields: {stem} input name without extension, {ext} output extension (with the dot), {name}
    input file name as it is, {date} YYYY-MM-DD, {model} model name.
    """
    check_name_template(template)
    ext = output_suffix(os.path.splitext(src_name)[1], fmt)
    source = NameSource(src_name, ext, (today or dt.date.today()).isoformat(), model)
    rendered = template.format(**name_fields(source))
    return truncate_name(sanitize_component(rendered, fallback="output" + ext))


def mirror_dir(root: Path, rel_dir: os.PathLike[str] | str) -> Path:
    """``root`` joined with the (sanitised) subfolders of ``rel_dir``; never outside ``root``."""
    parts = []
    for part in Path(rel_dir).parts:
        if part in ("", ".", "..") or os.path.isabs(part) or Path(part).drive:
            continue
        parts.append(truncate_name(sanitize_component(part)))
    directory = Path(root).joinpath(*parts)
    if not inside(directory, root):
        raise OutputError(f"{directory}: would leave {root}")
    return directory


def inside(path: os.PathLike[str] | str, root: os.PathLike[str] | str) -> bool:
    """Whether ``path`` is ``root`` or below it (as written; see ``ensure_dir`` for links)."""
    p = os.path.normcase(os.path.abspath(path))
    r = os.path.normcase(os.path.abspath(root)).rstrip(os.sep)
    return p == r or p.startswith(r + os.sep)


def ensure_dir(directory: Path, root: Path) -> None:
    """Create ``directory`` and check, with links resolved, that it is still inside ``root``."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"{directory}: cannot create folder: {exc.strerror or exc}") from exc
    if not inside(os.path.realpath(directory), os.path.realpath(root)):
        raise OutputError(
            f"{directory}: leads outside {root} through a symbolic link; refusing to write there"
        )


def candidates(name: str) -> Iterable[str]:
    """``name``, then ``stem (1).ext``, ``stem (2).ext``, ..."""
    yield name
    stem, ext = os.path.splitext(name)
    for i in range(1, MAX_COLLISIONS):
        yield f"{stem} ({i}){ext}"


def free_name(
    directory: Path,
    name: str,
    taken: Callable[[Path], bool] | None = None,
) -> Path:
    """The first of ``candidates(name)`` in ``directory`` that no file (or link) occupies and that
    ``taken`` (e.g. the journal's reservations) does not claim. Checking is advisory: the commit
    still links without overwriting and moves on if the name was grabbed meanwhile."""
    for candidate in candidates(name):
        path = directory / candidate
        if os.path.lexists(path):
            continue
        if taken is not None and taken(path):
            continue
        return path
    raise OutputError(
        f"{directory / name}: {MAX_COLLISIONS} files with this name already; clean up the folder"
    )


def tmp_path(final: Path, job_id: int) -> Path:
    """The temp name a worker writes ``final`` under: hidden, in the same folder (same file system,
    so the rename is atomic), and recognisable as ours after a crash."""
    return final.parent / f".{final.name}{TMP_MARK}{job_id}"


def tmp_job_id(name: str) -> int | None:
    """The job id in one of our temp names, or None for any other name."""
    m = _TMP_RE.match(name)
    return int(m.group(1)) if m else None


def plan_output(
    cfg: Config,
    inbox: InboxConfig,
    rel: os.PathLike[str] | str,
    *,
    taken: Callable[[Path], bool] | None = None,
    today: dt.date | None = None,
) -> Path:
    """A free output path for the file at ``rel`` in ``inbox`` (does not create anything)."""
    rel = Path(rel)
    root = outbox_root(cfg, inbox)
    directory = mirror_dir(root, rel.parent)
    own = inbox_config(cfg, inbox)
    name = render_name(
        own.output.name_template, rel.name, fmt=own.output.format, model=own.restore.model, today=today
    )
    return free_name(directory, name, taken)
