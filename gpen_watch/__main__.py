from gpen_watch.cli import entry

entry()
