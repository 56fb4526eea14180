"""What a dashboard request carries, read and checked: the page keys in its query, and the small
bodies of its commands. A value that is not what this dashboard sends is a 400 with a sentence,
never a guess."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web

from gpen_watch.journal.browse import Keyset

# What the photo page's redo form may set (outbox.redo.REDO_SETTINGS), by its field names.
REDO_FIELDS = {
    "strength": "restore.strength",
    "model": "restore.model",
    "fidelity": "restore.fidelity",
    "faces": "restore.faces",
    "upscale": "restore.upscale",
    "format": "output.format",
}
# A command's body: none, or a little JSON or a form (the settings page's forms are bigger and
# read by settings_page; the app's client_max_size bounds every body).
SMALL_BODY = 4096


def referring_page(request: web.Request) -> str:
    """Where a plain form post (a browser without the page's script) goes back to: the page of
    ours it was posted from, in the view its address named; "/" when the Referer names none.
    Only a path on this dashboard, never another site: "//host" and "/\\host" are addresses of
    another host to a browser."""
    sent = urlsplit(request.headers.get("Referer", ""))
    path = sent.path
    if not path.startswith("/") or path[1:2] in ("/", "\\") or not (path + sent.query).isprintable():
        return "/"
    return path + (f"?{sent.query}" if sent.query else "")


def int_param(request: web.Request, name: str) -> int | None:
    text = request.query.get(name)
    if text is None:
        return None
    if not text.isdigit() or len(text) > 18:
        raise web.HTTPBadRequest(text=f"{name} must be a number.\n")
    return int(text)


def key_param(request: web.Request) -> Keyset | None:
    text = request.query.get("before")
    if text is None:
        return None
    key = Keyset.parse(text)
    if key is None:
        raise web.HTTPBadRequest(text="before must be a page key from this dashboard.\n")
    return key


async def redo_body(request: web.Request) -> dict[str, Any]:
    """A redo's request: the script's JSON, or the plain form (fields left empty: the inbox's)."""
    if request.content_type == "application/json":
        data = _json(await request.read() or b"{}")
        if not isinstance(data, dict):
            raise web.HTTPBadRequest(text="The body must be a JSON object.\n")
        return data
    form = await request.post()
    settings = {REDO_FIELDS[k]: str(v) for k, v in form.items() if k in REDO_FIELDS and str(v)}
    picked = [int(str(v)) for k, v in form.items() if k == "face" and str(v).isdigit()]
    # "Redo with another model": its result beside the current one, to compare.
    beside = {"beside": True} if form.get("beside") == "1" else {}
    if form.get("keep") == "1":  # "Keep the original": no face restored
        return {"settings": settings, "face_ids": [], **beside}
    return {"settings": settings, "face_ids": picked if form.get("pick") == "1" else None, **beside}


async def keep_body(request: web.Request) -> int:
    """The run a keep is over (``other``): the form's field, or the script's JSON."""
    if request.content_length and request.content_length > SMALL_BODY:
        raise web.HTTPRequestEntityTooLarge(max_size=SMALL_BODY, actual_size=request.content_length)
    if request.content_type == "application/json":
        data = _json(await request.read() or b"{}")
        other = data.get("other") if isinstance(data, dict) else None
    elif request.content_type == "application/x-www-form-urlencoded":
        other = (await request.post()).get("other")
    else:
        raise web.HTTPBadRequest(text="Send the run kept over as a form or JSON: other=RUN_ID.\n")
    text = str(other) if isinstance(other, (str, int)) and not isinstance(other, bool) else ""
    if not text.isdigit() or len(text) > 18:
        raise web.HTTPBadRequest(text="other must be the run id of the result not kept.\n")
    return int(text)


async def mark_form(request: web.Request) -> dict[str, Any]:
    """The photo page's mark form posted without its script: the button pressed (``mark``, or
    ``stars`` with its number) and the note, which goes with "needs another look" only, as the
    script sends it. Values are passed on as given, for the mark's own checks to refuse."""
    if request.content_length and request.content_length > SMALL_BODY:
        raise web.HTTPRequestEntityTooLarge(max_size=SMALL_BODY, actual_size=request.content_length)
    form = await request.post()
    mark, stars, note = form.get("mark"), form.get("stars"), form.get("note")
    body: dict[str, Any] = {}
    if mark is not None:
        body["mark"] = str(mark)
        if body["mark"] == "look" and str(note or "").strip():
            body["note"] = str(note).strip()
    if stars is not None:
        text = str(stars)
        body["stars"] = int(text) if text.isdigit() and len(text) <= 2 else text
    return body


async def small_body(request: web.Request) -> None:
    """The commands take no arguments: a body, if any, must be small JSON (or a form)."""
    if request.content_length and request.content_length > SMALL_BODY:
        raise web.HTTPRequestEntityTooLarge(max_size=SMALL_BODY, actual_size=request.content_length)
    body = await request.read()
    if body and request.content_type == "application/json":
        _json(body)


def _json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        raise web.HTTPBadRequest(text="The body is not JSON.\n") from None
