"""Two runs of a photo side by side: both results in one frame with a slider, and each face of
each in a row (the same face of the same original, cut from the same box), with what each was
restored with; where both results are in the outbox (a redo beside the other, ``outbox.keep``),
real pixels of both at the same spot (the loupe's 1:1, ``crops``) and a button under each that
keeps it. Keeping goes through the service's control handler (``keep``)."""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from gpen_watch.config import SettingsUsed, inbox_config
from gpen_watch.dashboard import params, views
from gpen_watch.dashboard.crops import Halves, RealPixels
from gpen_watch.dashboard.site_parts import SiteParts
from gpen_watch.dashboard.views import FaceView, PhotoViews
from gpen_watch.journal.records import Job, describe_settings
from gpen_watch.outbox.naming import find_inbox


@dataclass(frozen=True)
class Side:
    """One run of the two: its views, what it was restored with, and whether its result is there."""

    job: Job
    views: PhotoViews | None
    label: str
    live: bool


@dataclass(frozen=True)
class FaceRow:
    index: int
    left: FaceView | None
    right: FaceView | None


@dataclass
class Compare:
    site: SiteParts
    pixels: RealPixels

    def routes(self) -> list[web.AbstractRouteDef]:
        pair = r"/photo/{id:\d{1,18}}/compare/{other:\d{1,18}}"
        return [
            web.get(pair, self.page),
            web.get(pair + "/real.json", self.real_sizes),
            web.get(pair + "/crop/{side:before|after}.jpg", self.crop),
            web.post(r"/api/keep/{id:\d{1,18}}", self.api_keep),
        ]

    def pair(self, request: web.Request) -> tuple[Job, Job]:
        """The two runs an address names (left, right): two runs of one photo, else 404."""
        journal = self.site.journal
        job = journal.get(int(request.match_info["id"]))
        other = journal.get(int(request.match_info["other"]))
        if (
            job is None
            or other is None
            or job.id == other.id
            or other.id not in {r.id for r in journal.runs(job.id)}
        ):
            raise web.HTTPNotFound(text="These are not two runs of one photo.\n")
        return job, other

    async def real_sizes(self, request: web.Request) -> web.Response:
        """The pixel sizes of both results, for the loupe's 1:1 (the right one's as "after")."""
        return await self.pixels.sizes_reply(Halves.of_two(*self.pair(request)))

    async def crop(self, request: web.Request) -> web.Response:
        """A region of the right run's result, or the same part of the left run's at that size; a
        run whose result is no longer in the outbox has none (404)."""
        return await self.pixels.crop_reply(Halves.of_two(*self.pair(request)), request)

    async def page(self, request: web.Request) -> web.Response:
        journal = self.site.journal
        job, other = self.pair(request)
        live = {r.id for r in journal.results_of(job)}
        left, right = (self.side(r, r.id in live) for r in (job, other))
        unkept = inbox_config(
            self.site.settings_now(), find_inbox(self.site.settings_now(), job.inbox)
        ).output
        return self.site.page(
            "compare.html",
            nav="results",
            live="",
            name=job.rel.name,
            left=left,
            right=right,
            faces=face_rows(left.views, right.views),
            can_keep=left.live and right.live,
            unkept=unkept.unkept_result,
            runs=journal.runs(job.id),
            describe=run_settings,
        )

    def side(self, job: Job, live: bool) -> Side:
        used = SettingsUsed.from_json(job.used)
        label = used.label if used is not None else run_settings(job)
        return Side(job, views.photo_views(self.site.views_root, job.id), label, live)

    async def api_keep(self, request: web.Request) -> web.Response:
        """Keep this run's result over ``other``'s: a form's field or the script's JSON."""
        form = request.content_type == "application/x-www-form-urlencoded"
        body = await params.keep_body(request)
        kept = int(request.match_info["id"])
        reply = await self.site.command({"cmd": "keep", "kept": kept, "other": body})
        if form and reply.get("ok"):
            raise web.HTTPSeeOther(location=f"/photo/{kept}")  # the photo, its result now this one
        return web.json_response(reply, status=200 if reply.get("ok") else 409 if "error" in reply else 503)


def face_rows(left: PhotoViews | None, right: PhotoViews | None) -> list[FaceRow]:
    """Each face found in either run, by its number, with each run's view of it."""
    a = {f.index: f for f in (left.faces if left else ())}
    b = {f.index: f for f in (right.faces if right else ())}
    return [FaceRow(i, a.get(i), b.get(i)) for i in sorted({*a, *b})]


def run_settings(job: Job) -> str:
    """What a run changed, in words: a redo's own settings, or the inbox's for a first run."""
    return describe_settings(job.settings) if job.is_redo else "first run, the inbox's settings"
