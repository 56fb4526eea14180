"""The report's part for the engine on each runtime: photos/s, faces/s of each stage, peak memory,
the ratio to upstream's warm loop against the goal, and how far the ONNX outputs are from torch's.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from benchmarks import report
from benchmarks.engine_modes import TORCH_MODE, is_engine_mode, pixel_diff, split_model, with_model
from benchmarks.results import ModeRun, ModeSummary

# What the engine is measured against: upstream's own warm loop where it ran (--upstream), else
# this project's imitation of it.
BASELINES = ("real-warm", "warm-loop")
# "restore" split: ParseNet's passes, and the rest of the face pass (GPEN and the conversions).
FACE_STAGES = ("detect", "parse", "generate")
DEFAULT_GOAL = 3.0


def baseline(summaries: list[ModeSummary]) -> ModeSummary | None:
    by_mode = {s.mode: s for s in summaries}
    return next((by_mode[b] for b in BASELINES if b in by_mode and by_mode[b].median("images_per_s")), None)


def stage_faces_per_s(runs: list[ModeRun], stage: str) -> float | None:
    """Median over the runs of faces / seconds in ``stage``; None where no run timed it."""
    values = [r.faces / r.stages[stage] for r in runs if r.stages.get(stage, 0.0) > 0]
    return float(statistics.median(values)) if values else None


def goal_text(ratio: float | None, goal: float, restored: bool = True) -> str:
    if not restored:
        # A ratio of 0 would read as a slow engine; it restored nothing (the failures are printed).
        return f"{goal:.1f}x goal: not measured (no photo restored)"
    if ratio is None:
        return f"{goal:.1f}x goal: no baseline"
    return f"{goal:.1f}x goal: {'met' if ratio >= goal else 'not met'} ({ratio:.2f}x)"


def _restored(m: ModeSummary) -> bool:
    return any(r.ok for r in m.runs)


def _peak(m: ModeSummary) -> float | None:
    parent, worker = m.peak_rss()
    return worker if worker is not None else parent


def table(summaries: list[ModeSummary], goal: float = DEFAULT_GOAL) -> str:
    """One row per mode: the engine's modes against the baseline, the baseline itself first."""
    base = baseline(summaries)
    base_ips = base.median("images_per_s") if base else 0.0
    shown = [m for m in summaries if m is base or is_engine_mode(m.mode) or m.mode.startswith("daemon-")]
    x_head = f"x {report.label(base.mode).split(' ')[0]}" if base else "x warm"
    head = [
        "mode",
        "photos/s",
        "faces/s",
        *[f"{s} faces/s" for s in FACE_STAGES],
        "peak RSS MB",
        x_head,
        "goal",
    ]
    rows = [head]
    for m in shown:
        ratio = m.median("images_per_s") / base_ips if base_ips else None
        cells = [stage_faces_per_s(m.runs, s) for s in FACE_STAGES]
        peak = _peak(m)
        rows.append(
            [
                report.label(m.mode),
                f"{m.median('images_per_s'):.3f}",
                f"{m.median('faces_per_s'):.2f}",
                *[f"{c:.2f}" if c is not None else "-" for c in cells],
                f"{peak:.0f}" if peak is not None else "-",
                f"{ratio:.2f}" if ratio is not None else "-",
                "" if m is base else goal_text(ratio, goal, _restored(m)),
            ]
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = [
        "  ".join(
            c.ljust(w) if i in (0, len(head) - 1) else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))
        )
        for row in rows
    ]
    lines.insert(1, "-" * len(lines[0]))
    if base is None:
        lines.append("no warm-loop baseline in this run (add real-warm with --upstream, or warm-loop)")
    return "\n".join(line.rstrip() for line in lines)


def goal_lines(summaries: list[ModeSummary], goal: float = DEFAULT_GOAL) -> list[str]:
    """One line per engine mode: its photos/s over the baseline's, against the goal."""
    base = baseline(summaries)
    if base is None:
        return []
    base_ips = base.median("images_per_s")
    return [
        f"{report.label(m.mode)} over {report.label(base.mode)}: "
        + goal_text(m.median("images_per_s") / base_ips, goal, _restored(m))
        for m in summaries
        if is_engine_mode(m.mode) or m.mode.startswith("daemon-")
    ]


def diff_lines(
    out_root: Path, runs: list[str], repeat: int, names: list[str]
) -> tuple[list[str], dict[str, dict[str, float]]]:
    """Each other engine mode's (ONNX, another ParseNet format) pixel difference from the torch
    engine's outputs on the same face model, same round."""
    lines: list[str] = []
    data: dict[str, dict[str, float]] = {}
    for mode in (m for m in runs if is_engine_mode(m) and split_model(m)[0] != TORCH_MODE):
        torch_mode = with_model(TORCH_MODE, split_model(mode)[1])
        if torch_mode not in runs:
            continue
        for rnd in range(repeat):
            diff = pixel_diff(out_root / f"r{rnd}" / mode, out_root / f"r{rnd}" / torch_mode, names)
            if diff is not None:
                data[mode] = {
                    "photos": diff.photos,
                    "max": diff.max_diff,
                    "mean": diff.mean_diff,
                    "over_one": diff.over_one,
                }
                lines.append(
                    f"{report.label(mode)} vs the torch engine, over {diff.photos} photos (decoded "
                    f"outputs): largest pixel difference {diff.max_diff} levels of 255, mean "
                    f"{diff.mean_diff}, {diff.over_one:.3%} of values more than one level off"
                )
                break
    return lines, data
