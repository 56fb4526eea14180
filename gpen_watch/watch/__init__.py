"""watch stage of gpen-watch."""
