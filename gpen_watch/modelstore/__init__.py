"""Model weights on disk: which of the files gpen_watch.catalog lists a configuration needs and
whether each is there and whole (``needs``, torch-free), where they are looked for (``store``),
and downloading them atomically (in the background with progress: ``fetcher``). Checking that a
file is the architecture it claims before a worker loads it (``weights_only`` loads only) is
gpen_watch.restore.engines.verify."""
