"""RUN/nodes.json: the Ray nodes and the node each part of the trainer runs on, for the dashboard.

A thread of the driver asks Ray's control store every `period_s` (no dashboard needed) and rewrites
the file (worldsample.atomic: temp file, fsync, rename) when something changed, and at least every
HEARTBEAT_S seconds, so its `updated` says the driver is alive (the containers' health check,
services/trainer/health.py). It also reports to
RUN/events.jsonl when a node joins or leaves the cluster and when Ray restarts a part.

    {"updated": 1767.3e6, "running": true, "address": "10.0.0.5:6379" | "local", "driver_node": "ab12...",
     "nodes": [{"node_id": "ab12...", "ip": "10.0.0.5", "hostname": "gpu-box", "alive": true, "head": true,
                "resources": {"CPU": 16, "GPU": 1, "wm_node": 1}}],
     "parts": {"world_model": {"node_id": "cd34...", "node_ip": "10.0.0.6", "hostname": "gpu-box", "pid": 4242,
                               "state": "ALIVE", "restarts": 0, "actor": "world_model-1a2b3c4d",
                               "placement": "0.5 GPU and resource wm_node"}}}
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from services.trainer.actors import RayPart
from worldsample.atomic import atomic_write_json
from worldsample.paths import RunFiles

log = logging.getLogger(__name__)
HEARTBEAT_S = 30.0  # rewritten at least this often while the trainer runs (services/trainer/health.py reads it)


def node_table(ray) -> list[dict[str, Any]]:
    out = []
    for n in ray.nodes():
        res = {k: v for k, v in (n.get("Resources") or {}).items() if not k.startswith("node:")}
        out.append(
            {
                "node_id": n["NodeID"],
                "ip": n.get("NodeManagerAddress"),
                "hostname": n.get("NodeManagerHostname"),
                "alive": bool(n.get("Alive")),
                "head": "node:__internal_head__" in (n.get("Resources") or {}),
                "resources": {
                    k: (int(v) if float(v).is_integer() else v)
                    for k, v in sorted(res.items())
                    if k not in ("memory", "object_store_memory")
                },
            }
        )
    return out


class NodeMonitor:
    """`with NodeMonitor(ray, run_dir, parts, report, address): ...` keeps RUN/nodes.json current."""

    def __init__(
        self,
        ray,
        run_dir: Path,
        parts: dict[str, RayPart],
        report: Callable[..., None],
        address: str | None,
        period_s: float = 2.0,
    ):
        self.ray, self.path, self.parts, self.report = ray, RunFiles.of(run_dir).nodes, parts, report
        self.address, self.period_s = address or "local", period_s
        self.driver_node = ray.get_runtime_context().get_node_id()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="node-monitor", daemon=True)
        self._alive: dict[str, bool] = {}
        self._restarts: dict[str, tuple[int, int]] = {}  # part -> (generation, restarts)
        self._where: dict[str, str] = {}  # part -> the node its actor was last seen alive on
        self._last = ""
        self._written = 0.0

    def __enter__(self) -> NodeMonitor:
        self.poll()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        try:
            self.poll(running=False)
        except Exception as e:  # Ray may be going down with the driver: the file keeps its last content
            log.debug("last nodes.json: %s", e)

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            try:
                self.poll()
            except Exception as e:  # never let the watcher take the trainer down
                log.debug("node monitor: %s", e)

    def poll(self, running: bool = True) -> dict:
        nodes = node_table(self.ray)
        by_id = {n["node_id"]: n for n in nodes}
        for n in nodes:
            was = self._alive.get(n["node_id"])
            if was is None and self._alive and n["alive"]:
                self.report(
                    "node_joined",
                    f"node {n['node_id'][:8]} ({n['ip']}) joined the Ray cluster",
                    node_id=n["node_id"],
                    resources=n["resources"],
                )
            elif was and not n["alive"]:
                on = sorted(p for p, node in self._where.items() if node == n["node_id"])
                self.report(
                    "node_lost",
                    f"node {n['node_id'][:8]} ({n['ip']}) left the Ray cluster"
                    + (f"; it ran {', '.join(on)}" if on else ""),
                    level="warning",
                    node_id=n["node_id"],
                    parts=on,
                )
            self._alive[n["node_id"]] = n["alive"]
        parts = {}
        for name, part in list(self.parts.items()):
            info = part.info() or {}
            node = by_id.get(info.get("node_id") or "", {})
            parts[name] = {
                **info,
                "hostname": node.get("hostname"),
                "placement": part.where,
                "generation": part.generation,
            }
            seen = self._restarts.get(name)
            now = (part.generation, int(info.get("restarts") or 0))
            if seen is not None and seen[0] == now[0] and now[1] > seen[1]:
                self.report(
                    "part_restarted",
                    f"Ray restarted the {name} part (restart {now[1]}); it goes on from its last checkpoint",
                    level="warning",
                    part=name,
                    restarts=now[1],
                )
            self._restarts[name] = now
            if info.get("state") == "ALIVE" and info.get("node_id"):
                self._where[name] = info["node_id"]
        doc = {
            "running": running,
            "address": self.address,
            "driver_node": self.driver_node,
            "nodes": nodes,
            "parts": parts,
        }
        text = json.dumps(doc, sort_keys=True)
        now = time.time()
        if text != self._last or not running or now - self._written > HEARTBEAT_S:
            self._last, self._written = text, now
            atomic_write_json(self.path, {"updated": now, **doc})
        return doc
