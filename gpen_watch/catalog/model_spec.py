"""One downloadable weights file as the catalog describes it (``ModelSpec``), and the size wording
every list of models uses. ``registry`` holds the catalog itself."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gpen_watch.catalog.gpen_config import GPENConfig
from gpen_watch.catalog.licences import Terms
from gpen_watch.catalog.rrdbnet_config import RRDBConfig

ModelKind = Literal["gpen", "gfpgan", "codeformer", "detector", "parser", "upscaler", "identity"]


def mb(n: int) -> str:
    """Sizes are shown in MB (10^6 bytes) everywhere (the README, `models list`, progress), never MiB."""
    return f"{n / 1e6:.1f} MB"


@dataclass(frozen=True)
class ModelSpec:
    """One downloadable weights file."""

    name: str
    filename: str
    url: str
    kind: ModelKind
    # Exact size and digest of the published file, checked on every download (a download that differs
    # is refused and removed). None where no value has been published that we could check against.
    size_bytes: int | None
    sha256: str | None
    description: str
    # Its publisher's terms, and whether they allow paid work (``licences``).
    terms: Terms
    # For display only, where size_bytes is not pinned ("~76 MB"); never used to accept a file.
    approx_size: str = ""
    # Tried in order after ``url``; each must serve a file with the same state-dict layout.
    mirrors: tuple[str, ...] = ()
    # Other names the same file is known by, so a copy taken from another project is found too.
    alt_filenames: tuple[str, ...] = ()
    # Architecture variant for the builder (RetinaFace backbone network_name).
    arch: str = ""
    # The generator's shape, for kind "gpen": the checkpoint must match it exactly.
    gpen: GPENConfig | None = None
    # The upscaler's shape, for kind "upscaler" (the checkpoint must match it exactly).
    rrdb: RRDBConfig | None = None
    # How this choice differs from the others of its kind, for help text and the config file.
    choice_note: str = ""
    # A model with no weights file (a network made in code alone): nothing to find, check or download
    # (modelstore.needs leaves it out).
    weightless: bool = False

    @property
    def size_text(self) -> str:
        """The download's size for people: "284.1 MB, 284,085,738 bytes", or the estimate."""
        if self.size_bytes is not None:
            return f"{mb(self.size_bytes)}, {self.size_bytes:,} bytes"
        return self.approx_size or "size unknown"

    @property
    def urls(self) -> tuple[str, ...]:
        return (self.url, *self.mirrors)

    @property
    def filenames(self) -> tuple[str, ...]:
        return (self.filename, *self.alt_filenames)
