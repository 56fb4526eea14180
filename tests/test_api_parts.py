"""The API's parts on their own: names made safe or refused, tokens stored hashed and checked in
constant time, the service's own certificate and its fingerprint (as OpenSSL computes it), the
client's pinning, the limits' counting, and an upload temp name the watcher never takes."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from gpen_watch.config import Config, InboxConfig, WatchConfig
from gpen_watch.dashboard.api import names, tls, tokens
from gpen_watch.dashboard.api.client import ApiClient, ApiError
from gpen_watch.dashboard.api.limits import Limits, Meter, TooMany
from gpen_watch.dashboard.api.names import Refusal
from gpen_watch.outbox import sent
from gpen_watch.platform import current
from gpen_watch.watch.filters import InboxFilter


@pytest.fixture
def cfg(tmp_path: Path) -> Config:
    return Config(watch=WatchConfig(inboxes=[InboxConfig(tmp_path / "in")], outbox=tmp_path / "out"))


# --- names ----------------------------------------------------------------------------------------


def test_names_keep_their_folders_and_lose_only_what_this_system_forbids(cfg: Config) -> None:
    inbox = cfg.watch.inboxes[0]
    assert names.place(cfg, inbox, "trip/IMG_1.jpg").rel.as_posix() == "trip/IMG_1.jpg"
    windows = current("win32")
    made = names.place(cfg, inbox, "CON.jpg", platform=windows)
    assert made.rel.as_posix() == "_CON.jpg" and "saved as _CON.jpg" in made.note
    assert names.place(cfg, inbox, "a<b>:c?.jpg", platform=windows).rel.as_posix() == "a_b__c_.jpg"
    assert names.place(cfg, inbox, "CON.jpg", platform=current("linux")).rel.as_posix() == "CON.jpg"
    long = names.place(cfg, inbox, "é" * 3000 + ".jpg")
    assert len(long.rel.name.encode()) <= 200 and long.rel.suffix == ".jpg"


def test_a_name_is_refused_for_an_inbox_without_subfolders(cfg: Config) -> None:
    flat = InboxConfig(cfg.watch.inboxes[0].path, recursive=False)
    with pytest.raises(Refusal, match="does not take subfolders"):
        names.place(cfg, flat, "a/b.jpg")


def test_the_outbox_inside_the_inbox_is_no_place_for_a_photo(tmp_path: Path) -> None:
    inbox = tmp_path / "in"
    cfg = Config(watch=WatchConfig(inboxes=[InboxConfig(inbox)], outbox=inbox / "done"))
    with pytest.raises(Refusal, match="the service's own folder"):
        names.place(cfg, cfg.watch.inboxes[0], "done/x.jpg")


def test_the_upload_temp_name_is_one_the_watcher_leaves_alone(tmp_path: Path) -> None:
    name = sent.upload_name()
    assert sent.is_upload_name(name) and not sent.is_upload_name("x" + name)
    rules = InboxFilter(tmp_path)
    assert rules.name_reason(tmp_path / name) is not None


# --- tokens ---------------------------------------------------------------------------------------


def test_a_token_is_stored_as_its_hash_alone_in_a_private_file(tmp_path: Path) -> None:
    store = tokens.TokenStore(tmp_path / "api-tokens.json")
    record, token = store.create("lightroom", ("submit", "read"), {"max_file_mb": 50})
    text = (tmp_path / "api-tokens.json").read_text()
    assert token not in text and token.split("_", 2)[2] not in text
    assert json.loads(text)["tokens"][0]["sha256"] == tokens.digest(token)
    assert stat.S_IMODE(os.stat(tmp_path / "api-tokens.json").st_mode) == 0o600
    found = store.verify(token)
    assert found is not None and found.id == record.id and found.limits == {"max_file_mb": 50}
    assert store.verify(token[:-1] + ("A" if token[-1] != "A" else "B")) is None
    assert store.verify("not a token") is None


def test_a_revoked_token_is_refused_by_a_store_that_read_it_before(tmp_path: Path) -> None:
    path = tmp_path / "api-tokens.json"
    service, cli = tokens.TokenStore(path), tokens.TokenStore(path)
    _, token = cli.create("laptop", ("submit",))
    assert service.verify(token) is not None
    cli.revoke("laptop")
    assert service.verify(token) is None  # the service reads the file again: it changed
    with pytest.raises(tokens.TokenError, match="no active token"):
        cli.revoke("laptop")
    _, again = cli.create("laptop", ("read",))  # the name is free once revoked
    assert service.verify(again) is not None


def test_scopes_and_names_are_checked(tmp_path: Path) -> None:
    assert tokens.parse_scopes("submit, read") == ("submit", "read")
    with pytest.raises(tokens.TokenError, match="admin"):
        tokens.parse_scopes("submit,admin")
    with pytest.raises(tokens.TokenError, match="1 to 64"):
        tokens.TokenStore(tmp_path / "t.json").create("../x", ("read",))


# --- TLS ------------------------------------------------------------------------------------------


def test_the_services_own_certificate_is_made_once_with_a_private_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tls, "folder", lambda: tmp_path / "tls")
    first = tls.certificate(None, None, "192.168.7.5")
    again = tls.certificate(None, None, "192.168.7.5")
    assert first.own and first.fingerprint == again.fingerprint
    assert stat.S_IMODE(os.stat(first.key).st_mode) == 0o600
    tls.server_context(first)  # the key and the certificate go together
    if shutil.which("openssl"):
        out = subprocess.run(
            [
                "openssl",
                "x509",
                "-in",
                str(first.cert),
                "-noout",
                "-fingerprint",
                "-sha256",
                "-ext",
                "subjectAltName",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert first.fingerprint in out and "192.168.7.5" in out


def test_a_users_certificate_that_cannot_be_read_is_said(tmp_path: Path) -> None:
    (tmp_path / "c.pem").write_text("not a certificate")
    with pytest.raises(tls.TlsError, match=r"api\.certificate"):
        tls.certificate(tmp_path / "c.pem", tmp_path / "k.pem", "0.0.0.0")


def test_fingerprints_are_read_however_they_are_typed() -> None:
    hexes = "ab" * 32
    assert tls.normalize_fingerprint(":".join(["AB"] * 32)) == hexes
    assert tls.normalize_fingerprint(hexes.upper()) == hexes
    with pytest.raises(ValueError, match="64 hexadecimal"):
        tls.normalize_fingerprint("abcd")


def test_the_client_refuses_a_fingerprint_for_plain_http_and_a_bad_address() -> None:
    with pytest.raises(ApiError, match="https"):
        ApiClient("http://host:4736/", "t", fingerprint="ab" * 32)
    with pytest.raises(ApiError, match="not an http"):
        ApiClient("ftp://host/", "t")


# --- limits ---------------------------------------------------------------------------------------


def test_requests_a_minute_are_counted_in_a_sliding_minute() -> None:
    now = [1000.0]
    meter = Meter(clock=lambda: now[0])
    limits = Limits(2, None, 10, 2)
    meter.request("t", limits)
    now[0] += 30
    meter.request("t", limits)
    with pytest.raises(TooMany) as refused:
        meter.request("t", limits)
    assert refused.value.retry_after == 30
    now[0] += 31  # the first has left the minute
    meter.request("t", limits)
    meter.request("owner", Limits(None, None, 10, 2))  # the service's own token is not counted


def test_upload_slots_are_given_back_whatever_happens() -> None:
    meter = Meter()
    limits = Limits(None, None, 1, 1)
    with pytest.raises(RuntimeError), meter.upload("t", limits):
        with pytest.raises(TooMany, match="already sending 1"), meter.upload("t", limits):
            pass
        raise RuntimeError
    assert meter.uploading("t") == 0
    with meter.upload("t", limits):
        assert meter.uploading("t") == 1
