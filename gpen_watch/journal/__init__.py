"""journal stage of gpen-watch: the durable SQLite record of every job (see journal.py)."""

from gpen_watch.journal.journal import AddResult, Claim, Event, Job, Journal, default_path, hash_file

__all__ = ["AddResult", "Claim", "Event", "Job", "Journal", "default_path", "hash_file"]
