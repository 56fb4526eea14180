"""Finding complete arrivals in the inboxes: which files are candidates (``filters``), when a file
has settled (``settle``), and the watchdog or polling observer with start-up scan and periodic
rescan that reports them (``watcher``)."""
