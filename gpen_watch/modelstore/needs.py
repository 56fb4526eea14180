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

from gpen_watch.base.errors import ModelError
from gpen_watch.catalog import registry
from gpen_watch.catalog.registry import ModelSpec
from gpen_watch.config import RestoreConfig
from gpen_watch.modelstore import store
from gpen_watch.modelstore.download import Progress
from gpen_watch.platform import program

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
        """Missing registry files (a custom file can only come from the user)."""
        return tuple(f.need.spec for f in self.missing if f.need.spec is not None)


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
    return ModelCheck(found, folders)


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


# --- what the user reads ------------------------------------------------------------------------


def workers_start() -> str:
    """What the service does once the files it waits for are there (the close of its problem)."""
    return f"the workers start as soon as every file is there (no `{program.command('resume')}` needed)"


def missing_message(
    result: ModelCheck, failures: Mapping[str, str] | None = None, closing: str | None = None
) -> str:
    """One problem naming every missing file, its URL and size, and the folders looked in (the
    service's status line); ``closing``: what happens once they are there."""
    failures = failures or {}
    parts = []
    for f in result.missing:
        what, source, failed = _file_text(f, failures)
        # The user's own file names its owner already (``_owned``); a catalogue file does not.
        owner = f" (needed by {f.need.owner})" if f.need.owner and f.need.spec is not None else ""
        text = f"{what} {source}".strip() + owner
        parts.append(text + (f" [download failed: {failed}]" if failed else ""))
    n = len(parts)
    text = f"model file{'s' if n != 1 else ''} missing: {'; '.join(parts)}. "
    advice = []
    own = _own_files_advice(result)
    if own:
        advice.append(", ".join(own))
    specs = [f.need.spec for f in result.missing if f.need.spec is not None]
    if specs:
        them = "them" if len(specs) > 1 else "it"
        advice.append(
            f"{' and '.join(s.filename for s in specs)}: looked for in {_folders(result)}; run "
            f"`{_fetch_command(specs)}`, or {', '.join(_copy_advice(them))}"
        )
    text += "; ".join(advice)
    return text + f": {closing or workers_start()}."


def missing_report(
    result: ModelCheck, failures: Mapping[str, str] | None = None, retry_s: float | None = None
) -> str:
    """``missing_message`` in short lines, for the log: each file on a line of its own (and why
    its download failed below it), then where they are looked for and what to do; ``retry_s``:
    when the downloads are tried again (None: they are not)."""
    failures = failures or {}
    n = len(result.missing)
    lines = [f"model file{'s' if n != 1 else ''} missing, the workers wait for {'them' if n != 1 else 'it'}:"]
    for f in result.missing:
        what, source, failed = _file_text(f, failures)
        lines.append(
            f"  {what}" + (f", needed by {f.need.owner}" if f.need.owner and f.need.spec is not None else "")
        )
        if source:
            lines.append(f"    {source}")
        if failed:
            lines.append(f"    download failed: {failed}")
    own = _own_files_advice(result)
    if own:
        lines.append(f"  {own[0]},")
        lines.append(f"    {own[1]}")
    specs = [f.need.spec for f in result.missing if f.need.spec is not None]
    if specs:
        them = "them" if len(specs) > 1 else "it"
        lines.append(f"  looked for in: {_folders(result)}")
        lines.append(f"  to get {them}: run `{_fetch_command(specs)}`,")
        copy, named = _copy_advice(them)
        lines.append(f"    or {copy},")
        lines.append(f"    {named}")
    lines.append(f"  {workers_start()}")
    if retry_s:
        lines.append(f"  downloads are tried again in {retry_s:g} s")
    return "\n".join(lines)


def ensure_all(cfg: RestoreConfig, *, download: bool, progress: Progress = True) -> None:
    """Every file ``cfg`` needs, there before anything loads: the missing registry files are
    downloaded (when ``download``, and unless a file of the user's own is missing too, which no
    download can bring), then a ModelError names every file still missing at once, as the
    service's status does, rather than the first one a load trips on."""
    result = check(cfg, deep=False)
    failures: dict[str, str] = {}
    if download and result.missing and all(f.need.spec is not None for f in result.missing):
        for spec in result.downloadable():
            try:
                store.fetch(spec, cfg.model_dir, progress=progress)
            except ModelError as exc:
                failures[spec.name] = store.failure_reason(exc)
        result = check(cfg, deep=False)
    if result.missing:
        raise ModelError(missing_message(result, failures, closing="then run the command again"))


def _file_text(f: FileCheck, failures: Mapping[str, str]) -> tuple[str, str, str | None]:
    """A missing file in words, where it comes from ("from URL"; "" for the user's own file), and
    why its download failed (None: it was not downloaded)."""
    spec = f.need.spec
    if spec is None:
        return f"{f.need.custom} ({_owned(f.need)}{custom_setting(f.need)}: no such file)", "", None
    return f"{spec.filename} ({spec.name}, {spec.size_text})", f"from {spec.url}", failures.get(spec.name)


def _own_files_advice(result: ModelCheck) -> tuple[str, str] | None:
    """What to do about the user's own missing files, in two parts: they are looked for at their
    path only, so no download or cache folder helps them (None when none is missing)."""
    customs = [f.need for f in result.missing if f.need.spec is None]
    if not customs:
        return None
    settings = " or ".join(dict.fromkeys(custom_setting(need) for need in customs))
    where = " and ".join(str(need.custom) for need in customs)
    return (
        f"Put your own file at {where} (it is read from that exact path only)",
        f"or set {settings} to a model name or another file",
    )


def _folders(result: ModelCheck) -> str:
    return ", ".join(str(d) for d in result.folders)


def _fetch_command(specs: Sequence[ModelSpec]) -> str:
    return program.command(f"models fetch {' '.join(s.name for s in specs)}")


def _copy_advice(them: str) -> tuple[str, str]:
    return (
        f"download {them} on a machine with internet access and copy {them} into one of those folders",
        f"or into a folder named by --model-dir, restore.model_dir or {store.ENV_MODEL_DIR}",
    )


def _owned(need: Need) -> str:
    return f"{need.owner}: " if need.owner else ""


def custom_setting(need: Need) -> str:
    """The setting that names a custom file ``need`` (the user's own .pth)."""
    return "restore.upscale_model" if need.role == "upscaler" else "restore.model"


def corrupt_message(result: ModelCheck) -> str:
    parts = []
    for f in result.corrupt:
        what = f.need.spec.name if f.need.spec is not None else _owned(f.need) + custom_setting(f.need)
        parts.append(f"{f.path} ({what}): {f.reason}")
    n = len(parts)
    advice = "Replace it with a good copy" if n == 1 else "Replace them with good copies"
    names = " ".join(f.need.spec.name for f in result.corrupt if f.need.spec is not None)
    if names:
        advice += f" (delete and run `{program.command('models fetch ' + names)}`, or copy one in)"
    return (
        f"corrupt model file{'s' if n != 1 else ''}: {'; '.join(parts)}. {advice}: "
        "the workers start as soon as the file changes."
    )
