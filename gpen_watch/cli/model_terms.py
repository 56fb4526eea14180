"""`gpen-watch models accept NAME...` and `gpen-watch models paid-work`: the user's answer to the
models' terms, written into the settings file as the dashboard's buttons write it
(restore.accepted_terms; restore.model and the others for paid work), and a running service told
to read the file again (its downloads start at once)."""

from __future__ import annotations

from pathlib import Path

from gpen_watch import config
from gpen_watch.base.errors import ConfigError
from gpen_watch.base.fsutil import write_text_atomic
from gpen_watch.catalog.licences import Terms
from gpen_watch.catalog.registry import all_specs
from gpen_watch.modelstore import answers, terms
from gpen_watch.platform import program
from gpen_watch.service import control, reload


def accept(names: list[str], path: Path) -> int:
    """Say yes to the terms ``names`` stand for (model or terms names), after showing them."""
    chosen = terms.resolve(names)
    for t in chosen:
        if not t.needs_yes:
            print(f"{t.name} ({_models(t)}): {t.answer} Nothing to accept.")
    asking = [t for t in chosen if t.needs_yes]
    if not asking:
        return 0
    for t in asking:
        print(f"{t.name}: {t.title}")
        print(f"  for {_models(t)}")
        print(f"  for paid work? {t.answer}")
        print(f"  {t.url}")
    text = _read(path)
    new = answers.accept(text, path, asking)
    if new == text:
        print(f"Already accepted in {path} (restore.accepted_terms).")
        return 0
    _save(path, new)
    print(f"You accepted {' and '.join(t.name for t in asking)}'s terms; saved in {path}.")
    _tell_service("the models under them are downloaded as soon as they are needed")
    return 0


def paid_work(path: Path) -> int:
    """Set the settings file's models to ones whose terms allow paid work, where they are not."""
    text = _read(path)
    cfg = config.from_text(text, path)
    new, changes = answers.for_paid_work(text, path)
    for owner, profile in config.inbox_profiles(cfg):
        own = [s.name for s in answers.not_for_paid_work(profile)]
        if own:
            print(f"{owner} uses its own {', '.join(own)}: change that in its restore settings")
    if not changes:
        print("The settings use only models whose terms allow paid work already; nothing changed.")
        return 0
    _save(path, new)
    for setting, value in changes.items():
        print(f"{setting} = {value} (was {_shown(cfg, setting)})")
    print(f"For paid work: {terms.paid_work_words(answers.not_for_paid_work(cfg.restore))}; saved in {path}.")
    _tell_service("its workers restart with these models, downloading them first")
    return 0


def _models(t: Terms) -> str:
    return ", ".join(s.name for s in all_specs() if s.terms is t)


def _shown(cfg: config.Config, setting: str) -> str:
    value = getattr(cfg.restore, setting.partition(".")[2])
    return str(value).lower() if isinstance(value, bool) else str(value)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8") if path.exists() else ""
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the settings file: {exc}") from None


def _save(path: Path, new: str) -> None:
    """``new`` as the settings file (checked as the file is read), in one rename."""
    config.from_text(new, path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(path, new, mode=path.stat().st_mode & 0o777 if path.exists() else None)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot save: {exc.strerror or exc}") from None


def _tell_service(then: str) -> None:
    """Have a running service read the file again; say what happens either way."""
    try:
        reply = control.request("reload")
    except control.NotRunning:
        print(f"No service is running; `{program.command('run')}` will read them.")
        return
    if reply.get("ok"):
        print(f"The running service read its settings again ({reload.summary(reply)}); {then}.")
    else:
        print(
            f"The running service did not read them: {reply.get('error')}; "
            f"`{program.command('reload')}` tries again"
        )
