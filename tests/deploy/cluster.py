"""A real Ray cluster of several nodes on this machine, for the multi-node tests and the benchmark:
`ray start --head` and `ray start --address` as a user would run them, each node with a temp dir of
its own, so that a node (or the whole cluster) is stopped by ending the processes that name its temp
dir, never by `ray stop` (which would end every Ray cluster of the machine).

The nodes bind 127.0.0.2: Ray replaces 127.0.0.1 by the machine's network address, any other
loopback address it keeps. Token authentication is on (RAY_AUTH_MODE=token with a fresh token in
RAY_AUTH_TOKEN), as docs/deploy.md asks of a real cluster; `env` holds what a driver needs to join.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.trainer.procs import processes_naming

ROOT = Path(__file__).resolve().parents[2]
RAY = str(Path(sys.executable).parent / "ray")
IP = "127.0.0.2"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


class LocalCluster:
    def __init__(self, head_cpus: int = 2, fast_failure_detection: bool = True):
        self.port = free_port()
        self.address = f"{IP}:{self.port}"
        self.env = {
            **os.environ,
            "RAY_AUTH_MODE": "token",
            "RAY_AUTH_TOKEN": secrets.token_hex(32),
            "RAY_USAGE_STATS_ENABLED": "0",
            "PYTHONPATH": str(ROOT),
            "MUJOCO_GL": "egl",
            "COLUMNS": "200",
        }
        self.head_cpus = head_cpus
        self.fast = fast_failure_detection
        self.nodes: list[Path] = []  # temp dirs, the head's first

    def _start(self, args: list[str], env: dict) -> Path:
        temp = Path(tempfile.mkdtemp(prefix="wsn-", dir="/tmp"))  # short: Ray's unix sockets live under it
        self.nodes.append(temp)
        cmd = [RAY, "start", f"--node-ip-address={IP}", f"--temp-dir={temp}", "--disable-usage-stats", *args]
        res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
        if res.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{res.stdout[-2000:]}{res.stderr[-2000:]}")
        return temp

    def start_head(self) -> Path:
        env = dict(self.env)
        if self.fast:  # a dead node is noticed in about 3 s instead of about 15 s
            env.update(
                RAY_health_check_period_ms="1000",
                RAY_health_check_failure_threshold="3",
                RAY_health_check_timeout_ms="1000",
            )
        return self._start(
            ["--head", f"--port={self.port}", f"--num-cpus={self.head_cpus}", "--include-dashboard=false"], env
        )

    def add_node(self, resources: dict[str, float] | None = None, cpus: int = 1) -> Path:
        args = [f"--address={self.address}", f"--num-cpus={cpus}"]
        if resources:
            args.append(f"--resources={json.dumps(resources)}")
        return self._start(args, self.env)

    def kill_node(self, temp: Path) -> int:
        """SIGKILL every process of one node (its raylet, agents and workers): the node is gone."""
        procs = processes_naming(str(temp))
        for pid in procs:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return len(procs)

    def stop(self) -> None:
        """End every process of this cluster's nodes (again, until none is left: a dying raylet may still
        start a worker) and remove their temp dirs."""
        marks = [str(t) for t in self.nodes]
        deadline = time.monotonic() + 30
        while marks and time.monotonic() < deadline:
            procs = processes_naming(*marks)
            if not procs:
                break
            for pid in procs:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.5)
        for temp in self.nodes:
            shutil.rmtree(temp, ignore_errors=True)

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
