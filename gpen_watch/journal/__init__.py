"""The durable SQLite record of every job: its state, attempts, history, output and what became of
its original (``journal``), the named states (``states``) and the schema (``schema``)."""

from gpen_watch.journal.journal import AddResult, Claim, Event, Job, Journal, default_path, hash_file

__all__ = ["AddResult", "Claim", "Event", "Job", "Journal", "default_path", "hash_file"]
