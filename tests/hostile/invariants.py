"""The invariant every hostile scenario ends with: nothing lost, nothing twice, nothing partial.

A ``Ledger`` records every file a scenario put into an inbox (its bytes' sha256 taken at drop time,
and what is allowed to become of it). ``check`` then opens the journal read-only and walks the
folders, and asserts:

* every drop is accounted for exactly once: a done (or duplicate) job whose output exists (a
  duplicate's own copy, or the first one's when the same name was dropped again) and whose
  original was archived, or a failed/unsupported job whose original sits in failed/ with a readable
  ``.error.txt`` giving the reason; ignored files (hidden names, links, FIFOs...) are still in the
  inbox untouched and have no job; files the scenario removed have no live job;
* the journal agrees with the folders: the outbox holds exactly the done and duplicate jobs' outputs, originals/
  exactly the archived originals, failed/ exactly the set-aside files and their error files, and
  the inbox nothing but what was meant to stay there; no job exists that no drop explains;
* nothing is partial: no temp file anywhere, every output decodes (real engine) or is byte-equal
  to its source (the copying stand-in);
* no original was modified: every archived or set-aside file has the sha256 it had when dropped.

An original the archive refused for a reason that can clear (journal: "waiting", retried by the
service) counts as accounted for where an archived one is expected, as long as its photo's result
is in the outbox (its job's own output, or a duplicate's done job's), the folder it waits for is
under originals/, and the original is still in the inbox unmodified (or no longer there at all: moved
away meanwhile, which the next retry records as "missing"). Anything else "waiting" is still a
finding: a failed photo waiting for failed/ has no error file yet, and a waiting original whose
result is not in the outbox is one that might be lost.

All problems are collected and reported together, so one run shows everything that went wrong.
"""

from __future__ import annotations

import dataclasses
import os
import re
import stat
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from gpen_watch.journal import Journal
from gpen_watch.journal.journal import Job, default_path
from gpen_watch.journal.states import JobState

from .harness import Service, file_sha, sha256

DONE_LIKE = frozenset({"done", "duplicate"})
FAILED_LIKE = frozenset({"failed", "unsupported"})
# Not a job: left alone in the inbox (hidden names, symlinks, FIFOs, devices, sockets, folders).
IGNORED = frozenset({"ignored"})
# Removed (or replaced) by the scenario before it was processed: no live job may remain for it.
GONE = frozenset({"gone"})

# Our temp names: ".<name>.gpen-tmp-<job>" (outbox commit) and ".<name>.tmp-<hex>" (image writer).
_TEMP_RE = re.compile(r"^\..+\.(gpen-tmp-\d+|tmp-[0-9a-f]{8})$", re.DOTALL)


@dataclass
class Drop:
    rel: str  # path relative to the inbox
    sha: str | None  # content at drop time; None for special files (links, FIFOs...)
    expect: frozenset[str]  # journal states allowed, or IGNORED / GONE
    reason: str | None = None  # substring the job's error must contain (failed/unsupported)
    # Allowed fates of the original, when not the default (archived / set-aside).
    original: frozenset[str] | None = None
    # Extra check of a done job's output file (format, size, mode...); raise AssertionError.
    output_check: Callable[[Path, Job], None] | None = None


@dataclass
class Ledger:
    inbox: Path
    drops: list[Drop] = field(default_factory=list)

    def add(
        self,
        rel: str,
        data: bytes | None,
        expect: Iterable[str],
        reason: str | None = None,
        original: Iterable[str] | None = None,
        output_check: Callable[[Path, Job], None] | None = None,
    ) -> Drop:
        drop = Drop(
            rel,
            None if data is None else sha256(data),
            frozenset(expect),
            reason,
            None if original is None else frozenset(original),
            output_check,
        )
        self.drops.append(drop)
        return drop

    def add_copy(self, rel: str, data: bytes) -> Drop:
        """A byte-identical copy of an earlier drop. Which of the two the service meets first (and so
        restores, the other becoming its duplicate) depends on when each is noticed: after a kill
        the copy can be journaled before an original the killed service never reached."""
        sha = sha256(data)
        for i, d in enumerate(self.drops):
            if d.sha == sha and d.expect == frozenset({"done"}):
                self.drops[i] = dataclasses.replace(d, expect=DONE_LIKE)
        return self.add(rel, data, DONE_LIKE)

    def jobs_expected(self) -> int:
        """Jobs that end as done/failed/unsupported/duplicate (what `status` counts as finished)."""
        return sum(1 for d in self.drops if d.expect - IGNORED - GONE)


@dataclass
class Report:
    counts: dict[str, int]
    outputs: int
    archived: int
    set_aside: int
    left_in_inbox: int


def _walk_files(folder: Path) -> list[Path]:
    """Every non-directory entry below folder (links and special files too), never following links."""
    out: list[Path] = []
    if not folder.is_dir():
        return out
    for dirpath, dirnames, filenames in os.walk(folder):
        base = Path(dirpath)
        out += [base / n for n in filenames]
        # os.walk lists symlinks to folders among dirnames and does not descend into them.
        out += [base / n for n in dirnames if (base / n).is_symlink()]
    return out


def _all_jobs(journal: Journal) -> list[Job]:
    return [j for state in JobState for j in journal.jobs(state)]


def decodes(path: Path) -> str | None:
    """None when the file is a complete image of the format its name says; else the problem."""
    from PIL import Image

    from gpen_watch.imaging.formats import OUTPUT_SUFFIXES, matching_suffix

    try:
        with Image.open(path) as im:
            im.load()
            fmt = "JPEG" if im.format == "MPO" else (im.format or "?")
    except Exception as exc:  # noqa: BLE001 - any failure is the finding
        import cv2
        import numpy as np

        arr = cv2.imdecode(np.fromfile(str(path), np.uint8), cv2.IMREAD_UNCHANGED)
        if arr is None:
            return f"does not decode: {exc}"
        return None  # e.g. a 16-bit colour TIFF Pillow cannot hold; OpenCV reads it whole
    if fmt in OUTPUT_SUFFIXES and matching_suffix(fmt, path.suffix) != path.suffix:
        return f"holds {fmt} data but is named {path.suffix!r}"
    return None


def check(svc: Service, ledger: Ledger, *, quiescent: bool = True, planted: Iterable[Path] = ()) -> Report:
    """Assert the invariant (see the module docstring); ``planted``: files the scenario itself put in
    the service's folders (e.g. a trap symlink in the outbox), which are not outputs."""
    report, problems = survey(svc, ledger, quiescent=quiescent, planted=planted)
    assert not problems, "invariant violated:\n  " + "\n  ".join(problems) + "\n" + svc.logs()
    return report


def survey(
    svc: Service, ledger: Ledger, *, quiescent: bool = True, planted: Iterable[Path] = ()
) -> tuple[Report, list[str]]:
    """The invariant's findings: a report and every problem found (each names the file concerned)."""
    problems: list[str] = []
    planted_set = {Path(p) for p in planted}
    journal = Journal.open(default_path(), readonly=True)
    try:
        if (ic := journal.integrity_check()) != "ok":
            problems.append(f"journal integrity: {ic}")
        jobs = _all_jobs(journal)
    finally:
        journal.close()
    counts = Counter(j.state for j in jobs)
    if quiescent and (counts["queued"] or counts["running"]):
        problems.append(f"jobs still active: {counts['queued']} queued, {counts['running']} running")

    # Nothing partial: no temp names anywhere the service writes.
    for folder in (svc.outbox, svc.failed, svc.originals):
        for p in _walk_files(folder):
            if _TEMP_RE.match(p.name):
                problems.append(f"temp file left: {p}")

    # Each drop accounted for exactly once.
    by_source: dict[Path, list[Job]] = defaultdict(list)
    by_id = {j.id: j for j in jobs}
    for j in jobs:
        by_source[j.source].append(j)
    explained: set[int] = set()
    groups: dict[tuple[Path, str | None], list[Drop]] = defaultdict(list)
    for d in ledger.drops:
        groups[(ledger.inbox / d.rel, d.sha)].append(d)
    stay_in_inbox: set[Path] = set()
    for (path, sha), drops in groups.items():
        expect = drops[0].expect
        mine = [j for j in by_source.get(path, []) if j.sha256 == sha]
        explained.update(j.id for j in mine)
        live = sorted((j for j in mine if j.state != "gone"), key=lambda j: j.id)
        label = f"{drops[0].rel!r}"
        if expect == IGNORED:
            # Jobs for this path that other drops of the scenario explain (it held a photo before).
            others = {d.sha for d in ledger.drops if ledger.inbox / d.rel == path and d.sha is not None}
            stray = [j for j in by_source.get(path, []) if j.sha256 not in others]
            if stray:
                problems.append(
                    f"{label}: should be ignored but has job(s) {[(j.id, j.state) for j in stray]}"
                )
            if not os.path.lexists(path):
                problems.append(f"{label}: should have stayed in the inbox but is gone")
            elif sha is not None and stat.S_ISREG(os.lstat(path).st_mode) and file_sha(path) != sha:
                problems.append(f"{label}: modified in the inbox")
            stay_in_inbox.add(path)
            continue
        if expect == GONE:
            if live:
                problems.append(
                    f"{label}: removed by the test but has live job(s) {[(j.id, j.state) for j in live]}"
                )
            continue
        if len(live) != len(drops):
            problems.append(
                f"{label}: dropped {len(drops)} time(s) but {len(live)} job(s) ended for it: "
                f"{[(j.id, j.state, j.error) for j in live]}"
            )
        for j, d in zip(live, drops):
            problems += _check_job(svc, j, d, stay_in_inbox, by_id)

    for j in jobs:
        if j.id not in explained:
            problems.append(f"job {j.id} ({j.state}) for {j.source} matches no drop of the scenario")

    # The journal agrees with the folders.
    done_outputs = {Path(j.output) for j in jobs if j.state in DONE_LIKE and j.output is not None}
    outbox_files = {p for p in _walk_files(svc.outbox) if p not in planted_set and not _TEMP_RE.match(p.name)}
    for p in sorted(outbox_files - done_outputs):
        problems.append(f"outbox file no done job claims: {p}")
    for p in sorted(done_outputs - outbox_files):
        problems.append(f"done job's output missing: {p}")
    outputs_per_job = Counter(Path(j.output) for j in jobs if j.state in DONE_LIKE and j.output is not None)
    problems += [f"output {p} claimed by {n} done jobs" for p, n in outputs_per_job.items() if n > 1]

    archived = {Path(j.original_path) for j in jobs if j.original == "archived" and j.original_path}
    original_files = {p for p in _walk_files(svc.originals) if not _TEMP_RE.match(p.name)}
    problems += [f"originals/ file no job archived: {p}" for p in sorted(original_files - archived)]
    problems += [f"archived original missing: {p}" for p in sorted(archived - original_files)]

    set_aside = {Path(j.original_path) for j in jobs if j.original == "set-aside" and j.original_path}
    failed_files = {p for p in _walk_files(svc.failed) if not _TEMP_RE.match(p.name)}
    error_files = {p for p in failed_files if p.name.endswith(".error.txt")}
    problems += [
        f"failed/ file no job set aside: {p}" for p in sorted(failed_files - error_files - set_aside)
    ]
    problems += [f"set-aside original missing: {p}" for p in sorted(set_aside - failed_files)]
    ended_badly = sum(1 for j in jobs if j.state in FAILED_LIKE and j.original != "replaced")
    if len(error_files) != ended_badly:
        problems.append(
            f"{len(error_files)} error files in failed/ for {ended_badly} failed/unsupported jobs"
        )

    # The inbox holds only what was meant to stay.
    for p in _walk_files(svc.inbox):
        if p not in stay_in_inbox and p not in planted_set:
            problems.append(f"left in the inbox unaccounted: {p}")

    return Report(
        dict(counts), len(done_outputs), len(archived), len(set_aside), len(stay_in_inbox)
    ), problems


def _check_job(svc: Service, j: Job, d: Drop, stay_in_inbox: set[Path], by_id: dict[int, Job]) -> list[str]:
    problems: list[str] = []
    label = f"{d.rel!r} (job {j.id}, {j.state})"
    if j.state not in d.expect:
        problems.append(f"{label}: expected {sorted(d.expect)}, error {j.error!r}")
        return problems
    if j.state in FAILED_LIKE and d.reason and d.reason.lower() not in (j.error or "").lower():
        problems.append(f"{label}: reason {j.error!r} does not mention {d.reason!r}")
    original = d.original or (frozenset({"archived"}) if j.state in DONE_LIKE else frozenset({"set-aside"}))
    if j.original == "waiting" and j.state in DONE_LIKE and "archived" in original:
        problems += _check_waiting(svc, j, d, label, stay_in_inbox, by_id)
    elif j.original not in original:
        shown = None if j.original is None else j.original.value
        problems.append(f"{label}: original {shown!r}, expected {sorted(original)}")
    if j.original in ("archived", "set-aside"):
        where = Path(j.original_path) if j.original_path else None
        if where is None or not where.is_file():
            problems.append(f"{label}: original recorded at {where} but not there")
        elif d.sha is not None and file_sha(where) != d.sha:
            problems.append(f"{label}: original at {where} was modified")
    elif j.original in ("left", "kept"):
        stay_in_inbox.add(j.source)
        if d.sha is not None and j.source.is_file() and file_sha(j.source) != d.sha:
            problems.append(f"{label}: original left in the inbox was modified")
    if j.state in FAILED_LIKE and j.original != "replaced":
        problems += _check_error_file(svc, j, label)
    if j.state in DONE_LIKE:
        out = _result(j, by_id)
        if out is None or not out.is_file():
            problems.append(f"{label}: output {out} missing")
            return problems
        if os.path.commonpath([out, svc.outbox]) != str(svc.outbox):
            problems.append(f"{label}: output {out} is outside the outbox")
        if d.sha is not None and d.output_check is None and _is_copy_engine(svc):
            if file_sha(out) != d.sha:
                problems.append(f"{label}: output {out} is not the photo that was dropped")
        elif (why := decodes(out)) is not None:
            problems.append(f"{label}: output {out.name} {why}")
        if d.output_check is not None:
            try:
                d.output_check(out, j)
            except AssertionError as exc:
                problems.append(f"{label}: {exc}")
    return problems


def _result(j: Job, by_id: dict[int, Job]) -> Path | None:
    """A done or duplicate job's result: its own output, else (the same name dropped again) the
    output of the run it duplicates (a done one, or a copy's own copy when a copy's name was
    dropped again)."""
    if j.output is not None:
        return Path(j.output)
    first = by_id.get(j.duplicate_of) if j.duplicate_of is not None else None
    return Path(first.output) if first is not None and first.state in DONE_LIKE and first.output else None


def _check_waiting(
    svc: Service, j: Job, d: Drop, label: str, stay_in_inbox: set[Path], by_id: dict[int, Job]
) -> list[str]:
    """An original waiting for the archive: accounted for only with its result in the outbox and the
    original still in the inbox unmodified (or moved away from it)."""
    problems: list[str] = []
    out = _result(j, by_id)
    if out is None or not out.is_file() or os.path.commonpath([out, svc.outbox]) != str(svc.outbox):
        problems.append(f"{label}: original 'waiting' but its result {out} is not in the outbox")
    folder = Path(j.original_path) if j.original_path else None
    if folder is None or os.path.commonpath([folder, svc.originals]) != str(svc.originals):
        problems.append(f"{label}: original 'waiting' for {folder}, not for a folder under originals/")
    if os.path.lexists(j.source):
        stay_in_inbox.add(j.source)
        if not stat.S_ISREG(os.lstat(j.source).st_mode) or (
            d.sha is not None and file_sha(j.source) != d.sha
        ):
            problems.append(f"{label}: original waiting in the inbox was modified")
    return problems


def _check_error_file(svc: Service, j: Job, label: str) -> list[str]:
    if j.original == "set-aside" and j.original_path:
        candidates = [Path(str(j.original_path) + ".error.txt")]
    else:  # left in the inbox or vanished: the error file is named after the original
        candidates = [
            p
            for p in _walk_files(svc.failed)
            if p.name.startswith(j.source.name[:150]) and p.name.endswith(".error.txt")
        ]
    for c in candidates:
        if c.is_file():
            text = c.read_text(encoding="utf-8")
            reason = next(
                (line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Reason:")),
                "",
            )
            if not reason or reason == "unknown":
                return [f"{label}: error file {c.name} gives no reason:\n{text}"]
            if j.error and reason != j.error.splitlines()[0].strip():
                return [f"{label}: error file reason {reason!r} differs from the journal's {j.error!r}"]
            return []
    return [f"{label}: no readable error file in failed/ ({[c.name for c in candidates]})"]


def _is_copy_engine(svc: Service) -> bool:
    return svc.env.get("GPEN_WATCH_RESTORER", "").startswith("hostile.hostile_restorer:Copy")
