"""The OpenAPI 3.1 document of /api/v1/, served at /api/v1/openapi.json: every address, what it
takes and every answer it gives, so that a client can be generated from it and a fuzzer (the slow
tests run schemathesis) can hold the server to it."""

from __future__ import annotations

import typing
from typing import Any

from gpen_watch.catalog.registry import FACE_MODEL_NAMES
from gpen_watch.config import OutputFormat
from gpen_watch.dashboard.api.tokens import SCOPES
from gpen_watch.outbox.sent import SENT_SETTINGS

JSON = "application/json"
MAX_ID = 999_999_999_999_999_999
# Each Server-Sent Event, as a client reads it: its name and its data (JSON text).
EVENT = {
    "type": "object",
    "properties": {"event": {"type": "string"}, "data": {"type": "string"}, "id": {"type": "string"}},
}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {JSON: {"schema": schema}}}


def _errors(*codes: int) -> dict[str, Any]:
    words = {
        400: "The request is not one this API takes; the sentence says what to change.",
        401: "No token, or one this service does not have (unknown or revoked).",
        403: "The token lacks the scope, was revoked while sending, or a web page of another origin sent it.",
        404: "No such photo or batch for this token.",
        405: "Not a method this address takes.",
        408: "The upload stopped or was too slow; nothing of it was kept.",
        409: "The photo is not in a state for this (no result yet, already being restored), or the inbox changed.",
        410: "The result was moved or deleted from the outbox.",
        413: "Larger than the token's largest photo.",
        415: "Not a photo: a file type that is never restored.",
        422: "The Idempotency-Key was used for another request.",
        429: "Past a limit of the token (Retry-After says when to try again).",
        500: "The service could not put the photo into its inbox.",
        503: "The service did not answer (stopping, or busy).",
        507: "The inbox's disk is full.",
    }
    return {str(c): _json(_ref("Error"), words[c]) for c in codes}


COMMON = (401, 403, 429, 503)
SETTING_WORDS = {
    "restore.model": ("The face model, by name.", {"type": "string", "enum": list(FACE_MODEL_NAMES)}),
    "restore.strength": (
        "How much of the restored face replaces the original, 0 to 1.",
        {"type": "number", "minimum": 0, "maximum": 1},
    ),
    "restore.fidelity": (
        "CodeFormer's fidelity weight w: 0 (the most restored) to 1 (the most faithful to the photo); "
        "only for a model that has one.",
        {"type": "number", "minimum": 0, "maximum": 1},
    ),
    "restore.faces": (
        "Which faces: all, largest or center.",
        {"type": "string", "enum": ["all", "largest", "center"]},
    ),
    "restore.upscale": (
        "Upscale the whole photo: 1 (off), 2 or 4.",
        {"type": "string", "enum": ["1", "2", "4"]},
    ),
    "output.format": (
        "The result's format: the photo's own (same), or another.",
        {"type": "string", "enum": list(typing.get_args(OutputFormat))},
    ),
}


def _id_param() -> dict[str, Any]:
    return {
        "name": "id",
        "in": "path",
        "required": True,
        "description": "The photo's id, as the submit answered.",
        "schema": {"type": "integer", "minimum": 1, "maximum": MAX_ID},
    }


def _batch_param() -> dict[str, Any]:
    return {
        "name": "batch",
        "in": "path",
        "required": True,
        "schema": {"type": "string", "pattern": "^[A-Za-z0-9._-]{1,64}$"},
    }


def _schemas() -> dict[str, Any]:
    nullable_str = {"type": ["string", "null"]}
    return {
        "Error": {
            "type": "object",
            "required": ["error"],
            "properties": {
                "error": {"type": "string", "description": "What went wrong and what to do, in one sentence."}
            },
        },
        "Photo": {
            "type": "object",
            "required": ["id", "name", "state", "final", "settings", "result", "report", "events"],
            "properties": {
                "id": {"type": "integer"},
                "name": {"type": "string", "description": "Where it is in its inbox ('/' between folders)."},
                "inbox": {"type": ["integer", "null"], "description": "The inbox's number (GET /api/v1/)."},
                "batch": nullable_str,
                "state": {
                    "type": "string",
                    "enum": ["queued", "running", "done", "failed", "unsupported", "duplicate", "gone"],
                },
                "final": {"type": "boolean", "description": "It has ended: its state changes no more."},
                "settings": {"type": "object", "additionalProperties": {"type": "string"}},
                "created": {"type": "number"},
                "finished": {"type": ["number", "null"]},
                "faces": {"type": ["integer", "null"], "description": "Faces restored."},
                "error": nullable_str,
                "notes": {"type": "array", "items": {"type": "string"}},
                "result": {
                    "type": ["object", "null"],
                    "required": ["url", "name", "run"],
                    "properties": {
                        "url": {"type": "string"},
                        "name": {"type": "string"},
                        "run": {"type": "integer"},
                    },
                },
                "report": {"type": "string"},
                "events": {"type": "string"},
                "note": {
                    "type": "string",
                    "description": "What the service changed (a name taken, a copy made).",
                },
            },
        },
        "Batch": {
            "type": "object",
            "required": ["batch", "total", "waiting", "counts", "final", "photos"],
            "properties": {
                "batch": {"type": "string"},
                "total": {"type": "integer"},
                "waiting": {"type": "integer"},
                "counts": {"type": "object", "additionalProperties": {"type": "integer"}},
                "final": {"type": "boolean"},
                "photos": {"type": "array", "items": _ref("Photo")},
                "next": {"type": ["integer", "null"], "description": "Pass as ?after= for the next page."},
            },
        },
        "Report": {
            "type": "object",
            "required": ["id", "run", "state", "faces"],
            "properties": {
                "id": {"type": "integer"},
                "run": {"type": "integer"},
                "state": {"type": "string"},
                "faces_restored": {"type": ["integer", "null"]},
                "faces": {
                    "type": ["array", "null"],
                    "description": "Every face found; null when its previews are no longer kept.",
                    "items": {
                        "type": "object",
                        "required": ["index", "box", "restored"],
                        "properties": {
                            "index": {"type": "integer"},
                            "box": {
                                "type": "array",
                                "items": {"type": "integer"},
                                "minItems": 4,
                                "maxItems": 4,
                            },
                            "score": {"type": ["number", "null"]},
                            "restored": {"type": "boolean"},
                            "reason": nullable_str,
                        },
                    },
                },
                "width": {"type": ["integer", "null"]},
                "height": {"type": ["integer", "null"]},
                "used": {"type": ["object", "null"]},
                "timings": {"type": "object", "additionalProperties": {"type": "number"}},
                "notes": {"type": "array", "items": {"type": "string"}},
                "error": nullable_str,
            },
        },
        "Info": {
            "type": "object",
            "required": ["service", "version", "api", "scopes", "inboxes", "settings", "limits"],
            "properties": {
                "service": {"type": "string"},
                "version": {"type": "string"},
                "api": {"type": "string"},
                "client": {"type": "string"},
                "scopes": {"type": "array", "items": {"type": "string", "enum": list(SCOPES)}},
                "inboxes": {"type": "array", "items": {"type": "object"}},
                "settings": {"type": "array", "items": {"type": "string"}},
                "limits": {"type": "object"},
            },
        },
    }


def document(version: str) -> dict[str, Any]:
    submit_params: list[dict[str, Any]] = [
        {
            "name": "name",
            "in": "query",
            "required": True,
            "description": "The photo's file name; folders inside the inbox with '/' (an inbox that takes "
            "subfolders). A name that leads out of the inbox, or that the inbox's watcher leaves alone (hidden, "
            "partial, a document), is refused (400, 415) with why.",
            "schema": {
                "type": "string",
                "minLength": 1,
                "maxLength": 4096,
                "pattern": "^[^\\x00-\\x1f\\x7f]+$",
            },
        },
        {
            "name": "inbox",
            "in": "query",
            "description": "The inbox's number (0: the first).",
            "schema": {"type": "integer", "minimum": 0},
        },
        {
            "name": "batch",
            "in": "query",
            "description": "A name of the client's choice that groups photos (a new one when left out).",
            "schema": {"type": "string", "pattern": "^[A-Za-z0-9._-]{1,64}$"},
        },
        {
            "name": "Idempotency-Key",
            "in": "header",
            "description": "The same key with the same request gives the same photo, however often it is sent.",
            "schema": {"type": "string", "pattern": "^[\\x21-\\x7e]{1,255}$"},
        },
    ]
    for key in SENT_SETTINGS:
        words, schema = SETTING_WORDS[key]
        submit_params.append({"name": key, "in": "query", "description": words, "schema": schema})
    photo_ok = _json(_ref("Photo"), "The photo.")
    by_id = {"id": "$response.body#/id"}
    links = {
        name: {"operationId": op, "parameters": by_id}
        for name, op in (
            ("photo", "getPhoto"),
            ("events", "followPhoto"),
            ("result", "getResult"),
            ("report", "getReport"),
            ("cancel", "cancelPhoto"),
        )
    } | {
        name: {"operationId": op, "parameters": {"batch": "$response.body#/batch"}}
        for name, op in (("batch", "getBatch"), ("batchEvents", "followBatch"), ("batchZip", "zipBatch"))
    }
    sent = photo_ok | {"links": links}
    paths: dict[str, Any] = {
        "/api/v1/openapi.json": {
            "get": {
                "operationId": "openapi",
                "summary": "This document.",
                "security": [],
                "responses": {
                    "200": {
                        "description": "The OpenAPI document.",
                        "content": {JSON: {"schema": {"type": "object"}}},
                    }
                },
            }
        },
        "/api/v1/": {
            "get": {
                "operationId": "info",
                "summary": "The service, the inboxes, the settings a photo may bring and this token's limits.",
                "responses": {"200": _json(_ref("Info"), "What this token may do."), **_errors(*COMMON)},
            }
        },
        "/api/v1/photos": {
            "post": {
                "operationId": "submitPhoto",
                "summary": "Send one photo (the body) with its settings; scope submit.",
                "parameters": submit_params,
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/octet-stream": {
                            "schema": {"type": "string", "format": "binary", "minLength": 1}
                        }
                    },
                },
                "responses": {
                    "201": sent | {"description": "Taken: the photo, queued like a dropped file."},
                    "200": sent | {"description": "Sent before with this Idempotency-Key: the same photo."},
                    **_errors(400, 404, 408, 409, 413, 415, 422, 500, 507, *COMMON),
                },
            }
        },
        "/api/v1/photos/{id}": {
            "get": {
                "operationId": "getPhoto",
                "summary": "A photo's state; scope read.",
                "parameters": [_id_param()],
                "responses": {"200": photo_ok, **_errors(404, *COMMON)},
            }
        },
        "/api/v1/photos/{id}/events": {
            "get": {
                "operationId": "followPhoto",
                "summary": "Server-Sent Events: the photo (event 'photo', JSON) each time it changes, until it has ended.",
                "parameters": [_id_param()],
                "responses": {
                    "200": {
                        "description": "The stream.",
                        "content": {"text/event-stream": {"schema": EVENT}},
                    },
                    **_errors(404, *COMMON),
                },
            }
        },
        "/api/v1/photos/{id}/result": {
            "get": {
                "operationId": "getResult",
                "summary": "The restored photo, once done.",
                "parameters": [_id_param()],
                "responses": {
                    "200": {
                        "description": "The result's bytes: image/jpeg, image/png..., or "
                        "application/octet-stream for a name without an image's extension.",
                        "content": {
                            "image/*": {"schema": {"type": "string", "format": "binary"}},
                            "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
                        },
                    },
                    **_errors(404, 409, 410, *COMMON),
                },
            }
        },
        "/api/v1/photos/{id}/report": {
            "get": {
                "operationId": "getReport",
                "summary": "Each face found, restored or why not, the settings used and the time each stage took.",
                "parameters": [_id_param()],
                "responses": {"200": _json(_ref("Report"), "The report."), **_errors(404, *COMMON)},
            }
        },
        "/api/v1/photos/{id}/cancel": {
            "post": {
                "operationId": "cancelPhoto",
                "summary": "Take back a photo still waiting (its file leaves the inbox); scope submit.",
                "parameters": [_id_param()],
                "responses": {"200": photo_ok, **_errors(404, 409, 500, *COMMON)},
            }
        },
        "/api/v1/batches/{batch}": {
            "get": {
                "operationId": "getBatch",
                "summary": "A batch's photos, in the order sent, a page at a time, with its counts.",
                "parameters": [
                    _batch_param(),
                    {
                        "name": "after",
                        "in": "query",
                        "schema": {"type": "integer", "minimum": 0, "maximum": MAX_ID},
                    },
                    {
                        "name": "limit",
                        "in": "query",
                        "schema": {"type": "integer", "minimum": 1, "maximum": 1000},
                    },
                ],
                "responses": {"200": _json(_ref("Batch"), "The batch."), **_errors(400, 404, *COMMON)},
            }
        },
        "/api/v1/batches/{batch}/events": {
            "get": {
                "operationId": "followBatch",
                "summary": "Server-Sent Events: the batch's counts (event 'batch', JSON) as they change, until none waits.",
                "parameters": [_batch_param()],
                "responses": {
                    "200": {
                        "description": "The stream.",
                        "content": {"text/event-stream": {"schema": EVENT}},
                    },
                    **_errors(404, *COMMON),
                },
            }
        },
        "/api/v1/batches/{batch}/results.zip": {
            "get": {
                "operationId": "zipBatch",
                "summary": "The batch's results as one zip, streamed as it is built.",
                "parameters": [_batch_param()],
                "responses": {
                    "200": {
                        "description": "The zip.",
                        "content": {"application/zip": {"schema": {"type": "string", "format": "binary"}}},
                    },
                    **_errors(404, *COMMON),
                },
            }
        },
        "/api/v1/results.zip": {
            "post": {
                "operationId": "zipPhotos",
                "summary": "The results of the photos named, as one zip, streamed.",
                "requestBody": {
                    "required": True,
                    "content": {
                        JSON: {
                            "schema": {
                                "type": "object",
                                "required": ["ids"],
                                "properties": {
                                    "ids": {
                                        "type": "array",
                                        "minItems": 1,
                                        "maxItems": 10_000,
                                        "items": {"type": "integer", "minimum": 1, "maximum": MAX_ID},
                                    }
                                },
                            }
                        }
                    },
                },
                "responses": {
                    "200": {
                        "description": "The zip.",
                        "content": {"application/zip": {"schema": {"type": "string", "format": "binary"}}},
                    },
                    **_errors(400, 404, *COMMON),
                },
            }
        },
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "gpen-watch",
            "version": version,
            "description": "Send photos to a running gpen-watch and get them back with their faces restored.",
        },
        "servers": [{"url": "/"}],
        "security": [{"token": []}],
        "components": {
            "securitySchemes": {
                "token": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "A token of `gpen-watch api token create`, or the service's own login token.",
                }
            },
            "schemas": _schemas(),
        },
        "paths": paths,
    }
