"""The overview's `cluster`: RUN/nodes.json (the Ray nodes and the node each part of the trainer
runs on, services/trainer/nodes.py) through a real server. Absent: null. Present: each part with
its node's hostname and address, state, restarts and placement, the nodes alive or lost, the
file's age. Damaged, nested past the limit or a symbolic link: an error for that item only; the
rest of the overview, and the live `overview` event, go on."""

from __future__ import annotations

import json
import os
import time

import httpx
import pytest

from services.dashboard import DashboardSettings, create_app
from services.dashboard.server import BackgroundServer
from tests.dashboard.rundata import make_run
from worldsample.atomic import atomic_write_json

TOKEN = "cluster-token-0123456789"
HEAD, WORKER = "ab12" * 14, "cd34" * 14


def nodes_doc(updated: float, running: bool = True, worker_alive: bool = True, wm_state: str = "ALIVE") -> dict:
    """What NodeMonitor.poll writes (the shape of services/trainer/nodes.py's docstring)."""
    return {
        "updated": updated,
        "running": running,
        "address": "10.0.0.5:6379",
        "driver_node": HEAD,
        "nodes": [
            {"node_id": HEAD, "ip": "10.0.0.5", "hostname": "gpu-box", "alive": True, "head": True,
             "resources": {"CPU": 16, "GPU": 1}},
            {"node_id": WORKER, "ip": "10.0.0.6", "hostname": "gpu-two", "alive": worker_alive, "head": False,
             "resources": {"CPU": 8, "GPU": 1, "wm_node": 1}},
        ],
        "parts": {
            "world_model": {"node_id": WORKER, "node_ip": "10.0.0.6", "hostname": "gpu-two", "pid": 4242,
                            "state": wm_state, "restarts": 1, "actor": "world_model-1a2b3c4d",
                            "placement": "0.5 GPU and resource wm_node", "generation": 0},
            "learner": {"node_id": HEAD, "node_ip": "10.0.0.5", "hostname": "gpu-box", "pid": 4343,
                        "state": "ALIVE", "restarts": 0, "actor": "learner-5e6f7a8b", "placement": "0.5 GPU",
                        "generation": 0},
        },
    }  # fmt: skip


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    run = make_run(tmp_path_factory.mktemp("cluster") / "run", episodes=2, length=12, size=16, metric_rows=5)
    settings = DashboardSettings(token=TOKEN, refresh_interval_s=0.1, store_refresh_min_s=0.0)
    with BackgroundServer(create_app(run, settings)) as srv, httpx.Client(base_url=srv.url, timeout=10) as c:
        yield run, c


def _overview(c: httpx.Client) -> dict:
    r = c.get("/api/run")
    assert r.status_code == 200, r.text[:300]
    ov = r.json()
    assert {g["name"] for g in ov["groups"]} == {"demo", "real"}  # the rest of the overview is there
    return ov


def _write(run, body: str | bytes) -> None:
    """Replaced by a rename, as the trainer does (a new inode each time)."""
    tmp = run / "nodes.json.tmp"
    tmp.write_bytes(body.encode() if isinstance(body, str) else body)
    os.replace(tmp, run / "nodes.json")


def test_no_nodes_json_is_null(served):
    run, c = served
    (run / "nodes.json").unlink(missing_ok=True)
    ov = _overview(c)
    assert "cluster" in ov and ov["cluster"] is None


def test_each_part_with_its_node(served):
    run, c = served
    atomic_write_json(run / "nodes.json", nodes_doc(time.time() - 12, worker_alive=False, wm_state="RESTARTING"))
    cl = _overview(c)["cluster"]
    assert cl["error"] is None and cl["running"] is True and cl["address"] == "10.0.0.5:6379"
    assert 11 < cl["age_s"] < 60 and cl["stale"] is False and cl["malformed"] == 0
    parts = {p["name"]: p for p in cl["parts"]}
    assert list(parts) == ["learner", "world_model"]
    wm = parts["world_model"]
    assert (wm["hostname"], wm["node_ip"], wm["node_id"]) == ("gpu-two", "10.0.0.6", WORKER)
    assert (wm["state"], wm["restarts"], wm["pid"]) == ("RESTARTING", 1, 4242)
    assert wm["placement"] == "0.5 GPU and resource wm_node" and wm["node_alive"] is False
    assert (parts["learner"]["hostname"], parts["learner"]["state"], parts["learner"]["node_alive"]) == (
        "gpu-box", "ALIVE", True)  # fmt: skip
    nodes = {n["hostname"]: n for n in cl["nodes"]}
    assert (nodes["gpu-box"]["alive"], nodes["gpu-box"]["head"]) == (True, True)
    assert (nodes["gpu-two"]["alive"], nodes["gpu-two"]["head"]) == (False, False)
    assert nodes["gpu-two"]["resources"] == {"CPU": 8, "GPU": 1, "wm_node": 1}
    # a trainer that says it runs but has not rewritten the file for 10 minutes is stale
    atomic_write_json(run / "nodes.json", nodes_doc(time.time() - 600))
    cl = _overview(c)["cluster"]
    assert cl["stale"] is True and 590 < cl["age_s"] < 700
    # one that stopped is not (its last view is shown as such)
    atomic_write_json(run / "nodes.json", nodes_doc(time.time() - 600, running=False))
    cl = _overview(c)["cluster"]
    assert cl["stale"] is False and cl["running"] is False


def test_entries_of_the_wrong_shape_are_left_out_and_counted(served):
    run, c = served
    doc = nodes_doc(time.time())
    doc["nodes"].append("not a node")
    doc["nodes"].append({"node_id": 7, "alive": "yes"})
    doc["parts"]["synthesis"] = ["not", "a", "part"]
    doc["parts"]["learner"]["restarts"] = "many"
    atomic_write_json(run / "nodes.json", doc)
    cl = _overview(c)["cluster"]
    assert cl["error"] is None and cl["malformed"] == 3
    assert [n["hostname"] for n in cl["nodes"]] == ["gpu-box", "gpu-two"]
    parts = {p["name"]: p for p in cl["parts"]}
    assert set(parts) == {"learner", "world_model"} and parts["learner"]["restarts"] is None


@pytest.mark.parametrize(
    "body, words",
    [
        ('{"updated": 1, "nodes": [{"node_id": "ab", ', "not valid JSON"),  # a torn write
        ('{"nodes": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested deeper than 32 levels"),  # past the parser
        ('{"nodes": ' + "[" * 40 + "]" * 40 + "}", "nested deeper than 32 levels"),  # past the limit
        ("[1, 2]", "not a JSON object"),
        (b"\xff\xfe garbage", "not valid JSON"),
    ],
)
def test_a_damaged_nodes_json_is_an_error_for_that_item(served, body, words):
    run, c = served
    _write(run, body)
    cl = _overview(c)["cluster"]
    assert words in cl["error"], cl
    assert cl["nodes"] == [] and cl["parts"] == []


def test_a_symbolic_link_is_not_followed(served, tmp_path):
    run, c = served
    elsewhere = tmp_path / "nodes.json"
    atomic_write_json(elsewhere, nodes_doc(time.time()))
    (run / "nodes.json").unlink(missing_ok=True)
    os.symlink(elsewhere, run / "nodes.json")
    try:
        cl = _overview(c)["cluster"]
        assert "symbolic link" in cl["error"] and cl["parts"] == [], cl
    finally:
        (run / "nodes.json").unlink()


def test_the_live_overview_carries_the_error(served):
    run, c = served
    _write(run, '{"nodes": ' + "[" * 100_000)
    with c.stream("GET", "/api/stream") as s:
        assert s.status_code == 200
        deadline = time.monotonic() + 8
        lines = s.iter_lines()
        for line in lines:
            if line == "event: overview":
                ov = json.loads(next(lines)[5:])
                break
            assert time.monotonic() < deadline, "no overview event"
    assert "nested deeper" in ov["cluster"]["error"] and ov["groups"]
