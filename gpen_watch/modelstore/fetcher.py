"""Downloading missing model files on a background thread, with progress others can read.

The service's loop must keep answering status and taking arrivals while hundreds of MB come in, so
the downloads run on their own thread, one file after another. Torch-free.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from gpen_watch.base.errors import ModelError
from gpen_watch.catalog.model_spec import ModelSpec, mb
from gpen_watch.modelstore import needs, store
from gpen_watch.modelstore.download import DEFAULT_TIMEOUT, DownloadError

log = logging.getLogger(__name__)

# Log lines per file: one at each tenth, so a slow download shows it is moving without flooding.
LOG_STEP_PERCENT = 10


class Cancelled(Exception):
    """Raised inside a download to abandon it (the service is stopping); its temp file is removed."""


@dataclass(frozen=True)
class FetchProgress:
    name: str
    filename: str
    done: int
    total: int | None

    @property
    def percent(self) -> int | None:
        return None if not self.total else min(100, self.done * 100 // self.total)

    def text(self) -> str:
        if self.percent is None:
            return f"downloading {self.name}: {mb(self.done)}"
        assert self.total is not None
        return f"downloading {self.name}: {self.percent} % ({self.done / 1e6:.1f} of {mb(self.total)})"


class BackgroundFetch:
    """Fetch ``specs`` into the cache, in order, on a daemon thread; ``on_done`` is called at the end
    (from that thread). Read ``progress()``, ``failures()`` and ``done`` from any thread."""

    def __init__(
        self,
        specs: Sequence[ModelSpec],
        model_dir: Path | None,
        on_done: Callable[[], None],
        timeout: float = DEFAULT_TIMEOUT,
        quiet: bool = False,
        accepted: Sequence[str] = (),
    ) -> None:
        self.specs = tuple(specs)
        # restore.accepted_terms, which every download is held to (``terms``).
        self._accepted = tuple(accepted)
        # A retry of downloads that failed before says "downloading" at debug level only. What
        # failed is always the caller's to say (the model gate names every file in one message):
        # each URL's and each file's failure is logged at debug level.
        self._quiet = quiet
        self._model_dir = model_dir
        self._on_done = on_done
        self._timeout = timeout
        self._lock = threading.Lock()
        self._progress: FetchProgress | None = None
        self._failures: dict[str, str] = {}
        # Fetched but refused (wrong size or digest, a server error page): trying again every few
        # minutes would download hundreds of MB each time for the same result.
        self._refused: set[str] = set()
        self._fetched: list[str] = []
        self._cancel = threading.Event()
        self._thread = threading.Thread(target=self._run, name="model-fetch", daemon=True)

    def start(self) -> BackgroundFetch:
        self._thread.start()
        return self

    @property
    def done(self) -> bool:
        return not self._thread.is_alive()

    def progress(self) -> FetchProgress | None:
        with self._lock:
            return self._progress

    def failures(self) -> dict[str, str]:
        with self._lock:
            return dict(self._failures)

    def refused(self) -> set[str]:
        with self._lock:
            return set(self._refused)

    def fetched(self) -> list[str]:
        with self._lock:
            return list(self._fetched)

    def cancel(self, wait: float = 5.0) -> None:
        self._cancel.set()
        if self._thread.is_alive():
            self._thread.join(wait)

    def _run(self) -> None:
        try:
            for spec in self.specs:
                if self._cancel.is_set():
                    return
                self._one(spec)
        finally:
            with self._lock:
                self._progress = None
            if not self._cancel.is_set():
                self._on_done()

    def _one(self, spec: ModelSpec) -> None:
        logged = [-1]

        def on_progress(done: int, total: int | None) -> None:
            if self._cancel.is_set():
                raise Cancelled(spec.filename)
            total = total or spec.size_bytes
            p = FetchProgress(spec.name, spec.filename, done, total)
            with self._lock:
                self._progress = p
            step = (p.percent or 0) // LOG_STEP_PERCENT
            if p.percent is not None and step > logged[0]:
                logged[0] = step
                log.info("%s", p.text())

        with self._lock:
            self._progress = FetchProgress(spec.name, spec.filename, 0, spec.size_bytes)
        log.log(
            logging.DEBUG if self._quiet else logging.INFO,
            "downloading %s (%s) from %s",
            spec.filename,
            spec.size_text,
            spec.url,
        )
        try:
            path = store.fetch(
                spec,
                self._model_dir,
                progress=False,
                timeout=self._timeout,
                on_progress=on_progress,
                quiet=True,
                accepted=self._accepted,
            )
        except Cancelled:
            log.info("download of %s abandoned (stopping)", spec.filename)
            return
        except ModelError as exc:
            reason = store.failure_reason(exc)
            cause = exc.__cause__
            with self._lock:
                self._failures[spec.name] = reason
                if isinstance(cause, DownloadError) and not cause.network:
                    self._refused.add(spec.name)
            log.debug("could not download %s: %s", spec.filename, reason)
            return
        except Exception as exc:  # a thread must not die silently: the service would wait forever
            with self._lock:
                self._failures[spec.name] = f"{type(exc).__name__}: {exc}"
            log.exception("downloading %s failed", spec.filename)
            return
        bad = needs.header_problem(path)
        if bad:
            # Our own fresh download (an unpinned file: a server's error page, a cut-off body): left
            # in the cache, it would be found on every start and fail every worker.
            path.unlink(missing_ok=True)
            reason = f"the file downloaded from {spec.url} is {bad}; removed"
            with self._lock:
                self._failures[spec.name] = reason
                self._refused.add(spec.name)
            log.error("%s: %s", spec.filename, reason)
            return
        with self._lock:
            self._fetched.append(spec.name)
        log.info("downloaded %s to %s", spec.filename, path)
