"""service stage of gpen-watch."""
