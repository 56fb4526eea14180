"""The running service's local control channel, and the lock that keeps it single.

Only the user who runs the service may talk to it:

* POSIX: a Unix domain socket in the per-user runtime folder (folder 0700, socket 0600), so the
  kernel already refuses other users; on top of that the client must prove it can read the secret.
* Windows: a loopback TCP socket, which any local user could reach, so the secret is the guard; it
  lives in the per-user runtime folder, which other users cannot read.

The secret is a random token in a 0600 file beside the socket. The server opens every connection
with a random nonce, and the client answers HMAC-SHA256(token, nonce): the token never crosses the
socket and an answer cannot be replayed. Then JSON lines: ``{"cmd": "status"}`` -> ``{"ok": true, ...}``.

The single-instance lock is an OS file lock (fcntl/msvcrt) on a file in the state folder, next to
the journal it protects; the OS drops it when the process dies, even by SIGKILL, so a stale lock
cannot block a restart. The file holds the owner's pid for the refusal message.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import logging
import os
import secrets
import selectors
import socket
import stat
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from gpen_watch import __version__
from gpen_watch import platform as platforms
from gpen_watch.base.errors import GpenWatchError
from gpen_watch.base.fsutil import write_text_atomic
from gpen_watch.platform import paths, program
from gpen_watch.platform.filelock import lock_file, unlock_file

log = logging.getLogger(__name__)

SOCKET_NAME = "control.sock"
SECRET_NAME = "control.secret"
LOCK_NAME = "service.lock"
# Longest request or reply line; status replies are a few kB.
MAX_LINE = 1 << 20
# Unix socket paths are limited to about 104-108 bytes by the OS.
MAX_SOCKET_PATH = 100

Handler = Callable[[dict[str, Any]], dict[str, Any]]


class ControlError(GpenWatchError):
    """The control channel could not be set up or used."""


class NotRunning(ControlError):
    """No service answers on the control channel."""


class AlreadyRunning(GpenWatchError):
    """Another `gpen-watch run` holds the instance lock."""


# --- single instance -----------------------------------------------------------------------------


class InstanceLock:
    """An exclusive, non-blocking OS lock on a file; held for the life of the service."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or paths.state_dir() / LOCK_NAME
        self._file: IO[str] | None = None

    def acquire(self) -> InstanceLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        f = open(self.path, "a+", encoding="utf-8")  # noqa: SIM115 - held open (and locked) until release()
        try:
            lock_file(f)
        except OSError:
            f.seek(0)
            owner = f.read().strip().splitlines()
            f.close()
            pid = owner[0] if owner else "unknown"
            raise AlreadyRunning(
                f"gpen-watch is already running (pid {pid}, lock {self.path}); "
                f"use `{program.command('status')}` to see it or `{program.command('stop')}` to stop it"
            ) from None
        f.seek(0)
        f.truncate()
        f.write(f"{os.getpid()}\n")
        f.flush()
        self._file = f
        return self

    def release(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.seek(0)
                self._file.truncate()
                unlock_file(self._file)
            self._file.close()
            self._file = None

    def __enter__(self) -> InstanceLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


# --- files ---------------------------------------------------------------------------------------


def private_dir(path: Path | None = None) -> Path:
    """The runtime folder, created 0700 and checked to be ours and private."""
    path = path or paths.runtime_dir()
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    if platforms.current().posix_permissions:
        st = path.stat()
        if st.st_uid != os.getuid():
            raise ControlError(f"{path}: owned by another user (uid {st.st_uid}); refusing to use it")
        if stat.S_IMODE(st.st_mode) != 0o700:
            path.chmod(0o700)  # created earlier with a looser umask: tighten it
    return path


def _write_private(path: Path, text: str) -> None:
    """Write a 0600 file atomically: readers see the old file or the complete new one."""
    write_text_atomic(path, text, mode=0o600)


# --- server --------------------------------------------------------------------------------------


class ControlServer:
    """Accepts authenticated clients and passes each request to ``handler`` (from its own thread)."""

    def __init__(self, handler: Handler, runtime_dir: Path | None = None) -> None:
        self.handler = handler
        self.dir = runtime_dir
        self.token = secrets.token_hex(32)
        self._sock: socket.socket | None = None
        self._wake_r, self._wake_w = socket.socketpair()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # Requests being answered; close() lets them finish so that a `stop` gets its reply.
        self._busy = 0
        self._idle = threading.Condition()
        self.address = ""

    def start(self) -> None:
        """Bind and listen. Call only while holding the instance lock: a stale socket is removed."""
        folder = private_dir(self.dir)
        secret_path = folder / SECRET_NAME
        if hasattr(socket, "AF_UNIX") and platforms.current().unix_sockets:
            sock_path = folder / SOCKET_NAME
            if len(str(sock_path)) > MAX_SOCKET_PATH:
                raise ControlError(
                    f"{sock_path}: path too long for a Unix socket; set XDG_RUNTIME_DIR shorter"
                )
            with contextlib.suppress(FileNotFoundError):
                sock_path.unlink()  # left by a service that was killed
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            # umask makes the socket 0600 from birth: no window where another user could connect.
            old = os.umask(0o177)
            try:
                sock.bind(str(sock_path))
                sock_path.chmod(0o600)
            except BaseException:
                sock.close()
                raise
            finally:
                os.umask(old)
            self.address = f"unix:{sock_path}"
        else:  # pragma: no cover - Windows
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            self.address = f"tcp:127.0.0.1:{sock.getsockname()[1]}"
        try:
            sock.listen(16)
            sock.setblocking(False)
            _write_private(
                secret_path, json.dumps({"pid": os.getpid(), "address": self.address, "token": self.token})
            )
        except BaseException:
            # A service that cannot publish its address must not keep a listening socket open.
            sock.close()
            raise
        self._sock = sock
        self._secret_path = secret_path
        self._thread = threading.Thread(target=self._serve, args=(sock,), name="control", daemon=True)
        self._thread.start()
        log.debug("control channel on %s", self.address)

    def close(self, wait: float = 3.0) -> None:
        self._stop.set()
        with self._idle:
            self._idle.wait_for(lambda: self._busy == 0, timeout=wait)
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")
        if self._thread is not None:
            self._thread.join(5.0)
        if self._sock is not None:
            self._sock.close()
            # Remove our files, unless a newer service already replaced them.
            with contextlib.suppress(OSError, ValueError):
                if json.loads(self._secret_path.read_text(encoding="utf-8")).get("pid") == os.getpid():
                    self._secret_path.unlink()
                    if self.address.startswith("unix:"):
                        Path(self.address[5:]).unlink()
            self._sock = None
        self._wake_r.close()
        self._wake_w.close()

    def _serve(self, sock: socket.socket) -> None:
        sel = selectors.DefaultSelector()
        sel.register(sock, selectors.EVENT_READ)
        sel.register(self._wake_r, selectors.EVENT_READ)
        while not self._stop.is_set():
            for key, _ in sel.select():
                if key.fileobj is self._wake_r:
                    continue
                try:
                    conn, _addr = sock.accept()
                except (BlockingIOError, OSError):
                    continue
                threading.Thread(
                    target=self._client, args=(conn,), name="control-client", daemon=True
                ).start()
        sel.close()

    def _client(self, conn: socket.socket) -> None:
        with conn:
            conn.setblocking(True)
            conn.settimeout(30.0)
            reader = conn.makefile("rb")
            try:
                nonce = secrets.token_hex(16)
                _send(conn, {"hello": "gpen-watch", "version": __version__, "nonce": nonce})
                auth = _recv(reader)
                expected = _answer(self.token, nonce)
                given = auth.get("auth") if isinstance(auth, dict) else None
                if not isinstance(given, str) or not hmac.compare_digest(given, expected):
                    _send(conn, {"ok": False, "error": "authentication failed"})
                    log.warning("control channel: refused a client that failed authentication")
                    return
                _send(conn, {"ok": True})
                while not self._stop.is_set():
                    try:
                        request = _recv(reader)
                    except EOFError:
                        return
                    with self._idle:
                        self._busy += 1
                    try:
                        _send(conn, self._handle(request))
                    finally:
                        with self._idle:
                            self._busy -= 1
                            self._idle.notify_all()
            except (OSError, EOFError, ValueError) as exc:
                log.debug("control client dropped: %s", exc)
            finally:
                reader.close()

    def _handle(self, request: Any) -> dict[str, Any]:
        if not isinstance(request, dict) or not isinstance(request.get("cmd"), str):
            return {"ok": False, "error": 'expected {"cmd": ...}'}
        try:
            return self.handler(request)
        except Exception as exc:  # a bug in a handler must not take the channel down
            log.exception("control command %r failed", request.get("cmd"))
            return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}


def not_running() -> str:
    """What a command that finds no service says."""
    return (
        f"gpen-watch is not running; start it with `{program.command('run')}`, "
        f"or at every login with `{program.command('service install')}`"
    )


# --- client --------------------------------------------------------------------------------------


class ControlClient:
    """One authenticated connection to the running service."""

    def __init__(self, runtime_dir: Path | None = None, timeout: float = 10.0) -> None:
        folder = runtime_dir or paths.runtime_dir()
        secret_path = folder / SECRET_NAME
        try:
            info = json.loads(secret_path.read_text(encoding="utf-8"))
            token, address = str(info["token"]), str(info["address"])
            self.pid = info.get("pid")
        except FileNotFoundError:
            raise NotRunning(not_running()) from None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ControlError(f"{secret_path}: cannot read the control secret: {exc}") from None
        try:
            self.sock = _connect(address, timeout)
        except OSError:
            # A service killed without its goodbye leaves its files: no answer means not running.
            raise NotRunning(not_running()) from None
        self.reader = self.sock.makefile("rb")
        try:
            hello = _recv(self.reader)
            _send(self.sock, {"auth": _answer(token, str(hello.get("nonce", "")))})
            reply = _recv(self.reader)
        except (OSError, EOFError, ValueError) as exc:
            self.close()
            raise ControlError(f"control channel {address}: handshake failed: {exc}") from None
        if not reply.get("ok"):
            self.close()
            raise ControlError(f"control channel {address}: {reply.get('error', 'refused')}")

    def request(self, cmd: str, **fields: Any) -> dict[str, Any]:
        try:
            _send(self.sock, {"cmd": cmd, **fields})
            return _recv(self.reader)
        except (OSError, EOFError, ValueError) as exc:
            raise ControlError(f"the service did not answer {cmd!r}: {exc}") from None

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.reader.close()
            self.sock.close()

    def __enter__(self) -> ControlClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def request(
    cmd: str, runtime_dir: Path | None = None, timeout: float = 10.0, **fields: Any
) -> dict[str, Any]:
    """Connect, authenticate, send one command, return the reply."""
    with ControlClient(runtime_dir, timeout) as client:
        return client.request(cmd, **fields)


# --- wire ----------------------------------------------------------------------------------------


def _answer(token: str, nonce: str) -> str:
    return hmac.new(token.encode(), nonce.encode(), hashlib.sha256).hexdigest()


def _connect(address: str, timeout: float) -> socket.socket:
    kind, _, rest = address.partition(":")
    if kind == "unix":
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        target: Any = rest
    elif kind == "tcp":
        host, _, port = rest.rpartition(":")
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        target = (host, int(port))
    else:
        raise OSError(f"unknown address {address!r}")
    sock.settimeout(timeout)
    try:
        sock.connect(target)
    except OSError:
        sock.close()
        raise
    return sock


def _send(sock: socket.socket, obj: dict[str, Any]) -> None:
    sock.sendall(json.dumps(obj, default=str).encode() + b"\n")


def _recv(reader: Any) -> dict[str, Any]:
    line = reader.readline(MAX_LINE + 1)
    if not line:
        raise EOFError("connection closed")
    if len(line) > MAX_LINE:
        raise ValueError("line too long")
    obj = json.loads(line)
    if not isinstance(obj, dict):
        raise ValueError("expected a JSON object")
    return obj
