"""What the dashboard shows of the models' terms: each publisher's terms with the models under
them, whether they allow paid work, and whether the user accepted them (the Settings page's
table, and the Overview's question when a download waits for that yes)."""

from __future__ import annotations

from dataclasses import dataclass

from gpen_watch.catalog import licences, registry
from gpen_watch.catalog.licences import Terms
from gpen_watch.config import RestoreConfig
from gpen_watch.modelstore import answers, needs, terms


@dataclass(frozen=True)
class TermsRow:
    terms: Terms
    models: tuple[str, ...]
    used: tuple[str, ...]  # of ``models``, those the settings use
    accepted: bool


def rows(cfg: RestoreConfig) -> list[TermsRow]:
    """Every publisher's terms, those the settings use first."""
    used = {s.name for s in needs.needed_specs(cfg)}
    out = []
    for t in licences.ALL_TERMS:
        models = tuple(s.name for s in registry.all_specs() if s.terms is t)
        out.append(
            TermsRow(t, models, tuple(m for m in models if m in used), t.needs_yes and _accepted(t, cfg))
        )
    return sorted(out, key=lambda r: not r.used)


def asked(names: list[str]) -> list[Terms]:
    """The terms a status names (``ModelFileStatus.terms``), each once."""
    found = [licences.terms_named(n) for n in dict.fromkeys(names)]
    return [t for t in found if t is not None]


def paid_work_words(cfg: RestoreConfig) -> str:
    """What the settings for paid work would change, in words ("" when nothing)."""
    return terms.paid_work_words(answers.not_for_paid_work(cfg))


def _accepted(t: Terms, cfg: RestoreConfig) -> bool:
    return t.name.lower() in terms.accepted_set(cfg.accepted_terms)
