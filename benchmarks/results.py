"""One measured run of one mode, and the medians the report is made of."""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class ModeRun:
    mode: str
    images: int
    ok: int
    faces: int
    wall_s: float  # from the first image handed over to the last result written
    load_s: float = 0.0  # model loading (and process start) not inside wall_s; 0 if it is inside
    stages: dict[str, float] = field(default_factory=dict)  # summed seconds per stage
    generator_s: float = 0.0  # wall time inside the GPEN forward passes
    detect_s: float = 0.0  # wall time inside the detector network (and its pre-/post-processing)
    cpu_s: float | None = None  # CPU time (all threads) of the measured process during wall_s
    rss_parent_mb: float | None = None
    rss_workers_mb: list[float] = field(default_factory=list)
    # The engine's resident memory (MB) when each stage of a photo ended, highest over the photos
    # (and over the workers), plus "peak": the process's high-water mark. Empty for modes 1-2.
    rss_stages_mb: dict[str, float] = field(default_factory=dict)
    # Processes running a generator at once (daemon workers, mode 1 lanes): busy is per process.
    slots: int = 1
    settings: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def images_per_s(self) -> float:
        return self.ok / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def faces_per_s(self) -> float:
        return self.faces / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def generator_busy(self) -> float:
        """Fraction of wall time inside the generator, per process (the device's busy fraction on CPU)."""
        return self.generator_s / (self.wall_s * max(1, self.slots)) if self.wall_s > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.update(
            images_per_s=round(self.images_per_s, 4),
            faces_per_s=round(self.faces_per_s, 4),
            generator_busy=round(self.generator_busy, 4),
        )
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModeRun:
        keep = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**keep)


@dataclass
class ModeSummary:
    """Medians over the repeated runs of one mode."""

    mode: str
    runs: list[ModeRun]

    def median(self, attr: str) -> float:
        return float(statistics.median(getattr(r, attr) for r in self.runs))

    def spread(self, attr: str) -> tuple[float, float]:
        values = [getattr(r, attr) for r in self.runs]
        return min(values), max(values)

    def stage_per_image(self) -> dict[str, float]:
        """Median seconds per image of each stage."""
        stages = sorted({s for r in self.runs for s in r.stages})
        return {s: statistics.median(r.stages.get(s, 0.0) / max(1, r.ok) for r in self.runs) for s in stages}

    def stage_rss(self) -> dict[str, float]:
        """Highest resident memory (MB) at the end of each stage over the runs."""
        out: dict[str, float] = {}
        for r in self.runs:
            for stage, mb in r.rss_stages_mb.items():
                out[stage] = max(mb, out.get(stage, 0.0))
        return out

    def peak_rss(self) -> tuple[float | None, float | None]:
        parent = [r.rss_parent_mb for r in self.runs if r.rss_parent_mb is not None]
        workers = [max(r.rss_workers_mb) for r in self.runs if r.rss_workers_mb]
        return (max(parent) if parent else None, max(workers) if workers else None)
