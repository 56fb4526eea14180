"""A real two-machine Ray cluster on this machine, made of Linux network namespaces.

Two namespaces ("head" and "node"), joined by a veth pair with private addresses chosen here; each
has only that link and loopback, so nothing Ray sends can leave them. The head runs `gpen-watch
cluster head`, the node `gpen-watch cluster join --cpu`; the service under test runs in the head's
namespace. Every process in a namespace is killed, and the namespaces deleted, at the end, even
when a test fails. Needs root, iproute2 and Ray; ``skip_reason`` says which is missing.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import random
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

TESTS_DIR = Path(__file__).resolve().parent


def skip_reason() -> str | None:
    if not sys.platform.startswith("linux"):
        return "network namespaces are Linux only"
    if os.geteuid() != 0:
        return "making network namespaces needs root"
    if shutil.which("ip") is None:
        return "iproute2 (`ip`) is not installed"
    if importlib.util.find_spec("ray") is None:
        return "Ray is not installed (pip install 'gpen-watch[cluster]')"
    probe = f"gwprobe{os.getpid() % 100000}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True, check=False)
    if made.returncode != 0:
        return f"cannot make a network namespace: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True, check=False)
    return None


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


@dataclass
class Cluster:
    root: Path
    head_ns: str
    node_ns: str
    head_ip: str
    node_ip: str
    port: int
    config: Path
    token: Path
    env: dict[str, str] = field(default_factory=dict)
    ray_dirs: list[Path] = field(default_factory=list)
    plain_head: bool = False  # the head started with `ray start --head`, not `gpen-watch cluster head`
    node_cpus: str = ""  # the node's Ray processes confined to these cores (taskset), "" for all
    # The node's TMPDIR: short (Ray puts sockets under it) and the test's own.
    node_tmp: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="gwtmp-", dir="/tmp")))

    @property
    def address(self) -> str:
        return f"{self.head_ip}:{self.port}"

    def run(
        self,
        ns: str,
        *cmd: str,
        check: bool = True,
        timeout: float = 120.0,
        env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            ["ip", "netns", "exec", ns, *cmd],
            env={**self.ns_env(ns), **(env or {})},
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        return proc

    def ns_env(self, ns: str) -> dict[str, str]:
        """Each "machine" has its own gpen-watch state folder (where `cluster head/join` record
        the Ray node they started), and the node its own temp folder (its actors' scratch)."""
        env = {**self.env, "XDG_STATE_HOME": str(self.root / f"state-{ns}")}
        if ns == self.node_ns:
            env["TMPDIR"] = str(self.node_tmp)
        return env

    def gpen_watch(
        self,
        ns: str,
        *args: str,
        check: bool = True,
        config: Path | None = None,
        wrap: tuple[str, ...] = (),
        env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        return self.run(
            ns,
            *wrap,
            sys.executable,
            "-m",
            "gpen_watch",
            "cluster",
            "--config",
            str(config or self.config),
            *args,
            check=check,
            env=env,
        )

    def ray_dir(self) -> Path:
        # Ray's unix sockets live under it: a short path, as a socket path has ~107 characters.
        d = Path(tempfile.mkdtemp(prefix="gwray-", dir="/tmp"))
        self.ray_dirs.append(d)
        return d

    def start_head(self) -> None:
        if self.plain_head:
            self.start_plain_head()
            return
        self.gpen_watch(
            self.head_ns, "head", "--bind", self.head_ip, "--port", str(self.port),
            "--temp-dir", str(self.ray_dir()), "--object-store-mb", "100",
        )  # fmt: skip

    def start_plain_head(self) -> None:
        """A head the user started with Ray's own command (a Ray cluster they already run), token
        authentication on as Ray 2.60 has it by default: no gpen-watch flag, port or token file."""
        if not self.token.exists():
            fd = os.open(self.token, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with open(fd, "w", encoding="ascii") as f:
                f.write(secrets.token_hex(32))
        ray = str(Path(sys.executable).parent / "ray")
        env = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(self.token)}
        self.run(
            self.head_ns, "env", *[f"{k}={v}" for k, v in env.items()], ray, "start", "--head",
            "--node-ip-address", self.head_ip, "--port", str(self.port), "--temp-dir", str(self.ray_dir()),
            "--object-store-memory", str(100 << 20), "--disable-usage-stats",
        )  # fmt: skip

    def join_node(self) -> None:
        self.gpen_watch(
            self.node_ns, "join", self.address, "--bind", self.node_ip, "--cpu",
            "--temp-dir", str(self.ray_dir()), "--object-store-mb", "100",
            wrap=("taskset", "-c", self.node_cpus) if self.node_cpus else (),
        )  # fmt: skip

    def keep_node(self, out: Path, *extra: str) -> subprocess.Popen[bytes]:
        """`gpen-watch cluster join --stay` in the node's namespace, its output to ``out``."""
        cmd = [
            "ip", "netns", "exec", self.node_ns, sys.executable, "-m", "gpen_watch", "cluster",
            "--config", str(self.config), "join", self.address, "--bind", self.node_ip, "--cpu",
            "--temp-dir", str(self.ray_dir()), "--object-store-mb", "100", "--stay", *extra,
        ]  # fmt: skip
        with open(out, "wb") as f:
            return subprocess.Popen(cmd, env=self.ns_env(self.node_ns), stdout=f, stderr=subprocess.STDOUT)

    def keep_head(self, out: Path) -> subprocess.Popen[bytes]:
        """`gpen-watch cluster head --stay` in the head's namespace, its output to ``out``."""
        cmd = [
            "ip", "netns", "exec", self.head_ns, sys.executable, "-m", "gpen_watch", "cluster",
            "--config", str(self.config), "head", "--bind", self.head_ip, "--port", str(self.port),
            "--temp-dir", str(self.ray_dir()), "--object-store-mb", "100", "--stay",
        ]  # fmt: skip
        with open(out, "wb") as f:
            return subprocess.Popen(cmd, env=self.ns_env(self.head_ns), stdout=f, stderr=subprocess.STDOUT)

    def wait_nodes(self, alive: int, timeout: float = 90.0) -> None:
        """Until `gpen-watch cluster status` counts this many live nodes (a killed node is seen
        gone only after Ray's health checks fail, some seconds)."""
        deadline = time.monotonic() + timeout
        while True:
            out = self.gpen_watch(self.head_ns, "status").stdout
            if out.count(": alive") == alive:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"not {alive} live node(s) within {timeout:g} s:\n{out}")
            time.sleep(1.0)

    def pids(self, ns: str) -> list[int]:
        out = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True, check=False).stdout
        return [int(p) for p in out.split()]

    def ray_daemons(self, ns: str, names: tuple[bytes, ...] = (b"/gcs_server", b"/raylet")) -> set[int]:
        """The pids of a namespace's Ray daemons of these names (its GCS and raylet)."""
        found = set()
        for pid in self.pids(ns):
            try:
                argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
            except OSError:
                continue
            if argv0.endswith(names):
                found.add(pid)
        return found

    def kill_ray(self, ns: str, keep: int) -> None:
        """SIGKILL every process in the namespace but ``keep`` and its descendants: the head
        machine's Ray processes die, the service that runs beside them (and its children) does not."""
        spared = descendants(keep)
        for _ in range(50):
            pids = [p for p in self.pids(ns) if p not in spared]
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.1)
            spared = descendants(keep)

    def kill_all(self, ns: str) -> None:
        """SIGKILL every process in the namespace (a machine losing power), and wait until gone."""
        for _ in range(50):
            pids = self.pids(ns)
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.1)


def descendants(pid: int) -> set[int]:
    """``pid`` and every process below it, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = set(), [pid]
    while todo:
        p = todo.pop()
        if p not in found:
            found.add(p)
            todo += children.get(p, [])
    return found


@contextlib.contextmanager
def cluster(
    root: Path, *, plain_head: bool = False, node_cpus: str = "", join: bool = True
) -> Iterator[Cluster]:
    """The two namespaces, the head and (``join``) the joined node; everything is gone on leaving."""
    tag = f"{os.getpid() % 10000}{random.randrange(1000)}"
    head_ns, node_ns = f"gwh{tag}", f"gwn{tag}"
    net = f"10.{random.randrange(200, 250)}.{random.randrange(1, 254)}"
    c = Cluster(
        root, head_ns, node_ns, f"{net}.1", f"{net}.2", random.randrange(20000, 30000),
        root / "cluster.toml", root / "token", plain_head=plain_head, node_cpus=node_cpus,
    )  # fmt: skip
    c.config.write_text(f'[cluster]\naddress = "{c.address}"\ntoken_file = "{c.token}"\n')
    home = root / "home"
    home.mkdir()
    c.env = dict(os.environ)
    c.env["HOME"] = str(home)  # Ray keeps ~/.ray; not the real user's
    c.env["PYTHONPATH"] = os.pathsep.join([str(TESTS_DIR), c.env.get("PYTHONPATH", "")]).strip(os.pathsep)
    try:
        _ip("netns", "add", head_ns)
        _ip("netns", "add", node_ns)
        _ip("link", "add", f"{head_ns}v", "type", "veth", "peer", "name", f"{node_ns}v")
        for ns, ip in ((head_ns, c.head_ip), (node_ns, c.node_ip)):
            _ip("link", "set", f"{ns}v", "netns", ns)
            _ip("-n", ns, "addr", "add", f"{ip}/24", "dev", f"{ns}v")
            _ip("-n", ns, "link", "set", f"{ns}v", "up")
            _ip("-n", ns, "link", "set", "lo", "up")
        c.start_head()
        if join:
            c.join_node()
        yield c
    finally:
        for ns in (node_ns, head_ns):
            c.kill_all(ns)
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)
        for d in [*c.ray_dirs, c.node_tmp]:
            shutil.rmtree(d, ignore_errors=True)
