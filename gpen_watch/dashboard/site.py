"""The dashboard's pages and API: what each URL shows, read from the journal page by page, the
service's status, and each photo's views.

Every URL names things by journal id and by names from fixed lists (``views.Picture``,
``views.Side``); no part of a request becomes a path. Pause and resume go through the service's
control handler, the very function the CLI's control channel calls.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2
from aiohttp import web

from gpen_watch.catalog.registry import has_fidelity, model_label
from gpen_watch.config import FACE_MODEL_NAMES, Config, SettingsUsed, short_path
from gpen_watch.dashboard import activity, overview, params, views
from gpen_watch.dashboard.face_checks import FaceCheckView, face_checks_context
from gpen_watch.dashboard.remote_access import remote_access
from gpen_watch.dashboard.review import RESULTS_PAGE, Review
from gpen_watch.dashboard.review_query import View
from gpen_watch.gpu.nvml import GpuSample, NvmlMonitor, ThrottledSampler
from gpen_watch.journal.browse import InboxCounts, JournalBrowser, Keyset, next_key
from gpen_watch.journal.records import Job, describe_settings
from gpen_watch.journal.states import SUCCEEDED
from gpen_watch.platform import resources
from gpen_watch.service.status import Status

log = logging.getLogger(__name__)

Control = Callable[[dict[str, Any]], dict[str, Any]]

STATIC_TYPES = {".css": "text/css", ".js": "text/javascript", ".png": "image/png", ".svg": "image/svg+xml"}
# A status is shared by every page and stream that asks within this long.
STATUS_FRESH_S = 0.5
PAGE_SIZE = 48
# The commands whose refusal is a sentence for the user (the photo cannot be redone now...).
USER_REQUESTS = ("redo", "retry", "dismiss")


@dataclass
class Site:
    cfg: Config
    control: Control
    journal: JournalBrowser
    views_root: Path
    templates: jinja2.Environment
    gpus: ThrottledSampler = field(default_factory=lambda: ThrottledSampler(NvmlMonitor(), every_s=2.0))
    static: dict[str, tuple[bytes, str]] = field(default_factory=dict)
    _status: tuple[float, Status | None, str | None] = (0.0, None, None)
    _status_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _counts: tuple[tuple[int, str, tuple[str, ...]], list[InboxCounts]] | None = None
    # The service's settings in effect now (they change when the Settings page or `gpen-watch
    # reload` has the service read its file again); None: ``cfg``, as the dashboard started.
    current: Callable[[], Config] | None = None
    review: Review = field(init=False)

    def __post_init__(self) -> None:
        # Read once: a request names a key of this table, never a file.
        for item in resources.resource("dashboard", "static").iterdir():
            kind = STATIC_TYPES.get(Path(item.name).suffix)
            if kind is not None:
                self.static[item.name] = (item.read_bytes(), kind)
        self.static["icon.png"] = (resources.require(*resources.ICON).read_bytes(), "image/png")
        self.review = Review(self)

    def routes(self) -> list[web.AbstractRouteDef]:
        photo = r"/photo/{id:\d{1,18}}"
        return [
            web.get("/", self.overview_page),
            web.get("/activity", self.activity_page),
            web.get("/results", self.results_page),
            web.get("/failed", self.failed_page),
            web.get(photo, self.photo_page),
            web.get(photo + r"/{picture:before|after|thumb}.jpg", self.picture),
            web.get(photo + r"/faces/{index:\d{1,4}}/{side:before|after}.jpg", self.face),
            web.get("/static/{name}", self.static_file),
            web.get("/api/status", self.api_status),
            web.get("/api/results", self.api_results),
            web.get(r"/api/photo/{id:\d{1,18}}", self.api_photo),
            web.post("/api/pause", self.api_pause),
            web.post("/api/resume", self.api_resume),
            web.post(r"/api/redo/{id:\d{1,18}}", self.api_redo),
            web.post(r"/api/retry/{id:\d{1,18}}", self.api_retry),
            web.post(r"/api/dismiss/{id:\d{1,18}}", self.api_dismiss),
            *self.review.routes(),
        ]

    # --- service ------------------------------------------------------------------------------

    def settings_now(self) -> Config:
        """The service's settings in effect now (``current``), never a copy taken at start."""
        return self.current() if self.current is not None else self.cfg

    async def status(self) -> tuple[Status | None, str | None]:
        """The service's status (cached briefly), or None and why not."""
        async with self._status_lock:
            at, status, problem = self._status
            if time.monotonic() - at < STATUS_FRESH_S:
                return status, problem
            reply = await self._call({"cmd": "status"})
            if reply.get("ok"):
                status, problem = Status.from_json(reply), None
            else:
                status, problem = None, str(reply.get("error") or "the service did not answer")
            self._status = (time.monotonic(), status, problem)
            return status, problem

    async def _call(self, request: dict[str, Any]) -> dict[str, Any]:
        # The control handler waits for the service loop: keep it off the event loop.
        return await asyncio.get_running_loop().run_in_executor(None, self.control, request)

    async def local_gpus(self) -> tuple[GpuSample, ...]:
        return await asyncio.get_running_loop().run_in_executor(None, self.gpus.sample)

    # --- pages --------------------------------------------------------------------------------

    def page(self, template: str, **context: Any) -> web.Response:
        return web.Response(text=self.render(template, **context), content_type="text/html", charset="utf-8")

    def render(self, template: str, **context: Any) -> str:
        return self.templates.get_template(template).render(**context)

    async def overview_context(self) -> dict[str, Any]:
        status, problem = await self.status()
        counts = self.inbox_counts()
        batch = self.journal.current_batch() if status else None
        return {
            "status": status,
            "problem": problem,
            "inboxes": [(short_path(Path(c.inbox)), c) for c in counts],
            # A start time, not an uptime: the page changes only when something happened.
            "started": status.started_at if status else None,
            "local_gpus": await self.local_gpus(),
            # The headline, each problem once, the time left from the rate shown, the batch.
            **overview.context(status, batch),
            # Its faces that may not look like the same person (docs/identity.md).
            "batch_flagged": self.journal.flagged_in(batch.first_id) if batch else 0,
            # Where other machines reach the service, and its certificate's fingerprint.
            "remote": remote_access(status),
        }

    def inbox_counts(self) -> list[InboxCounts]:
        """Counted again only when the journal has a new event (or the day changed): an open
        overview asks every second, and most seconds nothing happened."""
        inboxes = tuple(str(i.path) for i in self.settings_now().watch.inboxes)
        key = (self.journal.last_event_id(), time.strftime("%Y%m%d"), inboxes)
        if self._counts is None or self._counts[0] != key:
            self._counts = (key, self.journal.inbox_counts(list(inboxes)))
        return self._counts[1]

    async def overview_page(self, request: web.Request) -> web.Response:
        return self.page(
            "overview.html", nav="overview", live="/live/overview", **await self.overview_context()
        )

    def activity_context(self, view: activity.ActivityView) -> dict[str, Any]:
        return activity.activity_context(self.journal, view)

    async def activity_page(self, request: web.Request) -> web.Response:
        view = activity.activity_view(request.query)
        return self.page(
            "activity.html",
            nav="activity",
            # Only the first page follows the journal live, with the page's own filter.
            live="/live/activity" + view.query if view.first_page else "",
            **self.activity_context(view),
        )

    async def results_page(self, request: web.Request) -> web.Response:
        view = await self.review.settled_view(request.query)
        return self.page(
            "results.html",
            nav="results",
            live="/live/results" + view.query(),
            live_into="#results-live",
            **self.review.results_context(view),
        )

    def failed_context(self, before: Keyset | None) -> dict[str, Any]:
        jobs = self.journal.failures(before, limit=PAGE_SIZE)
        key = next_key(jobs) if len(jobs) == PAGE_SIZE else None
        return {"jobs": jobs, "more": key.token if key else None, "first_page": before is None}

    async def failed_page(self, request: web.Request) -> web.Response:
        before = params.key_param(request)
        return self.page(
            "failed.html",
            nav="failed",
            live="/live/failed" if before is None else "",
            **self.failed_context(before),
        )

    def photo_context(self, job_id: int, view: View | None = None) -> dict[str, Any]:
        job = self.journal.get(job_id)
        if job is None:
            raise web.HTTPNotFound(text=f"No run {job_id} in the journal.\n")
        runs = self.journal.runs(job_id)
        return {
            **self.review.step_context(job, view or self.review.view({})),
            # The run a Redo form restores again: this one, or for a redo that failed, the run
            # whose result is in the outbox.
            "current": self.journal.current_run(job),
            "used": self.settings_used(job),
            "job": job,
            "name": job.rel.name,
            "views": views.photo_views(self.views_root, job_id),
            "history": self.journal.events_of(job_id),
            "inbox": short_path(job.inbox),
            "runs": runs if len(runs) > 1 else [],
            "latest": runs[-1] if runs else job,
            "describe": describe_settings,
            "models": FACE_MODEL_NAMES,
            # The models whose family takes restore.fidelity (the redo forms show it for those).
            "fidelity_models": [m for m in FACE_MODEL_NAMES if has_fidelity(m)],
            # The runs whose results are in the outbox: two while a redo beside waits to be compared.
            "results": self.journal.results_of(job),
            # Each face's identity distance, the faces left as they were, or why not checked.
            **face_checks_context(self.journal, job, self.settings_now()),
        }

    @staticmethod
    def settings_used(job: Job) -> list[tuple[str, str]]:
        """The model and settings a run was restored with, as its result recorded them (never
        the settings in effect now, which a reload changes): ("Model", "GPEN-BFR-512"), ...; none
        for a run that recorded none (a gpen-watch before it kept them, or a run that ended
        before it was restored)."""
        used = SettingsUsed.from_json(job.used)
        if used is None:
            return []
        rows = [("Model", model_label(used.model)), ("Strength", f"{used.strength:g}"), ("Faces", used.faces)]
        if used.fidelity is not None:
            rows.append(("Fidelity", f"{used.fidelity:g}"))
        if used.upscale > 1:
            rows.append(("Upscale", f"x{used.upscale}"))
        if used.format:
            rows.append(("Format", used.format))
        return rows

    async def photo_page(self, request: web.Request) -> web.Response:
        job_id = int(request.match_info["id"])
        view = await self.review.settled_view(request.query)
        context = self.photo_context(job_id, view)
        return self.page(
            "photo.html", nav="results", live=f"/live/photo/{job_id}" + view.query(page=None), **context
        )

    # --- files --------------------------------------------------------------------------------

    async def picture(self, request: web.Request) -> web.StreamResponse:
        path = views.picture_file(
            self.views_root, int(request.match_info["id"]), views.Picture(request.match_info["picture"])
        )
        return _image(path, "image/jpeg")

    async def face(self, request: web.Request) -> web.StreamResponse:
        path = views.face_file(
            self.views_root,
            int(request.match_info["id"]),
            request.match_info["index"],
            views.Side(request.match_info["side"]),
        )
        return _image(path, "image/jpeg")

    async def static_file(self, request: web.Request) -> web.Response:
        found = self.static.get(request.match_info["name"])
        if found is None:
            raise web.HTTPNotFound()
        body, kind = found
        return web.Response(body=body, content_type=kind, headers={"Cache-Control": "private, max-age=300"})

    # --- API ----------------------------------------------------------------------------------

    async def api_status(self, request: web.Request) -> web.Response:
        status, problem = await self.status()
        if status is None:
            return web.json_response({"ok": False, "error": problem}, status=503)
        return web.json_response({"ok": True, **status.to_json()})

    async def api_results(self, request: web.Request) -> web.Response:
        """The photos of a Results view (the page's query names), as JSON."""
        view = await self.review.settled_view(request.query)
        size = params.int_param(request, "limit") or RESULTS_PAGE
        page = self.journal.review_page(view.filter, view.page, size)
        return web.json_response(
            {
                "photos": [job_json(j) for j in page.jobs],
                "total": page.total,
                "page": page.page,
                "pages": page.pages,
                "ignored": view.ignored,
            }
        )

    async def api_photo(self, request: web.Request) -> web.Response:
        context = self.photo_context(int(request.match_info["id"]))
        photo_views = context["views"]
        checks = context["checks"]
        return web.json_response(
            {
                "photo": job_json(context["job"]),
                "used": dict(context["used"]),
                "faces": [
                    {
                        "index": f.index,
                        "restored": f.restored,
                        "reason": f.reason,
                        **face_check_json(checks.get(f.index)),
                    }
                    for f in (photo_views.faces if photo_views else ())
                ],
                "identity_note": context["identity_note"],
                "history": [{"time": e.time, "kind": e.kind, "detail": e.detail} for e in context["history"]],
            }
        )

    async def api_pause(self, request: web.Request) -> web.Response:
        return await self._command(request, "pause")

    async def api_resume(self, request: web.Request) -> web.Response:
        return await self._command(request, "resume")

    async def api_redo(self, request: web.Request) -> web.Response:
        """Restore this photo again: JSON ``{"settings": {...}, "face_ids": [...]}`` from the
        page's script, or the form's fields without it."""
        body = await params.redo_body(request)
        settings = body.get("settings")
        face_ids = body.get("face_ids")
        if not isinstance(settings, dict) or not (face_ids is None or isinstance(face_ids, list)):
            raise web.HTTPBadRequest(text="settings must be an object and face_ids a list.\n")
        fields = {"beside": True} if body.get("beside") is True else {}
        return await self._command(
            request,
            "redo",
            target=request.match_info["id"],
            settings=settings,
            face_ids=face_ids,
            read=False,
            **fields,
        )

    async def api_retry(self, request: web.Request) -> web.Response:
        return await self._command(request, "retry", target=request.match_info["id"])

    async def api_dismiss(self, request: web.Request) -> web.Response:
        return await self._command(request, "dismiss", id=int(request.match_info["id"]))

    async def _command(
        self, request: web.Request, cmd: str, read: bool = True, **fields: Any
    ) -> web.Response:
        if read:
            await params.small_body(request)
        reply = await self.command({"cmd": cmd, **fields})
        # A refusal is the user's to read (409: this photo cannot be retried now); 503 only when
        # the service could not answer at all.
        status = 200 if reply.get("ok") else 409 if "error" in reply and cmd in USER_REQUESTS else 503
        if reply.get("ok") and request.content_type == "application/x-www-form-urlencoded":
            # A plain form post (a browser without the page's script): back to the page it came
            # from, which shows the change.
            raise web.HTTPSeeOther(location=params.referring_page(request))
        return web.json_response(reply, status=status)

    async def command(self, request: dict[str, Any]) -> dict[str, Any]:
        """One control command, through the service's control handler (the CLI's very function)."""
        reply = await self._call(request)
        self._status = (0.0, None, None)  # the next page shows the change
        return reply


def job_json(job: Job) -> dict[str, Any]:
    return {
        "id": job.id,
        "name": job.rel.name,
        "state": str(job.state),
        "inbox": str(job.inbox),
        "output": str(job.output) if job.output and job.state in SUCCEEDED else None,
        "faces": job.faces,
        "notes": job.notes,
        "error": job.error,
        "node": job.node,
        "finished": job.finished,
        "redo_of": job.redo_of,
        "photo": job.photo_id,
        "mark": job.mark,
        "mark_note": job.mark_note,
        "reviewed": job.reviewed,
        "stars": job.stars,
        "flagged": job.flagged,
        "identity": job.identity,
    }


def face_check_json(check: FaceCheckView | None) -> dict[str, Any]:
    """A face's checks in a photo's JSON (``face_checks.FaceCheckView``; None: not checked)."""
    if check is None:
        return {"detail": None, "distance": None, "flagged": False, "person": None}
    row = check.row
    return {
        "detail": row.detail,
        "distance": row.distance,
        "flagged": row.flagged,
        "person": check.person or None,
    }


def _image(path: Path | None, kind: str) -> web.StreamResponse:
    if path is None:
        raise web.HTTPNotFound(text="No such picture (views are kept for the newest photos only).\n")
    return web.FileResponse(path, headers={"Content-Type": kind, "Cache-Control": "private, max-age=60"})
