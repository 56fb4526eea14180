"""`gpen-watch restore INPUT... -o OUTDIR`: the engine the daemon uses, run once over files and folders."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from gpen_watch import config
from gpen_watch.errors import OutputError
from gpen_watch.restore.api import FileJob, FileResult

log = logging.getLogger(__name__)

STAGES = ("decode", "detect", "align", "restore", "paste", "encode")


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    parser.add_argument("inputs", nargs="+", type=Path, metavar="INPUT", help="image files or folders")
    parser.add_argument(
        "-o", "--output", type=Path, required=True, metavar="OUTDIR", help="folder for results"
    )
    parser.add_argument("--model", help="GPEN-BFR-512 (default), GPEN-BFR-256, or a .pth file")
    parser.add_argument("--model-dir", type=Path, help="folder with model files (checked before downloading)")
    parser.add_argument("--device", help="auto (default), cpu, cuda, cuda:N")
    parser.add_argument("--face-batch", type=int, help="faces per generator pass (0: from free memory)")
    parser.add_argument("--max-side", type=int, help="pre-scale photos whose long side is larger (0: never)")
    parser.add_argument("--precision", choices=["auto", "fp32", "fp16", "bf16"])
    parser.add_argument("--detector", choices=list(config.DETECTOR_NAMES))
    parser.add_argument("--threshold", type=float, help="face detection score threshold (default 0.9)")
    parser.add_argument("--no-parse", action="store_true", help="feathered mask instead of face parsing")
    parser.add_argument("--format", choices=["same", "jpeg", "png", "webp", "tiff"], help="output format")
    parser.add_argument("--quality", type=int, help="JPEG/WebP quality (default 95)")
    parser.add_argument("--threads", type=int, help="torch threads (default: all cores)")
    parser.add_argument("--overwrite", action="store_true", help="replace results already in OUTDIR")
    parser.add_argument("--no-download", action="store_true", help="never download missing model files")
    parser.add_argument("--config", type=Path, help="config file (settings below override it)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


@dataclass
class Planned:
    src: Path
    dst: Path


def run(args: argparse.Namespace) -> int:
    cfg = config.load(args.config, _overrides(args), must_exist=args.config is not None)
    from gpen_watch.imaging.load import SUPPORTED_EXTENSIONS

    outdir: Path = args.output.expanduser().resolve()
    plan, problems = plan_jobs(args.inputs, outdir, SUPPORTED_EXTENSIONS, cfg.output.format)
    if not plan and problems:
        for src, reason in problems:
            print(f"gpen-watch: {src}: {reason}", file=sys.stderr)
        return 2
    _check_writable(outdir)
    skipped: list[Planned] = []
    if not args.overwrite:
        skipped = [p for p in plan if p.dst.exists()]
        plan = [p for p in plan if not p.dst.exists()]
    for p in skipped:
        print(f"skip {p.src}: {p.dst} exists (use --overwrite)", file=sys.stderr)
    for folder in sorted({p.dst.parent for p in plan}):
        _check_writable(folder)

    from gpen_watch.restore.restorer import Restorer

    started = time.perf_counter()
    results: list[FileResult] = []
    with Restorer(cfg.restore, threads=args.threads, download=not args.no_download) as restorer:
        jobs = [FileJob(p.src, _temp_name(p.dst), cfg.output.format, cfg.output.jpeg_quality) for p in plan]
        final = {job.src: p.dst for job, p in zip(jobs, plan)}
        bar = _progress(len(jobs), disable=args.no_progress)
        t0 = time.perf_counter()
        for res in restorer.restore_files(jobs):
            if res.ok and res.dst is not None:
                _commit(res, final[res.src], args.overwrite)
            elif not res.ok:
                bar.write(f"failed: {res.src}: {res.error}")
            for note in res.notes:
                bar.write(f"note: {res.src.name}: {note}")
            results.append(res)
            bar.set_postfix(faces=sum(r.faces for r in results), refresh=False)
            bar.update(1)
        bar.close()
        elapsed = time.perf_counter() - t0
    failures = [(p, r) for p, r in problems] + [(r.src, r.error or "") for r in results if not r.ok]
    print(summary(results, failures, elapsed, time.perf_counter() - started, restorer.load_seconds))
    return 0 if not failures else 1


def plan_jobs(
    inputs: list[Path], outdir: Path, extensions: frozenset[str] | set[str], out_format: str
) -> tuple[list[Planned], list[tuple[Path, str]]]:
    """Files to restore and where each result goes; folders keep their structure under OUTDIR."""
    plan: list[Planned] = []
    problems: list[tuple[Path, str]] = []
    seen: set[Path] = set()
    for raw in inputs:
        path = raw.expanduser()
        if not path.exists():
            problems.append((raw, "no such file or folder"))
            continue
        if path.is_dir():
            root = path.resolve()
            for dirpath, dirnames, filenames in os.walk(root):
                here = Path(dirpath)
                # Never read back our own results when OUTDIR sits inside an input folder.
                dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and (here / d) != outdir)
                for name in sorted(filenames):
                    f = here / name
                    if name.startswith(".") or f.suffix.lower() not in extensions or f.is_symlink():
                        continue
                    rel = f.relative_to(root)
                    dst = outdir / root.name / rel if len(inputs) > 1 else outdir / rel
                    _add(plan, seen, f, _with_format(dst, out_format))
        elif path.is_file():
            f = path.resolve()
            _add(plan, seen, f, _with_format(outdir / f.name, out_format))
        else:
            problems.append((raw, "not a regular file"))
    for p in plan:
        if p.dst == p.src:
            raise OutputError(f"{p.src}: the result would replace the input; choose another output folder")
    return plan, problems


def _add(plan: list[Planned], seen: set[Path], src: Path, dst: Path) -> None:
    if src in seen:
        return
    seen.add(src)
    plan.append(Planned(src, dst))


def _with_format(dst: Path, out_format: str) -> Path:
    if out_format == "same":
        return dst  # decided from the content once decoded (see _commit)
    from gpen_watch.imaging.save import matching_suffix, output_format

    return dst.with_suffix(matching_suffix(output_format("", out_format), dst.suffix))


def _temp_name(dst: Path) -> Path:
    return dst.with_name(f".{dst.name}.gpen-tmp-{os.getpid()}")


def _commit(res: FileResult, final: Path, overwrite: bool) -> None:
    """Move the finished temp file to its name; never clobbers a file that appeared meanwhile."""
    tmp = res.dst
    assert tmp is not None
    if res.format:
        from gpen_watch.imaging.save import matching_suffix

        final = final.with_suffix(matching_suffix(res.format, final.suffix))
    try:
        if overwrite:
            os.replace(tmp, final)
        else:
            os.link(tmp, final)
            os.unlink(tmp)
    except FileExistsError:
        os.unlink(tmp)
        res.ok, res.error, res.error_kind = (
            False,
            f"{final} appeared while restoring; not overwritten",
            "failed",
        )
        return
    except OSError as exc:
        res.ok, res.error, res.error_kind = False, f"cannot write {final}: {exc.strerror or exc}", "failed"
        return
    res.dst = final


def _check_writable(outdir: Path) -> None:
    try:
        outdir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"{outdir}: cannot create output folder: {exc.strerror or exc}") from exc
    if not os.access(outdir, os.W_OK | os.X_OK):
        raise OutputError(f"{outdir}: output folder is not writable")


def _progress(total: int, disable: bool):  # noqa: ANN202 - tqdm's type
    from tqdm import tqdm

    return tqdm(total=total, unit="img", disable=disable or None, file=sys.stderr, dynamic_ncols=True)


def summary(
    results: list[FileResult],
    failures: list[tuple[Path, str]],
    elapsed: float,
    total: float,
    load_seconds: float,
) -> str:
    ok = [r for r in results if r.ok]
    faces = sum(r.faces for r in ok)
    no_face = sum(1 for r in ok if r.faces == 0)
    stage = Counter()
    for r in results:
        stage.update(r.timings)
    lines = [
        f"restored {len(ok)} of {len(ok) + len(failures)} images, "
        f"{faces} faces ({no_face} images without a face)",
        f"time {total:.1f} s (models {load_seconds:.1f} s, images {elapsed:.1f} s): "
        f"{len(results) / elapsed if elapsed > 0 else 0:.2f} images/s, "
        f"{faces / elapsed if elapsed > 0 else 0:.2f} faces/s",
    ]
    if stage:
        lines.append("stage totals: " + ", ".join(f"{k} {stage[k]:.1f} s" for k in STAGES if k in stage))
    if failures:
        lines.append(f"{len(failures)} failed:")
        lines.extend(f"  {src}: {reason}" for src, reason in failures)
    return "\n".join(lines)


def _overrides(args: argparse.Namespace) -> dict[str, object]:
    pairs = {
        "restore.model": args.model,
        "restore.model_dir": args.model_dir,
        "restore.device": args.device,
        "restore.face_batch": args.face_batch,
        "restore.max_side": args.max_side,
        "restore.precision": args.precision,
        "restore.detector": args.detector,
        "restore.detect_threshold": args.threshold,
        "restore.use_parse": False if args.no_parse else None,
        "output.format": args.format,
        "output.jpeg_quality": args.quality,
    }
    return {k: v for k, v in pairs.items() if v is not None}
