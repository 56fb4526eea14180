"""``python -m benchmarks``: build the photo set and models, run the modes interleaved, report.

Every mode sees the same photos and the same model files. Runs are interleaved (the order of the
modes rotates each round) so background load on a shared machine hits every mode alike, and the
report gives medians over ``--repeat`` rounds.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import report
from benchmarks.photos import SHARED_DETECTOR, build_photo_set, find_shared, find_solvay
from benchmarks.results import ModeRun, ModeSummary
from benchmarks.spec import RunSpec

MODES = ("upstream", "warm-loop", "engine", "daemon")
# With --upstream, the real upstream GPEN's two ways (benchmarks.real_upstream_mode).
REAL_MODES = ("real-upstream", "real-warm")
FACES_NOTE = (
    "Faces: the models have random weights (real architectures, same compute), so the detector finds "
    "no real faces. Face positions come from known landmarks scaled with each photo; the detector "
    "network still runs on every photo, so its cost is counted."
)
DETECT_REAL_NOTE = (
    "Faces: found by RetinaFace-MobileNet0.25 with its real, trained weights (--detect-real), not "
    "from known landmarks; GPEN (and ParseNet) keep random weights. The report counts the faces found."
)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="small CI-sized run: 3 photos of 2 MP, one round")
    p.add_argument(
        "--model-size", type=int, choices=[256, 512], help="GPEN-BFR size (default: 256 on CPU, 512 on GPU)"
    )
    p.add_argument(
        "--model",
        default="",
        help="face models of other families beside GPEN-BFR-<size>, e.g. GFPGAN-v1.4,CodeFormer: each "
        "runs every engine and daemon mode again (engine@CodeFormer ...), on random weights",
    )
    p.add_argument("--images", type=int, help="photos in the set (default 12; --quick 3)")
    p.add_argument("--megapixels", type=float, help="size of each photo (default 12; --quick 2)")
    p.add_argument("--out", type=Path, help="results folder (default results/bench-<date>/)")
    p.add_argument("--device", default="auto", help="auto, cpu or cuda (default auto)")
    p.add_argument("--modes", default=",".join(MODES), help=f"comma-separated subset of {', '.join(MODES)}")
    p.add_argument("--repeat", type=int, default=1, help="interleaved rounds; the report gives medians")
    p.add_argument(
        "--workers",
        default=None,
        help="daemon CPU worker counts to compare, e.g. 1,2 (default: 1,2 on CPU; --quick: 1)",
    )
    p.add_argument("--parse", action="store_true", help="also run ParseNet for the paste masks (all modes)")
    p.add_argument("--face-batch", type=int, default=0, help="engine face batch (0: its own choice)")
    p.add_argument(
        "--memory-mb", type=int, default=0, help="engine and daemon restore.memory_mb (0: their own choice)"
    )
    p.add_argument(
        "--precision",
        default="auto",
        choices=["auto", "fp32", "bf16", "fp16"],
        help="engine and daemon precision (restore.precision; modes 1-2 stay fp32)",
    )
    p.add_argument(
        "--threads", type=int, default=None, help="torch threads for modes 1-3 (default: all cores)"
    )
    p.add_argument("--solvay", type=Path, help="path of Solvay_conference_1927.png (default: ../shared/data)")
    p.add_argument("--timeout", type=float, default=3600, help="seconds allowed for one mode's run")
    p.add_argument(
        "--upstream",
        type=Path,
        help="a checkout of yangxy/GPEN: adds its pipeline as modes real-upstream (a process per photo) "
        "and real-warm (one process), with --parse and no pre-scale in every mode",
    )
    p.add_argument(
        "--detect-real",
        nargs="?",
        const=Path(""),
        type=Path,
        metavar="WEIGHTS",
        help="find faces with the MobileNet detector's real weights (default: ../shared/fixtures/"
        "retinaface_mobilenet0.25_real.pth) instead of known landmarks; the report says how many it found",
    )
    p.add_argument(
        "--engine",
        default="torch",
        help="runtimes for mode 'engine', e.g. torch,onnx: each its own mode, engine[onnx-cpu] ... (default torch)",
    )
    p.add_argument(
        "--provider",
        default="cpu",
        help="ONNX Runtime providers for --engine onnx, e.g. cpu,openvino (default cpu)",
    )
    p.add_argument(
        "--parse-precision",
        default="auto",
        help="ParseNet number formats for the torch engine, each its own mode, e.g. auto,bf16: "
        "engine, engine[parse-bf16] (default auto)",
    )
    p.add_argument(
        "--openvino-path",
        type=Path,
        help="a pip install --target folder with onnxruntime-openvino, put first on the path of the "
        "engine[onnx-openvino] processes only (that wheel replaces the plain onnxruntime)",
    )
    p.add_argument(
        "--goal", type=float, default=3.0, help="photos/s over upstream's warm loop to reach (default 3.0)"
    )
    p.add_argument("--tiny", action="store_true", help="tiny GPEN and MobileNet detector (tests only)")
    p.add_argument("--keep", action="store_true", help="keep the photos, models and outputs (printed path)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    import torch

    device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    gpus = list(range(torch.cuda.device_count())) if device.startswith("cuda") else []
    size = args.model_size or (512 if gpus else 256)
    images = args.images or (3 if args.quick else 12)
    megapixels = args.megapixels or (2.0 if args.quick else 12.0)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    known = MODES + REAL_MODES if args.upstream else MODES
    unknown = [m for m in modes if m not in known]
    if unknown:
        print(f"unknown mode(s): {', '.join(unknown)}; choose from {', '.join(known)}", file=sys.stderr)
        return 2
    if args.detect_real is not None:
        if args.upstream:
            print(
                "--detect-real and --upstream: the real upstream modes use known faces only", file=sys.stderr
            )
            return 2
        weights = args.detect_real if args.detect_real != Path("") else find_shared(SHARED_DETECTOR)
        if weights is None or not weights.is_file():
            print(
                f"--detect-real: no detector weights at {weights or '../' + str(SHARED_DETECTOR)}",
                file=sys.stderr,
            )
            return 2
        args.detect_real = weights
    if args.upstream:
        from benchmarks.real_upstream_mode import check_checkout
        from benchmarks.runner import BenchError

        try:
            args.upstream = check_checkout(args.upstream)
        except BenchError as exc:
            print(exc, file=sys.stderr)
            return 2
        # Upstream always parses; the comparison is only fair with the mask on everywhere.
        args.parse = True
        if args.modes == ",".join(MODES):
            modes = [*REAL_MODES, *modes]
    from benchmarks import engine_modes
    from gpen_watch.catalog.registry import FACE_MODEL_NAMES

    args.models = _csv(args.model)
    bad = [m for m in args.models if m not in FACE_MODEL_NAMES]
    if bad:
        print(f"--model {','.join(bad)}: choose from {', '.join(FACE_MODEL_NAMES)}", file=sys.stderr)
        return 2
    engines, providers = _csv(args.engine), _csv(args.provider)
    parses = tuple(_csv(args.parse_precision))
    why = engine_modes.check(engines, providers, args.openvino_path, parses)
    if why:
        print(why, file=sys.stderr)
        return 2
    # Kept for "daemon", which runs on the same runtimes as "engine".
    args.engine_modes = engine_modes.expand(engines, providers, parses)
    if "engine" in modes:
        at = modes.index("engine")
        modes[at : at + 1] = args.engine_modes
    worker_counts = [int(w) for w in (args.workers or ("1" if args.quick or gpus else "1,2")).split(",")]
    out = args.out or Path("results") / f"bench-{dt.date.today().isoformat()}"
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="gpen-bench-"))
    try:
        return _run(args, out, work, device, gpus, size, images, megapixels, modes, worker_counts)
    finally:
        if args.keep:
            print(f"kept photos, models and outputs in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def _run(
    args: argparse.Namespace,
    out: Path,
    work: Path,
    device: str,
    gpus: list[int],
    size: int,
    images: int,
    megapixels: float,
    modes: list[str],
    worker_counts: list[int],
) -> int:
    from benchmarks.models import write_models

    detector = "real RetinaFace-MobileNet0.25" if args.detect_real else "RetinaFace-R50"
    what = "tiny test models" if args.tiny else f"GPEN-BFR-{size} and {detector} models"
    print(f"building {images} photos of ~{megapixels:g} MP and {what} with random weights in {work}")
    photos = build_photo_set(work / "photos", images, megapixels, args.solvay or find_solvay())
    photos.save(work / "photos.json")
    models = write_models(
        work / "models",
        size,
        parse=args.parse,
        tiny=args.tiny,
        real_detector=args.detect_real,
        others=tuple(args.models),
    )
    spec = RunSpec(
        models,
        work / "photos.json",
        work / "out",
        device=device,
        face_batch=args.face_batch,
        threads=args.threads,
        precision=args.precision,
        memory_mb=args.memory_mb,
        # Upstream restores every photo at its own size: no pre-scale anywhere when compared with it.
        max_side=0 if args.upstream else RunSpec.max_side,
        detect_real=args.detect_real is not None,
    )
    if args.upstream:
        from benchmarks.real_upstream_mode import write_upstream_weights

        write_upstream_weights(models, args.upstream, work / "upstream-base")
    spec.save(work / "spec.json")
    for note in photos.notes:
        print(f"note: {note}")
    print(DETECT_REAL_NOTE if spec.detect_real else FACES_NOTE)
    runs = _with_models(_expand(modes, worker_counts, args.engine_modes), args.models)
    results: dict[str, list[ModeRun]] = {m: [] for m in runs}
    started = time.time()
    warm_ups = _warm_ups(args, runs, spec, work)
    for rnd in range(args.repeat):
        order = runs[rnd % len(runs) :] + runs[: rnd % len(runs)]
        for mode in order:
            t0 = time.perf_counter()
            load_before = _load()
            run = _run_one(mode, spec, work, gpus, args.timeout, f"r{rnd}", args.upstream, args.openvino_path)
            # Other jobs on a shared machine slow a run down; the load average shows when they did.
            run.settings["load_avg_1m"] = [load_before, _load()]
            results[mode].append(run)
            print(
                f"round {rnd + 1}/{args.repeat} {report.label(mode)}: {run.images_per_s:.3f} images/s, "
                f"{run.faces_per_s:.2f} faces/s ({run.ok}/{run.images} photos in {run.wall_s:.1f} s; "
                f"{time.perf_counter() - t0:.0f} s with start-up)",
                flush=True,
            )
            for why in run.settings.get("failed", [])[:3]:
                print(f"  failed: {why}", flush=True)
    summaries = [ModeSummary(m, results[m]) for m in runs if results[m]]
    text = report.table(summaries)
    meta = _meta(args, device, size, photos, started, spec)
    headline = _headline(summaries)
    if spec.detect_real:
        headline += "\n" + _found_line(summaries, photos.total_faces)
    if args.upstream:
        agreement = _agreement(spec, runs, args.repeat)
        meta["agreement_psnr_face_box_db"] = agreement
        headline += "".join(f"\n{line}" for line in _real_headline(summaries, agreement))
    from benchmarks.engine_modes import TORCH_MODE

    if args.engine_modes != [TORCH_MODE] or args.models:  # else no other engine mode to compare
        from benchmarks import engine_report

        diffs, meta["engine_modes_vs_torch_pixels"] = engine_report.diff_lines(
            spec.out_root, runs, args.repeat, [p.path.name for p in photos.photos]
        )
        meta["warm_up"] = [w.__dict__ for w in warm_ups]
        text += "\n\n" + engine_report.table(summaries, args.goal)
        headline += "".join(
            f"\n{line}"
            for line in [
                *engine_report.goal_lines(summaries, args.goal),
                *diffs,
                *(w.line() for w in warm_ups),
            ]
        )
    print()
    print(text)
    print(headline)
    (out / "table.txt").write_text(f"{text}\n{headline}\n")
    report.write_json(out / "results.json", summaries, {**meta, "headline": headline, "table": text})
    report.plot(
        out / "throughput.png",
        summaries,
        f"gpen-watch benchmark, {meta['machine']}, GPEN-{size}, {images} photos of ~{megapixels:g} MP, "
        f"median of {args.repeat}",
    )
    print(f"wrote {out / 'results.json'}, {out / 'throughput.png'}, {out / 'table.txt'}")
    return 0


def _expand(modes: list[str], worker_counts: list[int], engines: list[str]) -> list[str]:
    """The daemon as one mode per worker count and runtime (``engines``: the engine's modes)."""
    from benchmarks.engine_modes import daemon_modes

    out: list[str] = []
    for m in modes:
        out += daemon_modes(worker_counts, engines) if m == "daemon" else [m]
    return out


def _with_models(runs: list[str], models: list[str]) -> list[str]:
    """``runs``, then each engine and daemon mode again on each of ``models`` ("engine@CodeFormer")."""
    from benchmarks.engine_modes import is_engine_mode, with_model

    again = [m for m in runs if is_engine_mode(m) or m.startswith("daemon-")]
    return runs + [with_model(m, model) for model in models for m in again]


def _csv(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def _warm_ups(args: argparse.Namespace, runs: list[str], spec: RunSpec, work: Path) -> list[Any]:
    """Each ONNX mode once before the rounds: its exports made and cached, not timed with them."""
    from benchmarks.engine_modes import is_onnx_mode, warm_up

    out = []
    for mode in (m for m in runs if is_onnx_mode(m)):
        done = warm_up(
            mode, work / "spec.json", work, spec.models.model_dir, args.openvino_path, args.timeout
        )
        print(done.line(), flush=True)
        out.append(done)
    return out


def _run_one(
    mode: str,
    spec: RunSpec,
    work: Path,
    gpus: list[int],
    timeout: float,
    tag: str,
    upstream: Path | None,
    openvino_path: Path | None = None,
) -> ModeRun:
    from benchmarks import runner
    from benchmarks.engine_modes import is_engine_mode, mode_env

    out_dir = spec.out_root / tag / mode
    if mode in REAL_MODES and upstream is not None:
        from benchmarks.real_upstream_mode import run_real

        return run_real(mode, spec, upstream, work / "upstream-base", out_dir, timeout)
    if mode == "upstream":
        return runner.run_upstream(spec, work / "spec.json", out_dir, gpus, timeout)
    if mode.startswith("daemon-"):
        from benchmarks.daemon_mode import run_daemon
        from benchmarks.engine_modes import DaemonMode

        daemon = DaemonMode.parse(mode)
        extra = mode_env(daemon.engine_mode, openvino_path)
        run = run_daemon(
            spec, work / "daemon" / tag / mode, daemon.workers, timeout, extra, daemon.settings()
        )
        run.mode = mode
        return run
    env = mode_env(mode, openvino_path) if is_engine_mode(mode) else None
    return runner.run_in_child(mode, work / "spec.json", out_dir, work, timeout, env)


def _found_line(summaries: list[ModeSummary], known: int) -> str:
    """How many faces the real detector found in each mode (the last round), against the marks."""
    parts = [f"{report.label(m.mode)} {m.runs[-1].faces}" for m in summaries]
    return f"faces found by the real MobileNet detector (the photo set's marks: {known}): " + "; ".join(parts)


def _headline(summaries: list[ModeSummary]) -> str:
    ratio = report.ratios(summaries)
    parts = [
        f"{report.label(m.mode)} {ratio[m.mode]:.1f}x"
        for m in summaries
        if m.mode != report.BASELINE and ratio[m.mode] is not None
    ]
    return ("images/s relative to (1): " + "; ".join(parts)) if parts else ""


def _real_headline(summaries: list[ModeSummary], agreement: dict[str, list[float]]) -> list[str]:
    """Images/s of each gpen-watch mode over the real upstream's two ways, and the PSNR agreement."""
    by_mode = {m.mode: m.median("images_per_s") for m in summaries}
    lines = []
    for base in REAL_MODES:
        if by_mode.get(base):
            parts = [
                f"{report.label(m)} {ips / by_mode[base]:.2f}x"
                for m, ips in by_mode.items()
                if m not in (*REAL_MODES, "upstream", "warm-loop")
            ]
            lines.append(f"images/s relative to {report.label(base)}: " + "; ".join(parts))
    for mode, (faces, low, median) in agreement.items():
        lines.append(
            f"{mode} vs real upstream, PSNR over {faces:.0f} face boxes: min {low} dB, median {median} dB"
        )
    return lines


def _agreement(spec: RunSpec, runs: list[str], repeat: int) -> dict[str, list[float]]:
    """Face-box PSNR of the engine's (and mode 2's) outputs against real-upstream's, same round."""
    from benchmarks.real_upstream_mode import face_box_psnr

    out: dict[str, list[float]] = {}
    theirs = next((m for m in REAL_MODES if m in runs), None)
    if theirs is None:
        return out
    from benchmarks.engine_modes import is_engine_mode

    for mode in [m for m in runs if is_engine_mode(m)] + ["warm-loop"]:
        if mode not in runs:
            continue
        for rnd in range(repeat):
            agree = face_box_psnr(
                spec.photo_set, spec.out_root / f"r{rnd}" / mode, spec.out_root / f"r{rnd}" / theirs
            )
            if agree is not None:
                out[mode] = [agree.faces, agree.min_db, agree.median_db]
                break
    return out


def _meta(
    args: argparse.Namespace, device: str, size: int, photos: Any, started: float, spec: RunSpec
) -> dict[str, Any]:
    import torch

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    gpu = torch.cuda.get_device_name(0) if device.startswith("cuda") else None
    return {
        "date": dt.datetime.fromtimestamp(started).isoformat(timespec="seconds"),
        "machine": gpu or f"{cores}-core {platform.machine()} CPU",
        "cpu": _cpu_name(),
        "cores": cores,
        "load_average_at_start": os.getloadavg() if hasattr(os, "getloadavg") else None,
        "torch": torch.__version__,
        "device": device,
        "model": spec.models.gpen if not args.tiny else "tiny",
        "other_models": list(spec.models.others),
        "model_size": size,
        "detector": spec.models.detector,
        "parse": spec.models.use_parse,
        "precision": spec.precision,
        "photos": [
            {"name": p.path.name, "width": p.width, "height": p.height, "faces": p.faces}
            for p in photos.photos
        ],
        "faces_total": photos.total_faces,
        "repeat": args.repeat,
        "notes": [FACES_NOTE, *photos.notes],
        "command": " ".join(["python -m benchmarks", *sys.argv[1:]]),
    }


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _load() -> float | None:
    return round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None
