"""TLS for what the service serves beyond loopback: the user's certificate, or its own.

Plain HTTP on a network would show every photo and token to anyone on the path, so a listener on
any address but loopback speaks HTTPS only. Without ``api.certificate``, the service makes its own
certificate at first start (an ECDSA P-256 key and a self-signed certificate for this machine's
name, ten years), kept in ``tls/`` in its state folder with the key readable by the user alone,
and the same one at every start after. No authority signed it, so a client checks it by its
SHA-256 fingerprint, which `gpen-watch status` and the dashboard show: the client module pins it.

The certificate is made with the ``cryptography`` package (a dependency for this alone): OpenSSL's
command line is not on every machine (Windows has none), and Python's ``ssl`` module loads
certificates but cannot make one.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import ipaddress
import os
import socket
import ssl
from dataclasses import dataclass
from pathlib import Path

from gpen_watch.base.errors import GpenWatchError
from gpen_watch.base.fsutil import write_text_atomic
from gpen_watch.platform import paths

CERT_NAME = "api-cert.pem"
KEY_NAME = "api-key.pem"
VALID_DAYS = 3650


class TlsError(GpenWatchError):
    """The certificate cannot be read, made or used; the message says which file and why."""


@dataclass(frozen=True)
class Certificate:
    cert: Path
    key: Path
    fingerprint: str  # "AB:CD:...", SHA-256 of the DER certificate
    own: bool  # made by the service, not the user's


def folder() -> Path:
    return paths.state_dir() / "tls"


def fingerprint_of(pem: str) -> str:
    """The SHA-256 fingerprint of a PEM certificate, as browsers and ``openssl x509`` show it."""
    return format_fingerprint(hashlib.sha256(ssl.PEM_cert_to_DER_cert(pem)).hexdigest())


def format_fingerprint(hex_digest: str) -> str:
    return ":".join(hex_digest[i : i + 2] for i in range(0, len(hex_digest), 2)).upper()


def normalize_fingerprint(text: str) -> str:
    """A fingerprint as typed ("ab:cd...", "AB CD ...", "abcd..."): 64 hex digits, or ValueError."""
    digits = "".join(ch for ch in text if ch not in ": -").lower()
    if len(digits) != 64 or any(ch not in "0123456789abcdef" for ch in digits):
        raise ValueError(f"{text!r} is not a SHA-256 fingerprint (64 hexadecimal digits, colons allowed)")
    return digits


def certificate(cert: Path | None, key: Path | None, address: str) -> Certificate:
    """The user's certificate and key when given, else the service's own (made when missing)."""
    if cert is not None and key is not None:
        try:
            pem = cert.read_text(encoding="ascii")
            return Certificate(cert, key, fingerprint_of(pem), own=False)
        except (OSError, ValueError, UnicodeDecodeError) as exc:
            raise TlsError(f"api.certificate {cert}: cannot be read as a PEM certificate ({exc})") from None
    where = folder()
    own_cert, own_key = where / CERT_NAME, where / KEY_NAME
    if not (own_cert.is_file() and own_key.is_file()):
        _make(own_cert, own_key, address)
    try:
        return Certificate(own_cert, own_key, fingerprint_of(own_cert.read_text(encoding="ascii")), own=True)
    except (OSError, ValueError) as exc:
        raise TlsError(
            f"{own_cert}: the service's own certificate cannot be read ({exc}); remove {where} to make a new one"
        ) from None


def server_context(found: Certificate) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(found.cert, found.key)
    except (OSError, ssl.SSLError) as exc:
        raise TlsError(f"{found.cert} with {found.key}: not a certificate and its key ({exc})") from None
    return ctx


def _make(cert_path: Path, key_path: Path, address: str) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    host = socket.gethostname() or "gpen-watch"
    names: list[x509.GeneralName] = [x509.DNSName(host), x509.DNSName("localhost")]
    ips = {"127.0.0.1", "::1"}
    if address and address not in ("0.0.0.0", "::"):
        ips.add(address)
    names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in sorted(ips)]
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"gpen-watch on {host}"[:64])])
    now = dt.datetime.now(dt.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=VALID_DAYS))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode("ascii")
    # The key first: a certificate is never there without its key.
    write_text_atomic(key_path, key_pem, mode=0o600, fsync=True)
    write_text_atomic(
        cert_path, cert.public_bytes(serialization.Encoding.PEM).decode("ascii"), mode=0o644, fsync=True
    )
    os.chmod(cert_path.parent, 0o700)
