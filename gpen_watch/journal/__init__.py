"""journal stage of gpen-watch."""
