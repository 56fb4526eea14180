"""What the dashboard tells a person setting up another machine: where this service listens for
other machines, the SHA-256 fingerprint of the certificate it answers them with, and how to check
that fingerprint over there; or why nothing listens.

No authority signed the service's own certificate (``api.tls``), so the other machine can tell it
from a stand-in only by its fingerprint, read here and compared there. Everything comes from the
service's status (``api``, ``api_fingerprint``, ``api_problem``, ``dashboard``): the fingerprint
the server worked out from the certificate when it started. The private key is never read here.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from markupsafe import Markup

from gpen_watch.platform import program
from gpen_watch.service.status import Status


@dataclass(frozen=True)
class RemoteAccess:
    """Other machines and this service: ``url`` where they reach the API ("" none), the
    certificate's ``fingerprint`` ("AB:CD:..."; "" when nothing is served over HTTPS), the
    dashboard's own address when it too is served over HTTPS, and why the API is not served
    to other machines when it was asked to be."""

    url: str = ""
    fingerprint: str = ""
    dashboard_https: str = ""
    problem: str = ""

    @property
    def host_port(self) -> str:
        """The API's "host:port", as `openssl s_client -connect` takes it."""
        parts = urlsplit(self.url)
        return f"{parts.hostname}:{parts.port}" if parts.hostname and parts.port else ""

    @property
    def fingerprint_html(self) -> Markup:
        """The fingerprint with a line break allowed after each pair only, never inside one."""
        return Markup(":<wbr>").join(self.fingerprint.split(":"))

    def submit_line(self) -> str:
        """The command that sends photos from the other machine, pinned to this certificate: by
        its plain name, as an install there gives it (this machine's path means nothing there)."""
        return (
            f"{program.NAME} submit --to {self.url} --token TOKEN --fingerprint {self.fingerprint} PHOTO..."
        )

    def token_line(self) -> str:
        """The command, run here, that makes the TOKEN ``submit_line`` needs."""
        return program.command("api token create --name laptop --scope submit,read")

    def openssl_line(self) -> str:
        """The fingerprint as the other machine sees it, with nothing of gpen-watch there."""
        return (
            f"openssl s_client -connect {self.host_port} </dev/null 2>/dev/null"
            " | openssl x509 -noout -fingerprint -sha256"
        )

    @property
    def problem_sentence(self) -> str:
        return self.problem[:1].upper() + self.problem[1:] if self.problem else ""


def remote_access(status: Status | None) -> RemoteAccess:
    """What ``status`` says of other machines (nothing when the service does not answer)."""
    if status is None:
        return RemoteAccess()
    return RemoteAccess(
        url=status.api,
        fingerprint=status.api_fingerprint,
        dashboard_https=status.dashboard if status.dashboard.startswith("https://") else "",
        problem=status.api_problem or "",
    )
