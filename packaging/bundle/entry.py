"""The frozen program's entry point: `gpen-watch` as PyInstaller builds it (gpen-watch.spec)."""

import multiprocessing
import sys

from gpen_watch.cli import entry

if __name__ == "__main__":
    # The restorer workers are started with multiprocessing's spawn: in a frozen program the child
    # is this same executable, which must hand over to multiprocessing before anything else.
    multiprocessing.freeze_support()
    if sys.platform == "darwin" and len(sys.argv) == 1:
        # gpen-watch.app opened from Finder: the app is the service, with its menu-bar icon.
        sys.argv += ["run", "--open-if-running"]
    entry()
