"""``python -m benchmarks.people_grouping``: what grouping a batch's faces by person costs (the
People view's first visit, ``journal.people.people_of``), for batches of 8,652 faces (the
dashboard benchmark's wedding of 2,000 photos) and 20,000 (the most People groups).

The faces are made up as ``benchmarks.dashboard`` makes its batch's: each one of BATCH_PEOPLE
people, a descriptor 0.6 from the origin plus a little noise. ``--against FILE`` times another
implementation of ``journal/people.py`` (e.g. one from git history: ``git show REV:gpen_watch/
journal/people.py > old.py``) on the same faces, rounds interleaved, and checks that both find
the same people. On a shared machine the best round and the process's CPU seconds say the cost
better than a median; the load average is printed with each round. For docs/benchmarks.md,
"Grouping faces by person".
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType

import numpy as np

from benchmarks.dashboard import BATCH_PEOPLE
from gpen_watch.config import RestoreConfig
from gpen_watch.journal import people
from gpen_watch.journal.faces import FaceRow

Grouper = Callable[[Sequence[FaceRow], float], list[people.Person]]


def made_up_faces(count: int, seed: int = 3) -> list[FaceRow]:
    """``count`` described faces of BATCH_PEOPLE people, ten to a photo."""
    gen = np.random.default_rng(seed)
    centres = gen.normal(size=(BATCH_PEOPLE, 128))
    centres *= 0.6 / np.linalg.norm(centres, axis=1, keepdims=True)
    who = gen.integers(BATCH_PEOPLE, size=count)
    descriptors = (centres[who] + gen.normal(size=(count, 128)) * 0.01).astype("<f4")
    return [
        FaceRow(i % 10, True, float(gen.random() * 0.3), 0.1, False, descriptors[i].tobytes(), 1 + i // 10)
        for i in range(count)
    ]


def _load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location("people_against", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"{path}: not a Python file this benchmark can load")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _timed(
    group: Grouper, faces: list[FaceRow], threshold: float
) -> tuple[float, float, list[people.Person]]:
    wall, cpu = time.perf_counter(), time.process_time()
    found = group(faces, threshold)
    return time.perf_counter() - wall, time.process_time() - cpu, found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.people_grouping", description=__doc__)
    parser.add_argument("--faces", default="8652,20000", help="batch sizes, comma-separated")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--against", type=Path, help="another journal/people.py to time beside this one")
    args = parser.parse_args(argv)
    threshold = RestoreConfig().identity_threshold
    groupers: dict[str, Grouper] = {"this": people.people_of}
    if args.against is not None:
        groupers = {"against": _load(args.against).people_of, **groupers}
    print(
        f"threshold {threshold}, {os.cpu_count()} cores; seconds wall / CPU per round, load average before it"
    )
    for count in (int(c) for c in args.faces.split(",")):
        faces = made_up_faces(count)
        best: dict[str, tuple[float, float]] = {}
        found: dict[str, list[people.Person]] = {}
        for r in range(args.rounds):
            for name, group in groupers.items():
                load = os.getloadavg()[0]
                wall, cpu, found[name] = _timed(group, faces, threshold)
                print(
                    f"  {count} faces, round {r + 1}, {name}: {wall:.2f} s / {cpu:.2f} s CPU (load {load:.1f})"
                )
                was = best.get(name, (wall, cpu))
                best[name] = (min(was[0], wall), min(was[1], cpu))
        summary = ", ".join(f"{name} {w:.2f} s / {c:.2f} s CPU" for name, (w, c) in best.items())
        print(f"{count} faces, {len(found['this'])} people; best round: {summary}")
        if "against" in found and [p.faces for p in found["against"]] != [p.faces for p in found["this"]]:
            print(f"{count} faces: the two implementations found different people", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
