"""Model weights: the registry of the files gpen-watch knows (name, URL, size, digest, licence), which
of them a configuration needs and whether each is there and whole (``needs``, torch-free), where they
are looked for, downloading them atomically (in the background with progress: ``fetcher``), and
checking that a file is the architecture it claims before a worker loads it (``weights_only`` loads
only)."""
