"""The frozen program's entry point: `gpen-watch` as PyInstaller builds it (gpen-watch.spec)."""

import linecache
import multiprocessing
import os
import sys
import threading
import tokenize
import traceback
from types import TracebackType


def show_the_bundles_own_source_lines() -> None:
    """Make a traceback show, under each frame's file and line, that line of the source the bundle
    was built from, or no line at all.

    PyInstaller names a frozen module's file relative to the bundle ("gpen_watch/cli/__init__.py").
    Python's own traceback printer looks such a name up from the current folder, then tries the
    name's last part ("__init__.py") in every folder of sys.path; OpenCV's loader puts its own
    folder there, so every package's frame showed a line of OpenCV's __init__.py, and a checkout
    as the current folder showed that checkout's lines, whatever the bundle was built from. Here
    a relative name is read from the bundle's folder alone (gpen-watch.spec ships gpen-watch's own
    sources beside its byte-code), and uncaught exceptions, in the main thread and the others, are
    printed through the traceback module, which reads lines through linecache.
    """
    base = getattr(sys, "_MEIPASS", None)
    if base is None:
        return
    any_file = linecache.updatecache

    def from_the_bundle(filename: str, module_globals: dict[str, object] | None = None) -> list[str]:
        if not filename or os.path.isabs(filename) or (filename.startswith("<") and filename.endswith(">")):
            return any_file(filename, module_globals)
        path = os.path.join(base, filename)
        try:
            with tokenize.open(path) as f:
                lines = f.readlines()
        except (OSError, SyntaxError, UnicodeDecodeError):
            lines = []
        if lines and not lines[-1].endswith("\n"):
            lines[-1] += "\n"
        # No modification time: linecache.checkcache keeps the entry (the bundle's files do not change).
        linecache.cache[filename] = (sum(map(len, lines)), None, lines, path)
        return lines

    linecache.updatecache = from_the_bundle

    def uncaught(exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
        if sys.stderr is not None:
            traceback.print_exception(exc_type, exc, tb, file=sys.stderr)

    def uncaught_in_thread(args: threading.ExceptHookArgs) -> None:
        if args.exc_type is SystemExit or sys.stderr is None:
            return
        name = args.thread.name if args.thread is not None else threading.get_ident()
        print(f"Exception in thread {name}:", file=sys.stderr)
        traceback.print_exception(args.exc_type, args.exc_value, args.exc_traceback, file=sys.stderr)

    sys.excepthook = uncaught
    threading.excepthook = uncaught_in_thread


if __name__ == "__main__":
    show_the_bundles_own_source_lines()
    from gpen_watch.cli import entry

    # The restorer workers are started with multiprocessing's spawn: in a frozen program the child
    # is this same executable, which must hand over to multiprocessing before anything else.
    multiprocessing.freeze_support()
    if sys.platform == "darwin" and len(sys.argv) == 1:
        # gpen-watch.app opened from Finder: the app is the service, with its menu-bar icon.
        sys.argv += ["run", "--open-if-running"]
    entry()
