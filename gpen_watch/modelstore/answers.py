"""The user's answer to the models' terms, as a change of the settings file's text: yes to some
terms (restore.accepted_terms), or the settings for paid work (``terms.paid_work_settings``).

One home for both the `gpen-watch models accept | paid-work` commands and the dashboard's buttons,
which write the file each in their own way (the service's file, the user's) and then have the
service read it again. Each change is made through ``config.edit`` (the file's comments and order
stay) and read back by ``config.from_text``, the file's own checks.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from gpen_watch import config
from gpen_watch.catalog.licences import Terms
from gpen_watch.catalog.model_spec import ModelSpec
from gpen_watch.config import edit
from gpen_watch.modelstore import needs, terms


def accept(text: str, path: Path, chosen: Sequence[Terms]) -> str:
    """``text`` (the settings file at ``path``) with ``chosen``'s terms in restore.accepted_terms."""
    cfg = config.from_text(text, path)
    accepted = terms.with_yes(cfg.restore.accepted_terms, chosen)
    if accepted == list(cfg.restore.accepted_terms):
        return text
    return edit.apply_form(text, {"restore.accepted_terms": ", ".join(accepted)}, 0)


def not_for_paid_work(cfg: config.RestoreConfig) -> list[ModelSpec]:
    """The models ``cfg`` uses whose terms do not allow paid work."""
    return [s for s in needs.needed_specs(cfg) if not s.terms.paid_work]


def for_paid_work(text: str, path: Path) -> tuple[str, dict[str, str]]:
    """``text`` with the global settings changed to models whose terms allow paid work, and those
    changes (none when the settings use such models already). An inbox's own models are its own."""
    cfg = config.from_text(text, path)
    changes = terms.paid_work_settings(not_for_paid_work(cfg.restore))
    return (edit.apply_form(text, changes, 0) if changes else text), changes
