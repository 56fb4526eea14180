"""Each client's limits: requests a minute, bytes a day, the largest photo, uploads at once.

A client is an API token (its own limits over the api.* settings) or the service's own login token
(the dashboard, `gpen-watch submit` on this machine), which only the largest photo and the uploads
at once bound. Requests are counted in memory over the last 60 s; the bytes of the last 24 hours
come from the journal (``bytes_sent``), so a restart does not reset them. Every refusal is a
``Refusal`` with its status (413 or 429), a sentence, and for 429 the seconds to wait.
"""

from __future__ import annotations

import collections
import contextlib
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from gpen_watch.config import ApiConfig
from gpen_watch.dashboard.api.names import Refusal
from gpen_watch.dashboard.api.tokens import TokenRecord

MB = 1_000_000
DAY_S = 86_400.0
MINUTE_S = 60.0
# Uploads under way at once, all clients together: the server's own bound.
MAX_UPLOADS = 64


@dataclass(frozen=True)
class Limits:
    requests_per_minute: int | None  # None: not counted (the service's own token)
    mb_per_day: int | None
    max_file_mb: int
    uploads_at_once: int

    @classmethod
    def of(cls, api: ApiConfig, token: TokenRecord | None) -> Limits:
        if token is None:
            return cls(None, None, api.max_file_mb, api.uploads_at_once)
        own = token.limits
        return cls(
            own.get("requests_per_minute", api.requests_per_minute),
            own.get("mb_per_day", api.mb_per_day),
            own.get("max_file_mb", api.max_file_mb),
            api.uploads_at_once,
        )

    @property
    def max_bytes(self) -> int:
        return self.max_file_mb * MB


class TooMany(Refusal):
    """429, with the seconds to wait (Retry-After)."""

    def __init__(self, status: int, text: str, retry_after: int = 1) -> None:
        super().__init__(status, text)
        self.retry_after = retry_after


@dataclass
class Meter:
    """The counts behind the limits, for every client of one server."""

    clock: Callable[[], float] = time.monotonic
    wall: Callable[[], float] = time.time
    _requests: dict[str, collections.deque[float]] = field(default_factory=dict)
    _uploads: dict[str, int] = field(default_factory=dict)

    def request(self, client: str, limits: Limits) -> None:
        """Count one request; TooMany past the client's requests a minute."""
        if limits.requests_per_minute is None:
            return
        now = self.clock()
        seen = self._requests.setdefault(client, collections.deque())
        while seen and seen[0] <= now - MINUTE_S:
            seen.popleft()
        if len(seen) >= limits.requests_per_minute:
            wait = max(1, math.ceil(seen[0] + MINUTE_S - now))
            raise TooMany(
                429,
                f"this token made {len(seen)} requests in the last minute, its limit "
                f"(api.requests_per_minute); try again in {wait} s",
                wait,
            )
        seen.append(now)

    def check_size(self, size: int | None, limits: Limits) -> None:
        if size is not None and size > limits.max_bytes:
            raise Refusal(
                413,
                f"the photo is {size / MB:.1f} MB; the largest taken is {limits.max_file_mb} MB (api.max_file_mb)",
            )
        if size == 0:
            raise Refusal(400, "the photo is empty (0 bytes); send the file's content as the request's body")

    def check_day(self, client: str, size: int, limits: Limits, sent: Callable[[str, float], int]) -> None:
        """TooMany when ``size`` more bytes would pass the client's bytes a day."""
        if limits.mb_per_day is None:
            return
        since = self.wall() - DAY_S
        used = sent(client, since)
        if used + size > limits.mb_per_day * MB:
            raise TooMany(
                429,
                f"this token sent {used / MB:.0f} MB in the last 24 hours; its limit is {limits.mb_per_day} MB a day "
                "(api.mb_per_day); try again later",
                3600,
            )

    @contextlib.contextmanager
    def upload(self, client: str, limits: Limits) -> Iterator[None]:
        """Hold one of the client's upload slots while a photo is received."""
        mine = self._uploads.get(client, 0)
        if mine >= limits.uploads_at_once:
            raise TooMany(
                429,
                f"this token is already sending {mine} photos, its limit (api.uploads_at_once); "
                "send the next when one is through",
                1,
            )
        if sum(self._uploads.values()) >= MAX_UPLOADS:
            raise TooMany(429, f"the service is receiving {MAX_UPLOADS} photos already; try again shortly", 2)
        self._uploads[client] = mine + 1
        try:
            yield
        finally:
            self._uploads[client] -= 1
            if not self._uploads[client]:
                del self._uploads[client]

    def uploading(self, client: str) -> int:
        return self._uploads.get(client, 0)
