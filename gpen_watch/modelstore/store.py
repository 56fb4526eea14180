"""Where model files are looked for, and fetching the ones that are missing.

Search order, first hit wins:
1. the explicit folder (``restore.model_dir`` in the config, or ``--model-dir``);
2. ``GPEN_WATCH_MODEL_DIR`` (several folders separated by ``os.pathsep``), for offline machines and
   shared network folders;
3. the per-user download cache (``paths.model_cache_dir()``), the only place downloads go.

Nothing is remembered between calls: callers pass the folder in, and the environment is read at call
time (or passed in as ``env``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path

from gpen_watch.base.errors import ModelError
from gpen_watch.catalog.registry import ModelSpec
from gpen_watch.modelstore.download import DEFAULT_TIMEOUT, DownloadError, OnProgress, Progress, download
from gpen_watch.platform import paths, program

log = logging.getLogger(__name__)

ENV_MODEL_DIR = "GPEN_WATCH_MODEL_DIR"


def model_search_dirs(model_dir: Path | None, env: Mapping[str, str] | None = None) -> list[Path]:
    """Folders to look in, in order (duplicates removed)."""
    env = os.environ if env is None else env
    candidates: list[Path] = []
    if model_dir is not None and str(model_dir):
        candidates.append(Path(model_dir).expanduser())
    for entry in env.get(ENV_MODEL_DIR, "").split(os.pathsep):
        if entry.strip():
            candidates.append(Path(entry.strip()).expanduser())
    candidates.append(paths.model_cache_dir())
    unique: list[Path] = []
    for folder in candidates:
        if folder not in unique:
            unique.append(folder)
    return unique


def find_model(spec: ModelSpec, model_dir: Path | None, env: Mapping[str, str] | None = None) -> Path | None:
    """The first existing file for ``spec`` in the search folders, or None."""
    for folder in model_search_dirs(model_dir, env):
        for filename in spec.filenames:
            candidate = folder / filename
            if candidate.is_file():
                return candidate
    return None


def ensure_model(
    spec: ModelSpec,
    model_dir: Path | None,
    download: bool = True,
    progress: Progress = True,
    env: Mapping[str, str] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> Path:
    """The path of ``spec``'s file, downloading it into the cache when it is nowhere to be found."""
    found = find_model(spec, model_dir, env)
    if found is not None:
        return found
    folders = model_search_dirs(model_dir, env)
    if not download:
        raise ModelError(
            f"model {spec.name} ({spec.filename}) not found; looked in {_join(folders)}. "
            f"Run `{program.command('models fetch ' + spec.name)}`, or download {spec.url} and put it in one of "
            "those folders."
        )
    return fetch(spec, model_dir, progress, env, timeout)


def fetch(
    spec: ModelSpec,
    model_dir: Path | None,
    progress: Progress = False,
    env: Mapping[str, str] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    on_progress: OnProgress | None = None,
    quiet: bool = False,
) -> Path:
    """Download ``spec`` into the cache, trying its URLs in turn; a ModelError says what failed.
    ``quiet``: each URL's failure is logged at debug level only, for a caller that says what
    failed itself (the service's model gate, which would otherwise repeat it at every retry)."""
    return _download_spec(spec, model_search_dirs(model_dir, env), progress, timeout, on_progress, quiet)


def failure_reason(exc: ModelError) -> str:
    """Why a download failed, alone ("Name or service not known"), for a message that names many
    files; the whole sentence when it was no download that failed."""
    cause = exc.__cause__
    if isinstance(cause, DownloadError):
        return cause.reason
    return str(exc)


def cache_path(spec: ModelSpec) -> Path:
    """Where a download of ``spec`` goes."""
    return paths.model_cache_dir() / spec.filename


def _download_spec(
    spec: ModelSpec,
    folders: list[Path],
    progress: Progress,
    timeout: float,
    on_progress: OnProgress | None = None,
    quiet: bool = False,
) -> Path:
    dest = cache_path(spec)
    failures: list[DownloadError] = []
    for i, url in enumerate(spec.urls):
        if failures:
            log.log(
                logging.DEBUG if quiet else logging.INFO,
                "trying mirror %d of %d for %s: %s",
                i,
                len(spec.mirrors),
                spec.filename,
                url,
            )
        try:
            path = download(
                url,
                dest,
                expected_size=spec.size_bytes,
                sha256=spec.sha256,
                progress=progress,
                timeout=timeout,
                on_progress=on_progress,
            )
        except DownloadError as exc:
            failures.append(exc)
            log.log(
                logging.DEBUG if quiet else logging.WARNING,
                "could not download %s from %s: %s",
                spec.filename,
                url,
                exc.reason,
            )
            continue
        checked = "size and sha256 checked" if spec.sha256 else "no published digest to check"
        source = "its own URL" if i == 0 else f"mirror {i}"
        log.info("%s served by %s (%s): %s", spec.filename, source, url, checked)
        return path
    tried = "; ".join(f"{exc.url}: {exc.reason}" for exc in failures)
    message = f"cannot download {spec.filename} (model {spec.name}): {tried}."
    if any(exc.network for exc in failures):
        message += (
            f" Without internet access, download {spec.url} on another machine and put it in one of "
            f"{_join(folders)} (or in a folder named by --model-dir, restore.model_dir or {ENV_MODEL_DIR})."
        )
    raise ModelError(message) from failures[-1]


def _join(folders: list[Path]) -> str:
    return ", ".join(str(f) for f in folders)
