"""Model store: registry, search folders, safe downloads, checked loading, `gpen-watch models`.

No weights can be downloaded here, so the real architectures are built with random weights, saved,
and loaded back through the same code path users take with the real files. Downloads go to an HTTP
server on 127.0.0.1.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import http.server
import os
import pickle
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from gpen_watch import cli
from gpen_watch.base.errors import ModelError
from gpen_watch.catalog import model_spec, registry
from gpen_watch.catalog.model_spec import ModelSpec
from gpen_watch.modelstore import store
from gpen_watch.modelstore.download import DownloadError, download
from gpen_watch.platform import paths, program
from gpen_watch.restore.engines import verify
from gpen_watch.restore.engines.gpen_family import load_gpen

DATA = Path(__file__).parent / "data"
MOBILE = registry.get_spec("RetinaFace-MobileNet0.25")
R50 = registry.get_spec("RetinaFace-R50")
PARSENET = registry.get_spec("ParseNet")


@pytest.fixture(autouse=True)
def _isolated_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # platformdirs reads XDG_* on every call, so the cache and config land in tmp.
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    monkeypatch.delenv(store.ENV_MODEL_DIR, raising=False)


# --- helpers ------------------------------------------------------------------------------------


def save_random(spec: ModelSpec, path: Path, prefix: str = "", wrap: str | None = None) -> dict:
    """Build ``spec``'s real architecture with random weights and save its state dict to ``path``."""
    torch.manual_seed(0)
    state = verify.build_model(spec).state_dict()
    saved = {prefix + k: v for k, v in state.items()}
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({wrap: saved} if wrap else saved, path)
    return state


def assert_same_weights(model: torch.nn.Module, state: dict) -> None:
    loaded = model.state_dict()
    assert loaded.keys() == state.keys()
    for key, value in state.items():
        assert torch.equal(loaded[key].cpu(), value), key


@pytest.fixture(scope="module")
def big_models(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, dict]:
    """ResNet-50 RetinaFace (27 M params) and ParseNet (21 M), saved once for the module."""
    folder = tmp_path_factory.mktemp("big-models")
    r50 = save_random(R50, folder / R50.filename, prefix="module.")
    parse = save_random(PARSENET, folder / PARSENET.filename)
    return folder, r50, parse


class _Handler(http.server.SimpleHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/short":
            # Promises 1000 bytes, sends 10, hangs up: a connection cut mid-transfer.
            self.send_response(200)
            self.send_header("Content-Length", "1000")
            self.end_headers()
            self.wfile.write(b"0123456789")
            self.wfile.flush()
            self.close_connection = True
            return
        if self.path == "/busy":
            self.send_error(503)
            return
        super().do_GET()

    def log_message(self, format: str, *args: object) -> None:  # keep test output clean
        pass


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """(base URL, folder it serves)."""
    root = tmp_path / "www"
    root.mkdir()
    httpd = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_Handler, directory=str(root))
    )
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", root
    finally:
        httpd.shutdown()
        httpd.server_close()


def refused_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/x.pth"


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


# --- registry -----------------------------------------------------------------------------------


def test_registry_names_and_lookups() -> None:
    assert registry.model_names() == (
        "GPEN-BFR-512",
        "GPEN-BFR-256",
        "GPEN-BFR-1024",
        "GPEN-BFR-2048",
        "RetinaFace-R50",
        "RetinaFace-MobileNet0.25",
        "ParseNet",
        "GFPGAN-v1.4",
        "GFPGAN-v1.3",
        "CodeFormer",
        "RealESRNet-x2",
        "RealESRNet-x4",
        "RealESRGAN-x2plus",
        "RealESRGAN-x4plus",
        "dlib-face-recognition",
        "dlib-landmarks-5",
    )
    assert registry.get_spec("gpen-bfr-512").filename == "GPEN-BFR-512.pth"
    assert registry.detector_spec("retinaface_resnet50") is R50
    assert registry.detector_spec("retinaface_mobile0.25") is MOBILE
    assert registry.get_spec("retinaface_mobile0.25") is MOBILE
    assert R50.url.endswith("/detection_Resnet50_Final.pth")
    assert R50.mirrors[0].endswith("/RetinaFace-R50.pth")
    assert registry.spec_for_filename("RetinaFace-R50.pth") is R50
    from gpen_watch.config import RestoreConfig
    from gpen_watch.modelstore import needs

    # What the default configuration needs (`models fetch` with no names, the first run).
    assert [s.name for s in needs.needed_specs(RestoreConfig())] == [
        "GPEN-BFR-512",
        "RetinaFace-R50",
        "ParseNet",
    ]
    pinned = {spec.name: (spec.size_bytes, spec.sha256) for spec in registry.all_specs()}
    # The published files' values; the others have none published, so none are invented.
    assert pinned == {
        "GPEN-BFR-512": (284_085_738, "f1002c41add95b0decad69604d80455576f7187dd99ca16bd611bcfd44c10b51"),
        "GPEN-BFR-256": (None, None),
        "GPEN-BFR-1024": (None, None),
        "GPEN-BFR-2048": (None, None),
        "RetinaFace-R50": (109_497_761, "6d1de9c2944f2ccddca5f5e010ea5ae64a39845a86311af6fdf30841b0a5a16d"),
        "RetinaFace-MobileNet0.25": (None, None),
        "ParseNet": (85_331_193, "3d558d8d0e42c20224f13cf5a29c79eba2d59913419f945545d8cf7b72920de2"),
        "GFPGAN-v1.4": (348_632_874, "e2cd4703ab14f4d01fd1383a8a8b266f9a5833dacee8e6a79d3bf21a1b6be5ad"),
        "GFPGAN-v1.3": (348_632_874, "c953a88f2727c85c3d9ae72e2bd4846bbaf59fe6972ad94130e23e7017524a70"),
        "CodeFormer": (376_637_898, "1009e537e0c2a07d4cabce6355f53cb66767cd4b4297ec7a4a64ca4b8a5684b7"),
        "RealESRNet-x2": (None, None),
        "RealESRNet-x4": (None, None),
        "RealESRGAN-x2plus": (None, None),
        "RealESRGAN-x4plus": (None, None),
        "dlib-face-recognition": (
            22_466_066,
            "55533b28a95800a551ba546ba62fe69625c7e95a7061c338adffead08719da30",
        ),
        "dlib-landmarks-5": (9_150_489, "c4b1e9804792707d3a405c2c16a80a20269e6675021f64a41d30fffafbc41888"),
    }
    assert registry.spec_for_filename("ParseNet-latest.pth") is PARSENET
    # The GPEN authors' ModelScope release: 1024 is pytorch_model.pt, 2048 pytorch_model-2048.pt.
    hires = "https://www.modelscope.cn/models/iic/cv_gpen_image-portrait-enhancement-hires/resolve/master/"
    assert registry.get_spec("GPEN-BFR-1024").url == hires + "pytorch_model.pt"
    assert registry.get_spec("GPEN-BFR-2048").url == hires + "pytorch_model-2048.pt"
    assert registry.get_spec("GPEN-BFR-512").size_text == "284.1 MB, 284,085,738 bytes"
    assert registry.get_spec("GPEN-BFR-256").size_text == "~76 MB"
    for spec in registry.all_specs():
        assert spec.url.startswith("https://")
        assert spec.terms.answer.startswith(("Yes", "No", "Not as far")) and spec.terms.url.startswith(
            "https://"
        )
    assert "non-commercial" in registry.get_spec("GPEN-BFR-256").terms.answer
    with pytest.raises(dataclasses.FrozenInstanceError):
        MOBILE.url = "x"  # type: ignore[misc]
    with pytest.raises(ModelError, match="known models: GPEN-BFR-512"):
        registry.get_spec("GPEN-BFR-4096")
    with pytest.raises(ModelError, match="retinaface_resnet50"):
        registry.detector_spec("dlib")


def test_config_names_are_all_registered() -> None:
    from gpen_watch import config

    families = {f.kind for f in registry.FACE_FAMILIES}
    assert families == {"gpen", "gfpgan", "codeformer"}
    for name in registry.FACE_MODEL_NAMES:
        assert registry.get_spec(name).kind in families
    for name in config.DETECTOR_NAMES:
        assert registry.detector_spec(name).kind == "detector"


def test_light_modules_do_not_import_torch() -> None:
    code = (
        "import sys, gpen_watch.modelstore.store, gpen_watch.cli.models, gpen_watch.modelstore.needs,"
        " gpen_watch.modelstore.fetcher, gpen_watch.service.model_gate;"
        "assert 'torch' not in sys.modules, 'torch imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# --- search folders -----------------------------------------------------------------------------


def test_search_dirs_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = paths.model_cache_dir()
    assert str(cache).startswith(str(tmp_path))
    assert store.model_search_dirs(None) == [cache]
    monkeypatch.setenv(store.ENV_MODEL_DIR, f"{tmp_path / 'e1'}{os.pathsep}{tmp_path / 'e2'}")
    assert store.model_search_dirs(tmp_path / "x") == [
        tmp_path / "x",
        tmp_path / "e1",
        tmp_path / "e2",
        cache,
    ]
    assert store.model_search_dirs(None, env={}) == [cache]


def test_find_model_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    explicit, env_dir, cache = tmp_path / "explicit", tmp_path / "env", paths.model_cache_dir()
    assert store.find_model(MOBILE, explicit) is None
    for folder in (explicit, env_dir, cache):
        folder.mkdir(parents=True)
    (cache / MOBILE.filename).write_bytes(b"c")
    assert store.find_model(MOBILE, explicit) == cache / MOBILE.filename
    (env_dir / MOBILE.filename).write_bytes(b"e")
    monkeypatch.setenv(store.ENV_MODEL_DIR, str(env_dir))
    assert store.find_model(MOBILE, explicit) == env_dir / MOBILE.filename
    (explicit / MOBILE.filename).write_bytes(b"x")
    assert store.find_model(MOBILE, explicit) == explicit / MOBILE.filename
    assert store.ensure_model(MOBILE, explicit, download=False) == explicit / MOBILE.filename
    # GPEN's name for the same detector file is found too.
    (env_dir / "RetinaFace-R50.pth").write_bytes(b"r")
    assert store.find_model(R50, None) == env_dir / "RetinaFace-R50.pth"


def test_ensure_model_missing_without_download(tmp_path: Path) -> None:
    with pytest.raises(ModelError) as info:
        store.ensure_model(PARSENET, tmp_path / "mine", download=False)
    message = str(info.value)
    assert PARSENET.filename in message
    assert PARSENET.url in message
    assert str(tmp_path / "mine") in message
    assert str(paths.model_cache_dir()) in message
    assert f"    {program.command('models fetch ParseNet')}\n" in message


# --- download -----------------------------------------------------------------------------------


def test_download_ok(server: tuple[str, Path], tmp_path: Path) -> None:
    base, root = server
    body = os.urandom(3 * 1024 * 1024 + 17)  # several chunks
    (root / "w.pth").write_bytes(body)
    dest = tmp_path / "models" / "w.pth"
    out = download(
        f"{base}/w.pth",
        dest,
        expected_size=len(body),
        sha256=hashlib.sha256(body).hexdigest().upper(),
        progress=False,
    )
    assert out == dest
    assert dest.read_bytes() == body
    assert leftovers(dest.parent) == ["w.pth"]


def test_download_progress_bar_when_forced(
    server: tuple[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base, root = server
    (root / "w.pth").write_bytes(b"x" * 5000)
    download(f"{base}/w.pth", tmp_path / "w.pth", progress="always")
    assert "w.pth" in capsys.readouterr().err
    download(f"{base}/w.pth", tmp_path / "w2.pth", progress=True)  # stderr is not a tty here
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("bad", ["size", "sha256"])
def test_download_mismatch_leaves_nothing(server: tuple[str, Path], tmp_path: Path, bad: str) -> None:
    base, root = server
    body = b"weights" * 1000
    (root / "w.pth").write_bytes(body)
    dest = tmp_path / "models" / "w.pth"
    kwargs = {"expected_size": len(body) + 1} if bad == "size" else {"sha256": "0" * 64}
    with pytest.raises(DownloadError) as info:
        download(f"{base}/w.pth", dest, progress=False, **kwargs)
    assert f"{base}/w.pth" in str(info.value)
    assert "w.pth" in str(info.value)
    assert not info.value.network
    assert leftovers(dest.parent) == []


def test_failed_download_keeps_previous_file(server: tuple[str, Path], tmp_path: Path) -> None:
    base, root = server
    (root / "w.pth").write_bytes(b"new")
    dest = tmp_path / "w.pth"
    dest.write_bytes(b"old")
    with pytest.raises(DownloadError):
        download(f"{base}/w.pth", dest, sha256="0" * 64, progress=False)
    assert dest.read_bytes() == b"old"
    assert leftovers(tmp_path) == ["w.pth", "www"]


def test_download_cut_short(server: tuple[str, Path], tmp_path: Path) -> None:
    base, _ = server
    dest = tmp_path / "m" / "w.pth"
    with pytest.raises(
        DownloadError, match=re.escape("download cut short (10 of 1,000 bytes from 127.0.0.1")
    ):
        download(f"{base}/short", dest, progress=False)
    assert leftovers(dest.parent) == []


def test_download_404_and_refused(server: tuple[str, Path], tmp_path: Path) -> None:
    base, _ = server
    dest = tmp_path / "m" / "w.pth"
    for url, reason in (
        (f"{base}/missing.pth", "not on the server (HTTP 404"),
        (refused_url(), "connection refused"),
    ):
        with pytest.raises(DownloadError) as info:
            download(url, dest, progress=False, timeout=5)
        message = str(info.value)
        assert url in message
        assert reason in message
        assert f"put it at {dest}" in message
        assert info.value.network
        assert leftovers(dest.parent) == []


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that takes connections and never answers (the kernel accepts them into the backlog)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield listener.getsockname()[1]


OPENSSL_SELF_SIGNED = (
    "openssl",
    "req",
    "-x509",
    "-newkey",
    "rsa:2048",
    "-nodes",
    "-days",
    "1",
    "-subj",
    "/CN=127.0.0.1",
)


@pytest.fixture
def untrusted_https(tmp_path: Path, server: tuple[str, Path]) -> Iterator[str]:
    """An HTTPS server on loopback whose certificate is its own (self-signed): trusted by nobody."""
    import ssl

    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        [*OPENSSL_SELF_SIGNED, "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
        timeout=60,
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    _, root = server
    httpd = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_Handler, directory=str(root))
    )
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_every_way_a_download_fails_is_said_in_words(
    server: tuple[str, Path], silent_port: int, untrusted_https: str, tmp_path: Path
) -> None:
    """No resolver's or socket's own words ("Name or service not known", "[Errno 111]", "[SSL:
    ...]"): what happened, for a photographer, then the particulars. On loopback, and a name
    under the reserved .invalid domain, which no resolver finds: never the internet."""
    base, root = server
    (root / "w.pth").write_bytes(b"x")
    http_base = base.removeprefix("http://")
    cases = [
        (
            "http://gpen-watch-test.invalid/w.pth",
            "no internet connection (could not look up gpen-watch-test.invalid)",
        ),
        (refused_url(), "connection refused (127.0.0.1:"),
        (
            f"http://127.0.0.1:{silent_port}/w.pth",
            f"server did not answer (127.0.0.1:{silent_port}, waited 1 s)",
        ),
        (f"{base}/missing.pth", f"not on the server (HTTP 404 File not found from {http_base})"),
        (f"{base}/busy", f"server error (HTTP 503 Service Unavailable from {http_base})"),
        (f"https://{http_base}/w.pth", f"no secure connection ({http_base}: wrong version number)"),
        (f"{untrusted_https}/w.pth", "certificate not trusted (127.0.0.1:"),
    ]
    for url, said in cases:
        with pytest.raises(DownloadError) as info:
            download(url, tmp_path / "m" / "w.pth", progress=False, timeout=1)
        assert info.value.reason.startswith(said), (url, info.value.reason)
        assert info.value.network
        for raw in ("Errno", "[SSL", "Name or service", "urlopen error", "gaierror"):
            assert raw not in info.value.reason, (url, info.value.reason)
    assert "check this computer's date and time" in info.value.reason  # the certificate's: a local cause
    assert leftovers(tmp_path / "m") == []


def test_a_models_urls_failing_alike_are_said_under_one_headline(tmp_path: Path) -> None:
    """Offline, every URL of a model fails to look its server up: the message says "no internet
    connection" once, each URL's server under it, and every folder the file may be copied into;
    the service's short line says the headline alone."""
    spec = dataclasses.replace(
        PARSENET,
        url="http://one.gpen-watch-test.invalid/p.pth",
        mirrors=("http://two.gpen-watch-test.invalid/p.pth",),
    )
    with pytest.raises(ModelError) as info:
        store.fetch(spec, tmp_path / "mine", timeout=5, quiet=True, accepted=["PSFR-GAN"])
    lines = str(info.value).splitlines()
    assert lines[:3] == [
        f"cannot download {PARSENET.filename} (ParseNet): no internet connection",
        f"  from {spec.url}: could not look up one.gpen-watch-test.invalid",
        f"  from {spec.mirrors[0]}: could not look up two.gpen-watch-test.invalid",
    ]
    assert lines[3] == "  without internet access, download it from one of those addresses on another machine"
    assert lines[5:] == [
        f"    {tmp_path / 'mine'}",
        f"    {paths.model_cache_dir()} (the download cache)",
        "    a folder of your own, named by --model-dir, restore.model_dir or GPEN_WATCH_MODEL_DIR",
    ]
    reason = store.failure_reason(info.value)
    assert reason == (
        "no internet connection (could not look up one.gpen-watch-test.invalid; "
        "could not look up two.gpen-watch-test.invalid)"
    )
    from gpen_watch.modelstore import messages

    assert messages.failure_headline(reason) == "no internet connection"


def test_an_http_error_does_not_keep_its_connection_open(server: tuple[str, Path], tmp_path: Path) -> None:
    # urllib's HTTPError is the server's response too; the DownloadError keeps it as its cause,
    # so unless it is closed, every refused mirror holds a socket for as long as the error lives.
    base, _ = server
    with pytest.raises(DownloadError) as info:
        download(f"{base}/missing.pth", tmp_path / "w.pth", progress=False, timeout=5)
    cause = info.value.__cause__
    assert isinstance(cause, urllib.error.HTTPError)
    assert cause.code == 404
    assert cause.fp is not None
    assert cause.fp.closed


def test_download_rejects_other_schemes(tmp_path: Path) -> None:
    (tmp_path / "src").write_bytes(b"x")
    with pytest.raises(DownloadError, match="scheme"):
        download((tmp_path / "src").as_uri(), tmp_path / "dst", progress=False)
    assert not (tmp_path / "dst").exists()


def test_download_removes_only_stale_parts(server: tuple[str, Path], tmp_path: Path) -> None:
    base, root = server
    (root / "w.pth").write_bytes(b"x")
    stale, fresh = tmp_path / "w.pth.part-dead", tmp_path / "w.pth.part-live"
    stale.write_bytes(b"")
    fresh.write_bytes(b"")
    old = time.time() - 3 * 24 * 3600
    os.utime(stale, (old, old))
    download(f"{base}/w.pth", tmp_path / "w.pth", progress=False)
    assert not stale.exists()
    assert fresh.exists()


def test_ensure_model_downloads_into_cache(server: tuple[str, Path], tmp_path: Path) -> None:
    base, root = server
    (root / "det.pth").write_bytes(b"detector")
    spec = dataclasses.replace(MOBILE, url=f"{base}/gone.pth", mirrors=(f"{base}/det.pth",))
    path = store.ensure_model(spec, tmp_path / "explicit", progress=False)
    # First URL 404s, the mirror works; downloads always go to the cache, never the explicit folder.
    assert path == paths.model_cache_dir() / MOBILE.filename
    assert path.read_bytes() == b"detector"
    assert store.ensure_model(spec, tmp_path / "explicit", download=False) == path


def test_pinned_digest_refuses_a_different_download(server: tuple[str, Path], tmp_path: Path) -> None:
    base, root = server
    body = b"not the published ParseNet file"
    (root / "p.pth").write_bytes(body)
    spec = dataclasses.replace(PARSENET, url=f"{base}/p.pth", mirrors=(), size_bytes=len(body))
    with pytest.raises(ModelError) as info:
        store.ensure_model(spec, None, progress=False, accepted=["PSFR-GAN"])
    message = str(info.value)
    # Both digests, so the user can tell a wrong mirror from a damaged transfer.
    assert hashlib.sha256(body).hexdigest() in message
    assert PARSENET.sha256 in message
    assert "discarded" in message
    assert leftovers(paths.model_cache_dir()) == []


def test_mirrors_are_tried_in_order_and_the_log_says_which_served(
    server: tuple[str, Path], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    base, root = server
    body = b"the published ParseNet bytes"
    (root / "good.pth").write_bytes(body)
    (root / "wrong.pth").write_bytes(b"a different file of the same length!"[: len(body)])
    spec = dataclasses.replace(
        PARSENET,
        url=f"{base}/gone.pth",
        mirrors=(f"{base}/wrong.pth", f"{base}/good.pth"),
        size_bytes=len(body),
        sha256=hashlib.sha256(body).hexdigest(),
    )
    with caplog.at_level("INFO", logger="gpen_watch.modelstore.store"):
        path = store.ensure_model(spec, None, progress=False, accepted=["psfr-gan"])
    assert path.read_bytes() == body
    log = caplog.text
    assert f"could not download {PARSENET.filename} from {base}/gone.pth: not on the server (HTTP 404" in log
    # The mirror that served a file with another digest is named, with both digests.
    wrong = hashlib.sha256((root / "wrong.pth").read_bytes()).hexdigest()
    assert f"from {base}/wrong.pth: not the expected file (sha256 {wrong}, expected {spec.sha256}" in log
    assert f"{PARSENET.filename} served by mirror 2 ({base}/good.pth): size and sha256 checked" in log
    assert leftovers(paths.model_cache_dir()) == [PARSENET.filename]


def test_ensure_model_download_failure_names_file_url_and_folders(
    server: tuple[str, Path], tmp_path: Path
) -> None:
    base, _ = server
    spec = dataclasses.replace(PARSENET, url=f"{base}/gone.pth", mirrors=(refused_url(),))
    with pytest.raises(ModelError) as info:
        store.ensure_model(spec, tmp_path / "offline", progress=False, timeout=5, accepted=["PSFR-GAN"])
    message = str(info.value)
    assert PARSENET.filename in message
    assert spec.url in message
    assert spec.mirrors[0] in message
    assert str(tmp_path / "offline") in message
    assert str(paths.model_cache_dir()) in message
    assert leftovers(paths.model_cache_dir()) == []
    # Each URL's failure in words on a line of its own, then every folder a copy may go into.
    lines = message.splitlines()
    assert lines[0] == (
        f"cannot download {PARSENET.filename} (ParseNet): not on the server; connection refused"
    )
    assert lines[1].startswith(f"  from {spec.url}: HTTP 404 File not found from 127.0.0.1:")
    assert lines[2].startswith(f"  from {spec.mirrors[0]}: 127.0.0.1:")
    assert lines[-3:] == [
        f"    {tmp_path / 'offline'}",
        f"    {paths.model_cache_dir()} (the download cache)",
        "    a folder of your own, named by --model-dir, restore.model_dir or GPEN_WATCH_MODEL_DIR",
    ]


# --- loading ------------------------------------------------------------------------------------


def test_mobile_detector_roundtrip_strips_module_prefix(tmp_path: Path) -> None:
    state = save_random(MOBILE, tmp_path / MOBILE.filename, prefix="module.")
    assert all(k.startswith("module.") for k in torch.load(tmp_path / MOBILE.filename, weights_only=True))
    assert set(verify.load_checkpoint(tmp_path / MOBILE.filename)) == set(state)
    model = verify.load_detector("retinaface_mobile0.25", tmp_path, "cpu", download=False)
    assert not model.training
    assert_same_weights(model, state)
    with torch.no_grad():
        out = model(torch.zeros(1, 3, 64, 64))
    assert len(out) == 3  # boxes, scores, landmarks


def test_resnet50_detector_and_parsenet(big_models: tuple[Path, dict, dict]) -> None:
    folder, r50_state, parse_state = big_models
    detector = verify.load_detector("RetinaFace-R50", folder, download=False)
    assert not detector.training
    assert_same_weights(detector, r50_state)
    parser = verify.load_parser(folder, download=False)
    assert not parser.training
    assert_same_weights(parser, parse_state)


@pytest.mark.parametrize("wrap", ["params", "params_ema", "state_dict"])
def test_container_unwrapped(tmp_path: Path, wrap: str) -> None:
    state = save_random(MOBILE, tmp_path / MOBILE.filename, wrap=wrap)
    assert_same_weights(verify.load_detector(MOBILE.name, tmp_path, download=False), state)


def test_params_ema_preferred_over_params(tmp_path: Path) -> None:
    ema, raw = {"w": torch.ones(2)}, {"w": torch.zeros(2)}
    torch.save({"params": raw, "params_ema": ema}, tmp_path / "x.pth")
    assert torch.equal(verify.load_checkpoint(tmp_path / "x.pth")["w"], torch.ones(2))


def test_gpen_training_checkpoint_gives_its_g_ema_generator(tmp_path: Path) -> None:
    # Upstream GPEN's train_simple.py saves {"g", "d", "g_ema", "g_optim", "d_optim"}.
    ema, raw = {"w": torch.ones(2)}, {"w": torch.zeros(2)}
    torch.save({"g": raw, "d": {"v": torch.zeros(1)}, "g_ema": ema}, tmp_path / "x.pth")
    assert torch.equal(verify.load_checkpoint(tmp_path / "x.pth")["w"], torch.ones(2))


def test_mismatch_names_file_and_key(tmp_path: Path) -> None:
    path = tmp_path / MOBILE.filename
    state = save_random(MOBILE, path)
    key = next(k for k, v in state.items() if v.dim() == 4)

    bad = dict(state)
    bad[key] = torch.zeros(3, 3, 3, 3)
    torch.save(bad, path)
    with pytest.raises(ModelError) as info:
        verify.load_detector(MOBILE.name, tmp_path, download=False)
    message = str(info.value)
    assert str(path) in message
    assert key in message
    assert str(tuple(state[key].shape)) in message
    assert "(3, 3, 3, 3)" in message

    bad = dict(state)
    del bad[key]
    torch.save(bad, path)
    with pytest.raises(ModelError, match=f"missing key '{key}'") as info:
        verify.load_detector(MOBILE.name, tmp_path, download=False)
    assert str(path) in str(info.value)

    bad = dict(state, extra_head=torch.zeros(1))
    torch.save(bad, path)
    with pytest.raises(ModelError, match="unexpected key 'extra_head'"):
        verify.load_detector(MOBILE.name, tmp_path, download=False)


def test_wrong_model_file(tmp_path: Path) -> None:
    # A detector file where the parser belongs: every key differs.
    save_random(MOBILE, tmp_path / PARSENET.filename)
    with pytest.raises(ModelError, match="does not match the ParseNet architecture"):
        verify.load_parser(tmp_path, download=False)


class _RunsCode:
    """Unpickling this creates the marker file, standing in for any code an attacker chooses."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple:
        return (Path.touch, (self.marker,))


@pytest.mark.parametrize("how", ["torch.save", "torch.save-legacy", "pickle"])
def test_code_running_pickle_refused(tmp_path: Path, how: str) -> None:
    marker = tmp_path / "pwned"
    path = tmp_path / MOBILE.filename
    payload = {"body.conv1.weight": _RunsCode(marker)}
    if how == "pickle":
        path.write_bytes(pickle.dumps(payload))
    else:
        torch.save(payload, path, _use_new_zipfile_serialization=how == "torch.save")
    # The payload really would run under a plain unpickle of the same data...
    if how == "pickle":
        pickle.loads(path.read_bytes())
        assert marker.exists()
        marker.unlink()
    with pytest.raises(ModelError) as info:
        verify.load_detector(MOBILE.name, tmp_path, download=False)
    # ...but not here.
    assert not marker.exists()
    message = str(info.value)
    assert str(path) in message
    assert "refused" in message
    assert "weights_only=False" not in message


@pytest.mark.parametrize("legacy", [False, True])
def test_truncated_file(tmp_path: Path, legacy: bool) -> None:
    path = tmp_path / MOBILE.filename
    torch.manual_seed(0)
    torch.save(verify.build_model(MOBILE).state_dict(), path, _use_new_zipfile_serialization=not legacy)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelError) as info:
        verify.load_detector(MOBILE.name, tmp_path, download=False)
    message = str(info.value)
    assert str(path) in message
    assert "corrupt" in message
    assert "gpen-watch models fetch RetinaFace-MobileNet0.25" in message


@pytest.mark.parametrize("content", [b"", b"<html><body>Sign in to the hotel wifi</body></html>"])
def test_not_a_checkpoint(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "custom.pth"
    path.write_bytes(content)
    with pytest.raises(ModelError, match=re.escape("custom.pth")) as info:
        verify.load_checkpoint(path)
    assert "delete it" in str(info.value)


def test_non_state_dict_contents(tmp_path: Path) -> None:
    torch.save([torch.zeros(1)], tmp_path / "a.pth")
    with pytest.raises(ModelError, match="not a state dict"):
        verify.load_checkpoint(tmp_path / "a.pth")
    torch.save({"w": torch.zeros(1), "epoch": 3}, tmp_path / "b.pth")
    with pytest.raises(ModelError, match="'epoch' is a int"):
        verify.load_checkpoint(tmp_path / "b.pth")
    torch.save({"module.w": torch.zeros(1), "w": torch.zeros(1)}, tmp_path / "c.pth")
    with pytest.raises(ModelError, match="both with and without"):
        verify.load_checkpoint(tmp_path / "c.pth")
    with pytest.raises(ModelError, match="no such file"):
        verify.load_checkpoint(tmp_path / "nope.pth")


def test_missing_model_without_download(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="models fetch RetinaFace-R50"):
        verify.load_detector("retinaface_resnet50", tmp_path, download=False)
    with pytest.raises(ModelError, match="not a face detector"):
        verify.load_detector("ParseNet", tmp_path, download=False)


# --- GPEN (needs gpen_watch.restore.nets.gpen_model) -------------------------------------------------


def test_gpen_small_by_path(tmp_path: Path) -> None:
    pytest.importorskip("gpen_watch.restore.nets.gpen_model")
    ref = torch.load(DATA / "gpen_ref_s64.pt", map_location="cpu", weights_only=True)
    path = tmp_path / "tiny-gpen.pth"
    torch.save(ref["state_dict"], path)
    model = load_gpen(path)
    assert not model.training
    assert_same_weights(model, ref["state_dict"])
    # Loaded through the store (meta build + adopted tensors), it still computes the reference output.
    with torch.no_grad():
        out = model(ref["input"])
    assert (out - ref["output"]).abs().max() <= 1e-4
    assert_same_weights(load_gpen(str(path)), ref["state_dict"])


def test_gpen_256_by_name(tmp_path: Path) -> None:
    gpen_model = pytest.importorskip("gpen_watch.restore.nets.gpen_model")
    spec = registry.get_spec("GPEN-BFR-256")
    torch.manual_seed(0)
    state = gpen_model.build_gpen(gpen_model.GPEN_CONFIGS[spec.name]).state_dict()
    assert len(state) == 144
    torch.save(state, tmp_path / spec.filename)
    model = load_gpen("GPEN-BFR-256", tmp_path, download=False)
    assert not model.training
    assert_same_weights(model, state)
    assert abs(sum(p.numel() for p in model.parameters()) / 1e6 - 18.9) < 0.1
    # The 512 file must hold the 512 layout: the 256 weights under its name are rejected.
    os.replace(tmp_path / spec.filename, tmp_path / "GPEN-BFR-512.pth")
    with pytest.raises(ModelError, match=re.escape("GPEN-BFR-512.pth: does not match")):
        load_gpen("GPEN-BFR-512", tmp_path, download=False)


def test_gpen_1024_by_name_as_modelscope_publishes_it(tmp_path: Path) -> None:
    # ModelScope's pytorch_model.pt is the generator's bare state dict (its pipeline loads it with
    # strict=True into FullGenerator(1024, 512, 8, 2, narrow=1)); saved under our cache name.
    gpen_model = pytest.importorskip("gpen_watch.restore.nets.gpen_model")
    spec = registry.get_spec("GPEN-BFR-1024")
    torch.manual_seed(0)
    state = gpen_model.build_gpen(gpen_model.GPEN_CONFIGS[spec.name]).state_dict()
    assert len(state) == 182
    torch.save(state, tmp_path / spec.filename)
    model = load_gpen("GPEN-BFR-1024", tmp_path, download=False)
    assert model.config.size == 1024
    assert_same_weights(model, state)
    del model
    # The same weights under another release's name are found too, and a file of another
    # size under this name is refused, naming it.
    os.replace(tmp_path / spec.filename, tmp_path / "GPEN-BFR-2048.pth")
    with pytest.raises(ModelError, match=re.escape("GPEN-BFR-2048.pth: does not match")):
        load_gpen("GPEN-BFR-2048", tmp_path, download=False)


def test_gpen_by_path_rejects_other_models(tmp_path: Path) -> None:
    pytest.importorskip("gpen_watch.restore.nets.gpen_model")
    save_random(MOBILE, tmp_path / "det.pth")
    with pytest.raises(ModelError, match=re.escape("det.pth")):
        load_gpen(tmp_path / "det.pth")
    # The user's own file: that exact path is said to be missing, nothing about downloads.
    with pytest.raises(ModelError) as missing:
        load_gpen(tmp_path / "absent.pth")
    said = str(missing.value)
    assert said.startswith(f"{tmp_path / 'absent.pth'}: no such file (--model, restore.model); "), said
    assert "read from that exact path" in said
    assert "download" not in said
    with pytest.raises(ModelError, match="neither a GPEN model name"):
        load_gpen("GPEN-BFR-5l2")  # a mistyped name is no path


# --- `gpen-watch models` ------------------------------------------------------------------------


def test_cli_list_and_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / MOBILE.filename).write_bytes(b"x" * 1234)
    assert cli.main(["models", "list", "--model-dir", str(mine)]) == 0
    out = capsys.readouterr().out
    assert f"present at {mine / MOBILE.filename}" in out
    assert "1,234 bytes" in out
    assert "GPEN-BFR-512 (default, used by the configuration)  [gpen]  missing" in out
    assert "284.1 MB, 284,085,738 bytes" in out
    assert "non-commercial" in out
    assert cli.main(["models", "path"]) == 0
    assert capsys.readouterr().out.strip() == str(paths.model_cache_dir())
    assert cli.main(["models", "path", "retinaface_mobile0.25", "--model-dir", str(mine)]) == 0
    assert capsys.readouterr().out.strip() == str(mine / MOBILE.filename)
    assert cli.main(["models", "path", "ParseNet"]) == 2
    assert "models fetch ParseNet" in capsys.readouterr().err
    assert cli.main(["models", "path", "nonsense"]) == 2


def test_cli_model_dir_from_config_and_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from_config, from_env, from_flag = tmp_path / "cfg", tmp_path / "env", tmp_path / "flag"
    for folder in (from_config, from_env, from_flag):
        folder.mkdir()
        (folder / MOBILE.filename).write_bytes(b"x")
    paths.config_file().parent.mkdir(parents=True)
    paths.config_file().write_text(f'[restore]\nmodel_dir = "{from_config.as_posix()}"\n')
    monkeypatch.setenv(store.ENV_MODEL_DIR, str(from_env))
    cli.main(["models", "path", MOBILE.name])
    assert capsys.readouterr().out.strip() == str(from_config / MOBILE.filename)
    cli.main(["models", "path", MOBILE.name, "--model-dir", str(from_flag)])
    assert capsys.readouterr().out.strip() == str(from_flag / MOBILE.filename)
    paths.config_file().unlink()
    cli.main(["models", "path", MOBILE.name])
    assert capsys.readouterr().out.strip() == str(from_env / MOBILE.filename)


def test_cli_verify(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    save_random(MOBILE, tmp_path / MOBILE.filename, prefix="module.")
    assert cli.main(["models", "verify", "--model-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"RetinaFace-MobileNet0.25: OK ({tmp_path / MOBILE.filename})" in out
    assert "ParseNet: missing, skipped" in out
    # Naming a missing model is an error.
    assert cli.main(["models", "verify", "ParseNet", "--model-dir", str(tmp_path)]) == 2
    capsys.readouterr()
    data = (tmp_path / MOBILE.filename).read_bytes()
    (tmp_path / MOBILE.filename).write_bytes(data[:1000])
    assert cli.main(["models", "verify", MOBILE.name, "--model-dir", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert "RetinaFace-MobileNet0.25: FAILED" in captured.out
    assert "corrupt" in captured.out
    assert "failed verification" in captured.err


def test_cli_fetch(
    server: tuple[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    base, root = server
    save_random(MOBILE, root / MOBILE.filename, prefix="module.")
    (root / PARSENET.filename).write_bytes(b"<html>not weights</html>")
    local = tuple(
        dataclasses.replace(s, url=f"{base}/{s.filename}", mirrors=(), size_bytes=None, sha256=None)
        for s in registry.all_specs()
    )
    monkeypatch.setattr(registry, "MODELS", local)

    assert cli.main(["models", "fetch", "retinaface_mobile0.25", "--no-progress"]) == 0
    cached = paths.model_cache_dir() / MOBILE.filename
    assert cached.read_bytes() == (root / MOBILE.filename).read_bytes()
    assert f"saved to {cached}" in capsys.readouterr().out

    assert cli.main(["models", "fetch", MOBILE.name]) == 0
    assert f"present at {cached}" in capsys.readouterr().out

    # ParseNet's terms do not allow paid work: nothing is downloaded before the user says yes.
    assert cli.main(["models", "fetch", "ParseNet", "--no-progress"]) == 2
    out = capsys.readouterr().out
    assert "ParseNet is downloaded only once you accept its terms: they do not allow paid work" in out
    assert "CC BY-NC-SA 4.0" in out and "models accept ParseNet" in out
    assert leftovers(paths.model_cache_dir()) == [MOBILE.filename]
    assert cli.main(["models", "accept", "ParseNet"]) == 0
    assert "You accepted PSFR-GAN's terms" in capsys.readouterr().out

    # A download that is not a valid ParseNet file is deleted, not left to break every run.
    assert cli.main(["models", "fetch", "ParseNet", "--no-progress"]) == 2
    captured = capsys.readouterr()
    assert "ParseNet: FAILED" in captured.out
    assert "could not fetch ParseNet" in captured.err
    assert leftovers(paths.model_cache_dir()) == [MOBILE.filename]

    # No names: the defaults. GPEN-BFR-512 waits for a yes to GPEN's terms, with the one model
    # whose terms allow paid work named; the R50 file is not served (404), so it fails, naming its
    # URL and the folders to put it in; with --no-verify the bogus ParseNet file is taken as is.
    assert cli.main(["models", "fetch", "--no-progress", "--no-verify"]) == 2
    out = capsys.readouterr().out
    assert "GPEN-BFR-512 is downloaded only once you accept its terms" in out
    assert "for paid work, restore with GFPGAN-v1.4 (Apache-2.0) instead" in out
    assert "RetinaFace-R50: FAILED" in out
    assert registry.get_spec("RetinaFace-R50").url in out
    assert str(paths.model_cache_dir()) in out
    assert "ParseNet: saved to" in out


def _use_256(tmp_path: Path) -> Path:
    cfg = tmp_path / "gpen.toml"
    cfg.write_text(
        '[restore]\nmodel = "GPEN-BFR-256"\ndetector = "retinaface_mobile0.25"\naccepted_terms = ["GPEN", "PSFR-GAN"]\n'
    )
    return cfg


def test_cli_list_marks_what_the_configuration_uses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["models", "list", "--config", str(_use_256(tmp_path))]) == 0
    out = capsys.readouterr().out
    assert "GPEN-BFR-256 (used by the configuration)  [gpen]" in out
    assert "RetinaFace-MobileNet0.25 (used by the configuration)  [detector]" in out
    assert "ParseNet (default, used by the configuration)  [parser]" in out
    # The built-in defaults are marked as such, not as used, when the configuration does not use them.
    assert "GPEN-BFR-512 (default)  [gpen]" in out
    assert "RetinaFace-R50 (default)  [detector]" in out
    # restore.upscale defaults to 1: no upscaler is a default, and no description says one is.
    for name in registry.UPSCALER_NAMES:
        assert f"\n{name}  [upscaler]" in out


def test_the_default_models_are_what_the_default_settings_use() -> None:
    from gpen_watch.cli import models as models_cli

    assert models_cli.default_models() == {"GPEN-BFR-512", "RetinaFace-R50", "ParseNet"}
    assert not any("default" in spec.description for spec in registry.all_specs())


def test_cli_fetch_without_names_fetches_what_the_configuration_uses(
    server: tuple[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    base, root = server
    for spec in registry.all_specs():
        (root / spec.filename).write_bytes(spec.filename.encode())
    local = tuple(
        dataclasses.replace(s, url=f"{base}/{s.filename}", mirrors=(), size_bytes=None, sha256=None)
        for s in registry.all_specs()
    )
    monkeypatch.setattr(registry, "MODELS", local)
    assert (
        cli.main(["models", "fetch", "--no-progress", "--no-verify", "--config", str(_use_256(tmp_path))])
        == 0
    )
    out = capsys.readouterr().out
    assert "GPEN-BFR-512" not in out
    assert "RetinaFace-R50" not in out
    assert leftovers(paths.model_cache_dir()) == sorted(
        ["GPEN-BFR-256.pth", MOBILE.filename, PARSENET.filename]
    )


def test_cli_verify_with_nothing_present_fails_without_loading_torch(tmp_path: Path) -> None:
    code = (
        "import sys; from gpen_watch import cli; rc = cli.main(['models', 'verify']);"
        "assert 'torch' not in sys.modules, 'torch imported'; sys.exit(rc)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 2, done.stderr
    assert "no model files present in" in done.stderr
    assert "gpen-watch models fetch" in done.stderr
    assert str(paths.model_cache_dir()) in done.stderr


def test_the_model_sizes_in_the_readme_and_the_models_page_add_up_to_what_the_first_run_downloads() -> None:
    from gpen_watch.config import RestoreConfig
    from gpen_watch.modelstore import needs

    repo = Path(__file__).parents[1]
    readme = (repo / "README.md").read_text(encoding="utf-8")
    models_page = (repo / "docs" / "models.md").read_text(encoding="utf-8")
    assert "MiB" not in readme + models_page  # one unit everywhere: MB
    first_run = needs.needed_specs(RestoreConfig())
    assert all(spec.size_bytes for spec in first_run)
    total = sum(spec.size_bytes or 0 for spec in first_run)
    for spec in first_run:
        size = spec.size_bytes or 0
        assert f"{model_spec.mb(size)} ({size:,} bytes)" in models_page, spec.name  # the models table
        assert f"{spec.name} {model_spec.mb(size)}" in readme, spec.name  # Set up's list
    assert f"{model_spec.mb(total)} ({total:,} bytes)" in models_page
    assert f"Model weights: {total / 1e6:.0f} MB" in readme
