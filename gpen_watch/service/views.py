"""Where each photo's views live (the worker writes them; the dashboard reads them by job id)."""

from __future__ import annotations

from pathlib import Path


def views_root(journal_path: Path) -> Path:
    return journal_path.parent / "views"


def views_dir(root: Path, job_id: int) -> Path:
    return root / str(int(job_id))
