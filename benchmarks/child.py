"""``python -m benchmarks.child MODE SPEC OUTDIR RESULT``: run one in-process mode in a fresh process.

A fresh process per measured run: each mode starts from a clean heap and allocator state (the
engine tunes glibc malloc for CPU inference, which would otherwise leak into the next mode) and
reports its own peak RSS.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from benchmarks.engine import run_engine, run_warm
from benchmarks.engine_modes import is_engine_mode, mode_spec
from benchmarks.results import ModeRun
from benchmarks.spec import RunSpec


def main(argv: list[str]) -> int:
    """``--warm-up`` after the four arguments: an engine mode on its first photo only."""
    mode, spec_path, out_dir, result_path, *flags = argv
    spec = RunSpec.load(Path(spec_path))
    run: ModeRun
    if is_engine_mode(mode):
        run = run_engine(
            mode_spec(spec, mode), Path(out_dir), mode, limit=1 if "--warm-up" in flags else None
        )
    elif mode == "warm-loop":
        run = run_warm(spec, Path(out_dir))
    else:
        raise SystemExit(f"benchmarks.child: no in-process mode {mode!r}")
    Path(result_path).write_text(json.dumps(run.to_dict()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
