"""The API's addresses under /api/v1/ and what each answers (openapi.py describes them).

A photo is sent as the body of ``POST /api/v1/photos`` with its name, inbox, batch and settings in
the query; its bytes stream into a temp file in the inbox (``upload``), and the service loop takes
it into the journal (``service.submit``), where it is a photo like any dropped one. Reads come from
the dashboard's read-only journal connection and the photos' views. A token sees the photos sent
with it; the service's own token sees every photo.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import re
import secrets
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from gpen_watch import __version__
from gpen_watch.base.errors import ConfigError
from gpen_watch.dashboard import live
from gpen_watch.dashboard.api import names, openapi, photos, upload, zipstream
from gpen_watch.dashboard.api.gate import ApiGate, Client, client_of, json_body, need
from gpen_watch.dashboard.api.limits import Limits, Meter
from gpen_watch.dashboard.api.names import Refusal
from gpen_watch.dashboard.api.tokens import READ, SCOPES, SUBMIT, TokenStore
from gpen_watch.dashboard.site import Site
from gpen_watch.journal.records import Job
from gpen_watch.journal.states import ACTIVE, JobState
from gpen_watch.journal.submissions import Submitted
from gpen_watch.outbox import sent

BASE = photos.BASE
_KEY_RE = re.compile(r"^[\x21-\x7e]{1,255}$")
QUERY = frozenset({"name", "inbox", "batch", *sent.SENT_SETTINGS})
BATCH_PAGE = 1000
MAX_ZIP = 10_000
MAX_ID = 999_999_999_999_999_999
# A list of 10,000 ids of up to 18 digits, written out.
ZIP_LIST_BYTES = 256 << 10
ID = r"{id:\d{1,18}}"
BATCH = "{batch:" + names.BATCH_PATTERN + "}"


@dataclass
class Api:
    site: Site
    gate: ApiGate
    tokens: TokenStore
    meter: Meter
    closing: asyncio.Event
    io: ThreadPoolExecutor = field(default_factory=lambda: ThreadPoolExecutor(4, thread_name_prefix="api-io"))
    # The control calls wait for the service loop: a pool of their own, so that waiting uploads
    # never hold up the pages' status calls (the loop's default executor).
    calls: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(16, thread_name_prefix="api-call")
    )

    def routes(self) -> list[web.AbstractRouteDef]:
        return [
            web.get(BASE + "/openapi.json", self.openapi),
            web.get(BASE + "/", self.index),
            web.post(BASE + "/photos", self.submit),
            web.get(BASE + f"/photos/{ID}", self.photo),
            web.get(BASE + f"/photos/{ID}/events", self.photo_events),
            web.get(BASE + f"/photos/{ID}/result", self.result),
            web.get(BASE + f"/photos/{ID}/report", self.report),
            web.post(BASE + f"/photos/{ID}/cancel", self.cancel),
            web.get(BASE + f"/batches/{BATCH}", self.batch),
            web.get(BASE + f"/batches/{BATCH}/events", self.batch_events),
            web.get(BASE + f"/batches/{BATCH}/results.zip", self.batch_zip),
            web.post(BASE + "/results.zip", self.selection_zip),
        ]

    def close(self) -> None:
        self.io.shutdown(wait=False)
        self.calls.shutdown(wait=False)

    # --- description ----------------------------------------------------------------------------

    async def openapi(self, request: web.Request) -> web.Response:
        return json_body(openapi.document(__version__))

    async def index(self, request: web.Request) -> web.Response:
        client = client_of(request)
        cfg = self.site.settings_now()
        limits = Limits.of(cfg.api, client.token)
        return json_body(
            {
                "service": "gpen-watch",
                "version": __version__,
                "api": "v1",
                "client": client.name,
                "scopes": [s for s in SCOPES if client.may(s)],
                "inboxes": [
                    {
                        "number": i,
                        "name": inbox.path.name,
                        "subfolders": inbox.recursive,
                        **({"path": str(inbox.path)} if client.owner else {}),
                    }
                    for i, inbox in enumerate(cfg.watch.inboxes)
                ],
                "settings": list(sent.SENT_SETTINGS),
                "limits": {
                    "requests_per_minute": limits.requests_per_minute,
                    "mb_per_day": limits.mb_per_day,
                    "max_file_mb": limits.max_file_mb,
                    "uploads_at_once": limits.uploads_at_once,
                },
            }
        )

    # --- sending ------------------------------------------------------------------------------

    async def submit(self, request: web.Request) -> web.Response:
        client = need(request, SUBMIT)
        cfg = self.site.settings_now()
        q = request.query
        unknown = sorted(set(q) - QUERY)
        if unknown:
            raise Refusal(400, f"{', '.join(unknown)}: not taken; the query takes {', '.join(sorted(QUERY))}")
        number = q.get("inbox", "0")
        if not number.isdigit() or int(number) >= len(cfg.watch.inboxes):
            raise Refusal(
                404,
                f"inbox: no inbox {number[:20]!r}; this service has {len(cfg.watch.inboxes)} (GET {BASE}/ lists them)",
            )
        inbox = cfg.watch.inboxes[int(number)]
        placed = names.place(cfg, inbox, q.get("name", ""))
        settings = {k: q[k] for k in sent.SENT_SETTINGS if k in q}
        try:
            sent.check(cfg, inbox, settings)
        except ConfigError as exc:
            raise Refusal(400, str(exc)) from None
        batch = q["batch"] if "batch" in q else secrets.token_hex(8)
        if not names.batch_name_ok(batch):
            raise Refusal(400, "batch: 1 to 64 letters, digits, dots, dashes or underscores")
        key = request.headers.get("Idempotency-Key")
        if key is not None and not _KEY_RE.match(key):
            raise Refusal(400, "Idempotency-Key: 1 to 255 printable ASCII characters without spaces")
        limits = Limits.of(cfg.api, client.token)
        self.meter.check_size(request.content_length, limits)
        self.meter.check_day(client.id, request.content_length or 0, limits, self.site.journal.bytes_sent)
        root = Path(os.path.abspath(inbox.path))
        pace = upload.Pace(limits.max_bytes, cfg.api.upload_idle_s, cfg.api.min_upload_kbs * 1000.0)
        with self.meter.upload(client.id, limits):
            got = await upload.receive(request, sent.upload_path(root), pace, self.io)
        try:
            if not self.gate.still_valid(client):
                raise Refusal(
                    403, f"the token {client.name!r} was revoked while the photo was sent; nothing was kept"
                )
            self.meter.check_day(client.id, got.size, limits, self.site.journal.bytes_sent)
        except Refusal:
            await asyncio.get_running_loop().run_in_executor(self.io, _remove, got.path)
            raise
        asked = {
            "name": placed.rel.as_posix(),
            "inbox": str(root),
            "settings": settings,
            "content": got.sha256,
        }
        reply = await self.call(
            {
                "cmd": "submit",
                "upload": str(got.path),
                "inbox": str(root),
                "rel": placed.rel.as_posix(),
                "size": got.size,
                "sha256": got.sha256,
                "settings": settings,
                "client": client.id,
                "batch": batch,
                "key": key,
                "request": hashlib.sha256(json.dumps(asked, sort_keys=True).encode()).hexdigest(),
            }
        )
        if not reply.get("ok"):
            await asyncio.get_running_loop().run_in_executor(self.io, _remove, got.path)
            raise Refusal(
                int(reply.get("status") or 503), str(reply.get("error") or "the service did not answer")
            )
        job_id = int(reply["id"])
        body = self._photo(job_id, client)
        notes = [n for n in (placed.note, str(reply.get("note") or "")) if n]
        if notes:
            body["note"] = "; ".join(notes)
        location = f"{BASE}/photos/{job_id}"
        return json_body(body, 200 if reply.get("again") else 201, {"Location": location})

    async def cancel(self, request: web.Request) -> web.Response:
        client = need(request, SUBMIT)
        job_id = int(request.match_info["id"])
        self._visible(job_id, client)
        reply = await self.call({"cmd": "cancel", "id": job_id, "client": client.id})
        if not reply.get("ok"):
            raise Refusal(
                int(reply.get("status") or 503), str(reply.get("error") or "the service did not answer")
            )
        return json_body(self._photo(job_id, client))

    async def call(self, request: dict[str, Any]) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        reply: dict[str, Any] = await loop.run_in_executor(self.calls, self.site.control, request)
        return reply

    # --- reading ------------------------------------------------------------------------------

    def _visible(self, job_id: int, client: Client) -> tuple[Job, Submitted | None]:
        """The photo with this id if the client may see it: 404 otherwise (never "not yours")."""
        journal = self.site.journal
        sub = journal.submission_of(job_id)
        job = sub.job if sub is not None else journal.get(job_id)
        if job is None or (not client.owner and (sub is None or sub.client != client.id)):
            raise Refusal(404, f"no photo {job_id}" + ("" if client.owner else " was sent with this token"))
        return job, sub

    def _photo(self, job_id: int, client: Client) -> dict[str, Any]:
        job, sub = self._visible(job_id, client)
        return photos.photo_json(self.site.settings_now(), self.site.journal, job, sub)

    async def photo(self, request: web.Request) -> web.Response:
        client = need(request, READ)
        return json_body(self._photo(int(request.match_info["id"]), client))

    async def photo_events(self, request: web.Request) -> web.StreamResponse:
        """Server-Sent Events: the photo as JSON (event ``photo``) each time it changes, ending
        once it has ended."""
        client = need(request, READ)
        job_id = int(request.match_info["id"])
        self._visible(job_id, client)

        async def render() -> str:
            return json.dumps(self._photo(job_id, client))

        return await live.stream_changes(request, render, self.closing, event="photo", until=_final)

    async def result(self, request: web.Request) -> web.StreamResponse:
        client = need(request, READ)
        job, _ = self._visible(int(request.match_info["id"]), client)
        run = photos.result_run(self.site.journal, job)
        if run is None or run.output is None:
            if job.state in ACTIVE:
                raise Refusal(409, f"photo {job.id} ({job.rel.name}) has no result yet: it is {job.state}")
            raise Refusal(404, f"photo {job.id} ({job.rel.name}) has no result: {job.error or job.state}")
        if not run.output.is_file():
            raise Refusal(410, f"the result of photo {job.id} is no longer in the outbox (moved or deleted)")
        return web.FileResponse(
            run.output,
            headers={
                "Content-Type": _image_type(run.output),
                "Content-Disposition": f'attachment; filename="{_ascii_name(run.output.name)}"',
                "Cache-Control": "no-store",
            },
        )

    async def report(self, request: web.Request) -> web.Response:
        client = need(request, READ)
        job, _ = self._visible(int(request.match_info["id"]), client)
        return json_body(photos.report_json(self.site.journal, self.site.views_root, job))

    def _batch(self, client: Client, batch: str, after: int = 0, limit: int = BATCH_PAGE) -> dict[str, Any]:
        journal, cfg = self.site.journal, self.site.settings_now()
        counts = journal.batch_counts(client.id, batch)
        if not counts:
            raise Refusal(404, f"no batch {batch!r} was sent with this token")
        page = journal.batch_photos(client.id, batch, after, limit)
        waiting = sum(n for state, n in counts.items() if JobState(state) in ACTIVE)
        return {
            "batch": batch,
            "total": sum(counts.values()),
            "waiting": waiting,
            "counts": counts,
            "final": waiting == 0,
            "photos": [photos.photo_json(cfg, journal, s.job, s) for s in page],
            "next": page[-1].id if len(page) == limit else None,
        }

    async def batch(self, request: web.Request) -> web.Response:
        client = need(request, READ)
        after = _int_param(request, "after", 0)
        limit = _int_param(request, "limit", BATCH_PAGE)
        if not 1 <= limit <= BATCH_PAGE:
            raise Refusal(400, f"limit must be 1 to {BATCH_PAGE}")
        return json_body(self._batch(client, request.match_info["batch"], after, limit))

    async def batch_events(self, request: web.Request) -> web.StreamResponse:
        """Server-Sent Events: the batch's counts (event ``batch``) as they change, ending once
        none of its photos waits."""
        client = need(request, READ)
        name = request.match_info["batch"]
        self._batch(client, name, limit=1)

        async def render() -> str:
            summary = self._batch(client, name, limit=1)
            summary.pop("photos")
            summary.pop("next")
            return json.dumps(summary)

        return await live.stream_changes(request, render, self.closing, event="batch", until=_final)

    async def batch_zip(self, request: web.Request) -> web.StreamResponse:
        client = need(request, READ)
        name = request.match_info["batch"]
        self._batch(client, name, limit=1)
        jobs = [s.job for s in self.site.journal.batch_photos(client.id, name, 0, MAX_ZIP)]
        return await zipstream.send_zip(request, self._results(jobs), f"{name}.zip", self.io)

    async def selection_zip(self, request: web.Request) -> web.StreamResponse:
        """The results of the photos ``{"ids": [...]}`` names (at most 10,000), as one zip."""
        client = need(request, READ)
        body = await _read_at_most(request, ZIP_LIST_BYTES)
        try:
            data = json.loads(body or b"null")
        except ValueError:
            raise Refusal(400, 'the body must be JSON: {"ids": [1, 2, 3]}') from None
        ids = data.get("ids") if isinstance(data, dict) else None
        if not isinstance(ids, list) or not ids or not all(_photo_id(i) for i in ids):
            raise Refusal(400, 'the body must be JSON: {"ids": [1, 2, 3]}, photo ids')
        ids = [int(i) for i in ids]
        if len(ids) > MAX_ZIP:
            raise Refusal(400, f"{len(ids)} photos; at most {MAX_ZIP} in one zip")
        jobs = [self._visible(i, client)[0] for i in dict.fromkeys(ids)]
        return await zipstream.send_zip(request, self._results(jobs), "results.zip", self.io)

    def _results(self, jobs: list[Job]) -> list[tuple[str, Path]]:
        out = []
        for job in jobs:
            run = photos.result_run(self.site.journal, job)
            if run is not None and run.output is not None:
                out.append((run.output.name, run.output))
        return out


async def _read_at_most(request: web.Request, limit: int) -> bytes:
    """The whole body, refused (400) past ``limit`` bytes; the app's own bound is for its forms."""
    if request.content_length is not None and request.content_length > limit:
        raise Refusal(400, f"the body is larger than {limit // 1024} KB; at most {MAX_ZIP} ids")
    data = bytearray()
    while chunk := await request.content.readany():
        data += chunk
        if len(data) > limit:
            raise Refusal(400, f"the body is larger than {limit // 1024} KB; at most {MAX_ZIP} ids")
    return bytes(data)


def _photo_id(value: object) -> bool:
    """A JSON number that is a photo id (JSON's 3.0 is the integer 3)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return float(value).is_integer() and 1 <= value <= MAX_ID


def _final(text: str) -> bool:
    return bool(json.loads(text).get("final"))


def _int_param(request: web.Request, name: str, default: int) -> int:
    text = request.query.get(name)
    if text is None:
        return default
    if not text.isdigit() or len(text) > 18:
        raise Refusal(400, f"{name} must be a whole number")
    return int(text)


def _remove(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


_TYPES = {
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".png": "image/png",
    ".webp": "image/webp",
    ".tif": "image/tiff",
    ".tiff": "image/tiff",
    ".avif": "image/avif",
    ".heic": "image/heic",
    ".bmp": "image/bmp",
}


def _image_type(path: Path) -> str:
    return _TYPES.get(path.suffix.lower(), "application/octet-stream")


def _ascii_name(name: str) -> str:
    return "".join(ch if 32 <= ord(ch) < 127 and ch not in '"\\' else "_" for ch in name)
