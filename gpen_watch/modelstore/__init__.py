"""modelstore stage of gpen-watch."""
