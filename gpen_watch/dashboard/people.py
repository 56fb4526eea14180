"""Review by person (docs/dashboard.md, "People"): a batch's faces grouped into people by the
identity check's descriptors (``journal.people``), one tile a person on the People page, and the
Results filter "photos of this person" (``?person=RUN.FACE``).

A person is named by one of their faces, a run id and the face's number on its page, never by a
group number: groups are found again as a batch grows, and their numbers change. The faces
grouped are those of a batch and of every photo since (``BatchQueries.batch_start``), so the
People page of the newest batch and the Results filter its tiles link to group the same faces.
A grouping is kept until a photo of its batch ends or is redone (a mark changes nothing): an
open Results page renders every second, and grouping a wedding's 6,000 faces takes seconds on a
small machine (docs/benchmarks.md). People, when opened, waits for the grouping as the batch is
now, made off the event loop; elsewhere (Results, a photo's page, their live renders
and bulk actions by a person's view) a page is given the one before while the new one is made on
a thread of its own, so stepping through a person's photos while a batch is under way never
waits for it.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
from dataclasses import dataclass, field, replace

from aiohttp import web

from gpen_watch.catalog.registry import identity_specs
from gpen_watch.config import Config
from gpen_watch.dashboard import views
from gpen_watch.dashboard.site_parts import PageParts
from gpen_watch.journal.faces import FaceRow
from gpen_watch.journal.people import Person, people_of
from gpen_watch.modelstore.store import find_model
from gpen_watch.platform import program

# Faces grouped at most (a 2,000-photo wedding has about 6,000); a batch with more is grouped by
# its first ones, and the page says so.
MAX_FACES = 20_000
PEOPLE_PAGE = 96
# Groupings kept (each batch asked about, at each threshold).
KEPT = 4

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Grouping:
    """The faces of a batch and every photo since, grouped by person."""

    first: int  # the batch's first run
    people: list[Person]
    faces: dict[tuple[int, int], FaceRow]  # each (run, face number)'s row
    person_of: dict[tuple[int, int], int]  # each face's person, by their place in ``people``
    truncated: bool  # more than MAX_FACES: only the first were grouped

    def person(self, face: tuple[int, int]) -> Person | None:
        number = self.person_of.get(face)
        return self.people[number] if number is not None else None


@dataclass(frozen=True)
class PersonTile:
    """One person as the People page shows them: their clearest face and their counts."""

    key: str  # "RUN.FACE": how Results names them (?person=)
    clearest: tuple[int, int]
    crop: bool  # the clearest face's crop is kept (previews are kept for the newest photos)
    photos: int
    faces: int
    flagged: int  # their faces that may not look like the same person


def key_of(person: Person) -> str:
    run, face = person.clearest
    return f"{run}.{face}"


def why_not_described(cfg: Config) -> str:
    """Why the identity check cannot describe faces now, in one sentence; "" when it can (its
    setting on, dlib's two files in a model folder this machine searches)."""
    if not cfg.restore.identity_check:
        return (
            "The identity check is off (restore.identity_check = false): faces are not compared "
            "before and after restoring, nor grouped by person."
        )
    missing = [spec for spec in identity_specs() if find_model(spec, cfg.restore.model_dir) is None]
    if missing:
        names = " and ".join(spec.filename for spec in missing)
        fetch = program.command("models fetch " + " ".join(spec.name for spec in missing))
        return (
            f"The identity check does not run: dlib's {names} {'is' if len(missing) == 1 else 'are'} "
            f"in no model folder. `{fetch}` gets {'it' if len(missing) == 1 else 'them'} "
            "(31.6 MB for both); photos restored from then on are checked."
        )
    return ""


@dataclass
class People:
    site: PageParts
    # Per (first run, threshold): the grouping, and the batch's ``listed_since`` it was made at.
    _kept: dict[tuple[int, float], tuple[tuple[int, float], Grouping]] = field(default_factory=dict)
    _regrouping: set[tuple[int, float]] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _made: int = 0  # groupings made so far: a person found in an older one is looked up again
    _found: dict[tuple[int, int, float, int, int], tuple[Grouping, Person] | str] = field(
        default_factory=dict
    )

    def routes(self) -> list[web.AbstractRouteDef]:
        return [web.get("/people", self.people_page)]

    def grouping(self, first: int, fresh: bool = False) -> Grouping:
        """The faces of the batch that began at run ``first`` and of every photo since, by person.
        After a change, as it was before while it is grouped again beside the pages (a live
        page's next render shows the new one); with ``fresh``, the new one, made here."""
        key = (first, self.site.settings_now().restore.identity_threshold)
        mark = self.site.journal.listed_since(first)
        with self._lock:
            kept = self._kept.get(key)
            if kept is not None and kept[0] == mark:
                return kept[1]
            if kept is not None and not fresh and key not in self._regrouping:
                self._regrouping.add(key)
                threading.Thread(target=self._regroup, args=(key, mark), daemon=True).start()
        if kept is not None and not fresh:
            return kept[1]
        return self._store(key, mark, self._group(*key))

    def _regroup(self, key: tuple[int, float], mark: tuple[int, float]) -> None:
        try:
            self._store(key, mark, self._group(*key))
        except Exception:  # a page shows the grouping before; the next change tries again
            log.exception("grouping the faces of the batch from run %d failed", key[0])
        finally:
            with self._lock:
                self._regrouping.discard(key)

    def _store(self, key: tuple[int, float], mark: tuple[int, float], grouping: Grouping) -> Grouping:
        with self._lock:
            if key not in self._kept and len(self._kept) >= KEPT:
                self._kept.clear()
            self._kept[key] = (mark, grouping)
            self._made += 1
        return grouping

    async def ready(self, face: tuple[int, int] | None, fresh: bool = False) -> Grouping | None:
        """The grouping of the batch of ``face``'s photo (None: the newest photo's), made off the
        event loop if there is none yet (the first grouping of a large batch takes seconds, which
        no other page should wait for), or with ``fresh`` if the batch changed since."""
        first = self._first_of(face)
        if first is None:
            return None
        return await asyncio.get_running_loop().run_in_executor(None, self.grouping, first, fresh)

    def _first_of(self, face: tuple[int, int] | None) -> int | None:
        journal = self.site.journal
        if face is None:
            return journal.batch_start()
        job = journal.get(face[0])
        if job is None:
            return None
        return journal.batch_start((journal.current_run(job) or job).photo_id)

    def _group(self, first: int, threshold: float) -> Grouping:
        rows = self.site.journal.faces_since(first, MAX_FACES + 1)
        truncated = len(rows) > MAX_FACES
        rows = rows[:MAX_FACES]
        people = people_of(rows, threshold)
        person_of = {face: n for n, p in enumerate(people) for face in p.faces}
        return Grouping(first, people, {(f.job_id, f.index): f for f in rows}, person_of, truncated)

    def find(self, face: tuple[int, int]) -> tuple[Grouping, Person] | str:
        """The person whose face ``face`` (run, face number) is, with the grouping they were
        found in; or why there is none, in a sentence. A run since redone stands for its
        photo's newest: its faces have the same numbers."""
        threshold = self.site.settings_now().restore.identity_threshold
        key = (*face, threshold, self.site.journal.last_event_id(), self._made)
        found = self._found.get(key)
        if found is None:
            found = self._find(face)
            if len(self._found) >= 64:
                self._found.clear()
            self._found[key] = found
        return found

    def _find(self, face: tuple[int, int]) -> tuple[Grouping, Person] | str:
        journal = self.site.journal
        run, number = face
        job = journal.get(run)
        if job is None:
            return f"There is no run {run}: the person asked for cannot be found."
        current = journal.current_run(job) or job
        first = journal.batch_start(current.photo_id)
        if first is not None:
            grouping = self.grouping(first)
            for candidate in ((current.id, number), face):
                person = grouping.person(candidate)
                if person is not None:
                    return grouping, person
        said = (
            f"Face {number} of {job.rel.name} was not described by the identity check, so its "
            "person's photos cannot be found (it was left out, or restored without the check)."
        )
        why = why_not_described(self.site.settings_now())
        return f"{said} {why}" if why else said

    def _kept_crop(self, face: tuple[int, int]) -> bool:
        """Whether the original's crop of ``face`` (run, number) is kept with its run's views."""
        return views.face_file(self.site.views_root, face[0], str(face[1]), views.Side.BEFORE) is not None

    def tiles(self, grouping: Grouping) -> list[PersonTile]:
        """Every person's tile (``crop`` is looked up for the tiles a page shows)."""
        out = []
        for person in grouping.people:
            out.append(
                PersonTile(
                    key_of(person),
                    person.clearest,
                    False,
                    len({r for r, _ in person.faces}),
                    len(person.faces),
                    sum(grouping.faces[f].flagged for f in person.faces),
                )
            )
        return out

    async def people_page(self, request: web.Request) -> web.Response:
        """The People page: ``?run=N`` for the batch run N arrived in (default: the newest
        photo's), ``?before=N`` for the batch before the one that began at run N, ``page`` for
        more than one page of people."""
        journal = self.site.journal
        run_text, before_text = request.query.get("run", ""), request.query.get("before", "")
        page_text = request.query.get("page", "")
        for name, text in (("run", run_text), ("before", before_text)):
            if text and not (text.isdigit() and len(text) <= 18):
                raise web.HTTPBadRequest(text=f"{name} must be a run id.\n")
        if page_text and not (page_text.isdigit() and len(page_text) <= 9):
            raise web.HTTPBadRequest(text="page must be a page number.\n")
        if before_text:
            first = journal.batch_before(int(before_text))
            if first is None:
                raise web.HTTPNotFound(text=f"No batch before run {before_text} in the journal.\n")
            run_text = str(first)
        else:
            first = journal.batch_start(int(run_text) if run_text else None)
            if run_text and first is None:
                raise web.HTTPNotFound(text=f"No run {run_text} in the journal.\n")
        grouping = None
        if first is not None:
            # The page a person opens to see the batch's people shows them as they are now.
            grouping = await asyncio.get_running_loop().run_in_executor(None, self.grouping, first, True)
        tiles = self.tiles(grouping) if grouping is not None else []
        pages = max(1, math.ceil(len(tiles) / PEOPLE_PAGE))
        page = max(1, min(int(page_text or 1), pages))
        first_job = journal.get(first) if first is not None else None
        shown = [
            replace(t, crop=self._kept_crop(t.clearest))
            for t in tiles[(page - 1) * PEOPLE_PAGE : page * PEOPLE_PAGE]
        ]
        return self.site.page(
            "people.html",
            nav="people",
            live="",
            grouping=grouping,
            tiles=shown,
            people=len(tiles),
            faces=len(grouping.faces) if grouping else 0,
            photos=len({run for run, _ in grouping.faces}) if grouping else 0,
            flagged=sum(t.flagged for t in tiles),
            page=page,
            pages=pages,
            run=run_text,
            since=first_job.created if first_job else None,
            before=first if first is not None and first > 1 else None,
            why_not=why_not_described(self.site.settings_now()),
            max_faces=MAX_FACES,
        )
