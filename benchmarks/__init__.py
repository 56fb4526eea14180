"""``python -m benchmarks``: throughput of gpen-watch against the upstream way, on one photo set.

Modes, side by side: (1) upstream-style, a fresh process per photo; (2) one warm process, one face
at a time; (3) the engine (``Restorer.restore_files``, the ``restore`` path); (4) the daemon, photos
dropped into its inbox. See ``docs/benchmarks.md``.
"""
