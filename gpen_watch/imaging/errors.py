"""Why an image cannot be restored: one exception class per kind of reason, each carrying the
sentence the user reads (the file, what is wrong, what they can do)."""

from __future__ import annotations

from gpen_watch.base.errors import ErrorKind, InputError


class ImageInputError(InputError):
    """An input image cannot be restored. ``kind`` becomes FileResult.error_kind."""


class NotAnImageError(ImageInputError):
    """The file is not an image we can read at all (text, random bytes, a folder, a RAW file...)."""

    kind = ErrorKind.UNSUPPORTED


class EmptyFileError(NotAnImageError):
    """0 bytes: in a hot folder this is usually a copy that has not started writing yet."""


class UnsupportedFormatError(NotAnImageError):
    """An image, but in a format or colour mode this installation cannot decode."""


class BrokenImageError(ImageInputError):
    """A recognised image whose data is truncated or corrupt."""


class DecoderBugError(ImageInputError):
    """Decoding raised an exception that says nothing about the file (a TypeError in a plugin, a
    bug of ours): reported as such, never as a damaged file."""

    kind = ErrorKind.BUG


class ImageTooLargeError(ImageInputError):
    """The declared size exceeds the megapixel limit (refused before decoding)."""
