"""`gpen-watch cluster head | join | status | leave`: Ray's own commands with the right flags.

Every Ray command runs with token authentication on (``token.ray_env``). ``head`` advertises the
address the user names (``--bind``), never a guessed one, and prints the exact ``join`` command
for the other machines; ``join`` adds this machine's GPUs (and, with ``--cpu``, its CPU) to the
cluster; ``status`` lists the nodes and what the running service does on each; ``leave`` stops
the Ray node that ``head`` or ``join`` started on this machine (``started``), no other.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
from pathlib import Path
from typing import Any

from gpen_watch import config
from gpen_watch.base.errors import ClusterError
from gpen_watch.cli.config import add_config_option
from gpen_watch.cluster import started, stay, token
from gpen_watch.cluster.head import CPU_RESOURCE, probe_head
from gpen_watch.cluster.raylib import ray, ray_cli, ray_failure
from gpen_watch.gpu.nvml import GpuSample
from gpen_watch.platform import program
from gpen_watch.tray.model import gpu_line

DEFAULT_PORT = 6379


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    add_config_option(parser)
    # Also after the action (`cluster status --config PATH`), where every other command takes it.
    common = argparse.ArgumentParser(add_help=False)
    add_config_option(common, default=argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    head = sub.add_parser(
        "head", parents=[common], help="start the cluster's head on this machine (the one with the inbox)"
    )
    head.add_argument(
        "--bind",
        required=True,
        metavar="ADDRESS",
        help="this machine's address on the studio network, e.g. 192.168.1.10",
    )
    head.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"the head's port (default {DEFAULT_PORT})"
    )
    join = sub.add_parser("join", parents=[common], help="add this machine's GPUs to a cluster")
    join.add_argument("address", help="the head's host:port, as `gpen-watch cluster head` printed it")
    join.add_argument(
        "--bind", metavar="ADDRESS", help="this machine's address (default: the one that reaches the head)"
    )
    join.add_argument(
        "--cpu", action="store_true", help="also restore on this machine's CPU (one worker, all cores)"
    )
    for p in (head, join):
        p.add_argument(
            "--stay",
            action="store_true",
            help="stay in the foreground and start the node again whenever it ends (the head went "
            "away or restarted): for a login entry (`gpen-watch service install --node ...`)",
        )
        p.add_argument("--temp-dir", type=Path, help="Ray's session folder (default: Ray's, /tmp/ray)")
        p.add_argument("--object-store-mb", type=int, help="Ray's object store size in MB (default: Ray's)")
    sub.add_parser(
        "status", parents=[common], help="the cluster's nodes and GPUs, and what the service does on each"
    )
    sub.add_parser(
        "leave",
        parents=[common],
        help="stop the Ray node gpen-watch started here (its workers' photos are requeued)",
    )


def run(args: argparse.Namespace) -> int:
    cfg = config.load(args.config, must_exist=args.config is not None)
    path = token.token_path(cfg.cluster)
    if args.action != "leave":
        _stop_dead_head()
    if args.action == "head":
        return _head(args, path)
    if args.action == "join":
        return _join(args, path)
    if args.action == "status":
        return _status(cfg, path)
    return _leave(path)


def _leave(path: Path) -> int:
    # The keeper first: it would start the node again once it saw it end.
    kept = started.stop_keeper()
    keeper = "; its `--stay` keeper too (a login entry starts it again at the next login)" if kept else ""
    if not started.supported():
        _ray(["stop"], path)
        print(
            f"this machine has left the cluster (`ray stop`: every Ray process of this user is stopped){keeper}"
        )
        return 0
    if started.stop_recorded() == 0 and not kept:
        print(
            "no Ray node that gpen-watch started runs on this machine: nothing stopped "
            "(a Ray node you started yourself, with `ray start`, is stopped with `ray stop`)"
        )
        return 0
    print(f"this machine has left the cluster (the Ray node gpen-watch started here is stopped){keeper}")
    return 0


def _stop_dead_head() -> None:
    stopped = started.stop_dead_head()
    if stopped:
        print(
            "the cluster head gpen-watch started here had died (its GCS is gone, and Ray does not "
            f"start it again): stopped the {stopped} Ray process(es) it left running"
        )


def already_there(found: started.Running) -> str:
    """What runs here already, in words, naming the cluster's address."""
    at = f" at {found.address}" if found.address else ""
    if found.role == started.HEAD:
        what = f"this machine already runs the cluster's head{at}"
    elif found.role == started.NODE:
        what = f"this machine is already joined to the cluster{at}"
    else:
        what = "a Ray node that gpen-watch started already runs on this machine"
    kept = " (a `--stay` keeper keeps it up)" if found.kept else ""
    return f"{what}{kept}; nothing started"


def _refuse_second(role: str, address: str) -> bool:
    """True when this very node runs already (said; nothing to do); ClusterError when another
    one does; False when none does. A second `ray start` would wait 30 s for ports that are
    taken, fail, and leave a log monitor behind that no record names."""
    found = started.running()
    if found is None:
        return False
    if (found.role, found.address) == (role, address):
        print(already_there(found))
        return True
    raise ClusterError(f"{already_there(found)}; `{program.command('cluster leave')}` stops it first")


def _start_node(cmd: list[str], args: argparse.Namespace, path: Path, role: str, address: str) -> None:
    """`ray start`, remembering the processes it left running, for `leave`."""
    before = started.ray_processes() if started.supported() else {}
    _ray(cmd + _common(args), path)
    if started.supported():
        started.remember(before, args.temp_dir, role, address)


def _head(args: argparse.Namespace, path: Path) -> int:
    address = f"{args.bind}:{args.port}"
    if _refuse_second(started.HEAD, address):
        return 0
    made = token.ensure_token(path)
    cmd = ["start", "--head", "--port", str(args.port)]
    # The head's own GPUs have local workers (cluster.local_workers); the dashboard would open
    # more ports for nothing gpen-watch needs.
    cmd += ["--num-gpus", "0", "--include-dashboard", "false", "--disable-usage-stats"]
    running = f"cluster head running at {args.bind}:{args.port} (token authentication on)"
    if not args.stay:
        _start_node([*cmd, "--node-ip-address", args.bind], args, path, started.HEAD, address)
        print(running)
    print(f"token: {path}{' (new)' if made else ''}; copy it to the same place on each machine, mode 600")
    print("on each GPU machine, run:")
    print(f"  gpen-watch cluster join {args.bind}:{args.port}")
    print(f'and set cluster.address = "{args.bind}:{args.port}" (or "auto") for `gpen-watch run` here')
    if args.stay:
        plan = stay.NodePlan(
            (*cmd, *_common(args)), path, running, bind=args.bind, temp_dir=args.temp_dir, address=address
        )
        return _stay(plan)
    return 0


def _join(args: argparse.Namespace, path: Path) -> int:
    if _refuse_second(started.NODE, args.address):
        return 0
    token.check_token(path)
    cmd = ["start", "--address", args.address, "--disable-usage-stats"]
    if args.cpu:
        cmd += ["--resources", json.dumps({CPU_RESOURCE: 1})]
    running = f"joined the cluster at {args.address} as {{bind}} ({offers(len(read_gpus()), args.cpu)})"
    if args.stay:
        plan = stay.NodePlan(
            (*cmd, *_common(args)),
            path,
            running,
            head_address=args.address,
            bind=args.bind,
            temp_dir=args.temp_dir,
        )
        return _stay(plan)
    bind = args.bind or probe_head(args.address)
    # Ray says nothing until the head accepted the node or it gave up (about 20 s for a token
    # the head refuses).
    print(f"waiting for the head at {args.address} to accept this node...", flush=True)
    _start_node([*cmd, "--node-ip-address", bind], args, path, started.NODE, args.address)
    print(running.format(bind=bind))
    return 0


def offers(gpus: int, cpu: bool) -> str:
    """What a joining node offers gpen-watch, from the GPUs NVML finds on this machine."""
    if gpus and cpu:
        return f"its {gpus} GPU(s) and its CPU"
    if gpus:
        return f"its {gpus} GPU(s)"
    if cpu:
        return "its CPU; NVML finds no GPU on this machine"
    return "nothing: NVML finds no GPU on this machine, and no --cpu"


def _stay(plan: stay.NodePlan) -> int:
    keeper = stay.Keeper(plan, stay.say_to(plan.log_path))
    with stay.stop_on_signals(keeper.stop):
        return keeper.run()


# Fixed ports instead of Ray's random ones, so that a firewall can name them (docs/cluster.md).
# Every node uses the same set; the head also listens on --port.
FIXED_PORTS = {
    "--node-manager-port": 6380,
    "--object-manager-port": 6381,
    "--runtime-env-agent-port": 6382,
    "--dashboard-agent-grpc-port": 6383,
    "--dashboard-agent-listen-port": 6384,
    "--metrics-export-port": 6385,
    "--min-worker-port": 10002,
    "--max-worker-port": 10999,
}


def _common(args: argparse.Namespace) -> list[str]:
    extra = [str(part) for flag, port in FIXED_PORTS.items() for part in (flag, port)]
    if args.temp_dir:
        extra += ["--temp-dir", str(args.temp_dir)]
    if args.object_store_mb:
        extra += ["--object-store-memory", str(args.object_store_mb << 20)]
    return extra


def _ray(cmd: list[str], path: Path) -> None:
    proc = subprocess.run(
        [ray_cli(), *cmd],
        env={**os.environ, **token.ray_env(path)},
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise ClusterError(ray_failure(cmd[0], proc.stderr + proc.stdout, proc.returncode, path))


def status_address(cfg: config.Config) -> str:
    """cluster.address, else the cluster of the node gpen-watch started on this machine (the head
    right after `cluster head`, before anyone set cluster.address)."""
    if cfg.cluster.address:
        return cfg.cluster.address
    found = started.running()
    if found is not None and found.address:
        return found.address
    raise ClusterError(
        "cluster.address is not set and gpen-watch started no cluster node here; set it to the "
        "head's host:port, or auto"
    )


def _status(cfg: config.Config, path: Path) -> int:
    address = status_address(cfg)
    token.check_token(path)
    os.environ.update(token.ray_env(path))
    local_ip = None if address == "auto" else probe_head(address)
    r_ = ray()
    try:
        r_.init(address=address, _node_ip_address=local_ip, log_to_driver=False, configure_logging=False)
    except Exception as exc:  # noqa: BLE001
        if "InvalidAuthToken" in str(exc):
            raise ClusterError(token.refused_token(path)) from None
        raise ClusterError(f"cluster.address {address}: Ray refused the connection ({exc})") from None
    try:
        nodes = r_.nodes()
        gpus = _node_gpus(r_, nodes)
    finally:
        r_.shutdown()
    print(format_status(nodes, _service_workers(), gpus))
    return 0


# How long `cluster status` waits for the nodes' NVML readings.
GPU_READ_S = 10.0


def read_gpus() -> tuple[GpuSample, ...]:
    """Every GPU of the machine this runs on, as NVML reads them there (a Ray task on each node)."""
    from gpen_watch.gpu.nvml import NvmlMonitor

    return tuple(NvmlMonitor(environ={}).sample())


def _node_gpus(r_: Any, nodes: list[dict[str, Any]]) -> dict[str, tuple[GpuSample, ...]]:
    """Each live node's GPUs by node id; a node that did not answer within GPU_READ_S is missing."""
    task = r_.remote(num_cpus=0)(read_gpus)
    affinity = r_.util.scheduling_strategies.NodeAffinitySchedulingStrategy
    refs = {
        str(n["NodeID"]): task.options(scheduling_strategy=affinity(n["NodeID"], soft=False)).remote()
        for n in nodes
        if n.get("Alive")
    }
    if not refs:
        return {}
    ready, _ = r_.wait(list(refs.values()), num_returns=len(refs), timeout=GPU_READ_S)
    found: dict[str, tuple[GpuSample, ...]] = {}
    for node, ref in refs.items():
        if ref in ready:
            with contextlib.suppress(Exception):
                found[node] = tuple(r_.get(ref))
    return found


def _service_workers() -> list[dict[str, Any]]:
    from gpen_watch.service import control

    try:
        reply = control.request("status", timeout=5.0)
    except Exception:  # noqa: BLE001 - no service running: nodes only
        return []
    workers: list[dict[str, Any]] = reply.get("workers", [])
    return workers


def format_status(
    nodes: list[dict[str, Any]],
    workers: list[dict[str, Any]],
    gpus: dict[str, tuple[GpuSample, ...]] | None = None,
) -> str:
    """The nodes, each with its GPUs as NVML read them on that node (``gpus``, by node id), then
    what the running service's workers do there."""
    lines = []
    for n in sorted(nodes, key=lambda n: str(n.get("NodeManagerAddress"))):
        address = str(n.get("NodeManagerAddress"))
        res = n.get("Resources", {})
        offers = f"{int(res.get('GPU', 0))} GPU(s)" + (", CPU" if res.get(CPU_RESOURCE) else "")
        state = "alive" if n.get("Alive") else "gone"
        lines.append(f"{address} ({n.get('NodeManagerHostname', '?')}): {state}, offers {offers}")
        if n.get("Alive"):
            lines += _gpu_lines((gpus or {}).get(str(n.get("NodeID"))), res)
        for w in workers:
            if str(w.get("name", "")).startswith(f"{address}/"):
                lines.append(
                    f"  {w['name']}: {w['state']}, {w['done']} done, {w['in_flight']} in flight"
                    + (f" ({w['error']})" if w.get("error") else "")
                )
    return "\n".join(lines) if lines else "no nodes"


def _gpu_lines(read: tuple[GpuSample, ...] | None, res: dict[str, Any]) -> list[str]:
    if read:
        return [f"  GPU {g.index} {gpu_line(g)}" for g in read]
    offered = int(res.get("GPU", 0))
    cpu = res.get(CPU_RESOURCE, 0) >= 1
    if read is None:
        return [f"  GPUs: not read (the node did not answer within {GPU_READ_S:g} s)"]
    if offered:
        return [f"  {offered} GPU(s) offered; NVML gives no readings on that node"]
    return ["  no GPU (NVML finds none)" + ("; its CPU restores photos" if cpu else "")]
