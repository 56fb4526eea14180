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
from benchmarks.spec import RunSpec

RUNNERS = {"warm-loop": run_warm, "engine": run_engine}


def main(argv: list[str]) -> int:
    mode, spec_path, out_dir, result_path = argv
    run = RUNNERS[mode](RunSpec.load(Path(spec_path)), Path(out_dir))
    Path(result_path).write_text(json.dumps(run.to_dict()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
