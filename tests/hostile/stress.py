"""Long stress loops outside pytest: ``python -m tests.hostile.stress --help`` (from the repository root).

Runs the kill and load scenarios of tests/hostile/scenarios.py round after round, each in fresh temp
folders with its own isolated user folders, printing one JSON line of figures per round. Stops at
the first failure and prints its seed (rerun it with --seed). Examples:

    python -m tests.hostile.stress --scenario workers --rounds 20 --kills 50
    python -m tests.hostile.stress --scenario service --rounds 10 --restarts 20
    python -m tests.hostile.stress --scenario load --images 5000
    python -m tests.hostile.stress --scenario load --engine real --images 1000
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import scenarios
from .conftest import isolated_env
from .harness import TESTS_DIR, real_engine_args


def _real_engine_extra(root: Path) -> tuple[str, ...]:
    sys.path.insert(0, str(TESTS_DIR))
    from conftest import make_tiny_models  # tests/conftest.py: tiny models with random weights

    return tuple(real_engine_args(make_tiny_models(root / "models")))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.hostile.stress", description=__doc__.split("\n")[0])
    ap.add_argument("--scenario", choices=["workers", "service", "load", "all"], default="all")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=None, help="seed of the first round (then +1 per round)")
    ap.add_argument("--images", type=int, default=None, help="photos per round (default per scenario)")
    ap.add_argument("--kills", type=int, default=60, help="worker kills per round (workers)")
    ap.add_argument("--restarts", type=int, default=15, help="service kills per round (service)")
    ap.add_argument(
        "--engine", choices=["copy", "real"], default="copy", help="load: stand-in or tiny real models"
    )
    ap.add_argument("--keep", action="store_true", help="keep the temp folders of failed rounds")
    args = ap.parse_args(argv)
    if os.name != "posix":
        ap.error("POSIX only (signals, sockets)")

    base_seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    names = ["workers", "service", "load"] if args.scenario == "all" else [args.scenario]
    t_all = time.monotonic()
    for r in range(args.rounds):
        for name in names:
            seed = base_seed + r
            root = Path(tempfile.mkdtemp(prefix=f"gw-stress-{name}-"))
            ok = False
            t0 = time.monotonic()
            try:
                with isolated_env(root / "home"):
                    figures = _run(name, root / "svc", random.Random(seed), args)
                ok = True
                print(
                    json.dumps(
                        {
                            "round": r,
                            "scenario": name,
                            "seed": seed,
                            "seconds": round(time.monotonic() - t0, 1),
                            **figures,
                        }
                    ),
                    flush=True,
                )
            except KeyboardInterrupt:
                print(f"interrupted: scenario {name}, round {r}", flush=True)
                return 130
            except BaseException:  # noqa: BLE001
                traceback.print_exc()
                print(
                    f"FAILED: scenario {name}, round {r}, seed {seed}; folders kept in {root}"
                    if args.keep
                    else f"FAILED: scenario {name}, round {r}, seed {seed}",
                    flush=True,
                )
                return 1
            finally:
                if ok or not args.keep:
                    shutil.rmtree(root, ignore_errors=True)
    print(
        f"all {args.rounds} round(s) of {', '.join(names)} passed in {time.monotonic() - t_all:.0f} s",
        flush=True,
    )
    return 0


def _held(run: scenarios.KillRun, kills: int) -> dict[str, Any]:
    """A kill round's figures, or its failures raised (the tests assert the same facts)."""
    failures = run.failures(kills)
    if failures:
        raise AssertionError("\n  ".join(failures) + "\n" + run.logs)
    return run.figures()


def _run(name: str, root: Path, rng: random.Random, args: argparse.Namespace) -> dict[str, Any]:
    runners: dict[str, Callable[[], dict[str, Any]]] = {
        "workers": lambda: _held(
            scenarios.workers_killed_at_random(
                root, rng, images=args.images or 200, kills=args.kills, timeout=1800
            ),
            args.kills,
        ),
        "service": lambda: _held(
            scenarios.service_killed_at_random(
                root, rng, restarts=args.restarts, images=args.images or 100, timeout=1800
            ),
            args.restarts,
        ),
        "load": lambda: scenarios.load(
            root,
            images=args.images or 1000,
            timeout=3600,
            **(
                {"restorer": None, "workers": 1, "extra": _real_engine_extra(root.parent)}
                if args.engine == "real"
                else {}
            ),
        ),
    }
    root.mkdir(parents=True)
    return runners[name]()


if __name__ == "__main__":
    sys.exit(main())
