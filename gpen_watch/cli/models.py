"""`gpen-watch models list | fetch [NAME...] | verify [NAME...] | path [NAME] | accept NAME... | paid-work`.

``list`` and ``path`` never import torch; ``verify`` (and ``fetch``, which verifies what it downloads)
do, lazily.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from gpen_watch import config
from gpen_watch.base.errors import GpenWatchError, ModelError
from gpen_watch.catalog import licences, registry
from gpen_watch.catalog.model_spec import ModelSpec
from gpen_watch.cli import model_terms
from gpen_watch.cli.config import add_config_option
from gpen_watch.config import RestoreConfig
from gpen_watch.modelstore import needs, store, terms
from gpen_watch.platform import paths, program


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--model-dir",
        type=Path,
        default=None,
        help="folder checked first for weights files (default: restore.model_dir from the config)",
    )
    add_config_option(common, " to read restore.model and restore.model_dir from")
    names = ", ".join(registry.model_names())
    sub = parser.add_subparsers(dest="models_action", metavar="ACTION", required=True)
    sub.add_parser("list", parents=[common], help="show known models and where they are")
    fetch = sub.add_parser(
        "fetch",
        parents=[common],
        help="download missing models into the cache",
        description=f"Download missing models (default: the ones the configuration uses). Known: {names}.",
    )
    fetch.add_argument("names", nargs="*", metavar="NAME", help="models to fetch")
    fetch.add_argument("--no-progress", action="store_true", help="no progress bar")
    fetch.add_argument("--no-verify", action="store_true", help="do not load downloaded files to check them")
    verify = sub.add_parser(
        "verify",
        parents=[common],
        help="load model files and check they match their architecture",
        description=f"Check model files (default: every one present). Known: {names}.",
    )
    verify.add_argument("names", nargs="*", metavar="NAME", help="models to verify")
    path = sub.add_parser(
        "path", parents=[common], help="print the download cache folder, or where a model's file is"
    )
    path.add_argument("name", nargs="?", metavar="NAME", help="model name")
    accept = sub.add_parser(
        "accept",
        parents=[common],
        help="accept a model's terms, so that it may be downloaded (for terms that do not allow paid work)",
        description="Show the terms of the models named and record that you accept them "
        "(restore.accepted_terms in the settings file); a running service reads them at once. "
        f"Terms that ask for a yes: {', '.join(licences.ACCEPTABLE)}.",
    )
    accept.add_argument("names", nargs="+", metavar="NAME", help="a model (or its terms) to accept")
    sub.add_parser(
        "paid-work",
        parents=[common],
        help=f"use only models whose terms allow paid work ({licences.PAID_WORK_MODEL} ...)",
        description="Change the settings file so that the models it uses allow paid work: "
        f"restore.model = {licences.PAID_WORK_MODEL} in place of GPEN and CodeFormer, no face parser "
        "(ParseNet is non-commercial), Real-ESRGAN in place of GPEN's upscalers.",
    )


def run(args: argparse.Namespace) -> int:
    action = args.models_action
    if action in ("accept", "paid-work"):
        path = args.config or paths.config_file()
        return model_terms.accept(args.names, path) if action == "accept" else model_terms.paid_work(path)
    restore, profiles = _restore_config(args)
    model_dir = restore.model_dir
    if action == "list":
        return _list(restore, profiles)
    if action == "fetch":
        return _fetch(args.names, restore, profiles, progress=not args.no_progress, check=not args.no_verify)
    if action == "verify":
        return _verify(args.names, model_dir)
    return _path(args.name, model_dir)


def _restore_config(args: argparse.Namespace) -> tuple[RestoreConfig, list[needs.Profile]]:
    """The configuration's restore settings, with --model-dir in place of restore.model_dir, and
    the inboxes' own (their models are needed as much as the global ones)."""
    cfg = config.load(args.config, must_exist=args.config is not None)
    restore, profiles = cfg.restore, config.inbox_profiles(cfg)
    if args.model_dir is not None:
        restore = dataclasses.replace(restore, model_dir=args.model_dir)
    return restore, profiles


def _specs(names: list[str]) -> list[ModelSpec]:
    # Resolve every name before doing any work, so a typo fails fast.
    return [registry.get_spec(name) for name in names]


def _list(restore: RestoreConfig, profiles: list[needs.Profile]) -> int:
    model_dir = restore.model_dir
    print("Model folders, searched in this order:")
    for folder in store.model_search_dirs(model_dir):
        print(f"  {folder}")
    used = {n.spec.name for n in needs.all_needs(restore, profiles) if n.spec is not None}
    defaults = default_models()
    for spec in registry.all_specs():
        found = store.find_model(spec, model_dir)
        status = f"present at {found}" if found else "missing"
        print()
        print(f"{spec.name}{_marks(spec, defaults, used)}  [{spec.kind}]  {status}")
        print(f"  size:    {_size(spec, found)}")
        print(f"  about:   {spec.description}")
        print(f"  file:    {spec.filename}  from {spec.url}")
        print(f"  terms:   {spec.terms.title} ({spec.terms.url})")
        print(f"  for paid work? {spec.terms.answer}")
        if spec.terms.needs_yes:
            print(f"  accepted: {_accepted(spec, restore, found)}")
    return 0


def _accepted(spec: ModelSpec, restore: RestoreConfig, found: Path | None) -> str:
    if terms.answered(spec, restore.accepted_terms):
        return f"yes (restore.accepted_terms has {spec.terms.name})"
    then = "used as found, never downloaded" if found else "not downloaded"
    return f"no ({then} until `{terms.accept_command([spec])}`)"


def default_models() -> frozenset[str]:
    """What the default settings use: an upscaler only where restore.upscale's default asks for one."""
    return frozenset(spec.name for spec in needs.needed_specs(RestoreConfig()))


def _marks(spec: ModelSpec, defaults: frozenset[str], used: set[str]) -> str:
    """ " (default, used by the configuration)": whether the default settings and the user's use it."""
    marks = [("default", spec.name in defaults), ("used by the configuration", spec.name in used)]
    said = [mark for mark, on in marks if on]
    return f" ({', '.join(said)})" if said else ""


def _size(spec: ModelSpec, found: Path | None) -> str:
    if found is not None:
        try:
            return f"{found.stat().st_size:,} bytes"
        except OSError:
            pass
    return spec.size_text


def _fetch(
    names: list[str], restore: RestoreConfig, profiles: list[needs.Profile], progress: bool, check: bool
) -> int:
    model_dir = restore.model_dir
    if names:
        specs = _specs(names)
    else:
        wanted = needs.all_needs(restore, profiles)
        specs = [n.spec for n in wanted if n.spec is not None]
        for need in wanted:
            if need.custom is not None:  # the user's own file: nothing to download
                where = "present" if need.custom.is_file() else "MISSING"
                setting = (f"{need.owner}: " if need.owner else "") + needs.custom_setting(need)
                print(f"{need.role}: {setting} is the file {need.custom} ({where}); not downloaded")
    failures: list[str] = []
    # The files whose terms wait for the user's yes, said once for all of them.
    waiting = terms.unanswered(
        [s for s in specs if store.find_model(s, model_dir) is None], restore.accepted_terms
    )
    if waiting:
        print(terms.block(waiting, closing="then run the command again"))
        failures += [s.name for s in waiting]
    for spec in specs:
        if spec in waiting:
            continue
        found = store.find_model(spec, model_dir)
        if found is not None:
            print(f"{spec.name}: present at {found}")
            continue
        print(f"{spec.name}: downloading {spec.filename}, {spec.size_text}")
        try:
            # quiet: each URL's failure is in the one message below, not a line of its own first.
            path = store.fetch(
                spec, model_dir, progress=progress, quiet=True, accepted=restore.accepted_terms
            )
            if check:
                _check_download(spec, path)
        except GpenWatchError as exc:
            print(f"{spec.name}: FAILED: {exc}")
            failures.append(spec.name)
            continue
        print(f"{spec.name}: saved to {path}")
    if failures:
        raise ModelError(f"could not fetch {', '.join(failures)} (see above)")
    return 0


def _check_download(spec: ModelSpec, path: Path) -> None:
    """Load a fresh download once: the only check of the unpinned files (pinned ones were checked
    against their size and sha256 as they downloaded)."""
    from gpen_watch.restore.engines.verify import verify_file

    try:
        verify_file(spec, path)
    except ModelError:
        # We just wrote this file into our own cache; leaving it would make every run fail on it.
        path.unlink(missing_ok=True)
        raise


def _verify(names: list[str], model_dir: Path | None) -> int:
    explicit = bool(names)
    specs = _specs(names) if explicit else list(registry.all_specs())
    found = {spec.name: store.find_model(spec, model_dir) for spec in specs}
    if not explicit and not any(found.values()):
        # Said before torch is imported: that import alone takes seconds.
        folders = ", ".join(str(f) for f in store.model_search_dirs(model_dir))
        raise ModelError(f"no model files present in {folders}; run `{program.command('models fetch')}`")
    from gpen_watch.restore.engines.verify import verify_file

    failures: list[str] = []
    for spec in specs:
        path = found[spec.name]
        if path is None:
            if explicit:
                print(f"{spec.name}: MISSING (run `{program.command('models fetch ' + spec.name)}`)")
                failures.append(spec.name)
            else:
                print(f"{spec.name}: missing, skipped")
            continue
        try:
            verify_file(spec, path)
        except ModelError as exc:
            print(f"{spec.name}: FAILED: {exc}")
            failures.append(spec.name)
            continue
        print(f"{spec.name}: OK ({path})")
    if failures:
        raise ModelError(f"{len(failures)} model(s) failed verification: {', '.join(failures)}")
    return 0


def _path(name: str | None, model_dir: Path | None) -> int:
    if name is None:
        print(paths.model_cache_dir())
        return 0
    spec = registry.get_spec(name)
    found = store.find_model(spec, model_dir)
    if found is None:
        folders = ", ".join(str(f) for f in store.model_search_dirs(model_dir))
        raise ModelError(
            f"model {spec.name} ({spec.filename}) not found in {folders}; "
            f"run `{program.command('models fetch ' + spec.name)}`"
        )
    print(found)
    return 0
