"""Results as one zip: the photos of a view (``/results.zip?q=wedding``, the view's own query, an
upload's batch too) or those ticked on its page (``/results.zip?ids=3,7,9``). Each photo's result
now in the outbox goes in under its folder in the inbox and its result's name, streamed as the zip
is built (``api.zipstream``); a photo without a result (a failure) has nothing to put in.

One result is its photo page's own download (``review``); the API zips a batch or a selection of
ids the same way for its clients (``api.routes``).
"""

from __future__ import annotations

import asyncio
import itertools
import re
from collections.abc import Iterator
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from aiohttp import web

from gpen_watch.dashboard.api import zipstream
from gpen_watch.dashboard.review import Download, Review
from gpen_watch.journal.review import BULK_MAX

# Ticked on one page (at most 200 tiles), with room; a view holds up to BULK_MAX photos.
MAX_IDS = 1000
_IDS_RE = re.compile(r"^\d{1,18}(,\d{1,18})*$")


@dataclass
class Downloads:
    review: Review
    io: Executor  # reads the journal and the files off the event loop

    def routes(self) -> list[web.AbstractRouteDef]:
        return [web.get("/results.zip", self.results_zip)]

    async def results_zip(self, request: web.Request) -> web.StreamResponse:
        journal = self.review.site.journal
        loop = asyncio.get_running_loop()
        text = request.query.get("ids")
        if text is not None:
            ids, zip_name = _ids(text), "results.zip"
        else:
            view = self.review.view(request.query)
            if view.ignored:
                raise _plain(
                    web.HTTPBadRequest,
                    f"Not a view this dashboard writes: {', '.join(view.ignored)}; nothing was zipped.",
                )
            total = await loop.run_in_executor(self.io, journal.review_count, view.filter)
            if total > BULK_MAX:
                raise _plain(
                    web.HTTPBadRequest,
                    f"{total:,} photos in this view; a zip holds at most {BULK_MAX:,}: narrow the view "
                    "(a date, a folder) and download it in parts.",
                )
            ids = await loop.run_in_executor(self.io, journal.review_ids, view.filter, BULK_MAX)
            batch = view.values.get("batch")
            zip_name = f"{batch}.zip" if batch else "results.zip"
        # The rest are looked up as the zip goes: 10,000 take a second on a loaded machine, which
        # the first photo does not wait for.
        results = self._results(ids)
        first = await loop.run_in_executor(self.io, next, results, None)
        if first is None:
            raise _plain(
                web.HTTPNotFound,
                "None of these photos has a result in the outbox (a failed photo has none); nothing to zip.",
            )
        return await zipstream.send_zip(request, itertools.chain([first], results), zip_name, self.io)

    def _results(self, ids: list[int]) -> Iterator[tuple[str, Path]]:
        """Each photo's result now (name in the zip, file): its folder in the inbox kept."""
        for job_id in ids:
            job = self.review.site.journal.get(job_id)
            found = self.review.download_file(job, Download.RESULT) if job is not None else None
            if job is not None and found is not None:
                path, name = found
                yield (PurePosixPath(job.rel.as_posix()).parent / name).as_posix(), path


def _ids(text: str) -> list[int]:
    if not _IDS_RE.match(text):
        raise _plain(web.HTTPBadRequest, "ids must be photo ids separated by commas (ids=3,7,9).")
    ids = list(dict.fromkeys(int(i) for i in text.split(",")))
    if len(ids) > MAX_IDS:
        raise _plain(
            web.HTTPBadRequest,
            f"{len(ids)} photos ticked; at most {MAX_IDS} by id: download the view instead.",
        )
    return ids


def _plain(kind: type[web.HTTPException], text: str) -> web.HTTPException:
    return kind(text=text + "\n", content_type="text/plain")
