"""The dashboard's web server: aiohttp on its own thread and event loop, beside the service.

It starts once the service is ready (its journal exists), serves until the service ends, and is a
guest: a port already taken or a journal it cannot read is logged and shown in the status, and the
service runs on without a page. It reads the journal through its own read-only connection and asks
the service for everything else through ``control``, the handler of the control channel.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from gpen_watch.config import Config
from gpen_watch.config.source import ConfigSource
from gpen_watch.dashboard import access, live
from gpen_watch.dashboard.api import gate as api_gate
from gpen_watch.dashboard.api import tls, tls_only
from gpen_watch.dashboard.api.limits import Meter
from gpen_watch.dashboard.api.routes import Api
from gpen_watch.dashboard.api.tokens import TokenStore
from gpen_watch.dashboard.downloads import Downloads
from gpen_watch.dashboard.guard import guard
from gpen_watch.dashboard.guard import on_prepare as guard_on_prepare
from gpen_watch.dashboard.render import environment
from gpen_watch.dashboard.settings_page import SettingsPage
from gpen_watch.dashboard.site import Control, Site
from gpen_watch.journal.browse import JournalBrowser
from gpen_watch.platform import program
from gpen_watch.service.daemon import Service
from gpen_watch.service.views import views_root

log = logging.getLogger(__name__)

# Requests are small: a command has no body, a settings form a few kB.
MAX_BODY = 64 << 10


class Dashboard:
    """``start()`` binds and serves on a thread; ``close()`` stops it. ``url`` once started."""

    def __init__(
        self,
        cfg: Config,
        control: Control,
        journal_path: Path,
        token_path: Path | None = None,
        *,
        tokens_path: Path | None = None,
        source: ConfigSource | None = None,
        current: Callable[[], Config] | None = None,
    ) -> None:
        self.cfg = cfg
        # The settings page: the file the service reads, and its settings in effect now.
        self.source = source
        self.current = current or (lambda: cfg)
        self.control = control
        self.journal_path = journal_path
        self.token_path = token_path
        self.tokens_path = tokens_path
        self.url = ""
        self.problem: str | None = None
        # The API for other machines (api.address): its URL and certificate, or why it is not served.
        self.api_url = ""
        self.api_fingerprint = ""
        self.api_problem: str | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closing: asyncio.Event | None = None
        self._started = threading.Event()

    def start(self, timeout: float = 30.0) -> bool:
        """Serve; False (and ``problem``) when it cannot."""
        d = self.cfg.dashboard
        try:
            ssl_context = self._tls(d.address) if not access.is_loopback(d.address) else None
            sock = _bind(d.address, d.port)
        except tls.TlsError as exc:
            self.problem = f"the dashboard is not served beyond loopback without TLS: {exc}"
            log.warning("%s", self.problem)
            return False
        except OSError as exc:
            self.problem = (
                f"the dashboard cannot listen on {d.address}:{d.port} ({exc.strerror or exc}); "
                "another program may use that port: set dashboard.port (0 takes any free port)"
            )
            log.warning("%s", self.problem)
            return False
        # Beyond loopback, HTTPS only: plain HTTP would show the photos and the token to the network.
        scheme = "https" if ssl_context is not None else "http"
        origin = access.Origin(d.address, sock.getsockname()[1], scheme)
        remote = self._api_listener()
        self._thread = threading.Thread(
            target=self._serve, args=(sock, origin, ssl_context, remote), name="dashboard", daemon=True
        )
        self._thread.start()
        self._started.wait(timeout)
        if self.url:
            log.info("dashboard at %s (`%s` opens it)", self.url, program.command("dashboard"))
        return bool(self.url)

    def close(self, timeout: float = 5.0) -> None:
        loop, closing = self._loop, self._closing
        if loop is not None and closing is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # its loop already stopped
                loop.call_soon_threadsafe(closing.set)
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def _tls(self, address: str) -> ssl.SSLContext:
        """The TLS context of a listener beyond loopback (the user's certificate, or the
        service's own, made at first start); TlsError when there is none to be had."""
        a = self.cfg.api
        found = tls.certificate(a.certificate, a.private_key, address)
        self.api_fingerprint = found.fingerprint
        return tls.server_context(found)

    def _api_listener(self) -> Listener | None:
        """The API's listener for other machines (api.address), HTTPS only; None (and
        ``api_problem``) when there is none."""
        a = self.cfg.api
        if not a.enabled or not a.address:
            return None
        try:
            ssl_context = self._tls(a.address)
            sock = _bind(a.address, a.port)
        except tls.TlsError as exc:
            self.api_problem = f"the API is not served to other machines: {exc}"
        except OSError as exc:
            self.api_problem = (
                f"the API cannot listen on {a.address}:{a.port} ({exc.strerror or exc}); another program "
                "may use that port: set api.port"
            )
        else:
            return Listener(sock, access.Origin(a.address, sock.getsockname()[1], "https"), ssl_context)
        log.warning("%s", self.api_problem)
        return None

    def _serve(
        self,
        sock: socket.socket,
        origin: access.Origin,
        ssl_context: ssl.SSLContext | None = None,
        remote: Listener | None = None,
    ) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._main(sock, origin, ssl_context, remote))
        except Exception as exc:
            self.problem = f"the dashboard stopped: {type(exc).__name__}: {exc}"
            log.exception("dashboard failed")
        finally:
            self._started.set()
            loop.close()

    async def _main(
        self,
        sock: socket.socket,
        origin: access.Origin,
        ssl_context: ssl.SSLContext | None = None,
        remote: Listener | None = None,
    ) -> None:
        closing = self._closing = asyncio.Event()
        token = access.load_or_create_token(self.token_path)
        journal = JournalBrowser.open(self.journal_path)
        runners: list[web.AppRunner] = []
        accepting: list[asyncio.Task[None]] = []
        api: Api | None = None
        try:
            site = Site(
                self.cfg,
                self.control,
                journal,
                views_root(self.journal_path),
                environment(),
                current=self.current,
            )
            tokens, meter = TokenStore(self.tokens_path), Meter()
            gate = api_gate.ApiGate(token, tokens, self.current, origin, meter)
            api = Api(site, gate, tokens, meter, closing)
            app = web.Application(middlewares=[guard(origin, token, gate)], client_max_size=MAX_BODY)
            app.on_response_prepare.extend((api_gate.on_prepare, guard_on_prepare))
            settings = SettingsPage(site, self.source, self.current)
            downloads = Downloads(site.review, api.io)
            app.add_routes(
                site.routes()
                + settings.routes()
                + live.routes(site, closing)
                + downloads.routes()
                + api.routes()
            )
            runners.append(await _start(app, sock, ssl_context, origin.url, accepting))
            if remote is not None:
                # Other machines reach the API alone: no page, no sign-in, tokens only.
                far = api_gate.ApiGate(token, tokens, self.current, remote.origin, meter, cookies=False)
                api_app = web.Application(
                    middlewares=[guard(remote.origin, token, far, api_only=True)], client_max_size=MAX_BODY
                )
                api_app.on_response_prepare.extend((api_gate.on_prepare, guard_on_prepare))
                api_app.add_routes(api.routes())
                runners.append(
                    await _start(
                        api_app, remote.sock, remote.ssl_context, remote.origin.network_url, accepting
                    )
                )
                self.api_url = remote.origin.network_url
            self.url = origin.url
            self._started.set()
            await closing.wait()
        finally:
            for task in accepting:
                task.cancel()
            for runner in runners:
                await runner.cleanup()
            if api is not None:
                api.close()
            journal.close()


@dataclass(frozen=True)
class Listener:
    sock: socket.socket
    origin: access.Origin
    ssl_context: ssl.SSLContext


async def _start(
    app: web.Application,
    sock: socket.socket,
    ssl_context: ssl.SSLContext | None,
    url: str,
    accepting: list[asyncio.Task[None]],
) -> web.AppRunner:
    """Serve ``app`` on ``sock``: plainly (loopback), or HTTPS only, plain HTTP answered with the
    sentence that names ``url`` (``api.tls_only``)."""
    runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=2.0)
    await runner.setup()
    if ssl_context is None:
        await web.SockSite(runner, sock).start()
    else:
        assert runner.server is not None
        accepting.append(asyncio.create_task(tls_only.serve(sock, runner.server, ssl_context, url)))
    return runner


def _bind(address: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        # Not SO_REUSEADDR's Windows meaning (another process could take the port): POSIX only,
        # where it just lets a restart bind while old connections linger in TIME_WAIT.
        if hasattr(socket, "SO_REUSEPORT"):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((address, port))
        sock.listen(64)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


class ServedBeside:
    """The dashboard of a service that runs in this process: started once the service is ready,
    closed with it (``with ServedBeside(service):`` around ``service.run()``)."""

    def __init__(self, service: Service) -> None:
        self.service = service
        self.dashboard: Dashboard | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._start, name="dashboard-start", daemon=True)

    def __enter__(self) -> ServedBeside:
        if self.service.cfg.dashboard.enabled:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        if self._thread.is_alive():
            self._thread.join(10.0)
        if self.dashboard is not None:
            self.dashboard.close()

    def _start(self) -> None:
        while not self.service.ready.wait(0.2):
            if self._done.is_set():
                return
        s = self.service
        dashboard = Dashboard(s.cfg, s.control, s.journal_file, source=s.source, current=lambda: s.cfg)
        if dashboard.start():
            s.dashboard_url = dashboard.url
        s.dashboard_problem = dashboard.problem
        s.api_url, s.api_fingerprint, s.api_problem = (
            dashboard.api_url,
            dashboard.api_fingerprint,
            dashboard.api_problem,
        )
        self.dashboard = dashboard
