"""``python -m benchmarks --model GFPGAN-v1.4,CodeFormer``: every engine and daemon mode again on
each face model beside GPEN, named "engine@CodeFormer"; and ``benchmarks.gpu``'s section on the
families, whose code runs on the CPU (the GPU itself is measured where one is lent)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest


def test_modes_carry_their_face_model(tmp_path: Path) -> None:
    from benchmarks.cli import _with_models
    from benchmarks.engine_modes import DaemonMode, mode_spec, split_model, with_model
    from benchmarks.models import BenchModels
    from benchmarks.report import label
    from benchmarks.spec import RunSpec

    assert with_model("engine[onnx-cpu]", "CodeFormer") == "engine[onnx-cpu]@CodeFormer"
    assert split_model("daemon-1w@GFPGAN-v1.4") == ("daemon-1w", "GFPGAN-v1.4")
    assert with_model("engine", "") == "engine"
    spec = RunSpec(
        BenchModels(tmp_path, "GPEN-BFR-256", "retinaface_resnet50", False, 256), tmp_path, tmp_path
    )
    cfg = mode_spec(spec, "engine[onnx-cpu]@CodeFormer").restore_config()
    assert (cfg.model, cfg.engine, cfg.provider) == ("CodeFormer", "onnx", "cpu")
    assert mode_spec(spec, "engine").restore_config().model == "GPEN-BFR-256"
    daemon = DaemonMode.parse("daemon-2w[onnx-cpu]@CodeFormer")
    assert (daemon.workers, daemon.engine_mode, daemon.label()) == (
        2,
        "engine[onnx-cpu]",
        "daemon-2w[onnx-cpu]@CodeFormer",
    )
    assert daemon.settings() == {
        "restore.model": "CodeFormer",
        "restore.engine": "onnx",
        "restore.provider": "cpu",
    }
    assert label("engine@GFPGAN-v1.4") == "(3) gpen-watch engine (restore), GFPGAN-v1.4"
    assert label("daemon-1w@CodeFormer") == "(4) daemon, 1 worker, CodeFormer"
    # The upstream imitations are GPEN's own: only the engine and the daemon run each model.
    runs = _with_models(["warm-loop", "engine", "daemon-1w"], ["GFPGAN-v1.4"])
    assert runs == ["warm-loop", "engine", "daemon-1w", "engine@GFPGAN-v1.4", "daemon-1w@GFPGAN-v1.4"]


def test_an_unknown_model_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks.cli import main

    assert main(["--model", "GFPGAN-v9", "--out", str(tmp_path / "r")]) == 2
    assert "--model GFPGAN-v9: choose from GPEN-BFR-512" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_benchmark_measures_each_family_by_stage(tmp_path: Path) -> None:
    from benchmarks.cli import main

    out = tmp_path / "results"
    rc = main(
        [
            "--quick",
            "--tiny",
            "--images",
            "1",
            "--megapixels",
            "0.3",
            "--modes",
            "engine",
            "--model",
            "GFPGAN-v1.4,CodeFormer",
            "--out",
            str(out),
            "--solvay",
            str(tmp_path / "absent.png"),
        ]
    )
    assert rc == 0
    data = json.loads((out / "results.json").read_text())
    assert set(data["modes"]) == {"engine", "engine@GFPGAN-v1.4", "engine@CodeFormer"}
    assert data["other_models"] == ["GFPGAN-v1.4", "CodeFormer"]
    faces = {m: data["modes"][m]["runs"][0]["faces"] for m in data["modes"]}
    assert len(set(faces.values())) == 1 and faces["engine"] > 0  # the same faces, each model
    for name in ("engine@GFPGAN-v1.4", "engine@CodeFormer"):
        (run,) = data["modes"][name]["runs"]
        assert run["ok"] == run["images"] == 1 and run["stages"]["generate"] > 0
        assert run["rss_stages_mb"]["peak"] > 0
    text = (out / "table.txt").read_text()
    rows = {line.split("  ")[0]: line for line in text.splitlines() if line.startswith("(3)")}
    assert {
        "(3) gpen-watch engine (restore), GFPGAN-v1.4",
        "(3) gpen-watch engine (restore), CodeFormer",
    } <= set(rows)
    head = next(line for line in text.splitlines() if "generate faces/s" in line)
    assert "peak RSS MB" in head and "detect faces/s" in head


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_gpu_scripts_family_section_runs_on_the_cpu() -> None:
    from benchmarks import gpu_families

    rows: list[tuple[str, dict[str, Any]]] = []

    class Rows:
        def add(self, section: str, row: dict[str, Any]) -> None:
            rows.append((section, row))

    def once(fn: Any, min_time: float = 0.0, warmup: int = 0) -> float:
        fn()  # the real call, once: its inputs and its network's signature hold
        return 2.0

    gpu_families.model_only(Rows(), lambda: 600.0, gpu_families.DEFAULT_MODELS, "cpu", ("fp32",), (1,), once)
    assert rows == [
        (
            "families",
            {
                "model": m,
                "precision": "fp32",
                "batch": 1,
                "faces_per_s": 0.5,
                "ms_per_batch": 2000.0,
                "peak_mem_gb": None,
            },
        )
        for m in gpu_families.DEFAULT_MODELS
    ]
    # Out of budget: said, not silently left out.
    rows.clear()
    gpu_families.model_only(Rows(), lambda: 10.0, ("CodeFormer",), "cpu", ("fp32",), (1,), once)
    assert rows == [("skipped", {"what": "CodeFormer model-only fp32 batch 1+", "why": "budget"})]
