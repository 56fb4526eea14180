"""dispatch stage of gpen-watch."""
