"""Which weights files a configuration needs, and whether each is there and looks whole.

Torch-free, for the service's parent process and the ``models`` CLI: a file is judged by a stat and
its container's header and directory (a ``.pth`` is a zip archive, or a legacy pickle stream), never
by loading it. Loading, and the architecture check, belong to the workers (gpen_watch.restore.engines.verify).
"""

from __future__ import annotations

import enum
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from gpen_watch.catalog import registry
from gpen_watch.catalog.model_spec import ModelSpec
from gpen_watch.config import RestoreConfig
from gpen_watch.modelstore import store, terms

# torch.save's zip format, and the legacy format (a pickle, protocol 2 and up, starts with PROTO).
_ZIP_MAGIC = b"PK\x03\x04"
_PICKLE_PROTO = 0x80


class FileState(enum.Enum):
    PRESENT = "present"
    MISSING = "missing"
    CORRUPT = "corrupt"


@dataclass(frozen=True)
class Need:
    """One file the configuration needs: a registry model, or a custom file (``restore.model`` path)."""

    role: str  # "generator", "detector", "parser", "upscaler"
    spec: ModelSpec | None
    custom: Path | None = None
    # Who needs it beyond the global settings: an inbox's profile ("watch.inboxes[1] (~/Phone)").
    owner: str = ""

    @property
    def label(self) -> str:
        return self.spec.filename if self.spec is not None else str(self.custom)


@dataclass(frozen=True)
class FileCheck:
    need: Need
    state: FileState
    path: Path | None = None  # where it was found
    reason: str = ""  # why it is corrupt
    # (size, mtime_ns) of the file found, to notice a replaced file with a stat.
    stamp: tuple[int, int] | None = None


@dataclass(frozen=True)
class ModelCheck:
    files: tuple[FileCheck, ...]
    folders: tuple[Path, ...]
    # restore.accepted_terms: a missing file whose terms ask for a yes not among them is not
    # downloadable, but awaiting the user's answer (``awaiting``).
    accepted: tuple[str, ...] = ()

    @property
    def ready(self) -> bool:
        return all(f.state is FileState.PRESENT for f in self.files)

    @property
    def missing(self) -> tuple[FileCheck, ...]:
        return tuple(f for f in self.files if f.state is FileState.MISSING)

    @property
    def corrupt(self) -> tuple[FileCheck, ...]:
        return tuple(f for f in self.files if f.state is FileState.CORRUPT)

    @property
    def stamp(self) -> tuple[tuple[str, tuple[int, int] | None], ...]:
        """Changes whenever a needed file appears, goes or is replaced."""
        return tuple((str(f.path), f.stamp) for f in self.files)

    def downloadable(self) -> tuple[ModelSpec, ...]:
        """Missing registry files that may be downloaded now (a custom file can only come from
        the user; a file whose terms ask for a yes, once the user said it)."""
        specs = dict.fromkeys(f.need.spec for f in self.missing if f.need.spec is not None)
        return tuple(s for s in specs if terms.answered(s, self.accepted))

    def missing_specs(self) -> tuple[ModelSpec, ...]:
        """Every missing registry file: downloadable now, or waiting for a yes to its terms."""
        return tuple(dict.fromkeys(f.need.spec for f in self.missing if f.need.spec is not None))

    @property
    def awaiting(self) -> tuple[ModelSpec, ...]:
        """Missing registry files whose download waits for the user's yes to their terms."""
        specs = dict.fromkeys(f.need.spec for f in self.missing if f.need.spec is not None)
        return terms.unanswered(tuple(specs), self.accepted)

    def without_awaiting(self) -> ModelCheck:
        """This check without the files ``awaiting`` holds (said in the terms' own words)."""
        waiting = set(self.awaiting)
        return replace(self, files=tuple(f for f in self.files if f.need.spec not in waiting))


def needs(cfg: RestoreConfig) -> tuple[Need, ...]:
    """Every file ``cfg`` makes the engine load: generator, detector, and parser when used."""
    out: list[Need] = []
    names = {n.lower(): n for n in registry.model_names()}
    if cfg.model.lower() in names:
        spec = registry.get_spec(cfg.model)
        if not spec.weightless:
            out.append(Need("generator", spec))
    else:
        out.append(Need("generator", None, Path(cfg.model).expanduser()))
    out.append(Need("detector", registry.detector_spec(cfg.detector)))
    if cfg.use_parse:
        out.append(Need("parser", registry.parser_spec()))
    if cfg.upscale > 1:
        if cfg.upscale_model and cfg.upscale_model not in registry.UPSCALER_CONFIGS:
            out.append(Need("upscaler", None, Path(cfg.upscale_model).expanduser()))
        else:
            out.append(Need("upscaler", registry.upscaler_spec(cfg.upscale, cfg.upscale_model)))
    return tuple(out)


def needed_specs(cfg: RestoreConfig) -> tuple[ModelSpec, ...]:
    return tuple(n.spec for n in needs(cfg) if n.spec is not None)


# An inbox's profile: its label and the restore settings in effect for it (config.inbox_profiles).
Profile = tuple[str, RestoreConfig]


def all_needs(cfg: RestoreConfig, profiles: Sequence[Profile] = ()) -> tuple[Need, ...]:
    """The global settings' files, then each file only an inbox's profile needs, owned by it."""
    out = list(needs(cfg))
    seen = {(n.role, n.spec, n.custom) for n in out}
    for owner, profile in profiles:
        for need in needs(profile):
            if (need.role, need.spec, need.custom) not in seen:
                seen.add((need.role, need.spec, need.custom))
                out.append(replace(need, owner=owner))
    return tuple(out)


def check(
    cfg: RestoreConfig,
    env: Mapping[str, str] | None = None,
    deep: bool = True,
    profiles: Sequence[Profile] = (),
) -> ModelCheck:
    """Look for every needed file, those of the inboxes' ``profiles`` too. ``deep=False`` only
    stats (for a periodic check); the header is read when ``deep`` (at start, and when a file's
    stamp changed)."""
    folders = tuple(store.model_search_dirs(cfg.model_dir, env))
    found = tuple(check_one(n, cfg.model_dir, env, deep) for n in all_needs(cfg, profiles))
    return ModelCheck(found, folders, tuple(cfg.accepted_terms))


def check_one(need: Need, model_dir: Path | None, env: Mapping[str, str] | None, deep: bool) -> FileCheck:
    if need.spec is not None:
        path = store.find_model(need.spec, model_dir, env)
    else:
        assert need.custom is not None
        path = need.custom if need.custom.is_file() else None
    if path is None:
        return FileCheck(need, FileState.MISSING)
    try:
        st = path.stat()
    except OSError:
        return FileCheck(need, FileState.MISSING)
    stamp = (st.st_size, st.st_mtime_ns)
    reason = header_problem(path) if deep else None
    if reason:
        return FileCheck(need, FileState.CORRUPT, path, reason, stamp)
    return FileCheck(need, FileState.PRESENT, path, stamp=stamp)


def header_problem(path: Path) -> str | None:
    """Why ``path`` cannot be a whole PyTorch weights file, from its first bytes and (for the zip
    format) its central directory at the end; None when it looks whole. A cut-short zip loses the
    directory, so truncated downloads and copies are caught here; damage inside the data is the
    workers' to find."""
    try:
        with open(path, "rb") as f:
            head = f.read(4)
    except OSError as exc:
        return f"cannot read it: {exc.strerror or exc}"
    if not head:
        return "empty (0 bytes)"
    if head == _ZIP_MAGIC:
        try:
            with zipfile.ZipFile(path) as z:
                if not z.namelist():
                    return "an empty archive, not a weights file"
        except (zipfile.BadZipFile, OSError, ValueError) as exc:
            return f"truncated or damaged archive ({exc})"
        return None
    if head[0] == _PICKLE_PROTO:
        return None
    if head.startswith(b"<") or head.lower().startswith(b"<!do"):
        return "an HTML page (a download that went to an error or login page), not a weights file"
    return f"not a PyTorch weights file (starts with {head!r})"


def custom_setting(need: Need) -> str:
    """The setting that names a custom file ``need`` (the user's own .pth)."""
    return "restore.upscale_model" if need.role == "upscaler" else "restore.model"
