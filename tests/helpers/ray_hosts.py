"""A Ray cluster of several hosts on this machine: each host a Linux network namespace with its own
address, joined to the others by a bridge in the root namespace (``ip netns``, veth pairs), running
its own Ray node (``ray start``, its own temp dir). For the tests of what crosses a network: the
audit's engine ``ray`` on a head and worker nodes, a worker node dying halfway.

Every name carries a random tag (namespaces, bridge, veths, subnet, temp dir), so two runs on one
machine do not collide; :meth:`RayHosts.close` ends the processes of every namespace it made (found by
the namespace, ``ip netns pids``, never by a name), removes the links and namespaces and the temp
dir, and is safe to call twice and after a failed start. Needs root and iproute2: where a namespace
cannot be made, :func:`netns_missing` says why in one line.
"""

from __future__ import annotations

import os
import random
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

RAY_PORT = 6379
START_TRIES = 3
NODE_CPUS = 2  # per worker node: a second actor has room on the node that is left when one dies


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check, timeout=30)


def netns_missing() -> str:
    """Why namespaces cannot be made here, in one line ("" when one was made and removed)."""
    if shutil.which("ip") is None:
        return "the `ip` command (iproute2) is not installed"
    if os.geteuid() != 0:
        return f"network namespaces need root; this runs as uid {os.geteuid()}"
    name = f"wbprobe-{secrets.token_hex(3)}"
    made = _ip("netns", "add", name, check=False)
    if made.returncode != 0:
        return f"`ip netns add` failed: {(made.stderr or made.stdout).strip().splitlines()[-1:]}"
    _ip("netns", "del", name, check=False)
    return ""


def _free_subnet() -> str:
    """A 10.x.y.0/24 prefix (``10.x.y``) no interface of this machine uses."""
    used = _ip("-4", "-o", "addr").stdout
    for _ in range(100):
        prefix = f"10.{random.randint(100, 250)}.{random.randint(0, 255)}"
        if f" {prefix}." not in used:
            return prefix
    raise RuntimeError("no free 10.x.y.0/24 subnet for the namespaces")


@dataclass
class Host:
    """One namespace: its name, address, role (``head`` or ``worker``) and Ray temp dir."""

    name: str
    ip: str
    role: str
    temp_dir: Path

    def pids(self) -> list[int]:
        """Every process in this namespace (the Ray node's raylet, its workers, a driver run here)."""
        out = _ip("netns", "pids", self.name, check=False).stdout
        return [int(p) for p in out.split()]


@dataclass
class RayHosts:
    """``workers`` worker hosts and a head host (no CPUs of its own: every actor runs on a worker)."""

    root: Path
    workers: int = 2
    env: dict = field(default_factory=dict)  # what every Ray process and driver gets (PYTHONPATH, thread caps)
    tag: str = field(default_factory=lambda: secrets.token_hex(3))
    token: str = field(default_factory=lambda: secrets.token_hex(32))  # the cluster's own (Ray's token authentication)
    hosts: list[Host] = field(default_factory=list)
    links: list[str] = field(default_factory=list)

    @property
    def head(self) -> Host:
        return self.hosts[0]

    @property
    def worker_hosts(self) -> list[Host]:
        return self.hosts[1:]

    @property
    def address(self) -> str:
        return f"{self.head.ip}:{RAY_PORT}"

    @property
    def bridge(self) -> str:
        return f"wbr{self.tag}"

    def ray(self) -> str:
        return str(Path(sys.executable).parent / "ray")

    def proc_env(self) -> dict:
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
        env.update({"RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": self.token, **self.env})
        return env

    # ---- the network ------------------------------------------------------------------------------
    def _network(self) -> None:
        prefix = _free_subnet()
        _ip("link", "add", self.bridge, "type", "bridge")
        self.links.append(self.bridge)
        _ip("addr", "add", f"{prefix}.1/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        for i in range(self.workers + 1):
            role = "head" if i == 0 else "worker"
            host = Host(f"wb-{self.tag}-{'h' if i == 0 else f'w{i}'}", f"{prefix}.{i + 2}", role, self.root / f"n{i}")
            _ip("netns", "add", host.name)
            self.hosts.append(host)
            outer, inner = f"wv{self.tag}{i}", f"wi{self.tag}{i}"
            _ip("link", "add", outer, "type", "veth", "peer", "name", inner)
            self.links.append(outer)
            _ip("link", "set", inner, "netns", host.name)
            _ip("link", "set", outer, "master", self.bridge)
            _ip("link", "set", outer, "up")
            for args in (("addr", "add", f"{host.ip}/24", "dev", inner), ("link", "set", inner, "up"), ("link", "set", "lo", "up"),
                         ("route", "add", "default", "via", f"{prefix}.1")):  # Ray finds its own address by its route out
                _ip("-n", host.name, *args)

    # ---- Ray --------------------------------------------------------------------------------------
    def exec_argv(self, host: Host, argv: Sequence[str]) -> list[str]:
        return ["ip", "netns", "exec", host.name, *argv]

    def _ray_start(self, host: Host) -> None:
        host.temp_dir.mkdir(parents=True, exist_ok=True)
        common = [f"--node-ip-address={host.ip}", f"--temp-dir={host.temp_dir}", "--object-store-memory=100000000",
                  "--disable-usage-stats",
                  "--include-log-monitor=false"]  # fewer processes to start: the audit sends no worker logs to the driver
        if host.role == "head":
            argv = [self.ray(), "start", "--head", f"--port={RAY_PORT}", "--include-dashboard=false", "--num-cpus=0", "--no-monitor",
                    *common]
        else:
            argv = [self.ray(), "start", f"--address={self.address}", f"--num-cpus={NODE_CPUS}", *common]
        # Ray 2.60's raylet gives its Python agents 15 s to start, then stops ("timed out during startup"); on a
        # machine busy with other work they can take longer: the node's processes are ended and it starts again
        for attempt in range(START_TRIES):
            proc = subprocess.run(self.exec_argv(host, argv), capture_output=True, text=True, env=self.proc_env(), timeout=300)
            if proc.returncode == 0:
                return
            self.kill_host(host)
            time.sleep(1)
        raise RuntimeError(f"ray start on {host.name} ({host.ip}) failed {START_TRIES} times, last: "
                           f"{(proc.stderr or proc.stdout).strip().splitlines()[-1:]}")

    def start(self) -> "RayHosts":
        self.root.mkdir(parents=True, exist_ok=True)
        self._network()
        for host in self.hosts:
            self._ray_start(host)
        self.wait_for_nodes(len(self.hosts))
        return self

    def run_in(self, host: Host, code: str, timeout: float = 120) -> str:
        """``python -c code`` on ``host`` (its stdout); raises with its stderr when it fails."""
        proc = subprocess.run(self.exec_argv(host, [sys.executable, "-c", code]), capture_output=True, text=True,
                              env=self.proc_env(), timeout=timeout)
        if proc.returncode != 0:
            raise RuntimeError(f"python on {host.name} failed: {proc.stderr[-3000:]}")
        return proc.stdout

    def alive_nodes(self) -> dict[str, bool]:
        """Each Ray node's id and whether the cluster holds it alive (asked on the head)."""
        code = ("import json, ray\nray.init(address=%r, logging_level='ERROR', log_to_driver=False)\n"
                "print(json.dumps({n['NodeID']: n['Alive'] for n in ray.nodes()}))" % self.address)
        import json

        return json.loads(self.run_in(self.head, code).strip().splitlines()[-1])

    def wait_for_nodes(self, count: int, seconds: float = 120) -> None:
        deadline = time.monotonic() + seconds
        alive: dict = {}
        while time.monotonic() < deadline:
            alive = self.alive_nodes()
            if sum(alive.values()) >= count:
                return
            time.sleep(1)
        raise RuntimeError(f"{count} Ray nodes expected alive, the cluster has {alive}")

    def actors(self, class_part: str) -> list[dict]:
        """Every actor the cluster has held whose class name contains ``class_part`` (alive or dead):
        its class, the node address it ran on and its state, read from the GCS on the head."""
        code = ("import json, ray\nray.init(address=%r, logging_level='ERROR', log_to_driver=False)\n"
                "from ray._private import state\n"
                "rows = [{'class': a['ActorClassName'], 'ip': a['Address']['IPAddress'], 'state': a['State'],\n"
                "         'restarts': a.get('NumRestarts', 0)} for a in state.actors().values()]\n"
                "print(json.dumps(rows))" % self.address)
        import json

        rows = json.loads(self.run_in(self.head, code).strip().splitlines()[-1])
        return [r for r in rows if class_part in r["class"]]

    def restart(self, host: Host) -> None:
        """A host's Ray node started again (after :meth:`kill_host`): the cluster has all its hosts alive."""
        self.kill_host(host)
        self._ray_start(host)
        self.wait_for_nodes(len(self.hosts))

    def kill_host(self, host: Host) -> list[int]:
        """The host dies: SIGKILL to every process in its namespace (its raylet, object store and actors)."""
        pids = host.pids()
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return pids

    # ---- clean-up -----------------------------------------------------------------------------------
    def close(self) -> list[str]:
        """Everything this made, undone: processes in its namespaces (SIGTERM, then SIGKILL), the namespaces,
        the bridge and veths, the temp dir. Returns what could not be undone (empty when all went)."""
        left = []
        for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
            for host in self.hosts:
                for pid in host.pids():
                    try:
                        os.kill(pid, sig)
                    except ProcessLookupError:
                        pass
            deadline = time.monotonic() + wait
            while any(h.pids() for h in self.hosts) and time.monotonic() < deadline:
                time.sleep(0.2)
        for host in self.hosts:
            if host.pids():
                left.append(f"processes {host.pids()} in {host.name}")
            if _ip("netns", "del", host.name, check=False).returncode != 0:
                left.append(f"namespace {host.name}")
        for link in self.links:
            _ip("link", "del", link, check=False)  # a veth goes with its namespace; the bridge stays until here
        self.hosts, self.links = [], []
        shutil.rmtree(self.root, ignore_errors=True)
        return left


def short_root() -> Path:
    """A temp dir with a short path: Ray's Unix sockets live below it (a socket path is at most 107 bytes)."""
    return Path(tempfile.mkdtemp(prefix="wbh-", dir="/tmp"))


def leftovers(tag: str) -> list[str]:
    """Namespaces and links whose name carries ``tag`` (what a close should have removed)."""
    names = _ip("netns", "list", check=False).stdout + _ip("-o", "link", check=False).stdout
    return [line.split()[0] for line in names.splitlines() if tag in line]


def stop_quietly(hosts: Optional[RayHosts]) -> None:
    if hosts is not None:
        hosts.close()
