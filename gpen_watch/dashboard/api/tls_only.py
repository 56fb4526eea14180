"""A listener that speaks HTTPS only, and answers plain HTTP with one sentence.

A client that sends ``http://`` to an HTTPS port would otherwise see the connection drop with no
word of why. Each new connection's first byte is looked at (without reading it): a TLS handshake
begins with 0x16 and goes to the server's own handler wrapped in TLS; anything else is answered
``400`` with the sentence that names the https:// address, and closed. Nothing of the request is
read or logged: it may carry a token in the clear, which is the very thing refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
from collections.abc import Callable

log = logging.getLogger(__name__)

TLS_HANDSHAKE = 0x16
FIRST_BYTE_S = 10.0


def plain_http_answer(https_url: str) -> bytes:
    text = (
        f"This address speaks HTTPS only: plain HTTP would show photos and tokens to the network. "
        f"Use {https_url}\n"
    ).encode()
    head = (
        "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(text)}\r\nConnection: close\r\n\r\n"
    ).encode()
    return head + text


async def serve(
    sock: socket.socket,
    factory: Callable[[], asyncio.BaseProtocol],
    ctx: ssl.SSLContext,
    https_url: str,
) -> None:
    """Accept on ``sock`` until cancelled, handing TLS connections to ``factory``'s protocol."""
    loop = asyncio.get_running_loop()
    tasks: set[asyncio.Task[None]] = set()
    try:
        while True:
            conn, _ = await loop.sock_accept(sock)
            task = asyncio.create_task(_one(conn, factory, ctx, https_url))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
    finally:
        sock.close()
        for task in tasks:
            task.cancel()


async def _one(
    conn: socket.socket, factory: Callable[[], asyncio.BaseProtocol], ctx: ssl.SSLContext, https_url: str
) -> None:
    loop = asyncio.get_running_loop()
    try:
        first = await loop.run_in_executor(None, _peek, conn)
        if first is None:
            conn.close()
            return
        if first == TLS_HANDSHAKE:
            conn.setblocking(False)
            await loop.connect_accepted_socket(
                factory, sock=conn, ssl=ctx, ssl_handshake_timeout=FIRST_BYTE_S
            )
            return
        await loop.run_in_executor(None, _refuse, conn, plain_http_answer(https_url))
    except (OSError, ssl.SSLError, asyncio.TimeoutError) as exc:
        log.debug("api: a connection ended before it began: %s", exc)
        conn.close()


def _peek(conn: socket.socket) -> int | None:
    """The first byte the client sent, left unread; None when it sent nothing in time."""
    conn.settimeout(FIRST_BYTE_S)
    try:
        data = conn.recv(1, socket.MSG_PEEK)
    except OSError:
        return None
    return data[0] if data else None


def _refuse(conn: socket.socket, answer: bytes) -> None:
    with contextlib.suppress(OSError):
        conn.settimeout(5.0)
        conn.sendall(answer)
        conn.shutdown(socket.SHUT_WR)
        # Let the client read the answer before the close (a reset could lose it).
        while conn.recv(65536):
            pass
    conn.close()
