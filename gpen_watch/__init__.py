"""gpen-watch: hot-folder GPEN face restoration.

The package is split by stage: ``watch`` -> ``journal`` -> ``dispatch`` -> ``restore`` -> ``outbox``,
with ``tray`` and ``service`` beside them. Only ``restore`` (run inside worker processes) imports torch.
"""

__version__ = "0.1.0"
