"""The restore options `gpen-watch restore` and `gpen-watch run` share: one definition, so the two
commands cannot drift apart (a setting `restore` takes, `run` takes the same way).

No torch here: `run` imports this module in the parent daemon.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from gpen_watch import config
from gpen_watch.catalog import registry


def add_restore_options(parser: argparse.ArgumentParser) -> None:
    """How faces are found, restored and written; each one sets one config setting."""
    group = parser.add_argument_group("restore options (override the config file)")
    group.add_argument(
        "--model",
        metavar="NAME|PATH",
        help=f"{registry.choices_text('face')}, or a .pth file (default: {config.RestoreConfig.model})",
    )
    group.add_argument(
        "--model-dir",
        type=Path,
        metavar="DIR",
        help="folder with model files, searched before the download cache",
    )
    group.add_argument(
        "--detector",
        choices=list(registry.DETECTOR_NAMES),
        help=f"face detector: {registry.choices_text('detector')} (default: {config.RestoreConfig.detector})",
    )
    group.add_argument(
        "--threshold",
        type=float,
        metavar="SCORE",
        help=f"face detection score threshold, 0 to 1 (default: {config.RestoreConfig.detect_threshold})",
    )
    group.add_argument(
        "--strength",
        type=float,
        metavar="S",
        help="how much of the restored face replaces the original, 0 (none) to 1 (all; default: "
        f"{config.RestoreConfig.strength})",
    )
    group.add_argument(
        "--faces",
        choices=["all", "largest", "center"],
        help="which faces to restore: all (default), the largest, or the one nearest the centre",
    )
    group.add_argument(
        "--max-faces",
        type=int,
        metavar="N",
        help="restore at most N faces a photo, the largest (default: 0, no limit)",
    )
    group.add_argument(
        "--no-parse",
        dest="use_parse",
        action="store_const",
        const=False,
        help="paste faces back through a feathered mask instead of a face-parsing one (on a CPU "
        "this more than halves the time)",
    )
    group.add_argument(
        "--precision",
        choices=["auto", "fp32", "fp16", "bf16"],
        help="number format the networks run in: auto (default) is fp32 on a CPU and on Apple's GPU, "
        "and bf16 on an NVIDIA GPU that has it (else fp32); fp16 or bf16 halve the GPU memory a face "
        "needs; fp16 needs a GPU",
    )
    group.add_argument(
        "--face-batch",
        type=int,
        metavar="N",
        help="faces per generator pass (default: 0, picked from free GPU memory)",
    )
    group.add_argument(
        "--max-side",
        type=int,
        metavar="PX",
        help=f"pre-scale photos whose long side is larger (default: {config.RestoreConfig.max_side}; 0: never)",
    )
    group.add_argument(
        "--upscale",
        type=int,
        choices=[1, 2, 4],
        help="upscale the whole photo 2x or 4x (after pre-scaling) and restore the faces into it "
        "(default: 1, off)",
    )
    group.add_argument(
        "--upscale-model",
        metavar="NAME|PATH",
        help=f"upscaler for --upscale: {', '.join(registry.UPSCALER_NAMES)}, or a .pth file "
        "(default: upstream GPEN's RealESRNet of that factor)",
    )
    group.add_argument(
        "--format",
        choices=["same", "jpeg", "png", "webp", "tiff"],
        help="format of the results (default: same as the input)",
    )
    group.add_argument(
        "--quality",
        type=int,
        metavar="Q",
        help=f"JPEG/WebP quality, 1 to 100 (default: {config.OutputConfig.jpeg_quality})",
    )


def restore_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The options add_restore_options defined, as dotted config settings (only those given)."""
    pairs: dict[str, Any] = {
        "restore.model": args.model,
        # Relative to where the command was typed, not to wherever the service later looks from.
        "restore.model_dir": str(args.model_dir.expanduser().absolute()) if args.model_dir else None,
        "restore.detector": args.detector,
        "restore.detect_threshold": args.threshold,
        "restore.use_parse": args.use_parse,
        "restore.strength": args.strength,
        "restore.faces": args.faces,
        "restore.max_faces": args.max_faces,
        "restore.precision": args.precision,
        "restore.face_batch": args.face_batch,
        "restore.max_side": args.max_side,
        "restore.upscale": args.upscale,
        "restore.upscale_model": args.upscale_model,
        "output.format": args.format,
        "output.jpeg_quality": args.quality,
    }
    return {k: v for k, v in pairs.items() if v is not None}
