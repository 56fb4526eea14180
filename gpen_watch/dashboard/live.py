"""Live pages: Server-Sent Events that carry a page's changing part as HTML, rendered by the same
template as the page itself, sent only when it changed.

One stream per open page. Nothing runs while no page is open: the service's idle cost does not
change. A stream renders once a second (the status a second old at most, shared by the streams)
and sends nothing when the HTML is the same; a comment line every 15 s keeps proxies and the
browser's reconnect logic from taking the quiet for a dead connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace

from aiohttp import web

from gpen_watch.dashboard.activity import activity_view
from gpen_watch.dashboard.site import Site

TICK_S = 1.0
KEEPALIVE_S = 15.0


def routes(site: Site, closing: asyncio.Event) -> list[web.AbstractRouteDef]:
    async def overview() -> str:
        return site.render("overview_live.html", **await site.overview_context())

    async def failed() -> str:
        return site.render("failed_live.html", **site.failed_context(None))

    def stream(
        render: Callable[[], Awaitable[str]],
    ) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        async def handler(request: web.Request) -> web.StreamResponse:
            return await stream_changes(request, render, closing)

        return handler

    async def results(request: web.Request) -> web.StreamResponse:
        query = request.query  # the view the page shows, from its own URL

        async def render() -> str:
            # Read each time: a person's photos change as their batch grows or is redone.
            return site.render("results_live.html", **site.review.results_context(site.review.view(query)))

        return await stream_changes(request, render, closing)

    async def activity_stream(request: web.Request) -> web.StreamResponse:
        # The first page of the view the page shows (every photo, or ?only=failed), from its URL.
        view = replace(activity_view(request.query), before_event=None, before_failure=None)

        async def render() -> str:
            return site.render("activity_live.html", **site.activity_context(view))

        return await stream_changes(request, render, closing)

    async def photo(request: web.Request) -> web.StreamResponse:
        job_id = int(request.match_info["id"])
        query = request.query
        site.photo_context(job_id, site.review.view(query))  # 404 before the stream starts

        async def render() -> str:
            return site.render("photo_live.html", **site.photo_context(job_id, site.review.view(query)))

        return await stream_changes(request, render, closing)

    return [
        web.get("/live/overview", stream(overview)),
        web.get("/live/activity", activity_stream),
        web.get("/live/results", results),
        web.get("/live/failed", stream(failed)),
        web.get(r"/live/photo/{id:\d{1,18}}", photo),
    ]


async def stream_changes(
    request: web.Request,
    render: Callable[[], Awaitable[str]],
    closing: asyncio.Event,
    *,
    event: str = "page",
    until: Callable[[str], bool] | None = None,
) -> web.StreamResponse:
    """Send ``render()``'s text as an ``event`` whenever it changes; with ``until``, end the
    stream once the text sent satisfies it (the API's stream of a photo ends when it has ended)."""
    response = web.StreamResponse(
        headers={
            "Content-Type": "text/event-stream; charset=utf-8",
            "Cache-Control": "no-store",
            "X-Content-Type-Options": "nosniff",
            "X-Accel-Buffering": "no",
        }
    )
    await response.prepare(request)
    last = ""
    quiet_since = time.monotonic()
    try:
        while not closing.is_set():
            html = await render()
            if html != last:
                last = html
                await response.write(_event(event, html))
                quiet_since = time.monotonic()
                if until is not None and until(html):
                    break
            elif time.monotonic() - quiet_since > KEEPALIVE_S:
                await response.write(b": still here\n\n")
                quiet_since = time.monotonic()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(closing.wait(), TICK_S)
    except ConnectionResetError:
        pass  # the page was closed
    return response


def _event(name: str, data: str) -> bytes:
    lines = "".join(f"data: {line}\n" for line in data.split("\n"))
    return f"event: {name}\n{lines}\n".encode()
