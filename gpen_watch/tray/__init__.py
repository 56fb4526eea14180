"""tray stage of gpen-watch."""
