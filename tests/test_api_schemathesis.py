"""The served OpenAPI document held to the server: schemathesis generates requests from
/api/v1/openapi.json (its examples, coverage, fuzzing and stateful phases, every check) and sends
them to a real service with a scoped token; then the service must still be whole: every photo
those requests sent ended, none left half-written in the inbox."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from api_harness import token, uploads_left
from dashboard_client import Dashboard, served_dashboard
from service_harness import queue_empty

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

# Where the schema cannot say it all: a photo's name must also be one the inbox's watcher takes (not
# hidden, not partial, not a document, not leading out of the inbox), so a name the schema allows
# may be refused with 400 or 415 and the reason; and the same Idempotency-Key with another request
# is 422 (the stateful phase reuses headers across requests).
CONFIG = """
[checks.positive_data_acceptance]
expected-statuses = ["2xx", 401, 403, 404, 409, 422, 429]

[[operations]]
include-operation-id = "submitPhoto"
checks.positive_data_acceptance.expected-statuses = ["2xx", 400, 401, 403, 404, 409, 415, 422, 429]
"""


@pytest.fixture(scope="module")
def dash(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dashboard]:
    with served_dashboard(tmp_path_factory.mktemp("schemathesis")) as d:
        yield d


def schemathesis() -> list[str]:
    found = shutil.which("schemathesis", path=str(Path(sys.executable).parent))
    if found is None:
        pytest.skip("schemathesis is not installed (the test extra has it)")
    return [found]


def test_the_server_answers_as_its_openapi_document_says(dash: Dashboard, tmp_path: Path) -> None:
    config = tmp_path / "schemathesis.toml"
    config.write_text(CONFIG)
    bearer = token(dash, "fuzzer")
    run = subprocess.run(
        [
            *schemathesis(),
            "--config-file",
            str(config),
            "run",
            dash.url + "api/v1/openapi.json",
            "-H",
            f"Authorization: Bearer {bearer}",
            "--checks",
            "all",
            "--workers",
            "2",
            "--max-examples",
            "60",
            "--request-timeout",
            "30",
            "--seed",
            "20261206",
            "--no-color",
        ],
        capture_output=True,
        text=True,
        timeout=540,
    )
    assert run.returncode == 0, run.stdout[-20000:] + run.stderr[-3000:]
    assert " passed" in run.stdout and "failed" not in run.stdout.rpartition("SUMMARY")[2]
    dash.wait(queue_empty, 120, "the photos sent to end")
    assert uploads_left(dash) == []
    assert dash.status()["ok"]
