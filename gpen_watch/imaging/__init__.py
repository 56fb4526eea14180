"""imaging stage of gpen-watch."""
