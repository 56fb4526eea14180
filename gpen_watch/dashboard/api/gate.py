"""Who is calling the API, what they may do, and from which web pages: the API's part of the one
gate every request passes (``dashboard.guard`` checks the Host first, as for every page).

* A client sends ``Authorization: Bearer <token>``: an API token (its scopes and limits), or the
  service's own login token (every scope, every photo: the dashboard's owner on this machine).
* The dashboard's own page may use its session cookie instead; then, as for every change the page
  makes, a POST must come from its own origin (``guard``'s rule).
* CORS is closed: a request carrying the Origin of another web page is refused unless that origin
  is in api.cors_origins, and only then are the headers that let a browser read the answer sent.
* Each request counts against its client's requests a minute.

Every refusal is JSON: ``{"error": sentence}``, with its status (and Retry-After for 429).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from gpen_watch.config import Config
from gpen_watch.dashboard import access
from gpen_watch.dashboard.api.limits import Limits, Meter, TooMany
from gpen_watch.dashboard.api.names import Refusal
from gpen_watch.dashboard.api.tokens import SCOPES, TokenError, TokenRecord, TokenStore
from gpen_watch.journal.submissions import OWNER

log = logging.getLogger(__name__)

PREFIX = "/api/v1/"
PUBLIC = frozenset({"/api/v1/openapi.json"})
CLIENT_KEY = "gpen_watch_api_client"
CORS_KEY = "gpen_watch_api_cors"
ALLOWED_HEADERS = "Authorization, Content-Type, Idempotency-Key, X-GPEN-Watch"
ALLOWED_METHODS = "GET, POST, OPTIONS"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True)
class Client:
    """Who sent a request: ``id`` is OWNER for the service's own token, else the API token's id."""

    id: str
    name: str
    token: TokenRecord | None
    bearer: str  # the token as sent ("" for the session cookie), to check it again later

    @property
    def owner(self) -> bool:
        return self.token is None

    def may(self, scope: str) -> bool:
        return self.token is None or self.token.allows(scope)


def error(status: int, text: str, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        status=status,
        text=json.dumps({"error": text}) + "\n",
        content_type="application/json",
        headers=headers,
    )


def client_of(request: web.Request) -> Client:
    found: Client = request[CLIENT_KEY]
    return found


def need(request: web.Request, scope: str) -> Client:
    """The request's client, refused (403) without ``scope``."""
    client = client_of(request)
    if not client.may(scope):
        raise Refusal(
            403,
            f"the token {client.name!r} lacks the {scope!r} scope ({SCOPES[scope]}); "
            f"make one with it: gpen-watch api token create --name NAME --scope {scope}",
        )
    return client


@dataclass
class ApiGate:
    """The checks above, for one server's listener; ``cookies``: the dashboard's own listener
    (its page's session works there), not the one for other machines."""

    owner_token: str
    tokens: TokenStore
    settings: Callable[[], Config]
    origin: access.Origin
    meter: Meter
    cookies: bool = True

    async def handle(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        cfg = self.settings()
        sent_origin = request.headers.get("Origin")
        own = sent_origin is not None and self.origin.origin_allowed(
            sent_origin, request.headers.get("Host", "")
        )
        cors = sent_origin is not None and not own and sent_origin.lower() in cfg.api.cors_origins
        if sent_origin is not None and not own and not cors:
            log.warning("api: refused a request from the web page %r", sent_origin[:100])
            return error(
                403, "Requests from other web pages are refused (api.cors_origins lists those allowed)."
            )
        if cors:
            request[CORS_KEY] = sent_origin  # on_prepare answers with the headers that allow it
        if request.method == "OPTIONS":
            return web.Response(status=204) if cors else error(405, "OPTIONS is a browser's preflight.")
        if not cfg.api.enabled:
            return error(404, "The API is off in this service's settings (api.enabled = false).")
        return await self._authorized(request, handler, cfg, from_page=own)

    async def _authorized(
        self, request: web.Request, handler: Handler, cfg: Config, *, from_page: bool
    ) -> web.StreamResponse:
        if request.path in PUBLIC:
            return await self._run(request, handler)
        try:
            client = self._client(request, from_page)
        except Refusal as exc:
            return error(exc.status, exc.text)
        request[CLIENT_KEY] = client
        try:
            self.meter.request(client.id, Limits.of(cfg.api, client.token))
        except TooMany as exc:
            return error(429, exc.text, {"Retry-After": str(exc.retry_after)})
        return await self._run(request, handler)

    def _client(self, request: web.Request, from_page: bool) -> Client:
        bearer = request.headers.get("Authorization", "")
        if bearer:
            scheme, _, given = bearer.partition(" ")
            given = given.strip()
            if scheme.lower() != "bearer" or not given:
                raise Refusal(401, "Authorization must be 'Bearer TOKEN'.")
            if access.token_matches(self.owner_token, given):
                return Client(OWNER, "the service's own token", None, given)
            try:
                record = self.tokens.verify(given)
            except TokenError as exc:
                log.error("api: %s", exc)
                raise Refusal(503, "The service cannot read its tokens now; see its log.") from None
            if record is None:
                raise Refusal(401, "That token is not one of this service's (unknown or revoked).")
            return Client(record.id, record.name, record, given)
        cookie = request.cookies.get(access.COOKIE)
        if self.cookies and cookie is not None and access.session_valid(self.owner_token, cookie):
            if request.method not in ("GET", "HEAD") and not (
                from_page or request.headers.get(access.CSRF_HEADER) == "1"
            ):
                raise Refusal(403, "Changes are accepted only from the dashboard's own page.")
            return Client(OWNER, "the dashboard", None, "")
        raise Refusal(
            401,
            "Send 'Authorization: Bearer TOKEN' with a token of `gpen-watch api token create` "
            f"(scopes {', '.join(SCOPES)}).",
        )

    async def _run(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            return await handler(request)
        except TooMany as exc:
            return error(exc.status, exc.text, {"Retry-After": str(exc.retry_after)})
        except Refusal as exc:
            return error(exc.status, exc.text)
        except web.HTTPException as exc:
            if exc.status < 400:
                raise
            allow = exc.headers.get("Allow")
            return error(exc.status, _words(exc), {"Allow": allow} if allow else None)

    def still_valid(self, client: Client) -> bool:
        """Whether the client's token still holds (revoked meanwhile: no)."""
        if client.token is None:
            return True
        try:
            return self.tokens.verify(client.bearer) is not None
        except TokenError:
            return False


def _words(exc: web.HTTPException) -> str:
    text = (exc.text or "").strip()
    if exc.status == 404 and (not text or text.startswith("404")):
        return "No such API address; GET /api/v1/openapi.json describes them."
    if exc.status == 405:
        return "That method is not taken at this address; GET /api/v1/openapi.json describes them."
    return text or exc.reason


async def on_prepare(request: web.Request, response: web.StreamResponse) -> None:
    """Before any answer's headers go (a stream's too): CORS's, for an origin the settings allow."""
    origin = request.get(CORS_KEY)
    if origin is None:
        return
    response.headers["Access-Control-Allow-Origin"] = origin
    response.headers["Vary"] = "Origin"
    response.headers["Access-Control-Allow-Methods"] = ALLOWED_METHODS
    response.headers["Access-Control-Allow-Headers"] = ALLOWED_HEADERS
    response.headers["Access-Control-Expose-Headers"] = "Location, Retry-After"
    response.headers["Access-Control-Max-Age"] = "600"
    response.headers["Cross-Origin-Resource-Policy"] = "cross-origin"


def json_body(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        status=status, text=json.dumps(data) + "\n", content_type="application/json", headers=headers
    )
