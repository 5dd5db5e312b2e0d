"""Bridge throughput and timing on loopback DDS: sim-robot and bridge as separate processes.

    .venv/bin/python bench/bridge.py [--seconds 15] [--rates 10,50]

Load: two 640x480 RGB cameras at 30 Hz plus joint states at 500 Hz, published by
`sim-robot` (synthetic frames) with sensor QoS; the bridge records back-to-back episodes at each
control rate into a fresh store. Figures per rate:
- frames dropped: published by the sim minus received by the bridge, per stream (target 0);
- latency: header stamp -> receive (transport, the baseline), receive -> step accepted by the
  store (obs-to-store; includes the wait for the next tick and the one-tick wait for the step's
  reward), and loop hand-off -> store (the recorder's own cost; target p99 < 20 ms);
- control-loop period jitter |period - nominal| p50/p99 (target p99 < 2 ms) and overruns;
- CPU: each process (user+sys, % of one core) and per stream decode+check time in the bridge.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from robot_bridge.codec import String, decode, encode  # noqa: E402
from robot_bridge.transport.base import RELIABLE_QOS  # noqa: E402
from robot_bridge.transport.dds import LOOPBACK_XML, DdsTransport  # noqa: E402

console = Console()


def profile(rate: float) -> dict:
    cam = {"type": "sensor_msgs/msg/Image", "height": 480, "width": 640, "rate_hz": 30}
    return {
        "name": "bench",
        "control_rate_hz": rate,
        "cameras": [{"name": "front", "topic": "/cam/front/image_raw", **cam},
                    {"name": "wrist", "topic": "/cam/wrist/image_raw", **cam}],
        "joints": {"topic": "/joint_states", "names": ["hand_x", "hand_y", "hand_z", "gripper"], "rate_hz": 500},
        "action": {"low": [-1] * 4, "high": [1] * 4, "hold": [0] * 4},
        "episode": {"max_steps": int(rate * 5), "reset_timeout_s": 10, "chunk_len": 8},
        "reset": {"strategy": "handshake"},  # sim-robot answers the reset handshake
        "sim": {"images": "synthetic"},
    }


class Proc:
    def __init__(self, args: list[str], env: dict, log: Path):
        self.log = open(log, "wb")
        self.p = subprocess.Popen([sys.executable, "-m", "robot_bridge", *args], env=env, cwd=ROOT,
                                  stdout=self.log, stderr=subprocess.STDOUT)

        self.cpu_s: float | None = None

    def exited(self) -> bool:
        """Reap the process if it ended, keeping its CPU seconds (user + sys)."""
        if self.cpu_s is None:
            pid, status, ru = os.wait4(self.p.pid, os.WNOHANG)
            if pid:
                self.p.returncode = os.waitstatus_to_exitcode(status)
                self.cpu_s = ru.ru_utime + ru.ru_stime
        return self.cpu_s is not None

    def wait_cpu(self, timeout: float) -> float:
        deadline = time.monotonic() + timeout
        while not self.exited() and time.monotonic() < deadline:
            time.sleep(0.05)
        if not self.exited():
            self.p.kill()
            while not self.exited():
                time.sleep(0.05)
        return self.cpu_s


def run_rate(rate: float, seconds: float, tmp: Path) -> dict:
    domain = random.randint(1, 100)
    env = dict(os.environ, ROS_DOMAIN_ID=str(domain), CYCLONEDDS_URI=LOOPBACK_XML, MUJOCO_GL="egl")
    prof = tmp / f"bench_{rate:g}.yaml"
    prof.write_text(yaml.safe_dump(profile(rate)))
    op = DdsTransport(domain, LOOPBACK_XML)
    status: dict = {}
    op.subscribe("/worldsample/status", "std_msgs/msg/String", RELIABLE_QOS,
                 lambda raw, _: status.update(json.loads(decode(raw, "std_msgs/msg/String").data)))
    cmd = op.publisher("/worldsample/command", "std_msgs/msg/String", RELIABLE_QOS)
    bridge = Proc(["bridge", "-p", str(prof), "--run", str(tmp / f"run_{rate:g}"), "--stats-out", str(tmp / "b.json")],
                  env, tmp / f"bridge_{rate:g}.log")
    time.sleep(3.0)  # let the bridge subscribe before the sim starts its clock
    sim = Proc(["sim-robot", "-p", str(prof), "--wait-subscribers", "30", "--duration", str(seconds),
                "--stats-out", str(tmp / "s.json")], env, tmp / f"sim_{rate:g}.log")
    try:
        while not sim.exited():  # keep episodes going back to back
            if status.get("state") in ("idle", "ended") and not status.get("stale"):
                cmd(encode(String('{"cmd": "start"}')))
                time.sleep(0.3)
            time.sleep(0.05)
        sim_cpu = sim.wait_cpu(30)
        time.sleep(0.5)
        bridge.p.terminate()
        bridge_cpu = bridge.wait_cpu(60)
    finally:
        for p in (sim, bridge):
            if not p.exited():
                p.p.kill()
                p.wait_cpu(10)
        op.close()
    b, s = json.loads((tmp / "b.json").read_text()), json.loads((tmp / "s.json").read_text())
    return {"bridge": b, "sim": s, "bridge_cpu_s": bridge_cpu, "sim_cpu_s": sim_cpu}


def report(rate: float, r: dict) -> Table:
    b, s = r["bridge"], r["sim"]
    secs = s["seconds"]
    e = b["episodes"]
    t = Table(title=f"control {rate:g} Hz, {secs:.1f} s of sensor traffic, {e['committed']} episodes committed, "
                    f"{e['overruns']} dropped for recorder overrun, {e['steps']} steps stored")
    t.add_column("figure")
    t.add_column("value", justify="right")
    t.add_column("target", justify="right")
    topics = {"image_front": "/cam/front/image_raw", "image_wrist": "/cam/wrist/image_raw", "proprio": "/joint_states"}
    for key, topic in topics.items():
        tb = b["topics"][key]
        pub = s["published"].get(topic, 0)
        t.add_row(
            f"{key}: published / received / dropped", f"{pub} / {tb['received']} / {pub - tb['received']}", "0 dropped"
        )
        transport = tb["transport_ms"]
        t.add_row(f"{key}: transport p50 / p99 ms", f"{transport['p50']:.2f} / {transport['p99']:.2f}", "")
        t.add_row(f"{key}: bridge CPU (decode+check)", f"{100 * tb['cpu_s'] / secs:.1f} % of a core", "")
    o, h = b["obs_to_store_ms"], b["handoff_to_store_ms"]
    t.add_row(
        "obs receive -> store p50 / p99 ms", f"{o['p50']:.1f} / {o['p99']:.1f}", f"(>= 1 period = {1e3 / rate:.0f} ms)"
    )
    t.add_row("loop hand-off -> store p50 / p99 ms", f"{h['p50']:.2f} / {h['p99']:.2f}", "p99 < 20")
    j = b["period_jitter_ms"]
    t.add_row("control period jitter p50 / p99 ms", f"{j['p50']:.3f} / {j['p99']:.3f}", "p99 < 2")
    t.add_row("control overruns", str(b["overruns"]), "0")
    t.add_row("recorder backlog, most steps waiting", str(b["recorder_backlog_max"]), "small")
    t.add_row(
        "CPU bridge process / sim process",
        f"{100 * r['bridge_cpu_s'] / secs:.0f} % / {100 * r['sim_cpu_s'] / secs:.0f} %",
        "",
    )
    return t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--rates", default="10,50")
    ap.add_argument("--json", type=Path, default=None, help="also write the raw figures here")
    args = ap.parse_args()
    results = {}
    with tempfile.TemporaryDirectory(prefix="bench_bridge_") as d:
        for rate in (float(x) for x in args.rates.split(",")):
            console.print(f"[bold]control rate {rate:g} Hz[/]: running {args.seconds:g} s ...")
            results[rate] = run_rate(rate, args.seconds, Path(d))
            console.print(report(rate, results[rate]))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, default=str))


if __name__ == "__main__":
    main()
