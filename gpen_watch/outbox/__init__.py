"""outbox stage of gpen-watch."""
