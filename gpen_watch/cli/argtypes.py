"""argparse ``type=`` checks for numbers a setting has no validator for (argparse says the error,
with the option's name, and exits 2 like any other bad argument)."""

from __future__ import annotations

import argparse


def positive_int(text: str) -> int:
    """A count of at least 1 (``--threads``)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def seconds(text: str) -> float:
    """A duration in seconds, 0 or more (``--stop-grace``, ``--timeout``)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not value >= 0 or value == float("inf"):  # also refuses nan
        raise argparse.ArgumentTypeError(f"must be 0 or more seconds, got {text}")
    return value
