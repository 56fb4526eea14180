"""The durable SQLite record of every job: its state, attempts, history, output and what became of
its original. ``journal`` makes every change (and moves jobs along ``states.TRANSITIONS``),
``queries`` reads, ``records`` are what both hand out, ``connection`` opens the file and holds the
transaction rules, ``states`` names the states and ``schema`` the tables."""

from gpen_watch.journal.journal import AddResult, Claim, Event, Job, Journal, default_path, hash_file

__all__ = ["AddResult", "Claim", "Event", "Job", "Journal", "default_path", "hash_file"]
