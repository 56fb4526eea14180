"""``python -m benchmarks.onnx_int8``: the detector and ParseNet in int8 through ONNX Runtime (and
OpenVINO), beside fp32 torch and fp32 ONNX Runtime: ms a pass and the error bounds. Issue 36.

- RetinaFace-MobileNet0.25 with its real weights (../shared/fixtures) on the Solvay photo at its
  own size (1328 px, padded to a multiple of 32, as the engine detects it): faces found, and for
  the faces int8 and fp32 both find, the largest box-corner and landmark shift in px and score
  shift. Its int8 model is calibrated on other photos (scikit-image's astronaut, camera, coffee,
  chelsea, each fitted into the same canvas), so the Solvay photo is not one it was tuned on.
- ParseNet with random weights (no real ones can be had here) on the aligned 512 px crops of the
  Solvay faces fp32 torch finds: calibrated on the first ``--calib-faces`` of them, measured on the
  rest; the share of pixels whose class changes, whose face/not-face changes, and the largest
  difference of the paste-back mask (``paste.soften_parse_mask`` of the face classes, as
  ``enhance._parse`` makes it). The engine parses GPEN's restored face; with random GPEN weights
  that is no face, so the aligned crop itself is parsed.
- RetinaFace-R50 with random weights: speed only.

Exports by ``torch.onnx.export(dynamo=True, opset_version=18)`` at the fixed input shape, int8 by
``restore.engines.onnx_quant``; all cached under ``--work``. OpenVINO (its own runtime, reading
the same fp32 and QDQ int8 files) runs in a child process with ``--openvino-path`` first on its
path (the onnxruntime-openvino wheel there replaces onnxruntime). Every measurement is taken in
``--rounds`` interleaved rounds (each engine once a round), so a shared machine's load falls on
all alike; the table shows each round's median.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
SOLVAY = SHARED / "data" / "Solvay_conference_1927.png"
REAL_MOBILENET = SHARED / "fixtures" / "retinaface_mobilenet0.25_real.pth"
ENGINES = ("torch fp32", "ort fp32", "ort int8", "openvino fp32", "openvino int8")
Run = Callable[[np.ndarray], list[np.ndarray]]
# Keyed by (network, engine), with a few plain keys beside.
Results = dict[Any, Any]


def _time(run: Run, x: np.ndarray, passes: int) -> float:
    """Median ms of ``passes`` passes after one warm-up."""
    run(x)
    times = []
    for _ in range(passes):
        t = time.perf_counter()
        run(x)
        times.append(time.perf_counter() - t)
    return 1000 * statistics.median(times)


# ---------------------------------------------------------------------------------------------------
# Models and inputs


def photo_canvas(bgr: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """``bgr`` scaled to fit ``shape`` (H, W) and padded with the detector's mean colour."""
    import cv2

    from gpen_watch.restore.nets.anchors import BGR_MEAN

    h, w = bgr.shape[:2]
    scale = min(shape[0] / h, shape[1] / w)
    small = cv2.resize(bgr, (round(w * scale), round(h * scale)), interpolation=cv2.INTER_AREA)
    canvas = np.empty((*shape, 3), np.uint8)
    canvas[:] = np.array(BGR_MEAN, np.uint8)
    canvas[: small.shape[0], : small.shape[1]] = small
    return canvas


def detector_input(canvas: np.ndarray) -> np.ndarray:
    from gpen_watch.restore.nets.anchors import BGR_MEAN

    x = canvas.astype(np.float32) - np.array(BGR_MEAN, np.float32)
    return np.ascontiguousarray(x.transpose(2, 0, 1)[None])


def detector_calibration(shape: tuple[int, int]) -> Any:
    """Photos other than Solvay's, fitted into the detector's canvas."""
    from skimage import data

    from gpen_watch.restore.engines.onnx_quant import Calibration

    feeds = []
    for name in ("astronaut", "camera", "coffee", "chelsea"):
        img = getattr(data, name)()
        rgb = np.stack([img] * 3, -1) if img.ndim == 2 else img[..., :3]
        feeds.append({"x": detector_input(photo_canvas(np.ascontiguousarray(rgb[..., ::-1]), shape))})
    return Calibration("skimage-photos", feeds)


def export(module: Any, example: np.ndarray, dst: Path, outputs: list[str]) -> Path:
    import torch

    if not dst.exists():
        with torch.no_grad():
            program = torch.onnx.export(
                module,
                (torch.from_numpy(example),),
                dynamo=True,
                opset_version=18,
                input_names=["x"],
                output_names=outputs,
                external_data=False,
                verbose=False,
            )
        assert program is not None
        tmp = dst.with_suffix(".tmp")
        program.save(str(tmp), external_data=False)
        tmp.rename(dst)
    return dst


def ort_run(path: Path, threads: int) -> Run:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])

    def run(x: np.ndarray) -> list[np.ndarray]:
        return [np.asarray(o) for o in session.run(None, {"x": x})]

    return run


def torch_run(module: Any) -> Run:
    import torch

    def run(x: np.ndarray) -> list[np.ndarray]:
        with torch.inference_mode():
            # channels_last, as the engine feeds both networks (detect, enhance._parse).
            out = module(torch.from_numpy(x).contiguous(memory_format=torch.channels_last))
        return [o.float().contiguous().numpy() for o in (out if isinstance(out, tuple) else (out,))]

    return run


# ---------------------------------------------------------------------------------------------------
# OpenVINO, in a child process


def openvino_child(jobs_file: Path) -> None:
    """Runs in the child: each job's model on its input, timed; outputs saved beside the input."""
    import openvino as ov

    jobs = json.loads(jobs_file.read_text())
    core = ov.Core()
    result: dict[str, Any] = {"version": ov.__version__, "ms": {}}
    for job in jobs["jobs"]:
        compiled = core.compile_model(job["model"], "CPU", {"INFERENCE_NUM_THREADS": jobs["threads"]})
        x = np.load(job["input"])

        def run(x: np.ndarray, compiled: Any = compiled) -> list[np.ndarray]:
            out = compiled(x)
            return [np.asarray(out[o]) for o in compiled.outputs]

        result["ms"][job["key"]] = _time(run, x, jobs["passes"])
        for i, o in enumerate(run(x)):
            np.save(f"{job['output']}-{i}.npy", o)
        if "eval" in job:  # one item a pass; of the first output only the class map is kept
            items = np.load(job["eval"])
            classes = [run(item[None])[0].argmax(1).astype(np.uint8) for item in items]
            np.save(f"{job['output']}-eval.npy", np.concatenate(classes))
    print(json.dumps(result))


def run_openvino(jobs: list[dict[str, str]], work: Path, args: argparse.Namespace) -> dict[str, Any]:
    jobs_file = work / "ov_jobs.json"
    jobs_file.write_text(json.dumps({"jobs": jobs, "threads": args.threads, "passes": args.passes}))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([args.openvino_path, str(Path.cwd())]))
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.onnx_int8", "--openvino-child", str(jobs_file)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["failed"])[-1]}
    parsed: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return parsed


# ---------------------------------------------------------------------------------------------------
# Error measures


class _OnnxNet:
    """Stands in for RetinaFace inside ``FaceDetector``: its outputs from saved arrays."""

    def __init__(self, outs: list[np.ndarray], config: Any) -> None:
        self.outs, self.config = outs, config

    def eval(self) -> _OnnxNet:
        return self

    def __call__(self, x: Any) -> tuple[Any, ...]:
        import torch

        return tuple(torch.from_numpy(o) for o in self.outs)


def faces_from(outs: list[np.ndarray], config: Any, canvas: np.ndarray) -> list[Any]:
    import torch

    from gpen_watch.restore.stages.detect import FaceDetector

    detector = FaceDetector(_OnnxNet(outs, config), torch.device("cpu"))  # type: ignore[arg-type]
    return detector.detect([canvas])[0]


def face_shifts(ref: list[Any], got: list[Any]) -> dict[str, Any]:
    """Each reference face matched to the nearest found one by box centre (within half its side)."""
    box_px = land_px = score = rel = 0.0
    matched = 0
    for f in ref:
        centre = (f.box[:2] + f.box[2:]) / 2
        side = float(max(f.box[2:] - f.box[:2]))
        best = min(got, key=lambda g: float(np.abs((g.box[:2] + g.box[2:]) / 2 - centre).max()), default=None)
        if best is None or float(np.abs((best.box[:2] + best.box[2:]) / 2 - centre).max()) > side / 2:
            continue
        matched += 1
        box = float(np.abs(best.box - f.box).max())
        land = float(np.linalg.norm(best.landmarks - f.landmarks, axis=1).max())
        box_px, land_px = max(box_px, box), max(land_px, land)
        rel = max(rel, box / side, land / side)  # a shift as a share of that face's box side
        score = max(score, abs(best.score - f.score))
    return {
        "found": len(got),
        "matched": matched,
        "box_px": box_px,
        "landmark_px": land_px,
        "relative": rel,
        "score": score,
        "smallest_side": min(float(max(f.box[2:] - f.box[:2])) for f in ref),
    }


def parse_errors(ref_cls: np.ndarray, cls: np.ndarray) -> dict[str, float]:
    """Class maps (N, S, S) compared: what changes, and the paste mask made from each."""
    from gpen_watch.restore.stages.enhance import NOT_FACE
    from gpen_watch.restore.stages.paste import soften_parse_mask

    not_face = np.zeros(19, bool)
    not_face[list(NOT_FACE)] = True
    ref_face, face = ~not_face[ref_cls], ~not_face[cls]
    mask_diff = max(
        float(np.abs(soften_parse_mask(a.astype(np.float32)) - soften_parse_mask(b.astype(np.float32))).max())
        for a, b in zip(ref_face, face)
    )
    return {
        "class_changed": float((ref_cls != cls).mean()),
        "face_changed": float((ref_face != face).mean()),
        "face_px_changed": int((ref_face != face).sum()),
        "pixels": int(ref_face.size),
        "face_share": float(ref_face.mean()),
        "classes_present": len(np.unique(ref_cls)),
        "mask_max_diff": mask_diff,
    }


# ---------------------------------------------------------------------------------------------------
# The run


def build(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """Every model exported and quantised, every input made: one dict per network."""
    import cv2
    import torch

    from gpen_watch.restore.engines.onnx_quant import Calibration, cached_quantized
    from gpen_watch.restore.engines.verify import load_weights
    from gpen_watch.restore.nets.fold import (
        drop_image_head,
        fold_batchnorm,
        prepare_conv_net,
        prepare_detector,
    )
    from gpen_watch.restore.nets.parsenet import ParseNet
    from gpen_watch.restore.nets.retinaface import build_retinaface
    from gpen_watch.restore.stages.align import align_faces

    torch.manual_seed(0)
    bgr = cv2.imread(str(SOLVAY), cv2.IMREAD_COLOR)
    if bgr is None:
        raise SystemExit(f"cannot read {SOLVAY}")
    shape = (-(-bgr.shape[0] // 32) * 32, -(-bgr.shape[1] // 32) * 32)
    canvas = photo_canvas(bgr, shape)  # scale 1: the photo fits its own padded canvas
    x_det = detector_input(canvas)
    calib = detector_calibration(shape)
    nets: dict[str, Any] = {}
    for name, arch in (("mobilenet", "mobile0.25"), ("r50", "resnet50")):
        model = build_retinaface(arch)
        if name == "mobilenet":
            model = load_weights(model, REAL_MOBILENET, "RetinaFace-MobileNet0.25")
        model = model.eval()
        fold_batchnorm(model)
        fp32 = export(model, x_det, work / f"{name}.onnx", ["loc", "conf", "landm"])
        nets[name] = {
            "torch": prepare_detector(model, torch.device("cpu")),
            "fp32": fp32,
            "int8": cached_quantized(fp32, calib).path,
            "x": x_det,
            "config": model.config,
        }
    # ParseNet on the faces fp32 torch finds.
    ref = faces_from(torch_run(nets["mobilenet"]["torch"])(x_det), nets["mobilenet"]["config"], canvas)
    crops, _ = align_faces(bgr, np.stack([f.landmarks for f in ref]), 512)
    faces = crops[..., ::-1].transpose(0, 3, 1, 2).astype(np.float32) / 127.5 - 1
    parser = ParseNet().eval()
    fold_batchnorm(parser)
    drop_image_head(parser)
    fp32 = export(parser, faces[:1], work / "parsenet.onnx", ["parsing", "image"])
    k = args.calib_faces
    calib_p = Calibration(f"solvay-faces-512-first{k}", [{"x": faces[i : i + 1]} for i in range(k)])
    nets["parsenet"] = {
        "torch": prepare_conv_net(parser, torch.device("cpu")),
        "fp32": fp32,
        "int8": cached_quantized(fp32, calib_p).path,
        "x": faces[:1],
        "faces": faces,
    }
    nets["solvay"] = {"canvas": canvas, "ref_faces": ref}
    return nets


def jobs_done(work: Path) -> bool:
    """Whether the held-out faces went through OpenVINO already (the first round does it)."""
    return (work / "ov-parsenet-int8-eval.npy").exists()


def measure_round(nets: dict[str, Any], args: argparse.Namespace, work: Path) -> Results:
    """One round: each network on each engine in this process, then OpenVINO's child."""
    out: Results = {}
    jobs: list[dict[str, str]] = []
    held_out = work / "parsenet-eval.npy"
    np.save(held_out, nets["parsenet"]["faces"][args.calib_faces :])
    for name in ("mobilenet", "r50", "parsenet"):
        net = nets[name]
        runs = {
            "torch fp32": torch_run(net["torch"]),
            "ort fp32": ort_run(net["fp32"], args.threads),
            "ort int8": ort_run(net["int8"], args.threads),
        }
        np.save(work / f"{name}-x.npy", net["x"])
        for engine, run in runs.items():
            out[(name, engine)] = {"ms": _time(run, net["x"], args.passes), "run": run}
        for prec in ("fp32", "int8"):
            job = {
                "key": f"{name} {prec}",
                "model": str(net[prec]),
                "input": str(work / f"{name}-x.npy"),
                "output": str(work / f"ov-{name}-{prec}"),
            }
            if name == "parsenet" and not jobs_done(work):
                job["eval"] = str(held_out)
            jobs.append(job)
    ov = run_openvino(jobs, work, args)
    for name in ("mobilenet", "r50", "parsenet"):
        for prec in ("fp32", "int8"):
            key = (name, f"openvino {prec}")
            out[key] = {"error": ov["error"]} if "error" in ov else {"ms": ov["ms"][f"{name} {prec}"]}
    out["openvino_version"] = ov.get("version")
    return out


def errors(nets: dict[str, Any], first: Results, work: Path, args: argparse.Namespace) -> Results:
    """Error bounds of each engine against fp32 torch (from the first round's sessions)."""
    solvay = nets["solvay"]
    res: Results = {}
    mob = nets["mobilenet"]
    for engine in ENGINES:
        entry = first[("mobilenet", engine)]
        if "error" in entry:
            continue
        if engine.startswith("openvino"):
            prec = engine.split()[1]
            outs = [np.load(work / f"ov-mobilenet-{prec}-{i}.npy") for i in range(3)]
        else:
            outs = entry["run"](mob["x"])
        res[("mobilenet", engine)] = face_shifts(
            solvay["ref_faces"], faces_from(outs, mob["config"], solvay["canvas"])
        )
    faces = nets["parsenet"]["faces"][args.calib_faces :]

    def classes(run: Run) -> np.ndarray:
        return np.concatenate([run(f[None])[0].argmax(1) for f in faces])

    ref = classes(first[("parsenet", "torch fp32")]["run"])
    for engine in ENGINES[1:]:
        if "error" in first[("parsenet", engine)]:
            continue
        if engine.startswith("openvino"):
            got = np.load(work / f"ov-parsenet-{engine.split()[1]}-eval.npy")
        else:
            got = classes(first[("parsenet", engine)]["run"])
        res[("parsenet", engine)] = parse_errors(ref, got)
    return res


def report(rounds: list[Results], errs: Results, args: argparse.Namespace) -> str:
    from benchmarks.onnx_generator import cpu_model

    lines = [
        f"{cpu_model()}, {args.threads} threads, {len(rounds)} interleaved rounds "
        f"(ms a pass, each the median of {args.passes}; OpenVINO {rounds[0].get('openvino_version')})",
        "",
    ]
    titles = {
        "mobilenet": "RetinaFace-MobileNet0.25, real weights, Solvay photo 1328x1024 px (padded 1344x1024)",
        "r50": "RetinaFace-R50, random weights (speed only), same input",
        "parsenet": "ParseNet, random weights, one 512 px aligned Solvay face a pass",
    }
    for name, title in titles.items():
        lines.append(title)
        base = [r[(name, "torch fp32")]["ms"] for r in rounds]
        for engine in ENGINES:
            entries = [r[(name, engine)] for r in rounds]
            if "error" in entries[0]:
                lines.append(f"  {engine:14} not run: {entries[0]['error']}")
                continue
            ms = " / ".join(f"{e['ms']:7.0f}" for e in entries)
            speed = " / ".join(f"{b / e['ms']:.2f}x" for b, e in zip(base, entries))
            err = errs.get((name, engine))
            lines.append(f"  {engine:14} {ms} ms   vs torch {speed}   {_err_text(err)}")
        lines.append("")
    return "\n".join(lines)


def _err_text(err: dict[str, Any] | None) -> str:
    if err is None:
        return ""
    if "found" in err:
        return (
            f"faces {err['found']} (matched {err['matched']}), box <= {err['box_px']:.2f} px, "
            f"landmarks <= {err['landmark_px']:.2f} px ({100 * err['relative']:.1f} % of the face's side "
            f"at most; smallest face {err['smallest_side']:.0f} px), score <= {err['score']:.4f}"
        )
    return (
        f"class changed {100 * err['class_changed']:.3f} %, face/not-face {err['face_px_changed']} of "
        f"{err['pixels']} px, paste mask <= {err['mask_max_diff']:.3f} (fp32: {err['classes_present']} "
        f"classes present, {100 * err['face_share']:.0f} % face)"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/gpen-onnx-int8"))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--passes", type=int, default=3, help="timed passes a measurement")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--calib-faces", type=int, default=8, help="Solvay faces ParseNet is calibrated on")
    parser.add_argument("--openvino-path", default="/tmp/ov_target")
    parser.add_argument("--openvino-child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.openvino_child:
        openvino_child(args.openvino_child)
        return
    import torch

    from gpen_watch.restore.runtime.device import set_threads

    set_threads(args.threads)
    torch.set_num_threads(args.threads)
    args.work.mkdir(parents=True, exist_ok=True)
    for old in args.work.glob("ov-*.npy"):
        old.unlink()
    t = time.perf_counter()
    nets = build(args, args.work)
    print(f"exports and int8 models ready in {time.perf_counter() - t:.0f} s", file=sys.stderr)
    rounds = [measure_round(nets, args, args.work)]
    errs = errors(nets, rounds[0], args.work, args)
    for entry in rounds[0].values():  # the sessions go before the next round makes its own
        if isinstance(entry, dict):
            entry.pop("run", None)
    rounds += [measure_round(nets, args, args.work) for _ in range(args.rounds - 1)]
    print(report(rounds, errs, args))


if __name__ == "__main__":
    main()
