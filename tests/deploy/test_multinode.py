"""The trainer on a real Ray cluster of several nodes on this machine (tests/deploy/cluster.py): one
head for the module, worker nodes started and killed by the tests.

1. `worldsample train --address`: the world model is placed on a second node by a custom resource
   (`--place world_model=wm_node`). Its process is SIGKILLed: Ray starts it again on that node, the
   call in flight is retried, and the next world-model round continues from the last saved version
   (a fresh object: `wm/rounds` counts from 1 again while `wm/version` goes on). Then the second node
   is killed whole: the trainer reports it, starts the world model again on the head
   (`--on-node-loss continue`), and the run ends at its budget with every committed episode in the
   store and `store verify` clean.
2. `--on-node-loss wait`, through the trainer's own part maker (tests/deploy/lost_node_driver.py):
   the part's node is killed, the loss is reported and the call waits; a new node with the resource
   joins (however long `ray start` takes on a busy machine, within the wait) and the call completes
   there.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from services.cli.main import app
from worldsample.store import EpisodeStore

from ..trainer.tiny import TINY
from .cluster import ROOT, LocalCluster

# of 40 steps, a world-model round in each: the test reacts to a round's metrics well within the next
# round, so a kill lands in round 1 and the node loss in round 2, with rounds to spare
BUDGET_EPISODES = 5


def rows(run: Path) -> list[dict]:
    path = run / "metrics.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def events(run: Path) -> list[dict]:
    path = run / "events.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def nodes(run: Path) -> dict:
    try:
        return json.loads((run / "nodes.json").read_text())
    except (OSError, ValueError):
        return {}


def wm_rows(run: Path) -> list[dict]:
    return [r for r in rows(run) if "wm/version" in r]


def wait_until(what: str, check, p: subprocess.Popen, log: Path, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        assert p.poll() is None, f"the trainer ended while waiting for {what}:\n{log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"no {what} within {timeout:.0f} s:\n{log.read_text()[-3000:]}"
        time.sleep(0.25)


def health(run: Path) -> int:
    cmd = [sys.executable, "-m", "services.trainer.health", str(run)]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, timeout=60).returncode


def wm_part(run: Path) -> dict:
    return nodes(run).get("parts", {}).get("world_model", {})


@pytest.fixture(scope="module")
def cluster():
    with LocalCluster() as c:
        c.start_head()
        yield c


@pytest.mark.timeout(300)
def test_trainer_on_two_nodes_survives_a_killed_world_model_and_a_lost_node(cluster, tiny_sim_run, tmp_path):
    run, log = tiny_sim_run, tmp_path / "train.log"  # demos and the tiny config, shared by the session (conftest)
    second = cluster.add_node({"wm_node": 1})
    cmd = [
        sys.executable,
        "-m",
        "services.cli.main",
        "train",
        str(run),
        "--address",
        cluster.address,
        "--place",
        "world_model=wm_node",
        "--on-node-loss",
        "continue",
        *TINY,
        "--set",
        "loop.wm_every_episodes=1",
        "--set",
        f"loop.real_steps={40 * BUDGET_EPISODES}",
    ]
    with open(log, "w") as out:
        p = subprocess.Popen(cmd, cwd=ROOT, env=cluster.env, stdout=out, stderr=subprocess.STDOUT)
    try:
        # the world model runs on the second node, placed there by its resource; the rest beside the driver
        first = wait_until("a world-model version", lambda: wm_rows(run), p, log, timeout=150)[-1]
        placed = wait_until(
            "the world model in nodes.json", lambda: wm_part(run).get("state") == "ALIVE" and wm_part(run), p, log
        )
        doc = nodes(run)
        by_id = {n["node_id"]: n for n in doc["nodes"]}
        assert by_id[placed["node_id"]]["resources"].get("wm_node") == 1, doc
        assert placed["node_id"] != doc["driver_node"] and not by_id[placed["node_id"]]["head"], doc
        assert by_id[doc["driver_node"]]["head"]
        assert {doc["parts"][p]["node_id"] for p in ("learner", "sim", "synth")} == {doc["driver_node"]}, doc
        assert health(run) == 0  # the containers' health check of the trainer (docker-compose.yml)

        # 1. the world model's process dies: Ray starts it again on the same node, it goes on from its last version
        victim = placed["pid"]
        assert b"WorldModelRounds" in Path(f"/proc/{victim}/cmdline").read_bytes()
        subprocess.run(["kill", "-9", str(victim)], check=True)
        v_kill = int(wm_rows(run)[-1]["wm/version"])
        after = wait_until(
            "a world-model round after the kill",
            lambda: [r for r in wm_rows(run) if r["wm/version"] > v_kill and r["wm/rounds"] == 1],
            p,
            log,
        )[0]
        assert after["wm/mode_loop"] == 1.0  # continual: from the saved version, not from scratch
        assert after["wm/version"] == v_kill + 1

        # 2. the second node dies whole: reported, the world model starts again on the head, training goes on
        real = EpisodeStore(run).reader("real", cache=False)
        episodes_before = real.num_episodes
        v_lost = int(wm_rows(run)[-1]["wm/version"])
        assert cluster.kill_node(second) > 0
        wait_until(
            "a world-model round on the head", lambda: [r for r in wm_rows(run) if r["wm/version"] > v_lost], p, log
        )
        moved = wm_part(run)
        assert moved["state"] == "ALIVE" and moved["node_id"] == doc["driver_node"] and moved["generation"] == 1
        assert p.wait(timeout=180) == 0, log.read_text()[-3000:]
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()

    out = log.read_text()
    assert "trained" in out, out[-3000:]
    assert "left the Ray cluster" in out  # the trainer says so on its console too
    kinds = [(e["kind"], e["data"].get("part"), e["data"].get("node_id")) for e in events(run)]
    # Ray restarted the killed process (on its node); later that node was lost and the part moved to the head
    assert ("part_restarted", "world_model", None) in kinds
    assert ("part_node_lost", "world_model", placed["node_id"]) in kinds
    assert ("part_moved", "world_model", None) in kinds
    assert ("node_lost", None, placed["node_id"]) in kinds
    real.refresh()
    assert real.num_episodes >= max(episodes_before, BUDGET_EPISODES)
    assert sorted(real.records) == list(range(real.num_episodes))  # nothing lost, nothing twice
    assert int(wm_rows(run)[-1]["wm/version"]) > int(first["wm/version"]) + 1
    assert nodes(run)["running"] is False and health(run) == 1
    res = CliRunner().invoke(app, ["store", "verify", str(run)])
    assert res.exit_code == 0, res.output


class Lines:
    """The JSON lines a subprocess prints, read as they come."""

    def __init__(self, p: subprocess.Popen):
        self.p, self.seen, self._q = p, [], queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.p.stdout:
            if line.startswith("{"):
                self._q.put(json.loads(line))
        self._q.put(None)

    def until(self, what: str, match, timeout: float = 60.0) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self._q.get(timeout=0.5)
            except queue.Empty:
                continue
            assert line is not None, f"the driver ended before {what}: {self.seen[-5:]}"
            self.seen.append(line)
            if match(line):
                return line
        raise AssertionError(f"no {what} within {timeout:.0f} s: {self.seen[-5:]}")


@pytest.mark.timeout(240)
def test_lost_node_in_wait_mode_waits_for_a_node_with_the_resource(cluster, tmp_path):
    # the Ray head's health check in docker-compose.yml, with the cluster's token and without it
    check = [str(Path(sys.executable).parent / "ray"), "health-check", "--address", cluster.address]
    assert subprocess.run(check, env=cluster.env, capture_output=True, timeout=60).returncode == 0
    no_token = {k: v for k, v in cluster.env.items() if k != "RAY_AUTH_TOKEN"}
    assert subprocess.run(check, env=no_token, capture_output=True, timeout=60).returncode != 0

    first = cluster.add_node({"wm_node": 1})
    cmd = [sys.executable, "-m", "tests.deploy.lost_node_driver", cluster.address, str(tmp_path), "wait", "180"]
    p = subprocess.Popen(cmd, cwd=ROOT, env=cluster.env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        lines = Lines(p)
        driver = lines.until("the driver", lambda x: x["kind"] == "driver")["node_id"]
        on_first = lines.until("a result", lambda x: x["kind"] == "result")
        assert on_first["node_id"] != driver  # placed by its resource, on the only node that has it
        cluster.kill_node(first)
        lost = lines.until("the lost node reported", lambda x: x.get("event") == "part_node_lost")
        assert lost["node_id"] == on_first["node_id"] and "waiting up to 180 s" in lost["message"]
        cluster.add_node({"wm_node": 1})  # the call in flight waits for it, then runs there
        back = lines.until("the part back", lambda x: x.get("event") == "part_back", timeout=120)
        assert back["node_id"] not in (driver, on_first["node_id"])
        done = lines.until(
            "a result on the new node", lambda x: x["kind"] == "result" and x["node_id"] == back["node_id"]
        )
        # the call that was in flight when the node died is the one that completed there: none lost, none twice
        before = [x["i"] for x in lines.seen if x["kind"] == "result" and x["node_id"] == on_first["node_id"]]
        assert done["i"] == max(before) + 1
        p.terminate()
        p.wait(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
