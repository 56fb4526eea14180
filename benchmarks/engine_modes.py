"""The engine on each runtime as a mode of its own: "engine" (PyTorch), "engine[onnx-cpu]",
"engine[onnx-openvino]"... (``--engine torch,onnx --provider cpu,openvino``), and the PyTorch
engine with ParseNet in another number format, "engine[parse-bf16]"... (``--parse-precision
auto,bf16``; ONNX exports are fp32, so the ONNX modes take no such variant).

Each face model beside the base GPEN (``--model GFPGAN-v1.4,CodeFormer``) runs every engine and
daemon mode again, named with it after an "@": "engine@GFPGAN-v1.4",
"engine[onnx-cpu]@CodeFormer", "daemon-1w@CodeFormer".

Each ONNX mode's exports are made once, by a warm-up run before the timed rounds, into the run's
model folder (where the engine caches them beside the weights); the timed runs then load the
cached exports, as a service does from its second start on. What the warm-up took is reported
apart from the rounds. onnxruntime-openvino replaces the plain onnxruntime wheel, so it comes from
a folder of its own (``--openvino-path``, a ``pip install --target``) put first on PYTHONPATH of
the OpenVINO modes' processes only.
"""

from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import get_args

import cv2
import numpy as np

from benchmarks.results import ModeRun
from benchmarks.spec import RunSpec
from gpen_watch.config import ParsePrecision

TORCH_MODE = "engine"
# Between a mode and the face model it runs, where that is not the base GPEN.
MODEL_MARK = "@"
ENGINES = ("torch", "onnx")
_PARSE_PREFIX = "engine[parse-"


def engine_mode(engine: str, provider: str, parse_precision: str = "auto") -> str:
    """The mode label of the engine on ``engine`` (and, for onnx, ``provider``; for torch, a
    ParseNet number format other than auto)."""
    if engine != "torch":
        return f"engine[{engine}-{provider}]"
    return TORCH_MODE if parse_precision == "auto" else f"{_PARSE_PREFIX}{parse_precision}]"


def with_model(mode: str, model: str) -> str:
    """``mode`` on the face model ``model`` ("" or None: the base GPEN)."""
    return f"{mode}{MODEL_MARK}{model}" if model else mode


def split_model(mode: str) -> tuple[str, str]:
    """(the mode without its face model, the model: "" for the base GPEN)."""
    base, _, model = mode.partition(MODEL_MARK)
    return base, model


def is_engine_mode(mode: str) -> bool:
    base = split_model(mode)[0]
    return base == TORCH_MODE or (base.startswith("engine[") and base.endswith("]"))


def is_onnx_mode(mode: str) -> bool:
    return split_model(mode)[0].startswith("engine[onnx-")


def mode_spec(spec: RunSpec, mode: str) -> RunSpec:
    """``spec`` with restore.engine, restore.provider, restore.parse_precision and the face model
    as ``mode`` names them."""
    mode, model = split_model(mode)
    return dataclasses.replace(_runtime_spec(spec, mode), model=model)


def _runtime_spec(spec: RunSpec, mode: str) -> RunSpec:
    if mode.startswith(_PARSE_PREFIX):
        wanted = mode.removeprefix(_PARSE_PREFIX).removesuffix("]")
        parse = next(p for p in get_args(ParsePrecision) if p == wanted)
        return dataclasses.replace(spec, engine="torch", parse_precision=parse)
    if not is_onnx_mode(mode):
        return dataclasses.replace(spec, engine="torch")
    provider = mode.removeprefix("engine[onnx-").removesuffix("]")
    return dataclasses.replace(spec, engine="onnx", provider=provider)


def expand(
    engines: list[str], providers: list[str], parse_precisions: tuple[str, ...] = ("auto",)
) -> list[str]:
    """The engine modes for ``--engine``, ``--provider`` and ``--parse-precision``: torch once
    for each ParseNet format, onnx on each provider."""
    out: list[str] = []
    for engine in engines:
        if engine == "onnx":
            out += [engine_mode(engine, provider) for provider in providers]
        else:
            out += [engine_mode(engine, "cpu", parse) for parse in parse_precisions]
    return list(dict.fromkeys(out))


def check(
    engines: list[str],
    providers: list[str],
    openvino_path: Path | None,
    parse_precisions: tuple[str, ...] = ("auto",),
) -> str | None:
    """Why these options cannot run (one sentence), or None."""
    from gpen_watch.catalog.providers import PROVIDERS

    bad = [e for e in engines if e not in ENGINES]
    if bad:
        return f"--engine {','.join(bad)}: choose from {', '.join(ENGINES)}"
    bad = [p for p in parse_precisions if p not in get_args(ParsePrecision)]
    if bad:
        return f"--parse-precision {','.join(bad)}: choose from {', '.join(get_args(ParsePrecision))}"
    bad = [p for p in providers if p not in PROVIDERS]
    if bad:
        return f"--provider {','.join(bad)}: choose from {', '.join(PROVIDERS)}"
    if openvino_path is not None and not (openvino_path / "onnxruntime").is_dir():
        return (
            f"--openvino-path {openvino_path}: no onnxruntime package in that folder; "
            f"make it with pip install --target {openvino_path} onnxruntime-openvino"
        )
    return None


def mode_env(mode: str, openvino_path: Path | None) -> dict[str, str]:
    """Environment changes for ``mode``'s process: the OpenVINO wheel first on its path."""
    if openvino_path is None or split_model(mode)[0] != engine_mode("onnx", "openvino"):
        return {}
    from benchmarks.runner import child_env

    return {"PYTHONPATH": os.pathsep.join([str(openvino_path), child_env()["PYTHONPATH"]])}


@dataclass(frozen=True)
class WarmUp:
    """One ONNX mode's warm-up: the engine loaded (exporting what is not cached) and one photo."""

    mode: str
    load_s: float  # the engine's load, the exports it made included
    wall_s: float  # the warm-up's whole process, start-up to exit
    new_files: list[str]  # what appeared in the model folder: the exports and their manifests
    engine_label: str
    engine_note: str

    def line(self) -> str:
        if self.new_files:
            made = f"exported {', '.join(self.new_files)}"
        elif self.engine_label:
            made = "nothing new in the model folder (its exports were cached)"
        else:
            # The engine names what runs its networks once restore.engine is wired to ONNX Runtime.
            made = (
                "no export appeared in the model folder and the engine did not say what runs its "
                "networks: this checkout may still run PyTorch for restore.engine = onnx"
            )
        runs = f"; runs on {self.engine_label}" if self.engine_label else ""
        note = f"; {self.engine_note}" if self.engine_note else ""
        return (
            f"warm-up {self.mode}: load with export {self.load_s:.1f} s "
            f"({self.wall_s:.1f} s with start-up and one photo), {made}{runs}{note}"
        )


def warm_up(
    mode: str, spec_path: Path, work: Path, model_dir: Path, openvino_path: Path | None, timeout: float
) -> WarmUp:
    """Run ``mode`` once on the first photo, outside the timed rounds, so they find the exports."""
    from benchmarks.runner import run_in_child

    before = _files(model_dir)
    t0 = time.perf_counter()
    run = run_in_child(
        mode, spec_path, work / "warm-up" / mode, work, timeout, mode_env(mode, openvino_path), warm_up=True
    )
    wall = time.perf_counter() - t0
    return WarmUp(
        mode,
        run.load_s,
        wall,
        sorted(_files(model_dir) - before),
        str(run.settings.get("engine_label", "")),
        str(run.settings.get("engine_note", "")),
    )


def _files(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}


def split_parse(stages: dict[str, float], parse_s: float) -> dict[str, float]:
    """The "restore" stage (generator and parser together, as the engine times it) split into
    "parse" (ParseNet's passes) and "generate" (the rest: GPEN and the crops' conversions)."""
    if "restore" not in stages:
        return dict(stages)
    out = dict(stages)
    if parse_s > 0:
        out["parse"] = parse_s
    out["generate"] = max(0.0, stages["restore"] - parse_s)
    return out


def parse_seconds(enhancer: object) -> float:
    """ParseNet's seconds so far in an enhancer (``FaceEnhancer.parse_s``; 0 where it has none)."""
    return float(getattr(enhancer, "parse_s", 0.0))


@dataclass(frozen=True)
class PixelDiff:
    """How far one mode's outputs are from the torch engine's (levels of 255)."""

    photos: int
    max_diff: int
    mean_diff: float
    over_one: float  # the share of values more than one level off


def pixel_diff(ours: Path, torch_out: Path, names: list[str]) -> PixelDiff | None:
    """Largest and mean absolute difference, and the share over one level, over the photos both
    folders hold; None if none."""
    worst, means, over, n = 0, [], [], 0
    for name in names:
        a = cv2.imread(str(ours / name), cv2.IMREAD_COLOR)
        b = cv2.imread(str(torch_out / name), cv2.IMREAD_COLOR)
        if a is None or b is None or a.shape != b.shape:
            continue
        d = np.abs(a.astype(np.int16) - b.astype(np.int16))
        worst = max(worst, int(d.max()))
        means.append(float(d.mean()))
        over.append(float((d > 1).mean()))
        n += 1
    if not n:
        return None
    return PixelDiff(n, worst, round(float(np.mean(means)), 4), round(float(np.mean(over)), 6))


def load_note(runs: list[ModeRun]) -> str:
    """What ran in an engine mode, from its last run: the engine's own label and note."""
    if not runs:
        return ""
    settings = runs[-1].settings
    label, note = settings.get("engine_label", ""), settings.get("engine_note", "")
    return "; ".join(str(x) for x in (label, note) if x)


@dataclass(frozen=True)
class DaemonMode:
    """A daemon mode's label read back: "daemon-2w", or "daemon-1w[onnx-cpu]" on another runtime."""

    workers: int
    runtime: str  # "" (PyTorch) or "onnx-cpu", "onnx-openvino"...
    model: str = ""  # the face model, "" for the base GPEN

    @property
    def engine_mode(self) -> str:
        return f"engine[{self.runtime}]" if self.runtime else TORCH_MODE

    @classmethod
    def parse(cls, mode: str) -> DaemonMode:
        mode, model = split_model(mode)
        head, _, rest = mode.removeprefix("daemon-").partition("[")
        return cls(int(head.rstrip("w")), rest.removesuffix("]"), model)

    def label(self) -> str:
        runtime = f"[{self.runtime}]" if self.runtime else ""
        return with_model(f"daemon-{self.workers}w{runtime}", self.model)

    def settings(self) -> dict[str, object]:
        """The daemon's --set values for this runtime and face model."""
        out: dict[str, object] = {"restore.model": self.model} if self.model else {}
        if self.runtime:
            engine, _, provider = self.runtime.partition("-")
            out.update({"restore.engine": engine, "restore.provider": provider})
        return out


def daemon_modes(worker_counts: list[int], engine_modes: list[str]) -> list[str]:
    """The daemon at each worker count, on each runtime the engine modes name."""
    runtimes = [m.removeprefix("engine[").removesuffix("]") for m in engine_modes if is_onnx_mode(m)]
    if TORCH_MODE in engine_modes or not runtimes:
        runtimes.insert(0, "")
    return [DaemonMode(n, r).label() for n in worker_counts for r in runtimes]
