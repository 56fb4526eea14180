"""What the user reads of a model check (``modelstore.needs``), the one home of those words.

Each problem comes in two forms. The block, for every place that shows lines (the log,
`gpen-watch status`, `gpen-watch restore`'s error, the dashboard): a first line that says it in
short, then each file on lines of its own, where it comes from and why its download failed, the
command that fetches them and every folder they may be copied into. The short line, for the
places that show one line (the tray's menu and tooltip, a desktop notice): the block's first
line, a few dozen characters ("model files missing: no internet connection").

``ensure_all`` says them before a command loads anything (`gpen-watch restore`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gpen_watch.base.errors import ModelError
from gpen_watch.catalog.model_spec import ModelSpec
from gpen_watch.config import RestoreConfig
from gpen_watch.modelstore import store, terms
from gpen_watch.modelstore.download import Progress
from gpen_watch.modelstore.needs import FileCheck, ModelCheck, Need, check, custom_setting
from gpen_watch.platform import program

INDENT = "  "
# What happens once the files are there, in the service (the last line of its blocks).
WORKERS_START = "the workers start by themselves as soon as every file is there"
WORKERS_RETRY = "the workers start by themselves as soon as the file changes"


def missing_line(result: ModelCheck, failures: Mapping[str, str] | None = None) -> str:
    """The missing files in one short line, and why their downloads failed when they all failed
    for one reason ("model files missing: no internet connection"). Their number is left to the
    block's lines: with "(see the dashboard)" after it, this fits a tray menu's line."""
    n = len(result.missing)
    text = f"model file{'s' if n != 1 else ''} missing"
    why = {failure_headline(r) for r in _failed(result, failures or {}).values()}
    if len(why) == 1:
        return f"{text}: {why.pop()}"
    return f"{text}: downloads failed" if why else text


def missing_block(
    result: ModelCheck,
    failures: Mapping[str, str] | None = None,
    *,
    closing: str = WORKERS_START,
    retry_s: float | None = None,
) -> str:
    """Every missing file, its size and URL (and why its download failed below it), then what to
    do: the command that fetches them, or the folders to copy them into. ``closing``: what happens
    once they are there; ``retry_s``: when the downloads are tried again (None: they are not)."""
    failures = failures or {}
    lines = [missing_line(result, failures)]
    for f in result.missing:
        lines += _missing_file(f, failures)
    customs = [f.need for f in result.missing if f.need.spec is None]
    if customs:
        lines += _own_files_advice(customs)
    specs = [f.need.spec for f in result.missing if f.need.spec is not None]
    if specs:
        them = "them" if len(specs) > 1 else "it"
        lines.append(f"{INDENT}to get {them}, run:")
        lines.append(f"{INDENT * 2}{fetch_command(specs)}")
        lines.append(f"{INDENT}or download {them} on a machine with internet access and copy {them} into")
        lines[-1] += " any of these folders:"
        lines += [f"{INDENT * 2}{folder}" for folder in store.copy_folders(result.folders)]
    lines.append(f"{INDENT}{closing}")
    if retry_s:
        lines.append(f"{INDENT}downloads are tried again in {retry_s:g} s")
    return "\n".join(lines)


def corrupt_line(result: ModelCheck) -> str:
    """The corrupt files in one short line: "corrupt model file: GPEN-BFR-512"."""
    bad = result.corrupt
    if len(bad) == 1:
        need = bad[0].need
        return f"corrupt model file: {need.spec.name if need.spec is not None else _file_name(need)}"
    return f"{len(bad)} corrupt model files"


def corrupt_block(result: ModelCheck, closing: str = WORKERS_RETRY) -> str:
    """Each corrupt file with what is wrong with it, then how to replace it."""
    lines = [corrupt_line(result)]
    for f in result.corrupt:
        what = f.need.spec.name if f.need.spec is not None else _owned(f.need) + custom_setting(f.need)
        lines.append(f"{INDENT}{f.path} ({what}): {f.reason}")
    one = len(result.corrupt) == 1
    specs = [f.need.spec for f in result.corrupt if f.need.spec is not None]
    if specs:
        lines.append(f"{INDENT}replace {'it' if one else 'them'}: delete {'it' if one else 'them'} and run")
        lines.append(f"{INDENT * 2}{fetch_command(specs)}")
        lines.append(f"{INDENT}or put a good copy in {'its' if one else 'their'} place")
    else:
        lines.append(f"{INDENT}replace {'it with a good copy' if one else 'them with good copies'}")
    lines.append(f"{INDENT}{closing}")
    return "\n".join(lines)


def ensure_all(cfg: RestoreConfig, *, download: bool, progress: Progress = True) -> None:
    """Every file ``cfg`` needs, there before anything loads: the missing registry files are
    downloaded (when ``download``, and unless a file of the user's own is missing too, which no
    download can bring), then a ModelError names every file still missing at once, in the block
    the service's status shows, rather than the first one a load trips on."""
    result = check(cfg, deep=False)
    failures: dict[str, str] = {}
    if download and result.missing and all(f.need.spec is not None for f in result.missing):
        for spec in result.downloadable():
            try:
                # quiet: each URL's failure is in the block below, not a line of its own before it.
                store.fetch(spec, cfg.model_dir, progress=progress, quiet=True, accepted=cfg.accepted_terms)
            except ModelError as exc:
                failures[spec.name] = store.failure_reason(exc)
        result = check(cfg, deep=False)
    closing = "then run the command again"
    waiting = result.awaiting
    rest = result.without_awaiting()
    if waiting:
        text = terms.block(waiting, closing="" if rest.missing else closing)
        if rest.missing:
            text += "\n" + missing_block(rest, failures, closing=closing)
        raise terms.TermsNotAccepted(text, waiting)
    if result.missing:
        raise ModelError(missing_block(result, failures, closing=closing))


def fetch_command(specs: Sequence[ModelSpec]) -> str:
    """The command that downloads ``specs``, as this user can run it."""
    return program.command(f"models fetch {' '.join(s.name for s in specs)}")


def failure_headline(reason: str) -> str:
    """A download failure's reason without its particulars: "no internet connection" of "no
    internet connection (could not look up github.com)"; "downloads failed" for a reason that
    joins several (its URLs failed in different ways)."""
    headlines, depth, start = [], 0, 0
    for i, char in enumerate(reason + ";"):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == ";" and depth == 0:
            headlines.append(reason[start:i].split(" (", 1)[0].strip())
            start = i + 1
    return headlines[0] if len(set(headlines)) == 1 else "downloads failed"


def _failed(result: ModelCheck, failures: Mapping[str, str]) -> dict[str, str]:
    """The missing files' download failures, by model name."""
    return {
        f.need.spec.name: failures[f.need.spec.name]
        for f in result.missing
        if f.need.spec is not None and f.need.spec.name in failures
    }


def _missing_file(f: FileCheck, failures: Mapping[str, str]) -> list[str]:
    spec = f.need.spec
    if spec is None:
        return [f"{INDENT}{f.need.custom} ({_owned(f.need)}{custom_setting(f.need)}: no such file)"]
    owner = f", needed by {f.need.owner}" if f.need.owner else ""
    lines = [
        f"{INDENT}{spec.filename} ({spec.name}, {spec.size_text}){owner}",
        f"{INDENT * 2}from {spec.url}",
    ]
    if spec.name in failures:
        lines.append(f"{INDENT * 2}download failed: {failures[spec.name]}")
    return lines


def _own_files_advice(customs: Sequence[Need]) -> list[str]:
    """The user's own files are read from their path only: no download or folder helps them."""
    settings = " or ".join(dict.fromkeys(custom_setting(need) for need in customs))
    where = " and ".join(str(need.custom) for need in customs)
    return [
        f"{INDENT}put your own file at {where} (it is read from that exact path only),",
        f"{INDENT}or set {settings} to a model name or another file",
    ]


def _owned(need: Need) -> str:
    return f"{need.owner}: " if need.owner else ""


def _file_name(need: Need) -> str:
    return need.custom.name if need.custom is not None else need.label
