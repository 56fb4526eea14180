"""What every benchmark mode is given: models, photo set and the knobs, as one JSON-able record.

Modes run in fresh processes (so each starts with a clean heap and its own peak RSS), and the spec
travels to them as a file.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from benchmarks.models import BenchModels
from gpen_watch.config import EngineName, ParsePrecision, Precision, RestoreConfig


@dataclass
class RunSpec:
    models: BenchModels
    photo_set: Path  # PhotoSet JSON
    out_root: Path  # each run writes its outputs in a folder below
    device: str = "cpu"
    max_side: int = 4096
    detect_max_side: int = 1000
    detect_shrink_above: int = 1500
    # 0: the engine's own choice (restore.face_batch = 0).
    face_batch: int = 0
    # None: the engine's own choice (all cores).
    threads: int | None = None
    io_threads: int | None = None
    jpeg_quality: int = 95
    # The engine's restore.precision (modes 3-4); modes 1-2 are always fp32, like upstream.
    precision: Precision = "auto"
    # The engine's restore.memory_mb (modes 3-4); 0: its own choice.
    memory_mb: int = 0
    # Faces found by the MobileNet detector with its real weights (models.detector is it) instead
    # of the photo set's known landmarks.
    detect_real: bool = False
    # restore.engine and restore.provider: what runs the networks. Set per mode from its label
    # ("engine[onnx-cpu]", benchmarks.engine_modes); the saved spec keeps the defaults.
    engine: EngineName = "torch"
    provider: str = "cpu"
    # restore.parse_precision, set per mode from its label ("engine[parse-bf16]") likewise.
    parse_precision: ParsePrecision = "auto"
    # The face model, set per mode from its label ("engine@CodeFormer"); "": the models' GPEN.
    model: str = ""

    def save(self, path: Path) -> None:
        data = asdict(self)
        data["models"] = self.models.to_dict()
        data["photo_set"] = str(self.photo_set)
        data["out_root"] = str(self.out_root)
        path.write_text(json.dumps(data, indent=1))

    @classmethod
    def load(cls, path: Path) -> RunSpec:
        data = json.loads(Path(path).read_text())
        data["models"] = BenchModels.from_dict(data["models"])
        data["photo_set"] = Path(data["photo_set"])
        data["out_root"] = Path(data["out_root"])
        return cls(**data)

    def restore_config(self) -> RestoreConfig:
        """The engine's RestoreConfig for these models and knobs (everything else at its default)."""
        m = self.models
        return RestoreConfig(
            model=self.model or m.gpen,
            detector=m.detector,
            use_parse=m.use_parse,
            model_dir=m.model_dir,
            device=self.device,
            face_batch=self.face_batch,
            max_side=self.max_side,
            detect_max_side=self.detect_max_side,
            detect_shrink_above=self.detect_shrink_above,
            precision=self.precision,
            memory_mb=self.memory_mb,
            engine=self.engine,
            provider=self.provider,
            parse_precision=self.parse_precision,
        )
