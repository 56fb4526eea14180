"""The benchmark's outputs: a text table, a JSON file and a matplotlib plot."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks.results import ModeSummary
from benchmarks.stages import STAGES

BASELINE = "upstream"
LABELS = {
    "upstream": "(1) upstream imitation: process per photo",
    "warm-loop": "(2) upstream imitation: warm loop",
    "engine": "(3) gpen-watch engine (restore)",
    "real-upstream": "(U1) real upstream GPEN: process per photo",
    "real-warm": "(U2) real upstream GPEN: one warm process",
}
_TABLE_STAGES = (*STAGES, "startup+load")


def label(mode: str) -> str:
    base, _, model = mode.partition("@")  # a face model beside GPEN (benchmarks.engine_modes)
    if model:
        return f"{label(base)}, {model}"
    if mode.startswith("engine["):  # the engine on another runtime (benchmarks.engine_modes)
        return f"{LABELS['engine']}, {mode.removeprefix('engine[').removesuffix(']')}"
    if mode.startswith("daemon-"):
        n, _, runtime = mode.removeprefix("daemon-").partition("[")
        n = n.rstrip("w")
        on = f", {runtime.removesuffix(']')}" if runtime else ""
        return f"(4) daemon, {n} worker{'s' if n != '1' else ''}{on}"
    return LABELS.get(mode, mode)


def ratios(summaries: list[ModeSummary]) -> dict[str, float | None]:
    """Median images/s of each mode over mode (1)'s, or None without a baseline run."""
    base = next((s for s in summaries if s.mode == BASELINE), None)
    base_ips = base.median("images_per_s") if base else 0.0
    return {s.mode: (s.median("images_per_s") / base_ips if base_ips else None) for s in summaries}


def table(summaries: list[ModeSummary]) -> str:
    ratio = ratios(summaries)
    stages = [s for s in _TABLE_STAGES if any(s in m.stage_per_image() for m in summaries)]
    head = [
        "mode",
        "img/s",
        "best img/s",
        "faces/s",
        "x(1)",
        "gen busy",
        *[f"{s} ms" for s in stages],
        "RSS MB parent/worker",
    ]
    rows = [head]
    for m in summaries:
        per = m.stage_per_image()
        parent, worker = m.peak_rss()
        r = ratio[m.mode]
        rows.append(
            [
                label(m.mode),
                f"{m.median('images_per_s'):.3f}",
                f"{m.spread('images_per_s')[1]:.3f}",
                f"{m.median('faces_per_s'):.2f}",
                f"{r:.2f}" if r is not None else "-",
                f"{m.median('generator_busy'):.0%}",
                *[f"{per[s] * 1000:.0f}" if s in per else "-" for s in stages],
                f"{_mb(parent)}/{_mb(worker)}",
            ]
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = [
        "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
        for row in rows
    ]
    lines.insert(1, "-" * len(lines[0]))
    lines.extend(_stage_rss_lines(summaries))
    return "\n".join(lines)


def _stage_rss_lines(summaries: list[ModeSummary]) -> list[str]:
    """Resident memory of the engine's process as each stage ended (highest), one line per mode."""
    lines = []
    for m in summaries:
        per = m.stage_rss()
        if per:
            cells = [f"{s} {per[s]:.0f}" for s in (*STAGES, "peak") if s in per]
            lines.append(f"RSS MB at stage end, {label(m.mode)}: " + ", ".join(cells))
    return ["", *lines] if lines else []


def _mb(value: float | None) -> str:
    return f"{value:.0f}" if value is not None else "-"


def write_json(path: Path, summaries: list[ModeSummary], meta: dict[str, Any]) -> None:
    ratio = ratios(summaries)
    data = {
        **meta,
        "modes": {
            m.mode: {
                "label": label(m.mode),
                "median": {
                    k: round(m.median(k), 4)
                    for k in ("images_per_s", "faces_per_s", "wall_s", "generator_busy")
                },
                "best_images_per_s": round(m.spread("images_per_s")[1], 4),
                "ratio_to_upstream": round(r, 3) if (r := ratio[m.mode]) is not None else None,
                "stage_s_per_image": {k: round(v, 4) for k, v in m.stage_per_image().items()},
                "peak_rss_mb": dict(zip(("parent", "worker"), m.peak_rss())),
                "rss_at_stage_end_mb": m.stage_rss(),
                "runs": [r.to_dict() for r in m.runs],
            }
            for m in summaries
        },
    }
    path.write_text(json.dumps(data, indent=1))


def plot(path: Path, summaries: list[ModeSummary], title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")  # files only, no display needed
    import matplotlib.pyplot as plt

    ratio = ratios(summaries)
    names = [label(m.mode) for m in summaries]
    ips = [m.median("images_per_s") for m in summaries]
    lo = [ips[i] - m.spread("images_per_s")[0] for i, m in enumerate(summaries)]
    hi = [m.spread("images_per_s")[1] - ips[i] for i, m in enumerate(summaries)]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(14, 0.9 * len(summaries) + 2.5))
    y = list(range(len(summaries)))[::-1]
    ax1.barh(y, ips, xerr=[lo, hi], color="#4878a8", capsize=3)
    for yi, v, up, m in zip(y, ips, hi, summaries):
        r = ratio[m.mode]
        ax1.text(v + up, yi, f"  {v:.3f}" + (f"  ({r:.1f}x)" if r is not None else ""), va="center")
    ax1.set_yticks(y, names)
    ax1.set_xlabel("images/s (median; bars: min-max)")
    ax1.set_xlim(0, max(ips) * 1.45 if ips else 1)
    left = [0.0] * len(summaries)
    tab10 = plt.get_cmap("tab10")
    colours = [tab10(i) for i in range(tab10.N)]
    for k, stage in enumerate(_TABLE_STAGES):
        widths = [m.stage_per_image().get(stage, 0.0) for m in summaries]
        if not any(widths):
            continue
        ax2.barh(y, widths, left=left, color=colours[k % len(colours)], label=stage)
        left = [a + b for a, b in zip(left, widths)]
    ax2.set_yticks(y, [""] * len(y))
    ax2.set_xlabel("seconds per image in each stage (summed over threads and processes)")
    ax2.legend(loc="lower right", fontsize="small")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
