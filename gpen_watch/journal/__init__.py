"""journal stage of gpen-watch: the durable SQLite record of every job (see journal.py)."""

from gpen_watch.journal.journal import AddResult, Event, Job, Journal, default_path, hash_file

__all__ = ["AddResult", "Event", "Job", "Journal", "default_path", "hash_file"]
