"""Security: model files only through weights_only, a control channel that refuses strangers and
survives abuse, output names that cannot leave the outbox. (Links and special files in the inbox are
bad-input kinds in test_bad_inputs; a code-running pickle given as the model is in test_engine_faults;
the channel's unit tests are in tests/test_control.py.)"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import gpen_watch
from gpen_watch import config
from gpen_watch.base.errors import ConfigError
from gpen_watch.platform import paths
from gpen_watch.service import control

from . import inputs
from .harness import write_atomic
from .invariants import Ledger, check

PACKAGE = Path(gpen_watch.__file__).parent


# --- model files ------------------------------------------------------------------------------------


def _calls(tree: ast.AST) -> list[tuple[str, ast.Call]]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            out.append((ast.unparse(node.func), node))
    return out


def test_every_model_load_is_weights_only() -> None:
    """No code path unpickles a weights file with code execution allowed: every torch.load passes
    weights_only=True, and nothing calls pickle/torch.jit loaders on files."""
    loads = []
    for path in PACKAGE.rglob("*.py"):
        for name, call in _calls(ast.parse(path.read_text(encoding="utf-8"))):
            where = f"{path.relative_to(PACKAGE)}:{call.lineno}"
            if name == "torch.load":
                kw = {k.arg: k.value for k in call.keywords}
                ok = isinstance(kw.get("weights_only"), ast.Constant) and kw["weights_only"].value is True
                assert ok, f"{where}: torch.load without weights_only=True"
                loads.append(where)
            assert name not in (
                "pickle.load",
                "pickle.loads",
                "torch.jit.load",
                "dill.load",
                "joblib.load",
            ), where
    assert loads, "no torch.load found: has model loading moved? update this test"


# --- the control channel ------------------------------------------------------------------------------


def _raw_client() -> tuple[socket.socket, Any, dict[str, Any]]:
    secret = json.loads((paths.runtime_dir() / control.SECRET_NAME).read_text())
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(10)
    sock.connect(secret["address"].partition(":")[2])
    reader = sock.makefile("rb")
    hello = json.loads(reader.readline())
    return sock, reader, hello


def _hung_up(sock: socket.socket, reader: Any) -> bool:
    """The server closed the connection (EOF, or a reset when it left our bytes unread)."""
    try:
        return reader.readline() == b""
    except (ConnectionResetError, BrokenPipeError):
        return True


def test_control_channel_refuses_strangers_and_survives_abuse(services: Any) -> None:
    svc = services().start()
    folder = paths.runtime_dir()
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    for name in (control.SOCKET_NAME, control.SECRET_NAME):
        assert stat.S_IMODE((folder / name).stat().st_mode) == 0o600, name

    # Without the secret: a guessed answer is refused, and the command is never run.
    sock, reader, hello = _raw_client()
    assert "nonce" in hello
    assert "token" not in json.dumps(hello)
    sock.sendall(json.dumps({"auth": "0" * 64}).encode() + b"\n")
    assert json.loads(reader.readline()) == {"ok": False, "error": "authentication failed"}
    with contextlib.suppress(OSError):
        sock.sendall(b'{"cmd": "stop"}\n')
    assert _hung_up(sock, reader)
    sock.close()

    # Abuse: clients that connect and say nothing, one that sends 2 MB without a newline, one that
    # sends garbage. None may stall the service or its answers to the real user.
    idle = [_raw_client()[0] for _ in range(30)]
    flood, _, _ = _raw_client()
    with contextlib.suppress(OSError):  # the server hangs up after 1 MB (its longest line)
        flood.sendall(b"x" * (2 << 20))
    junk, junk_reader, _ = _raw_client()
    junk.sendall(b"\xff\xfe not json \n")
    t0 = time.monotonic()
    s = control.request("status")
    took = time.monotonic() - t0
    assert s["ok"], took
    assert took < 2.0, took
    assert _hung_up(junk, junk_reader)  # dropped
    for c in (*idle, flood, junk):
        c.close()
    assert svc.alive()
    assert control.request("status")["ok"]
    assert "refused a client that failed authentication" in svc.log_text()
    assert svc.stop() == 0


# --- output names ----------------------------------------------------------------------------------------


TEMPLATE_INJECTIONS = [
    "../{stem}{ext}",
    "{stem}/../../escaped{ext}",
    "/etc/{name}",
    "sub/{name}",
    "..{sep}{name}",
    "{name.__class__}",
    "{stem!r}{ext}",
    "{0}{ext}",
    "{stem:>300}{ext}",
    "{stem.__init__.__globals__}",
    "{ext[0]}",
    "{stem}\\..\\{ext}",
]


@pytest.mark.parametrize("template", TEMPLATE_INJECTIONS)
def test_name_template_injection_is_refused_by_the_settings(tmp_path: Path, template: str) -> None:
    with pytest.raises(ConfigError, match=r"^output\.name_template: "):
        config.load(tmp_path / "none.toml", {"output.name_template": template})


# The same refusal from `gpen-watch run` itself, for a path and for a field (a subprocess each).
@pytest.mark.parametrize("template", ["../{stem}{ext}", "{name.__class__}"])
def test_name_template_injection_is_refused_at_start(tmp_path: Path, template: str) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpen_watch",
            "run",
            "--no-tray",
            "--inbox",
            str(tmp_path / "in"),
            "--outbox",
            str(tmp_path / "out"),
            "--set",
            f"output.name_template={template}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2, (out.returncode, out.stderr)
    assert "output.name_template" in out.stderr, out.stderr
    assert not (tmp_path / "out").exists()  # refused before anything was created


HOSTILE_NAMES = [
    "{name}.jpg",
    "{0.__class__}.jpg",
    "{stem!r}.jpg",
    "%s%n%x.jpg",
    "$(touch pwned).jpg",
    "`id`.jpg",
    "a;rm -rf ~.jpg",
    "line\nbreak.jpg",
    "tab\there.jpg",
    "back\\slash.jpg",
    "c:ol*on?.jpg",
    "..jpg.jpg",
    "...jpg",
    "\u202egpj.exe.jpg",
    "nul.jpg",
    "CON.jpg",
    " leading space.jpg",
    "trailing dot..jpg",
]


def test_hostile_file_names_stay_inside_the_outbox(services: Any) -> None:
    """File names full of template syntax, shell syntax, control characters and Windows device names:
    each is restored to a name inside the outbox (the invariant checks every output's path), none is
    interpreted, and a hostile template renders them as plain text."""
    svc = services("--set", "output.name_template=restored-{stem}-{date}{ext}")
    ledger = Ledger(svc.inbox)
    for i, name in enumerate(HOSTILE_NAMES):
        data = inputs.jpeg(64, 64, seed=3000 + i)
        write_atomic(svc.inbox / name, data)
        ledger.add(name, data, {"done"} if not name.startswith(".") else {"ignored"})
    svc.start()
    svc.wait_idle(ledger.jobs_expected())
    assert svc.stop() == 0
    check(svc, ledger)
    outputs = [p.name for p in svc.outbox.rglob("*") if p.is_file()]
    assert len(outputs) == ledger.jobs_expected()
    for name in outputs:
        assert name.startswith("restored-"), name
        assert "\n" not in name, name
        assert "/" not in name, name
    assert not any(p.name == "pwned" for p in Path.cwd().iterdir())
    assert not (Path(os.environ["HOME"]) / "pwned").exists()
