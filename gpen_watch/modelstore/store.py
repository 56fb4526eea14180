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
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

from gpen_watch.base.errors import ModelError
from gpen_watch.catalog.model_spec import ModelSpec
from gpen_watch.modelstore import terms
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
    accepted: Collection[str] = (),
) -> Path:
    """The path of ``spec``'s file, downloading it into the cache when it is nowhere to be found
    (and its terms allow it: ``accepted``, restore.accepted_terms; ``terms``)."""
    found = find_model(spec, model_dir, env)
    if found is not None:
        return found
    folders = model_search_dirs(model_dir, env)
    if not download:
        lines = [
            f"model {spec.name} ({spec.filename}) not found; to get it, run:",
            f"    {program.command('models fetch ' + spec.name)}",
            f"  or download {spec.url}",
            "  and copy it into any of these folders:",
            *(f"    {line}" for line in copy_folders(folders)),
        ]
        raise ModelError("\n".join(lines))
    return fetch(spec, model_dir, progress, env, timeout, accepted=accepted)


def fetch(
    spec: ModelSpec,
    model_dir: Path | None,
    progress: Progress = False,
    env: Mapping[str, str] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    on_progress: OnProgress | None = None,
    quiet: bool = False,
    accepted: Collection[str] = (),
) -> Path:
    """Download ``spec`` into the cache, trying its URLs in turn; a ModelError says what failed.
    ``quiet``: each URL's failure is logged at debug level only, for a caller that says what
    failed itself (the service's model gate, which would otherwise repeat it at every retry).
    ``accepted``: the terms the user said yes to (restore.accepted_terms); a file whose terms ask
    for a yes not among them is refused before anything is downloaded (terms.TermsNotAccepted)."""
    terms.require(spec, accepted)
    return _download_spec(spec, model_search_dirs(model_dir, env), progress, timeout, on_progress, quiet)


def fetch_accepted(specs: Sequence[ModelSpec], model_dir: Path | None, accepted: Collection[str]) -> None:
    """Download the missing ``specs`` whose terms ask for a yes that ``accepted`` gives. What the
    engine loads by name (``ensure_model``) knows no answer and never downloads those: a restorer
    that may download (a cluster node's) asks for them here first, with its settings' answer."""
    for spec in specs:
        if spec.terms.needs_yes and terms.answered(spec, accepted) and find_model(spec, model_dir) is None:
            fetch(spec, model_dir, accepted=accepted)


class FetchFailed(ModelError):
    """Every URL of a model failed (``failures``, in the order tried); raised from the last."""

    def __init__(self, message: str, failures: list[DownloadError]) -> None:
        super().__init__(message)
        self.failures = failures


def failure_reason(exc: ModelError) -> str:
    """Why a download failed, alone, for a message that names many files: "no internet connection
    (could not look up a.com; could not look up b.com)", each URL's particulars under one
    headline where they share it; the whole sentence when it was no download that failed."""
    if isinstance(exc, FetchFailed):
        return joined_reason(exc.failures)
    cause = exc.__cause__
    if isinstance(cause, DownloadError):
        return cause.reason
    return str(exc)


def joined_reason(failures: list[DownloadError]) -> str:
    by_headline: dict[str, list[str]] = {}
    for f in failures:
        details = by_headline.setdefault(f.failure.headline, [])
        if f.failure.detail and f.failure.detail not in details:
            details.append(f.failure.detail)
    return "; ".join(
        f"{headline} ({'; '.join(details)})" if details else headline
        for headline, details in by_headline.items()
    )


def copy_folders(folders: list[Path] | tuple[Path, ...]) -> list[str]:
    """Every folder a copied model file is found in, in the order they are searched (the download
    cache said to be one), and how to name another: one line each."""
    cache = paths.model_cache_dir()
    out = [f"{folder} (the download cache)" if folder == cache else str(folder) for folder in folders]
    out.append(f"a folder of your own, named by --model-dir, restore.model_dir or {ENV_MODEL_DIR}")
    return out


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
    headlines = list(dict.fromkeys(exc.failure.headline for exc in failures))
    lines = [f"cannot download {spec.filename} ({spec.name}): {'; '.join(headlines)}"]
    lines += [f"  from {exc.url}: {exc.failure.detail or exc.failure.headline}" for exc in failures]
    if any(exc.network for exc in failures):
        where = "that address" if len(failures) == 1 else "one of those addresses"
        lines.append(f"  without internet access, download it from {where} on another machine")
        lines.append("  and copy it into any of these folders:")
        lines += [f"    {line}" for line in copy_folders(folders)]
    raise FetchFailed("\n".join(lines), failures) from failures[-1]


def _join(folders: list[Path]) -> str:
    return ", ".join(str(f) for f in folders)
