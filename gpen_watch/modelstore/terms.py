"""Model terms before downloads: a file whose publisher's terms do not allow paid work
(``catalog.licences``) is downloaded only once the user has seen those terms and said yes
(``restore.accepted_terms``), and the words that ask for that yes.

``store.fetch`` holds every download to ``require``, so no path (``models fetch``, the service's
downloads at start, ``restore``, a cluster node's restorer) fetches such a file unasked. A file
already on disk is used whatever its terms: whoever put it there got it from its publisher, and
a service upgraded onto a cache that holds one keeps working; ``models list`` and the dashboard
still show its terms.

Torch-free, and below ``store`` (which imports it).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from gpen_watch.base.errors import ModelError
from gpen_watch.catalog import licences, registry
from gpen_watch.catalog.licences import Terms
from gpen_watch.catalog.model_spec import ModelSpec
from gpen_watch.platform import program

INDENT = "  "
# What happens once the user answered, in the service (the last line of its block).
DOWNLOADS_START = (
    "or answer on the dashboard's Overview, a button for each; photos wait in the queue meanwhile"
)


class TermsNotAccepted(ModelError):
    """A download refused: the terms of ``specs`` ask for the user's yes, not given yet."""

    def __init__(self, message: str, specs: Sequence[ModelSpec]) -> None:
        super().__init__(message)
        self.specs = tuple(specs)


def accepted_set(names: Collection[str]) -> frozenset[str]:
    """restore.accepted_terms as compared: any case."""
    return frozenset(n.lower() for n in names)


def answered(spec: ModelSpec, accepted: Collection[str]) -> bool:
    """Whether ``spec`` may be downloaded: its terms allow paid work, or the user said yes."""
    return not spec.terms.needs_yes or spec.terms.name.lower() in accepted_set(accepted)


def unanswered(specs: Sequence[ModelSpec], accepted: Collection[str]) -> tuple[ModelSpec, ...]:
    """The ``specs`` whose download waits for the user's yes to their terms."""
    return tuple(s for s in specs if not answered(s, accepted))


def require(spec: ModelSpec, accepted: Collection[str], closing: str = "then run the command again") -> None:
    """Raise TermsNotAccepted, in the block's words, unless ``spec`` may be downloaded."""
    if not answered(spec, accepted):
        raise TermsNotAccepted(block([spec], closing=closing), [spec])


def line(specs: Sequence[ModelSpec]) -> str:
    """The short form, for a tray's menu line or a notice (the models are named in the block):
    "model terms to accept, or use GFPGAN-v1.4"."""
    return f"model terms to accept, or use {licences.PAID_WORK_MODEL}"


def block(specs: Sequence[ModelSpec], *, closing: str = DOWNLOADS_START) -> str:
    """Why ``specs`` are not downloaded: each one's terms and the answer to "may I use it for paid
    work?", then the two ways on, each one command: accept the terms, or the settings for paid
    work. ``closing``: what happens once the user answered."""
    one = len(specs) == 1
    lines = [
        f"{_and([s.name for s in specs])} {'is' if one else 'are'} downloaded only once you accept "
        f"{'its' if one else 'their'} terms: they do not allow paid work"
    ]
    for spec in specs:
        lines.append(f"{INDENT}{spec.name} ({spec.size_text}): {spec.terms.title}")
        lines.append(f"{INDENT * 2}for paid work? {spec.terms.answer} ({spec.terms.url})")
    lines.append(
        f"{INDENT}not for paid work? accept {'its' if one else 'their'} terms and the download starts:"
    )
    lines.append(f"{INDENT * 2}{accept_command(specs)}")
    instead = paid_work_words(specs)
    if instead:
        lines.append(f"{INDENT}for paid work, {instead} instead:")
        lines.append(f"{INDENT * 2}{program.command('models paid-work')}")
    if closing:
        lines.append(f"{INDENT}{closing}")
    return "\n".join(lines)


def accept_command(specs: Sequence[ModelSpec]) -> str:
    """The command that says yes to the terms of ``specs``, as this user can run it."""
    return program.command(f"models accept {' '.join(s.name for s in specs)}")


def paid_work_words(specs: Sequence[ModelSpec]) -> str:
    """What the settings for paid work change for ``specs``, in words: "restore with GFPGAN-v1.4
    (GFPGAN's licence: Apache-2.0), without the face parser"; "" when nothing can stand in."""
    parts: list[str] = []
    for setting, value in dict.fromkeys(alt for s in specs if (alt := paid_work_alternative(s)) is not None):
        if setting == "restore.use_parse":
            parts.append("without the face parser (its plain paste-back mask)")
        else:
            terms = registry.get_spec(value).terms
            parts.append(f"with {value} ({_licence(terms)})")
    return ("restore " + ", ".join(parts)) if parts else ""


def paid_work_settings(specs: Sequence[ModelSpec]) -> dict[str, str]:
    """The settings that do without ``specs`` for paid work (``paid_work_alternative``)."""
    return dict(alt for s in specs if (alt := paid_work_alternative(s)) is not None)


def paid_work_alternative(spec: ModelSpec) -> tuple[str, str] | None:
    """The setting and value that do without ``spec`` for paid work, where its terms do not allow
    it: ("restore.model", "GFPGAN-v1.4") for a face model, ("restore.use_parse", "false") for
    the parser (no parser under such terms is known: the family's plain mask instead),
    ("restore.upscale_model", "RealESRGAN-x2plus") for GPEN's upscalers; None where its terms
    allow paid work."""
    if spec.terms.paid_work:
        return None
    if spec.kind in {f.kind for f in registry.FACE_FAMILIES}:
        return ("restore.model", licences.PAID_WORK_MODEL)
    if spec.kind == "parser":
        return ("restore.use_parse", "false")
    if spec.rrdb is not None:
        for other in registry.all_specs():
            if other.rrdb is not None and other.rrdb.scale == spec.rrdb.scale and other.terms.paid_work:
                return ("restore.upscale_model", other.name)
    return None


def resolve(names: Sequence[str]) -> list[Terms]:
    """The terms that ``names`` (model names or terms names, any case) stand for, each once, or a
    ModelError naming what is neither."""
    out: dict[str, Terms] = {}
    for name in names:
        found = licences.terms_named(name)
        if found is None:
            try:
                found = registry.get_spec(name).terms
            except ModelError:
                raise ModelError(
                    f"{name!r} is neither a model nor the name of its terms; models: "
                    f"{', '.join(registry.model_names())}; terms: {', '.join(t.name for t in licences.ALL_TERMS)}"
                ) from None
        out[found.name] = found
    return list(out.values())


def with_yes(accepted: Sequence[str], new: Sequence[Terms]) -> list[str]:
    """restore.accepted_terms with ``new``'s names added (those asking for a yes, each once)."""
    names = list(dict.fromkeys(accepted))
    have = accepted_set(names)
    names += [t.name for t in new if t.needs_yes and t.name.lower() not in have]
    return names


def _licence(terms: Terms) -> str:
    return terms.title.split(": ", 1)[-1] if ": " in terms.title else terms.title


def _and(names: Sequence[str]) -> str:
    if len(names) <= 1:
        return "".join(names)
    return f"{', '.join(names[:-1])} and {names[-1]}"
