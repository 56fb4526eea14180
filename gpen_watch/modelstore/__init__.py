"""Model weights: the registry of the files gpen-watch knows (name, URL, licence), where they are
looked for, downloading them atomically, and checking that a file is the architecture it claims
before a worker loads it (``weights_only`` loads only)."""
