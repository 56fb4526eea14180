"""The one gate every request passes: Host, login, same-origin for changes, and the headers that
keep the page from being framed, sniffed or leaking its URL (``access`` has the rules and why)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from urllib.parse import urlencode

from aiohttp import web
from aiohttp.typedefs import Middleware
from multidict import CIMultiDict

from gpen_watch.dashboard import access
from gpen_watch.dashboard.api.gate import PREFIX as API_PREFIX
from gpen_watch.dashboard.api.gate import ApiGate
from gpen_watch.dashboard.api.gate import error as api_error
from gpen_watch.platform import program

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

# Scripts and styles come from /static only; no inline code, no other site, no framing.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SAFE_METHODS = frozenset({"GET", "HEAD"})


def _not_signed_in() -> str:
    return (
        f"Not signed in. Open the dashboard with `{program.command('dashboard')}` (or the tray's Open "
        "dashboard): its link carries the login token."
    )


def guard(
    origin: access.Origin, token: str, api: ApiGate | None = None, *, api_only: bool = False
) -> Middleware:
    """The dashboard's gate; with ``api``, /api/v1/ is the API's (``api.gate``: tokens, scopes,
    CORS, JSON answers); ``api_only``: a listener for other machines, which serves nothing else."""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            response = await _checked(request, handler, origin, token, api, api_only)
        except web.HTTPException as exc:
            response = exc
        _harden(response)
        return response

    return middleware


async def _checked(
    request: web.Request,
    handler: Handler,
    origin: access.Origin,
    token: str,
    api: ApiGate | None,
    api_only: bool,
) -> web.StreamResponse:
    host = request.headers.get("Host")
    for_api = request.path.startswith(API_PREFIX)
    if not origin.host_allowed(host):
        # DNS rebinding: a foreign name pointing at this port. Say nothing more.
        log.warning("dashboard: refused a request for host %r", host)
        if for_api or api_only:
            return api_error(421, "This server answers only to its own address.")
        raise _plain(web.HTTPMisdirectedRequest, "This server answers only to its own address.")
    if api is not None and for_api:
        return await api.handle(request, handler)
    if api_only:
        return api_error(404, f"This address serves the API only: {API_PREFIX} (openapi.json describes it).")
    given = request.query.get("token")
    if given is not None:
        if request.method not in SAFE_METHODS or not access.token_matches(token, given):
            raise _plain(web.HTTPForbidden, "That login token is not this service's. " + _not_signed_in())
        return _sign_in(request, token)
    if not _signed_in(request, token):
        if request.headers.get("Authorization", "").startswith("Bearer "):
            raise _plain(web.HTTPForbidden, "That token is not this service's.")
        raise _plain(web.HTTPUnauthorized, _not_signed_in())
    if request.method not in SAFE_METHODS and not _same_origin(request, origin, host or ""):
        log.warning("dashboard: refused a cross-site %s %s", request.method, request.path)
        raise _plain(web.HTTPForbidden, "Changes are accepted only from the dashboard's own page.")
    return await handler(request)


def _signed_in(request: web.Request, token: str) -> bool:
    bearer = request.headers.get("Authorization", "")
    if bearer.startswith("Bearer "):
        return access.token_matches(token, bearer[len("Bearer ") :].strip())
    cookie = request.cookies.get(access.COOKIE)
    return cookie is not None and access.session_valid(token, cookie)


def _same_origin(request: web.Request, origin: access.Origin, host: str) -> bool:
    sent = request.headers.get("Origin")
    if sent is not None:
        return origin.origin_allowed(sent, host)
    if request.headers.get("Sec-Fetch-Site", "same-origin") not in ("same-origin", "none"):
        return False
    return request.headers.get(access.CSRF_HEADER) == "1"


def _sign_in(request: web.Request, token: str) -> web.StreamResponse:
    """Trade the URL's token for a session cookie and send the browser to the URL without it."""
    rest = [(k, v) for k, v in request.query.items() if k != "token"]
    target = request.path + (f"?{urlencode(rest)}" if rest else "")
    response = web.HTTPSeeOther(location=target)
    response.set_cookie(
        access.COOKIE,
        access.make_session(token),
        max_age=access.SESSION_S,
        httponly=True,
        samesite="Strict",
        path="/",
        secure=request.secure,
    )
    return response


def _plain(kind: type[web.HTTPException], text: str) -> web.HTTPException:
    return kind(text=text + "\n", content_type="text/plain")


async def on_prepare(request: web.Request, response: web.StreamResponse) -> None:
    """Before any answer's headers go: a stream's (a download, a zip, a live page) are sent by its
    handler, before the middleware sees it, and get the same headers here."""
    _harden_headers(response.headers)


def _harden(response: web.StreamResponse) -> None:
    if response.prepared:  # its headers are gone already (``on_prepare`` gave them these)
        return
    _harden_headers(response.headers)


def _harden_headers(headers: CIMultiDict[str]) -> None:
    headers.setdefault("Content-Security-Policy", CSP)
    headers.setdefault("X-Content-Type-Options", "nosniff")
    headers.setdefault("X-Frame-Options", "DENY")
    # The first URL carries the token: never send a referrer to another site. Within the page's own
    # origin it is sent, so that the browser sends an Origin with a plain form post too (under
    # no-referrer it sends "Origin: null", which the same-origin check must refuse).
    headers.setdefault("Referrer-Policy", "same-origin")
    headers.setdefault("Cross-Origin-Opener-Policy", "same-origin")
    headers.setdefault("Cross-Origin-Resource-Policy", "same-origin")
    headers.setdefault("Cache-Control", "no-store")
