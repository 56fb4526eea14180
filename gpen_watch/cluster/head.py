"""Reaching the cluster's head before Ray is handed its address, and what a node offers gpen-watch.

Shared by the service's bridge (``bridge_main``) and the commands (gpen_watch.cli.cluster).
"""

from __future__ import annotations

import socket

from gpen_watch.base.errors import ClusterError

# The custom Ray resource a node offers when its CPU may restore photos (`cluster join --cpu`).
CPU_RESOURCE = "gpen_watch_cpu"
PROBE_TIMEOUT_S = 3.0


def probe_head(address: str) -> str:
    """Reach the head over TCP before handing the address to Ray (which retries for a long time
    before it fails); returns this machine's address on the way there."""
    try:
        return reach_head(address)
    except OSError as exc:
        raise ClusterError(
            f"cluster.address {address}: cannot reach the Ray head ({exc.strerror or exc}); check the "
            "address and that `gpen-watch cluster head` runs there; local workers carry on"
        ) from None


def reach_head(address: str) -> str:
    """This machine's address on the way to the head at ``address``; OSError when it does not answer."""
    host, _, port = address.rpartition(":")
    with socket.create_connection((host.strip("[]"), int(port)), timeout=PROBE_TIMEOUT_S) as s:
        return str(s.getsockname()[0])
