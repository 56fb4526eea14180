"""What the Overview says in words: its headline, each problem once, the time left, the batch.

The status joins its problems into one sentence for `gpen-watch status`; the page shows some of
their subjects in a form of their own (the model files as a list, a worker's error under that
worker, the engines' notes as warnings), so it takes the problems one by one (``Status.problems``) and
says each thing once. The time left is computed from the very rate the page shows, and there is
none while that rate is 0: a time left for a queue nobody is working on would be made up.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpen_watch.catalog import registry
from gpen_watch.dashboard import model_terms
from gpen_watch.journal.batch import Batch
from gpen_watch.modelstore import terms
from gpen_watch.platform import program
from gpen_watch.service.status import ModelFileStatus, ModelsStatus, Status


@dataclass(frozen=True)
class ModelsWait:
    """The model files the workers wait for, said once."""

    files: list[ModelFileStatus]  # those not there (missing or damaged)
    folders: tuple[str, ...]
    fetch: str  # "gpen-watch models fetch A B" for those a name can fetch; "" if none
    sentence: str  # the gate's own problem when there is no file to list (a worker could not load them)
    download: Any  # service.status.DownloadStatus | None
    # The terms whose yes the downloads of ``asking`` wait for (catalog.licences.Terms), and what
    # the settings for paid work would use instead, in words.
    terms: list[Any] = field(default_factory=list)
    asking: list[ModelFileStatus] = field(default_factory=list)
    paid_work: str = ""


@dataclass(frozen=True)
class OverviewFacts:
    headline: str
    problems: list[str] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    models: ModelsWait | None = None
    # Worker errors the problems above already say (the page does not repeat them per worker).
    said: list[str] = field(default_factory=list)
    rate: float = 0.0  # photos a minute now, as the page shows it
    eta_s: float | None = None
    eta_note: str = ""  # why there is no time left to give
    # Why no new photo is taken though nobody paused (outside workers.schedule, on battery), in
    # words; "" when none.
    standby: str = ""
    # Inboxes away, as (path, "away: why; photos there wait until it is back"): warning banners.
    inboxes_away: list[tuple[str, str]] = field(default_factory=list)
    # Worth knowing about the others, as (path, note): polled and why, photos waiting for download.
    inbox_notes: list[tuple[str, str]] = field(default_factory=list)
    # What the workers' engines say is not what the settings ask for (a provider not installed):
    # warning banners, each sentence once; the workers' lines do not repeat them.
    engine_notes: list[str] = field(default_factory=list)


def facts(status: Status) -> OverviewFacts:
    models = _models_wait(status.models)
    problems: list[str] = []
    engine: list[str] = []
    said: list[str] = []
    for p in status.problems:
        if p.about == "models" and models is not None:
            continue  # the list of files says it
        if p.about == "engine":
            # Not a fault (the photos are restored, on another provider): a warning of its own.
            engine.append(p.text)
            said.append(p.text)
            continue
        if p.about == "workers":
            said.append(p.text)
        problems.append(f"Cluster: {p.text}" if p.about == "cluster" else p.text)
    if not status.problems and status.problem:  # a service from before problems came one by one
        problems.append(status.problem)
    notices = [n.text for n in status.notices if not (n.about == "models" and models is not None)]
    if not status.notices and status.notice:
        notices.append(status.notice)
    rate = status.throughput.images_per_min
    eta, note = time_left(status, rate)
    standby = status.standby_text[:1].upper() + status.standby_text[1:]
    away = [(i.path, i.away_text) for i in status.inbox_states if i.away_text]
    inbox_notes = [(i.path, n) for i in status.inbox_states for n in (i.polling_text, i.download_text) if n]
    return OverviewFacts(
        headline(status), problems, notices, models, said, rate, eta, note, standby, away, inbox_notes, engine
    )


def headline(status: Status) -> str:
    q = status.queue
    if status.stopping:
        return "Stopping"
    if status.paused:
        return "Paused"
    if status.standby == "schedule":
        return "Waiting for the schedule"
    if status.standby == "battery":
        return "Paused on battery"
    if status.models is not None and status.models.held:
        return "Waiting for model files"
    if q.restoring:
        return "Restoring"
    if q.depth:
        return "Working"
    return "Idle"


def time_left(status: Status, rate: float) -> tuple[float | None, str]:
    """Seconds until the queue is through at ``rate`` photos a minute, or None and why not."""
    depth = status.queue.depth
    if not depth:
        return None, "nothing waiting"
    if rate > 0:
        return depth * 60.0 / rate, ""
    if status.paused:
        return None, "paused"
    if status.standby_text:
        return None, status.standby_text
    if status.models is not None and status.models.held:
        return None, "not known: waiting for model files"
    if status.queue.in_flight:
        return None, "not known until a photo finishes"
    return None, "not known: nothing is being restored"


def _models_wait(models: ModelsStatus | None) -> ModelsWait | None:
    if models is None or not models.held:
        return None
    files = [f for f in models.files if f.state != "present"]
    asking = [f for f in files if f.terms]
    names = [f.name for f in files if f.name and f.url and not f.terms]
    sentence = ""
    if not files:
        sentence = "A worker could not load the model files; it tries again as soon as a model file changes."
    fetch = program.command(f"models fetch {' '.join(names)}") if names else ""
    specs = [registry.get_spec(f.name) for f in asking if f.name]
    return ModelsWait(
        [f for f in files if not f.terms],
        models.folders,
        fetch,
        sentence,
        models.download,
        model_terms.asked([f.terms for f in asking if f.terms]),
        asking,
        terms.paid_work_words(specs),
    )


def size_text(size: int | None) -> str:
    return "" if not size else f"{size / 1e6:.1f} MB"


@dataclass(frozen=True)
class BatchBar:
    """The batch as the page shows it: "k of n" through, and what became of them."""

    ended: int
    total: int
    done: int
    failed: int
    other: int
    since: float
    redos: int


def batch_bar(batch: Batch | None) -> BatchBar | None:
    """The progress bar for a batch of two photos or more (one photo is its own progress)."""
    if batch is None or batch.total < 2:
        return None
    return BatchBar(batch.ended, batch.total, batch.done, batch.failed, batch.other, batch.since, batch.redos)


def context(status: Status | None, batch: Batch | None) -> dict[str, Any]:
    """The Overview's words, for the template beside the status itself."""
    return {
        "facts": facts(status) if status is not None else None,
        "batch": batch_bar(batch) if status is not None else None,
        "size_text": size_text,
    }
