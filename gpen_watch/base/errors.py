"""Errors a user sees. Each names the file it concerns and says what to do."""

from __future__ import annotations

from gpen_watch.base.strenum import StrEnum


class ErrorKind(StrEnum):
    """Why a photo got no output (``FileResult.error_kind``); it decides where its record goes."""

    FAILED = "failed"  # an image that broke, or that the engine failed on: failed/, retried on request
    UNSUPPORTED = "unsupported"  # not a photo gpen-watch can read at all
    OUTBOX = "outbox"  # the output folder refused the write (full, read-only): not the photo's fault
    # gpen-watch or a library it uses failed on the photo (an exception no decoder should raise):
    # failed/ like FAILED, but counted apart in status and not blamed on the file.
    BUG = "bug"


class GpenWatchError(Exception):
    """Base for every error gpen-watch reports to the user (exit code 2 in the CLI)."""


class ConfigError(GpenWatchError):
    """A setting is invalid; the message names the setting and the reason."""


class InputError(GpenWatchError):
    """An input file cannot be restored (unreadable, not an image, too large...)."""

    kind = ErrorKind.FAILED

    def __init__(self, path: object, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class ClusterError(GpenWatchError):
    """The Ray cluster cannot be used (not installed, unreachable, no token, refused)."""


class ModelError(GpenWatchError):
    """Model weights are missing, corrupt or do not match the architecture."""


class OutputError(GpenWatchError):
    """An output cannot be written (folder not writable, disk full...)."""


class OutboxUnavailable(OutputError):
    """The output folder refuses writes for now (disk full, read-only, gone, no permission).

    Not the photo's fault: callers keep the photo waiting in the inbox instead of failing it."""
