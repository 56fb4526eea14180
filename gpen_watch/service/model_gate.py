"""The service's start-up gate: workers start only once every model file they need is there.

At start the service checks the files its configuration needs (generator, detector, parser). Any that
are missing are downloaded on a background thread (BackgroundFetch) with progress in the status;
what cannot be had is one problem naming every missing file, its URL, its size and the folders it
is looked for in. Meanwhile photos are queued in the journal as usual; nothing is claimed.

Noticing the files: the service loop calls ``poll()`` every CHECK_EVERY_S while it waits, which
stats the few needed paths (the model folders may not exist yet, so a watchdog observer would need
to watch their parents and still miss a network share; three stats every two seconds cost nothing).
A file's header is read only when its stamp (size, mtime) changed, and it must hold still for one
interval, so a file still being copied is not loaded half-written. Failed downloads are retried
every FETCH_RETRY_S (and at once on ``resume``), for when the network comes back.

The log says the missing files once, in short lines, when the first downloads have failed; a retry
then adds one line when what is missing (or why) changed, and nothing when it did not: a service
left offline for a week would otherwise write the same paragraph every hour.

A worker that starts and finds a file the header check could not fault (damaged data, the wrong
architecture) stops with the loader's message; the gate then holds the workers until a needed file
changes, and lets them try again by themselves.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from gpen_watch.config import RestoreConfig
from gpen_watch.modelstore import messages, needs, terms
from gpen_watch.modelstore.fetcher import BackgroundFetch
from gpen_watch.modelstore.needs import ModelCheck
from gpen_watch.platform import program
from gpen_watch.service.status import DownloadStatus, ModelFileStatus, ModelsStatus

log = logging.getLogger(__name__)

CHECK_EVERY_S = 2.0
# Failed downloads are tried again after this, doubling up to FETCH_RETRY_MAX_S while they fail.
FETCH_RETRY_S = 60.0
FETCH_RETRY_MAX_S = 3600.0


class GateState(enum.Enum):
    READY = "ready"  # workers may run
    WAITING = "waiting"  # files missing or corrupt: workers are held
    WORKERS_FAILED = "workers_failed"  # workers could not load the files: held until one changes


class ModelGate:
    def __init__(
        self,
        cfg: RestoreConfig,
        wake: Callable[[], None],
        *,
        clock: Callable[[], float] = time.monotonic,
        fetch_timeout: float = 60.0,
        profiles: Sequence[needs.Profile] = (),
    ) -> None:
        self._cfg = cfg
        # The inboxes' own restore settings: a model only one inbox names is needed as much.
        self._profiles = tuple(profiles)
        self._wake = wake
        self._clock = clock
        self._fetch_timeout = fetch_timeout
        self.state = GateState.READY
        self._check: ModelCheck | None = None
        self._settled_stamp: Any = None  # the stamp seen at the previous poll
        self._failed_stamp: Any = None  # the stamp the workers failed on
        self._next_check = 0.0
        self._next_fetch = 0.0
        self._fetch: BackgroundFetch | None = None
        self._failures: dict[str, str] = {}  # last download failure per model name
        self._refused: set[str] = set()  # downloaded but refused: not retried before `resume`
        self._retry_s = FETCH_RETRY_S
        self._rounds = 0  # fetch rounds started
        # Corrupt files already in the log, as (path, stamp): each is logged once, not per poll.
        self._logged_corrupt: set[tuple[str, Any]] = set()
        # The missing files (and why each download failed) the log last said.
        self._said_missing: tuple[tuple[str, str], ...] = ()

    # --- driven by the service loop -------------------------------------------------------------

    def start(self) -> bool:
        """Check at start; True when the workers can start now. Else downloads begin."""
        self._check = needs.check(self._cfg, profiles=self._profiles)
        self._settled_stamp = self._check.stamp
        _log_terms_on_disk(self._check)
        if self._check.ready:
            return True
        self.state = GateState.WAITING
        self._maybe_fetch()
        # What the downloads just started will bring is news now; how they end is said when they
        # do (poll), however soon that is: a refused connection can end one before this line.
        self._log_waiting(fetch_failures=False)
        self._logged_corrupt |= _corrupt_keys(self._check)  # they were in that message
        return False

    def due_in(self) -> float:
        """Seconds until the loop should call poll() (a large number when nothing is awaited)."""
        if self.state is GateState.READY:
            return 3600.0
        return max(0.0, self._next_check - self._clock())

    def poll(self) -> bool:
        """The periodic check; True when the held workers should (re)start now."""
        if self.state is GateState.READY or self._clock() < self._next_check:
            return False
        self._next_check = self._clock() + CHECK_EVERY_S
        if self._fetch is not None and self._fetch.done:
            self._fetch_ended(self._fetch)
        shallow = needs.check(self._cfg, deep=False, profiles=self._profiles)
        stamp = shallow.stamp
        settled = stamp == self._settled_stamp
        self._settled_stamp = stamp
        if self._check is None or stamp != self._check.stamp:
            self._check = needs.check(
                self._cfg, profiles=self._profiles
            )  # something changed: read the headers again
            self._log_new_corrupt(self._check)
        if self.state is GateState.WORKERS_FAILED and stamp == self._failed_stamp:
            return False
        if not settled:
            return False
        if self._check.ready:
            was = self.state
            self.state = GateState.READY
            self._failures.clear()
            if self._fetch is not None:
                # The user copied the files in meanwhile: the rest of the download is not needed.
                self._fetch.cancel(wait=0.0)
                self._fetch = None
            if was is GateState.WORKERS_FAILED:
                log.info("a model file changed: the workers try to load them again")
            else:
                log.info("every model file is there now: starting the workers")
            return True
        if self.state is GateState.WORKERS_FAILED:
            self.state = GateState.WAITING  # the change made a file missing or corrupt
            self._log_waiting(corrupt=False)  # a corrupt file was logged by the check that found it
        self._maybe_fetch()
        return False

    def _fetch_ended(self, fetch: BackgroundFetch) -> None:
        self._fetch = None
        failures = fetch.failures()
        self._failures.update(failures)
        self._refused |= fetch.refused()
        for name in fetch.fetched():
            self._failures.pop(name, None)
        self._next_fetch = self._clock() + self._retry_s
        if fetch.fetched():
            # What is missing now, for the log below (the next poll would find it too).
            self._check = needs.check(self._cfg, profiles=self._profiles)
            self._log_new_corrupt(self._check)
        if failures:
            if self._rounds == 1:
                self._log_waiting(retry_s=self._retry_s if self._retried() else None)
            else:
                self._log_still_missing()
            self._retry_s = min(FETCH_RETRY_MAX_S, self._retry_s * 2)

    def _retried(self) -> bool:
        """Whether a missing file is downloaded again by itself (one whose download was not refused)."""
        assert self._check is not None
        return any(s.name not in self._refused for s in self._check.downloadable())

    def _log_still_missing(self) -> None:
        """After a retry: one line when what is missing, or why, changed since the log said it."""
        assert self._check is not None
        missing = self._check.without_awaiting().missing
        if not missing:
            return
        failures = self._known_failures()
        said = _missing_key(missing, failures)
        files = "; ".join(f"{label}: {why}" if why else label for label, why in said)
        then = (
            f"next try in {self._retry_s:g} s"
            if self._retried()
            else f"no download is tried again before `{program.command('resume')}`"
        )
        level = logging.WARNING if said != self._said_missing else logging.DEBUG
        log.log(level, "model files still missing: %s; %s", files, then)
        self._said_missing = said

    def workers_failed(self) -> None:
        """The workers could not load the files (the pool stopped them): wait for a change."""
        if self.state is GateState.WORKERS_FAILED:
            return
        self._check = needs.check(self._cfg, profiles=self._profiles)
        self._failed_stamp = self._settled_stamp = self._check.stamp
        self.state = GateState.WORKERS_FAILED
        self._next_check = self._clock() + CHECK_EVERY_S
        log.error("the workers cannot load the model files; they try again once a file changes")

    def accept(self, accepted_terms: Sequence[str]) -> None:
        """The user said yes to more terms (restore.accepted_terms, changed while running): the
        files that waited for it are downloaded now."""
        accepted = list(accepted_terms)
        self._cfg = dataclasses.replace(self._cfg, accepted_terms=accepted)
        self._profiles = tuple(
            (owner, dataclasses.replace(profile, accepted_terms=accepted))
            for owner, profile in self._profiles
        )
        if self._check is not None:
            self._check = dataclasses.replace(self._check, accepted=tuple(accepted))
        self.retry_now()

    def retry_now(self) -> None:
        """``resume``: check now, and download again now."""
        self._next_check = 0.0
        self._next_fetch = 0.0
        self._retry_s = FETCH_RETRY_S
        self._refused.clear()
        if self.state is GateState.WORKERS_FAILED:
            # The pool restarts the stopped workers itself on resume; if they fail again, that
            # failure is recorded against the files as they are now.
            self.state = GateState.READY
        if self.state is GateState.WAITING:
            self._maybe_fetch()

    def close(self) -> None:
        if self._fetch is not None:
            self._fetch.cancel()
            self._fetch = None

    def _maybe_fetch(self) -> None:
        assert self._check is not None
        specs = [s for s in self._check.downloadable() if s.name not in self._refused]
        if not specs or self._fetch is not None or self._clock() < self._next_fetch:
            return
        self._rounds += 1
        quiet = self._rounds > 1
        self._fetch = BackgroundFetch(
            specs, self._cfg.model_dir, self._wake, self._fetch_timeout, quiet, self._cfg.accepted_terms
        ).start()

    def _log_new_corrupt(self, check: ModelCheck) -> None:
        """A file that turned up corrupt (a cut-short copy, an error page saved as .pth) is said in
        the log, with its path and what to do, once; status shows it for as long as it lasts."""
        new = tuple(f for f in check.corrupt if _corrupt_key(f) not in self._logged_corrupt)
        if new:
            log.error("%s", messages.corrupt_block(dataclasses.replace(check, files=new)))
            self._logged_corrupt |= {_corrupt_key(f) for f in new}

    def _log_waiting(
        self, corrupt: bool = True, retry_s: float | None = None, fetch_failures: bool = True
    ) -> None:
        """Say in the log why the workers wait: what the status says, but the missing files in
        a block (``messages.missing_block``); ``retry_s``: when the downloads are tried again."""
        check = self._check
        if self.state is not GateState.WAITING or check is None:
            problem = self.problem()
            if problem:
                log.error("%s", problem)
            return
        if corrupt and check.corrupt:
            log.error("%s", messages.corrupt_block(check))
        if check.awaiting:
            log.warning("%s", terms.block(check.awaiting))
        check = check.without_awaiting()
        if not check.missing:
            return
        failures = self._known_failures() if fetch_failures else dict(self._failures)
        if self._missing_is_a_problem(failures):
            log.error("%s", messages.missing_block(check, failures, retry_s=retry_s))
            self._said_missing = _missing_key(check.missing, failures)
        else:
            names = ", ".join(f.need.label for f in check.missing)
            log.warning("model files missing: %s; downloading them", names)

    # --- what status shows ----------------------------------------------------------------------

    def _known_failures(self) -> dict[str, str]:
        failures = dict(self._failures)
        if self._fetch is not None:
            failures.update(self._fetch.failures())
        return failures

    def problem(self) -> str | None:
        """Why the workers wait, as blocks of lines (status, the dashboard); None when they do not."""
        return self._problems(short=False)

    def problem_line(self) -> str | None:
        """The same in one short line (the tray, a desktop notice)."""
        return self._problems(short=True)

    def _problems(self, short: bool) -> str | None:
        if self.state is GateState.READY or self._check is None:
            return None
        if self.state is GateState.WORKERS_FAILED:
            # The loader's own message is the pool's problem (and each worker's error in status).
            if short:
                return "the workers could not load the model files"
            return "a worker could not load the model files; it tries again as soon as a model file changes"
        awaiting = self._check.awaiting
        if short and awaiting:
            return terms.line(awaiting)  # the one thing only the user can do
        parts = [terms.block(awaiting)] if awaiting else []
        if self._check.corrupt:
            parts.append(messages.corrupt_line(self._check) if short else messages.corrupt_block(self._check))
        failures = self._known_failures()
        check = self._check.without_awaiting()
        if check.missing and self._missing_is_a_problem(failures):
            parts.append(
                messages.missing_line(check, failures) if short else messages.missing_block(check, failures)
            )
        if short and len(parts) > 1:
            return "model files missing or corrupt"
        return "\n".join(parts) or None

    def _missing_is_a_problem(self, failures: dict[str, str]) -> bool:
        """While the first downloads run, missing files are news (a notice), not yet a problem;
        a file no download brings, or one whose download failed, is one at once."""
        assert self._check is not None
        missing = self._check.missing
        hopeless = any(f.need.spec is None or f.need.spec.name in failures for f in missing)
        return hopeless or self._fetch is None or bool(self._check.awaiting)

    def notice(self) -> str | None:
        if self._fetch is None or self.state is GateState.READY:
            return None
        progress = self._fetch.progress()
        return progress.text() if progress is not None else None

    def status(self) -> ModelsStatus:
        check = self._check
        progress = self._fetch.progress() if self._fetch is not None else None
        failures = self._known_failures()
        awaiting = set(check.awaiting) if check is not None else set()
        files = []
        for f in check.files if check is not None else ():
            spec = f.need.spec
            files.append(
                ModelFileStatus(
                    role=f.need.role,
                    name=spec.name if spec is not None else None,
                    file=f.need.label,
                    state=f.state.value,
                    path=str(f.path) if f.path is not None else None,
                    reason=f.reason or (failures.get(spec.name) if spec is not None else None),
                    url=spec.url if spec is not None else None,
                    size_bytes=spec.size_bytes if spec is not None else None,
                    terms=spec.terms.name if spec in awaiting else None,
                )
            )
        download = None
        if progress is not None:
            download = DownloadStatus(
                progress.name, progress.filename, progress.done, progress.total, progress.percent
            )
        return ModelsStatus(
            state=self.state.value,
            files=tuple(files),
            folders=tuple(str(d) for d in check.folders) if check is not None else (),
            download=download,
        )


def _missing_key(missing: Sequence[needs.FileCheck], failures: dict[str, str]) -> tuple[tuple[str, str], ...]:
    """What the log says of ``missing``: each file, and why its download failed."""
    return tuple(
        (f.need.label, failures.get(f.need.spec.name, "") if f.need.spec is not None else "") for f in missing
    )


def _log_terms_on_disk(check: ModelCheck) -> None:
    """Files found on disk whose terms ask for a yes the user has not given are used (whoever put
    them there had them from their publisher), and their terms said once, at start."""
    present = [
        f.need.spec
        for f in check.files
        if f.state is not needs.FileState.MISSING
        and f.need.spec is not None
        and not terms.answered(f.need.spec, check.accepted)
    ]
    for spec in dict.fromkeys(present):
        log.info(
            "%s is used as found on disk; its terms do not allow paid work (%s); `%s` records your yes",
            spec.name,
            spec.terms.title,
            terms.accept_command([spec]),
        )


def _corrupt_key(f: needs.FileCheck) -> tuple[str, Any]:
    return str(f.path), f.stamp


def _corrupt_keys(check: ModelCheck) -> set[tuple[str, Any]]:
    return {_corrupt_key(f) for f in check.corrupt}
