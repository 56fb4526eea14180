"""Hostile test suite: bad inputs, crashes, load and security against a real `gpen-watch run`.

Every scenario ends with ``invariants.check``: each file that entered an inbox is accounted for
exactly once, the journal agrees with the folders, no output is partial and no original was
modified. Long loops live behind ``--runslow`` and in ``python -m tests.hostile.stress``.
"""
