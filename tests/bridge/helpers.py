"""Shared pieces of the bridge tests: small profiles, processes on a private DDS domain, and an
in-process operator that sends commands and watches status and actions."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import yaml

from robot_bridge.codec import Bool, String, decode, encode
from robot_bridge.transport.base import RELIABLE_QOS
from robot_bridge.transport.dds import LOOPBACK_XML, DdsTransport
from services.cli.dds_robot import domain_range

ROOT = Path(__file__).resolve().parents[2]
SIM_PROFILE = ROOT / "configs" / "robot_profiles" / "sim_arm.yaml"


def small_profile(tmp_path: Path, **changes) -> Path:
    """The sim arm profile with a 32x32 camera at a fast control rate and short episodes; its frames
    are the synthetic pattern that encodes the physics step (tests check alignment with it)."""
    data = yaml.safe_load(SIM_PROFILE.read_text())
    data["sim"]["images"] = "synthetic"
    data["control_rate_hz"] = 20
    data["status_rate_hz"] = 10
    data["cameras"][0].update(height=32, width=32, rate_hz=20)
    data["joints"]["rate_hz"] = 50
    data["vectors"][0]["rate_hz"] = 50
    data["episode"]["max_steps"] = 15
    data["episode"]["reset_timeout_s"] = 8
    for dotted, value in changes.items():
        node = data
        *parents, leaf = dotted.split(".")
        for p in parents:
            node = node[int(p)] if isinstance(node, list) else node[p]
        node[leaf] = value
    path = tmp_path / "profile.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def new_domain() -> int:
    """A random domain from the range tests/conftest.py gives this pytest worker (WORLDSAMPLE_DDS_DOMAINS,
    which the jobs the tests start draw from too): parallel workers never share a domain."""
    return random.Random(os.getpid() * 1000 + time.time_ns()).randint(*domain_range())


def env_for(domain: int) -> dict:
    env = dict(os.environ)
    env.update(
        ROS_DOMAIN_ID=str(domain), CYCLONEDDS_URI=LOOPBACK_XML, MUJOCO_GL="egl", PYTHONUNBUFFERED="1", COLUMNS="200"
    )
    return env


class Proc:
    """A `python -m robot_bridge ...` subprocess, killed on exit no matter what."""

    def __init__(self, args: list[str], domain: int, log: Path):
        self.log = log
        self._f = open(log, "wb")
        self.p = subprocess.Popen([sys.executable, "-m", "robot_bridge", *args], env=env_for(domain),
                                  stdout=self._f, stderr=subprocess.STDOUT, cwd=ROOT)

    def stop(self, timeout: float = 20) -> int:
        if self.p.poll() is None:
            self.p.terminate()
        try:
            return self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            return self.p.wait(5)

    def kill(self) -> None:
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait(10)

    def output(self) -> str:
        self._f.flush()
        return self.log.read_text(errors="replace")

    def __enter__(self) -> Proc:
        return self

    def __exit__(self, *exc) -> None:
        self.kill()
        self._f.close()


class Operator:
    """Sends episode commands / e-stop, records status messages and the actions on the wire."""

    def __init__(self, domain: int, action_topic: str = "/worldsample/action"):
        self.t = DdsTransport(domain, LOOPBACK_XML)
        self._cmd = self.t.publisher("/worldsample/command", "std_msgs/msg/String", RELIABLE_QOS)
        self._estop = self.t.publisher("/worldsample/estop", "std_msgs/msg/Bool", RELIABLE_QOS)
        self.status: dict = {}
        self.actions: list[np.ndarray] = []
        self._lock = threading.Lock()
        self.t.subscribe("/worldsample/status", "std_msgs/msg/String", RELIABLE_QOS, self._on_status)
        self.t.subscribe(action_topic, "std_msgs/msg/Float32MultiArray", RELIABLE_QOS, self._on_action)

    def _on_status(self, raw: bytes, _):
        self.status = json.loads(decode(raw, "std_msgs/msg/String").data)

    def _on_action(self, raw: bytes, _):
        with self._lock:
            self.actions.append(np.array(decode(raw, "std_msgs/msg/Float32MultiArray").data))

    def send(self, cmd: str, **kw) -> None:
        self._cmd(encode(String(json.dumps({"cmd": cmd, **kw}))))

    def estop(self, on: bool) -> None:
        self._estop(encode(Bool(on)))

    def wait(self, pred, timeout: float = 30, what: str = "condition") -> dict:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            st = self.status
            if st and pred(st):
                return st
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what}; last status: {json.dumps(self.status)[:2000]}")

    def wait_ready(self, timeout: float = 60) -> dict:
        """Bridge is up and every required stream is fresh."""
        return self.wait(lambda s: s["state"] in ("idle", "ended") and not s["stale"], timeout, "a ready bridge")

    def committed(self) -> int:
        return self.status.get("episodes", {}).get("committed", 0)

    def record_episode(self, timeout: float = 30) -> dict:
        n = self.committed() + self.status.get("episodes", {}).get("discarded", 0)
        self.send("start")
        return self.wait(
            lambda s: s["episodes"]["committed"] + s["episodes"]["discarded"] > n and s["state"] != "running",
            timeout,
            "an episode to end",
        )

    def close(self) -> None:
        self.t.close()


def publish_policy(run_dir: Path, seed: int = 0, scale: float = 0.5, stochastic: bool = False,
                   source: dict | None = None) -> int:
    """A random MLP over proprio+state into RUN's registry (`source`: its provenance, e.g. real_steps); returns
    its version."""
    from worldsample.policy import ObsInput, PolicyConfig, PolicyRegistry

    cfg = PolicyConfig(obs=[ObsInput(key="proprio", dim=4), ObsInput(key="state", dim=39)], action_dim=4,
                       hidden=[16], action_low=[-1] * 4, action_high=[1] * 4, stochastic=stochastic,
                       source=source or {})
    rng = np.random.default_rng(seed)
    tensors = {k: rng.normal(0, scale, s).astype(np.float32) for k, s in cfg.tensor_shapes().items()}
    return PolicyRegistry(run_dir).publish(cfg, tensors)


class Rig:
    """sim-robot + bridge subprocesses on a fresh domain, and an Operator; everything is torn down."""

    def __init__(self, tmp_path: Path, profile: Path, run: Path | None = None, sim_args=(), bridge_args=()):
        self.tmp, self.profile, self.domain = tmp_path, profile, new_domain()
        self.run = run or tmp_path / "run"
        self.sim_args, self.bridge_args = list(sim_args), list(bridge_args)
        self.sim = self.bridge = self.op = None

    def start_sim(self) -> Proc:
        self.sim = Proc(
            ["sim-robot", "--profile", str(self.profile), *self.sim_args], self.domain, self.tmp / "sim.log"
        )
        return self.sim

    def start_bridge(self) -> Proc:
        self.bridge = Proc(["bridge", "--profile", str(self.profile), "--run", str(self.run), *self.bridge_args],
                           self.domain, self.tmp / f"bridge{time.monotonic_ns()}.log")
        return self.bridge

    def __enter__(self) -> Rig:
        self.start_sim()
        self.start_bridge()
        self.op = Operator(self.domain)
        return self

    def logs(self) -> str:
        return "\n".join(f"--- {p.log.name}\n{p.output()[-3000:]}" for p in (self.sim, self.bridge) if p is not None)

    def __exit__(self, exc_type, *exc) -> None:
        try:
            if exc_type is not None:
                print(self.logs())
        finally:
            for p in (self.bridge, self.sim):
                if p is not None:
                    p.__exit__(None, None, None)
            if self.op is not None:
                self.op.close()
