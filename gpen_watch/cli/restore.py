"""`gpen-watch restore INPUT... -o OUTDIR`: the engine the daemon uses, run once over files and folders."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from gpen_watch import config
from gpen_watch.base.errors import ErrorKind, InputError, OutputError
from gpen_watch.base.streams import silence
from gpen_watch.cli import engine_thread
from gpen_watch.cli.argtypes import positive_int
from gpen_watch.cli.config import add_config_option, add_set_option, set_overrides
from gpen_watch.cli.restore_options import add_restore_options, restore_overrides
from gpen_watch.modelstore import messages
from gpen_watch.platform.files import publish_file
from gpen_watch.restore.api import FileJob, FileResult

log = logging.getLogger(__name__)

STAGES = ("decode", "prescale", "detect", "align", "upscale", "restore", "identity", "paste", "encode")


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    parser.add_argument("inputs", nargs="+", type=Path, metavar="INPUT", help="image files or folders")
    parser.add_argument(
        "-o", "--output", type=Path, required=True, metavar="OUTDIR", help="folder for results"
    )
    parser.add_argument(
        "--device", help="auto (default: a CUDA GPU, else Apple's GPU, else the CPU), cpu, cuda, cuda:N, mps"
    )
    parser.add_argument(
        "--threads", type=positive_int, metavar="N", help="torch threads (default: all cores)"
    )
    parser.add_argument("--overwrite", action="store_true", help="replace results already in OUTDIR")
    parser.add_argument("--no-download", action="store_true", help="never download missing model files")
    add_config_option(parser, "; the options override it")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_restore_options(parser)
    add_set_option(parser, "--set restore.detect_shrink_above=2000")


@dataclass
class Planned:
    src: Path
    dst: Path


def run(args: argparse.Namespace) -> int:
    # Ctrl-C or SIGTERM at any point, from loading the config on: see engine_thread.abandon.
    state = engine_thread.RunState()
    try:
        with engine_thread.stop_signals():
            return _run(args, state)
    except engine_thread.Stopped as stop:
        engine_thread.abandon(state, stop.signum, say)


def _run(args: argparse.Namespace, state: engine_thread.RunState) -> int:
    cfg = config.load(args.config, _overrides(args), must_exist=args.config is not None)
    from gpen_watch.imaging.formats import SUPPORTED_EXTENSIONS

    outdir: Path = args.output.expanduser().resolve()
    state.outdir = outdir
    limit = cfg.restore.max_megapixels
    plan, problems, ignored = plan_jobs(args.inputs, outdir, SUPPORTED_EXTENSIONS, cfg.output.format, limit)
    skipped: list[Planned] = []
    if not args.overwrite:
        plan, skipped = _skip_existing(plan, cfg.output.format, limit)
    if not plan:
        # Nothing to restore: say why, without paying for the models or creating any folder.
        for src, reason in problems:
            say(f"gpen-watch: {src}: {reason}")
        say(nothing_to_do(len(skipped), ignored, outdir), sys.stdout)
        return 2 if problems else 0
    # Checked before the models load (a typo fails fast), created only once they have: a run that
    # stops on missing weights leaves no empty folders behind.
    for folder in sorted({outdir} | {p.dst.parent for p in plan}):
        _check_creatable(folder)
    # Every missing model file named at once (downloaded first when it may be), as `run` does,
    # rather than the first one the engine's load trips on, one per try.
    messages.ensure_all(cfg.restore, download=not args.no_download, progress=not args.no_progress)

    started = time.perf_counter()
    results: list[FileResult] = state.results
    jobs = [FileJob(p.src, _temp_name(p.dst), cfg.output.format, cfg.output.jpeg_quality) for p in plan]
    final = {job.src: p.dst for job, p in zip(jobs, plan)}
    state.jobs = jobs
    folders = sorted({p.dst.parent for p in plan})

    def make_folders() -> None:
        # Only once the models have loaded (on the engine thread, before the first photo).
        for folder in folders:
            _make_folder(folder)

    engine = state.engine = engine_thread.EngineThread(cfg, args, jobs, make_folders)
    load_seconds = _restore(engine, jobs, final, results, args)
    elapsed = time.perf_counter() - engine.images_started
    failures = [(p, r) for p, r in problems] + [(r.src, r.error or "") for r in results if not r.ok]
    say(
        summary(
            results,
            failures,
            elapsed,
            time.perf_counter() - started,
            load_seconds,
            skipped=len(skipped),
            ignored=ignored,
        ),
        sys.stdout,
    )
    return 0 if not failures else 1


def _skip_existing(
    plan: list[Planned], out_format: str, max_megapixels: float
) -> tuple[list[Planned], list[Planned]]:
    """The jobs left to do, and those whose result an earlier run wrote (each said)."""
    from gpen_watch.restore.engines.existing import existing_result

    planned = {p.dst for p in plan}
    todo: list[Planned] = []
    skipped: list[Planned] = []
    for p in plan:
        found = existing_result(p.src, p.dst, out_format, planned, max_megapixels)
        if found is None:
            todo.append(p)
        else:
            skipped.append(p)
            say(f"skip {p.src}: {found} exists (use --overwrite)")
    return todo, skipped


def _restore(
    engine: engine_thread.EngineThread,
    jobs: list[FileJob],
    final: dict[Path, Path],
    results: list[FileResult],
    args: argparse.Namespace,
) -> float:
    """Commit and report each result as the engine thread hands it over; the model load time."""
    bar = None
    try:
        for res in engine.results():
            if res is None:  # the models are loaded
                bar = _progress(len(jobs), disable=args.no_progress)
                continue
            assert bar is not None
            if res.ok and res.dst is not None:
                _commit(res, final[res.src], args.overwrite)
            elif not res.ok:
                say(f"failed: {res.src}: {res.error}", bar=bar)
            for note in res.notes:
                say(f"note: {res.src.name}: {note}", bar=bar)
            results.append(res)
            bar.set_postfix(faces=sum(r.faces for r in results), refresh=False)
            bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    return engine.load_seconds


def plan_jobs(
    inputs: list[Path],
    outdir: Path,
    extensions: frozenset[str] | set[str],
    out_format: str,
    max_megapixels: float,
) -> tuple[list[Planned], list[tuple[Path, str]], list[Path]]:
    """Files to restore and where each result goes (folders keep their structure under OUTDIR),
    the inputs that cannot be restored with the reason, and the files in folders left out
    (``_folder_file_taken``). Headers are read with restore.max_megapixels, as the engine reads
    them."""
    from gpen_watch.imaging.load import probe_image

    plan: list[Planned] = []
    problems: list[tuple[Path, str]] = []
    ignored: list[Path] = []
    seen: set[Path] = set()
    for raw in inputs:
        path = raw.expanduser()
        if not path.exists():
            problems.append((raw, "no such file or folder"))
            continue
        if path.is_dir():
            root = path.resolve()
            for dirpath, dirnames, filenames in os.walk(root):
                here = Path(dirpath)
                # Never read back our own results when OUTDIR sits inside an input folder.
                dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and (here / d) != outdir)
                for name in sorted(filenames):
                    f = here / name
                    if name.startswith(".") or f.is_symlink():
                        continue
                    if not _folder_file_taken(f, extensions, max_megapixels):
                        ignored.append(f)
                        continue
                    rel = f.relative_to(root)
                    dst = outdir / root.name / rel if len(inputs) > 1 else outdir / rel
                    _add(plan, seen, f, _with_format(dst, out_format))
        elif path.is_file():
            f = path.resolve()
            # A file the user named is judged by its content (any name), from its header alone, so
            # a document given by mistake is reported before the models load.
            try:
                probe_image(f, max_megapixels)
            except InputError as exc:
                problems.append((raw, exc.reason))
                continue
            _add(plan, seen, f, _with_format(outdir / f.name, out_format))
        else:
            problems.append((raw, "not a regular file"))
    for p in plan:
        if p.dst == p.src:
            raise OutputError(f"{p.src}: the result would replace the input; choose another output folder")
    return plan, problems, ignored


def _folder_file_taken(f: Path, extensions: frozenset[str] | set[str], max_megapixels: float) -> bool:
    """The watcher's decision for a file found in a folder: a name that is never a photo (text,
    documents, archives, sidecars) or a temporary one is left out unread, a known image extension
    is taken, and any other name by its header (a scan with no extension, a PNG named .dat).
    What the header shows is no image readable here is left out; a damaged image is taken, so
    the run reports why it fails."""
    from gpen_watch.imaging.errors import NotAnImageError
    from gpen_watch.imaging.formats import denied_name
    from gpen_watch.imaging.load import probe_image
    from gpen_watch.watch.filters import ignored_name

    if denied_name(f.name) or ignored_name(f.name) is not None:
        return False
    if f.suffix.lower() in extensions:
        return True
    try:
        probe_image(f, max_megapixels)
    except NotAnImageError:
        return False
    except InputError:
        return True
    return True


def _add(plan: list[Planned], seen: set[Path], src: Path, dst: Path) -> None:
    if src in seen:
        return
    seen.add(src)
    plan.append(Planned(src, dst))


def _with_format(dst: Path, out_format: str) -> Path:
    if out_format == "same":
        return dst  # decided from the content once decoded (see _commit)
    from gpen_watch.imaging.formats import matching_suffix
    from gpen_watch.imaging.save import output_format

    return dst.with_suffix(matching_suffix(output_format("", out_format), dst.suffix))


def _temp_name(dst: Path) -> Path:
    return dst.with_name(f".{dst.name}.gpen-tmp-{os.getpid()}")


def _commit(res: FileResult, final: Path, overwrite: bool) -> None:
    """Move the finished temp file to its name; never clobbers a file that appeared meanwhile."""
    tmp = res.dst
    assert tmp is not None
    if res.format:
        from gpen_watch.imaging.formats import matching_suffix

        final = final.with_suffix(matching_suffix(res.format, final.suffix))
    try:
        publish_file(tmp, final, overwrite=overwrite)
    except FileExistsError:
        os.unlink(tmp)
        res.ok, res.error, res.error_kind = (
            False,
            f"{final} appeared while restoring; not overwritten",
            ErrorKind.FAILED,
        )
        return
    except OSError as exc:
        res.ok, res.error, res.error_kind = (
            False,
            f"cannot write {final}: {exc.strerror or exc}",
            ErrorKind.FAILED,
        )
        return
    res.dst = final


def _check_creatable(folder: Path) -> None:
    """Raise OutputError unless ``folder`` exists and is writable, or could be made so."""
    existing = folder
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    if not existing.is_dir():
        raise OutputError(f"{folder}: cannot create output folder: {existing} is a file, not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        if existing == folder:
            raise OutputError(f"{folder}: output folder is not writable")
        raise OutputError(f"{folder}: cannot create output folder: {existing} is not writable")


def _make_folder(folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"{folder}: cannot create output folder: {exc.strerror or exc}") from exc


def _progress(total: int, disable: bool) -> Any:  # tqdm's type
    from tqdm import tqdm

    return tqdm(total=total, unit="img", disable=disable or None, file=sys.stderr, dynamic_ncols=True)


def summary(
    results: list[FileResult],
    failures: list[tuple[Path, str]],
    elapsed: float,
    total: float,
    load_seconds: float,
    skipped: int = 0,
    ignored: list[Path] | None = None,
) -> str:
    ok = [r for r in results if r.ok]
    faces = sum(r.faces for r in ok)
    no_face = sum(1 for r in ok if r.faces == 0 and r.found == 0)
    # Faces found and none restored: the settings left them (restore.skip_sharp, strength 0, ...).
    left = sum(1 for r in ok if r.faces == 0 and r.found > 0)
    untouched = [f"{_count(no_face, 'image')} without a face"] if no_face else []
    untouched += [f"{_count(left, 'image')} whose faces were left as they were"] if left else []
    stage: Counter[str] = Counter()
    for r in results:
        stage.update(r.timings)
    lines = [
        # "restored" only for faces: a photo without one is done, but nothing in it was restored.
        f"done {len(ok)} of {_count(len(ok) + len(failures), 'image')}: "
        + (f"{_count(faces, 'face')} restored" if faces else "no face restored")
        + (f" ({', '.join(untouched)})" if untouched else ""),
        f"time {total:.1f} s (models {load_seconds:.1f} s, images {elapsed:.1f} s): "
        f"{len(results) / elapsed if elapsed > 0 else 0:.2f} images/s, "
        f"{faces / elapsed if elapsed > 0 else 0:.2f} faces/s",
    ]
    if stage:
        lines.append("stage totals: " + ", ".join(f"{k} {stage[k]:.1f} s" for k in STAGES if k in stage))
    if skipped:
        lines.append(f"skipped {_count(skipped, 'image')} whose result exists (--overwrite replaces it)")
    if ignored:
        lines.append(_ignored_line(ignored))
    if failures:
        lines.append(f"{len(failures)} failed:")
        lines.extend(f"  {src}: {reason}" for src, reason in failures)
    return "\n".join(lines)


def nothing_to_do(skipped: int, ignored: list[Path], outdir: Path) -> str:
    """The summary of a run with no image left to restore."""
    if skipped:
        line = (
            f"nothing to restore: skipped {_count(skipped, 'image')} whose result exists in {outdir} "
            "(--overwrite replaces them)"
        )
    else:
        line = "nothing to restore: no image found in the inputs"
    return line + ("\n" + _ignored_line(ignored) if ignored else "")


def _ignored_line(ignored: list[Path]) -> str:
    n = _count(len(ignored), "file")
    return f"left out {n} in the folders that are not images gpen-watch reads (e.g. {ignored[0]})"


def _count(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def say(text: str, stream: TextIO | None = None, bar: Any = None) -> None:
    """Print a line (to stderr unless told); a reader that went away (`... | head`) silences the
    stream but does not stop the batch: the photos matter more than the lines about them, and a
    batch cut short would leave temp files behind."""
    stream = stream or sys.stderr
    try:
        if bar is not None:
            bar.write(text, file=stream)
        else:
            print(text, file=stream, flush=True)
    except BrokenPipeError:
        silence(stream)


def _overrides(args: argparse.Namespace) -> dict[str, object]:
    out: dict[str, object] = restore_overrides(args)
    if args.device is not None:
        out["restore.device"] = args.device
    # Last, as for `run`: a --set wins over the named options.
    out.update(set_overrides(args.set))
    return out
