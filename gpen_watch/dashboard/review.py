"""Reviewing a batch on the dashboard: Results as a queue (search, filters, order, numbered pages,
tiles of each photo's faces), a photo's place in it (the photos either side), marks, bulk actions,
downloads of a result and its original, and two runs of a photo side by side.

Every action goes through the service's control handler (``mark``, ``bulk``), the very function
the CLI's control channel calls; this module only reads the journal. A download is found by run id
and a name from a fixed list; the file is opened without following a link and must be a plain file.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote

from aiohttp import web
from multidict import MultiDict

from gpen_watch.base.fsutil import READ_NOFOLLOW_FLAGS
from gpen_watch.config import short_path
from gpen_watch.dashboard import params, review_query, views
from gpen_watch.dashboard.compare import Compare
from gpen_watch.dashboard.crops import Halves, RealPixels
from gpen_watch.dashboard.people import People, why_not_described
from gpen_watch.dashboard.review_query import View
from gpen_watch.dashboard.site_parts import SiteParts
from gpen_watch.journal.records import Job
from gpen_watch.journal.review import BULK_MAX, Neighbours, Sort
from gpen_watch.journal.states import FAILURES, MAX_STARS, SUCCEEDED, JobState, Original

RESULTS_PAGE = 48
# Faces a tile shows at most (the largest first would need the boxes; the worker's order is the
# detector's, by score).
TILE_FACES = 4
BULK_ACTIONS = ("redo", "accept", "reject", "look", "unmark", "retry", "dismiss")
MARKS = ("accepted", "rejected", "look", "none", "reviewed")
MAX_NOTE = 200
# Photo pages whose place in their view is kept between renders.
STEP_CACHE = 64
# Photos shown either side of one in its page's filmstrip.
FILMSTRIP = 8
MAX_BODY = 128 * 1024  # a bulk body: ids of up to BULK_MAX runs
CHUNK = 1 << 20


class Download:
    RESULT = "result"
    ORIGINAL = "original"


@dataclass(frozen=True)
class Tile:
    job: Job
    faces: tuple[int, ...]  # the face crops it shows (restored ones, by index)
    found: int | None  # faces found, when the views say
    result: bool = False  # it has a result of its own in the outbox (done, or a copy)
    copy_of: Job | None = None  # the photo whose result it copied (the same photo dropped again)
    # Of ``faces``, those shown as they were (a person's face left as it was has no restored crop).
    before: frozenset[int] = frozenset()


@dataclass(frozen=True)
class PersonShown:
    """A person's view of Results: their clearest face, and their faces in each of their photos
    (run: face numbers)."""

    clearest: tuple[int, int]
    photos: dict[int, tuple[int, ...]]


@dataclass(frozen=True)
class Step:
    """A photo's page's place in its view, and the copies it belongs with."""

    around: Neighbours
    copy_of: Job | None
    copies: list[Job]


@dataclass
class Review:
    site: SiteParts
    _steps: dict[tuple[int, str, int], Step] = field(default_factory=dict)
    pixels: RealPixels = field(init=False)
    people: People = field(init=False)

    def __post_init__(self) -> None:
        self.pixels = RealPixels(self.download_file)
        self.compare = Compare(self.site, self.pixels)
        self.people = People(self.site)

    def routes(self) -> list[web.AbstractRouteDef]:
        photo = r"/photo/{id:\d{1,18}}"
        return [
            web.get(photo + r"/download/{what:result|original}", self.download),
            web.get(photo + r"/real.json", self.real_sizes),
            web.get(photo + r"/crop/{side:before|after}.jpg", self.crop),
            web.post(r"/api/mark/{id:\d{1,18}}", self.api_mark),
            web.post("/api/bulk", self.api_bulk),
            web.get("/api/progress", self.api_progress),
            *self.compare.routes(),
            *self.people.routes(),
        ]

    # --- views --------------------------------------------------------------------------------

    def view(self, query: Any) -> View:
        """The view ``query`` names, a person's photos found (``people``)."""
        view = review_query.parse(query, [str(i.path) for i in self.site.settings_now().watch.inboxes])
        if view.person is None:
            return view
        found = self.people.find(view.person)
        if isinstance(found, str):
            return replace(view, filter=replace(view.filter, runs=frozenset()), person_problem=found)
        _grouping, person = found
        return replace(view, filter=replace(view.filter, runs=frozenset(run for run, _ in person.faces)))

    def view_query(self, query: Any) -> str:
        """The query string of the view ``query`` names, page left out (a photo page's own)."""
        inboxes = [str(i.path) for i in self.site.settings_now().watch.inboxes]
        return review_query.parse(query, inboxes).query(page=None)

    async def settled_view(self, query: Any) -> View:
        """``view``, after grouping the batch of the person it names off the event loop (the first
        grouping of a large batch takes seconds; pages after it find it made)."""
        face = review_query.parse(query, []).person
        if face is not None:
            await self.people.ready(face)
        return self.view(query)

    def inbox_choices(self) -> list[tuple[str, str]]:
        inboxes = self.site.settings_now().watch.inboxes
        return [(str(n), short_path(Path(i.path))) for n, i in enumerate(inboxes, start=1)]

    def results_context(self, view: View) -> dict[str, Any]:
        page = self.site.journal.review_page(view.filter, view.page, RESULTS_PAGE)
        shown = replace(view, page=page.page)
        copies = self.site.journal.copy_sources(page.jobs)
        person = self.person(view)
        theirs = person.photos if person is not None else {}
        return {
            "page": page,
            "tiles": [self.tile(j, copies.get(j.id), theirs.get(j.id)) for j in page.jobs],
            "person": person,
            "view": shown,
            "inbox_choices": self.inbox_choices(),
            "numbers": page_numbers(page.page, page.pages),
            # Why a view by the identity check can find nothing now, when it cannot.
            "identity_off": why_not_described(self.site.settings_now())
            if view.filter.flagged or view.filter.sort == Sort.IDENTITY or view.person
            else "",
        }

    def person(self, view: View) -> PersonShown | None:
        """The person a view shows the photos of (``?person=``), if found."""
        found = self.people.find(view.person) if view.person is not None else None
        if found is None or isinstance(found, str):
            return None
        person = found[1]
        faces: dict[int, list[int]] = {}
        for run, face in sorted(person.faces):
            faces.setdefault(run, []).append(face)
        return PersonShown(person.clearest, {run: tuple(numbers) for run, numbers in faces.items()})

    def tile(self, job: Job, copy_of: Job | None = None, person: tuple[int, ...] | None = None) -> Tile:
        """A photo's tile: its restored faces, or in a person's view that person's faces."""
        result = job.state in SUCCEEDED and job.output is not None
        v = views.photo_views(self.site.views_root, job.id) if result else None
        if v is None:
            return Tile(job, (), None, result, copy_of)
        if person is not None:
            theirs = [f for f in v.faces if f.index in person][:TILE_FACES]
            before = frozenset(f.index for f in theirs if not f.has_after)
            return Tile(job, tuple(f.index for f in theirs), len(v.faces), result, copy_of, before)
        restored = tuple(f.index for f in v.faces if f.restored and f.has_after)
        return Tile(job, restored[:TILE_FACES], len(v.faces), result, copy_of)

    def step_context(self, job: Job, view: View) -> dict[str, Any]:
        """The photo's place in the view it was opened from (the runs either side, its filmstrip,
        and where), and the photo it is a copy of or its copies. Read again only when the journal
        has a new event: an open photo page renders every second."""
        query = view.query(page=None)
        key = (job.id, query, self.site.journal.last_event_id())
        found = self._steps.get(key)
        if found is None:
            journal = self.site.journal
            copy_of = journal.copy_sources([job]).get(job.id)
            copies = [r for r in journal.copy_group(job) if r.photo_id != job.photo_id]
            found = Step(journal.neighbours(view.filter, job, around=FILMSTRIP), copy_of, copies)
            if len(self._steps) >= STEP_CACHE:
                self._steps.clear()
            self._steps[key] = found
        return {
            "view": view,
            "step": found.around,
            "query": query,
            "copy_of": found.copy_of,
            "copies": found.copies,
        }

    # --- pages --------------------------------------------------------------------------------

    async def download(self, request: web.Request) -> web.StreamResponse:
        job = self.site.journal.get(int(request.match_info["id"]))
        if job is None:
            raise web.HTTPNotFound(text="No such run.\n")
        found = self.download_file(job, request.match_info["what"])
        if found is None:
            raise web.HTTPNotFound(text="That file is not where gpen-watch left it (moved or deleted).\n")
        return await _send_file(request, *found)

    async def real_sizes(self, request: web.Request) -> web.Response:
        """The pixel sizes of a run's result and original, for the loupe's 1:1."""
        return await self.pixels.sizes_reply(Halves.of_run(self._run(request)))

    async def crop(self, request: web.Request) -> web.Response:
        """A region of real pixels of a run's result or original (``crops``)."""
        return await self.pixels.crop_reply(Halves.of_run(self._run(request)), request)

    def _run(self, request: web.Request) -> Job:
        job = self.site.journal.get(int(request.match_info["id"]))
        if job is None:
            raise web.HTTPNotFound(text="No such run.\n")
        return job

    def download_file(self, job: Job, what: str) -> tuple[Path, str] | None:
        """The file a download of ``job`` means, and the name to save it as."""
        if what == Download.RESULT:
            # An older run's result was replaced in place by a redo; one a redo went beside is
            # there until one of the two is kept (outbox.keep).
            if job.output is None or job.id not in {r.id for r in self.site.journal.results_of(job)}:
                return None
            return job.output, job.output.name
        if job.original in (Original.ARCHIVED, Original.SET_ASIDE):
            path = job.original_path
        elif job.original in (Original.KEPT, Original.LEFT):
            path = job.original_path or job.source
        elif job.original is None:
            path = job.source  # not moved yet: still in its inbox
        else:
            path = None  # deleted, missing, replaced, or on its way somewhere
        return (path, job.rel.name) if path is not None else None

    # --- API ----------------------------------------------------------------------------------

    async def api_mark(self, request: web.Request) -> web.Response:
        """A run's flag (``mark``) and rating (``stars``, 0 clearing it), either or both: what a
        key press on its page sends, and what an undo sends back; or the page's mark form posted
        without its script, answered with the photo's page (303) in the view it was opened from."""
        form = request.content_type == "application/x-www-form-urlencoded"
        body = await params.mark_form(request) if form else await _json_body(request, 4096)
        mark, note, stars = body.get("mark"), body.get("note"), body.get("stars")
        if (
            (mark is None and stars is None)
            or (mark is not None and mark not in MARKS)
            or not (note is None or (isinstance(note, str) and len(note) <= MAX_NOTE))
            or not (stars is None or (type(stars) is int and 0 <= stars <= MAX_STARS))
        ):
            raise web.HTTPBadRequest(
                text=f"mark must be one of {', '.join(MARKS)}, stars 0 to {MAX_STARS}; "
                f"a note at most {MAX_NOTE} characters.\n"
            )
        run = int(request.match_info["id"])
        reply = await self.site.command(
            {"cmd": "mark", "ids": [run], "mark": mark, "note": note, "stars": stars}
        )
        if form and reply.get("ok"):
            # The view is read again from the form's address and written anew: only names this
            # dashboard writes, never a URL from the request.
            raise web.HTTPSeeOther(location=f"/photo/{run}" + self.view_query(request.query))
        return web.json_response(reply, status=200 if reply.get("ok") else 409 if "error" in reply else 503)

    async def api_bulk(self, request: web.Request) -> web.Response:
        """One action on many runs: ``{"action", "ids": [...]}`` or ``{"action", "view": "?q=..."}``
        (every run the view matches, at most ``BULK_MAX``), with a redo's ``settings`` or a
        mark's ``note``."""
        form = request.content_type == "application/x-www-form-urlencoded"
        body = dict(await request.post()) if form else await _json_body(request, MAX_BODY)
        action, ids, view_text = body.get("action"), body.get("ids"), body.get("view")
        if action not in BULK_ACTIONS:
            raise web.HTTPBadRequest(text=f"action must be one of {', '.join(BULK_ACTIONS)}.\n")
        if isinstance(view_text, str) and ids is None:
            query = MultiDict((k, v[0]) for k, v in parse_qs(view_text.lstrip("?")).items())
            ids = self.site.journal.review_ids((await self.settled_view(query)).filter, BULK_MAX)
        if (
            not isinstance(ids, list)
            or not all(isinstance(i, int) and i >= 0 for i in ids)
            or len(ids) > BULK_MAX
        ):
            raise web.HTTPBadRequest(
                text=f"ids must be a list of at most {BULK_MAX} run ids, or view a Results query.\n"
            )
        settings = body.get("settings") or {}
        if not isinstance(settings, dict):
            raise web.HTTPBadRequest(text="settings must be an object.\n")
        note = body.get("note")
        reply = await self.site.command(
            {
                "cmd": "bulk",
                "action": action,
                "ids": ids,
                "settings": settings,
                "note": note if isinstance(note, str) else None,
            }
        )
        if form and reply.get("ok"):
            # A plain form (Failed's Retry all without the page's script): back to that page.
            raise web.HTTPSeeOther(location=params.referring_page(request))
        return web.json_response(reply, status=200 if reply.get("ok") else 409 if "error" in reply else 503)

    async def api_progress(self, request: web.Request) -> web.Response:
        first, last = request.query.get("first", ""), request.query.get("last", "")
        if not (first.isdigit() and last.isdigit() and len(first) < 19 and len(last) < 19):
            raise web.HTTPBadRequest(text="first and last must be run ids.\n")
        counts = self.site.journal.progress(int(first), int(last))
        ended = sum(counts[str(s)] for s in (JobState.DONE, *FAILURES, JobState.GONE, JobState.DUPLICATE))
        return web.json_response(
            {
                "total": sum(counts.values()),
                "ended": ended,
                "done": counts[JobState.DONE],
                "failed": sum(counts[str(s)] for s in FAILURES),
            }
        )


def page_numbers(page: int, pages: int) -> list[int | None]:
    """The page links to show: the first, the last, and two either side of ``page`` (None: a gap)."""
    wanted = sorted({1, pages, *range(max(1, page - 2), min(pages, page + 2) + 1)})
    out: list[int | None] = []
    for n in wanted:
        last = out[-1] if out else None
        if last is not None and n - last > 1:
            out.append(None)
        out.append(n)
    return out


async def _json_body(request: web.Request, limit: int) -> dict[str, Any]:
    if request.content_length is not None and request.content_length > limit:
        raise web.HTTPRequestEntityTooLarge(max_size=limit, actual_size=request.content_length)
    if request.content_type != "application/json":
        raise web.HTTPUnsupportedMediaType(text="Send JSON (Content-Type: application/json).\n")
    raw = await request.read()
    if len(raw) > limit:
        raise web.HTTPRequestEntityTooLarge(max_size=limit, actual_size=len(raw))
    try:
        data = json.loads(raw or b"{}")
    except ValueError:
        raise web.HTTPBadRequest(text="The body is not JSON.\n") from None
    if not isinstance(data, dict):
        raise web.HTTPBadRequest(text="The body must be a JSON object.\n")
    return data


async def _send_file(request: web.Request, path: Path, name: str) -> web.StreamResponse:
    try:
        fd = os.open(path, READ_NOFOLLOW_FLAGS)
    except OSError:
        raise web.HTTPNotFound(
            text="That file is not where gpen-watch left it (moved or deleted).\n"
        ) from None
    with open(fd, "rb", buffering=0) as f:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise web.HTTPNotFound(text="That is not a plain file any more.\n")
        response = web.StreamResponse(
            headers={
                "Content-Type": "application/octet-stream",
                "Content-Disposition": f"attachment; filename*=UTF-8''{quote(name, safe='')}",
                "Content-Length": str(info.st_size),
                "Cache-Control": "private, no-store",
            }
        )
        await response.prepare(request)
        read: Callable[[int], bytes] = f.read
        while chunk := read(CHUNK):
            await response.write(chunk)
        await response.write_eof()
    return response
