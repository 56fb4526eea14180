"""A photo redone with another model beside its result, compared and one kept, through a real
`gpen-watch run` and its dashboard (the stand-in restorer: what is tested is the service's
bookkeeping and the dashboard, not the networks): the redo's refusals, the keep endpoint against
hostile requests, and a keep that leaves one result at the photo's name."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import isolated_env
from dashboard_client import Dashboard, Reply, served_dashboard
from service_harness import queue_empty, write_atomic

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture
def dash(tmp_path: Path, grace_hopper_path: Path) -> Iterator[Dashboard]:
    with served_dashboard(tmp_path) as d, isolated_env(d.home):
        write_atomic(d.svc.inbox / "portrait.jpg", grace_hopper_path.read_bytes())
        d.svc.wait(lambda s: s["queue"]["done"] >= 1, 60, "the photo restored")
        yield d


def post_json(d: Dashboard, path: str, body: dict[str, Any]) -> Reply:
    return d.post(path, {"Content-Type": "application/json"}, json.dumps(body).encode())


def first_run(d: Dashboard) -> int:
    photos = d.get("/api/results").json()["photos"]
    return int(next(p["id"] for p in photos if p["name"] == "portrait.jpg"))


def redo_beside(d: Dashboard, run: int, **settings: Any) -> int:
    r = post_json(d, f"/api/redo/{run}", {"settings": settings, "beside": True})
    assert r.status == 200, r.text
    new = int(r.json()["id"])
    d.svc.wait(queue_empty, 60, f"run {new}")
    return new


def test_a_redo_beside_is_compared_and_the_keep_endpoint_refuses_hostile_requests(dash: Dashboard) -> None:
    d = dash
    first = first_run(d)
    refused = post_json(
        d,
        f"/api/redo/{first}",
        {"settings": {"restore.model": "GFPGAN-v1.4", "restore.fidelity": 0.7}, "beside": True},
    )
    assert (
        refused.status == 409
        and "restore.fidelity: is a weight of CodeFormer only" in refused.json()["error"]
    )
    second = redo_beside(d, first, **{"restore.model": "GFPGAN-v1.4", "restore.strength": 0.8})
    beside = d.svc.outbox / "portrait (GFPGAN-v1.4).jpg"
    assert sorted(p.name for p in d.svc.outbox.iterdir()) == ["portrait (GFPGAN-v1.4).jpg", "portrait.jpg"]
    again = post_json(d, f"/api/redo/{second}", {"settings": {"restore.model": "CodeFormer"}, "beside": True})
    assert again.status == 409 and "has two results to compare already" in again.json()["error"]

    page = d.get(f"/photo/{second}").text
    assert 'id="compare-results"' in page and f"/photo/{first}/compare/{second}" in page
    compare = d.get(f"/photo/{first}/compare/{second}")
    assert compare.status == 200
    assert f'id="keep-{first}"' in compare.text and f'id="keep-{second}"' in compare.text
    assert "GFPGAN-v1.4, strength 0.8" in compare.text and "is removed (output.unkept_result)" in compare.text
    for run in (first, second):  # both results are there to download while compared
        assert d.get(f"/photo/{run}/download/result").status == 200

    own = {"Origin": f"http://{d.host}", "Content-Type": "application/x-www-form-urlencoded"}
    body = f"other={first}".encode()
    hostile = [
        (d.raw("POST", f"/api/keep/{second}", own, body, signed_in=False), 401),
        (d.raw("POST", f"/api/keep/{second}", {**own, "Origin": "http://evil.example"}, body), 403),
        (d.raw("POST", f"/api/keep/{second}", {**own, "Origin": "null"}, body), 403),
        (d.get(f"/api/keep/{second}"), 405),
        (d.post(f"/api/keep/{second}", {"Content-Type": "text/plain"}, body), 400),
        (post_json(d, f"/api/keep/{second}", {"other": "1; DROP TABLE jobs"}), 400),
        (post_json(d, f"/api/keep/{second}", {"other": True}), 400),
        (post_json(d, f"/api/keep/{second}", {"other": 10**30}), 400),
        (post_json(d, f"/api/keep/{second}", {}), 400),
        (post_json(d, f"/api/keep/{second}", {"other": second}), 409),  # itself
        (post_json(d, f"/api/keep/{second}", {"other": 999_999}), 409),  # no such run
        (post_json(d, f"/api/keep/{second}", {"other": first, "pad": "x" * 5000}), 413),
    ]
    for reply, status in hostile:
        assert reply.status == status, (status, reply.status, reply.text[:300])
    assert sorted(p.name for p in d.svc.outbox.iterdir()) == ["portrait (GFPGAN-v1.4).jpg", "portrait.jpg"]

    kept_ino = beside.stat().st_ino
    ok = post_json(d, f"/api/keep/{second}", {"other": first})
    assert ok.status == 200 and ok.json()["output"] == str(d.svc.outbox / "portrait.jpg"), ok.text
    assert [p.name for p in d.svc.outbox.iterdir()] == ["portrait.jpg"]
    assert os.stat(d.svc.outbox / "portrait.jpg").st_ino == kept_ino
    assert d.get(f"/photo/{first}/download/result").status == 404
    assert d.get(f"/photo/{second}/download/result").status == 200
    listed = [p["id"] for p in d.get("/api/results").json()["photos"] if p["name"] == "portrait.jpg"]
    assert listed == [second]
    assert post_json(d, f"/api/keep/{first}", {"other": second}).status == 409  # decided already
