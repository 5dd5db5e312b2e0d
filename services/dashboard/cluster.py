"""The Ray cluster the trainer runs on, from RUN/nodes.json (written by services/trainer/nodes.py),
for the overview: the nodes (alive or lost, head or not) and the node each part of the trainer
runs on (its state, restarts and placement).

The file is read as reports and policy metadata are (services/dashboard/artifacts.py): without
following a symbolic link, at most MAX_NODES_BYTES, parsed with at most MAX_DEPTH levels of
nesting. A file that breaks a rule is an `error` in the overview's `cluster` (logged once per
version of the file), never a failed overview; an entry of the wrong shape is left out and
counted (`malformed`). Parsed results are cached by the file's (device, inode, size, mtime): the
trainer replaces the file by a rename, so each version is parsed once.
"""

from __future__ import annotations

import logging
import math
import os
import time
from pathlib import Path
from typing import Any

from services.dashboard.artifacts import Refused, StatCache, parse_json, read_under
from services.dashboard.models import ClusterNode, ClusterPart, ClusterView
from worldsample.paths import RunFiles

log = logging.getLogger(__name__)

MAX_NODES_BYTES = 1 << 20
MAX_ENTRIES = 256  # nodes, and parts, shown at most
MAX_TEXT = 200  # characters kept of a name, address or placement
MAX_RESOURCES = 32  # resource names kept per node
# the trainer rewrites the file at least every 30 s while it runs (services/trainer/nodes.py,
# HEARTBEAT_S); older than this while it says `running`, and its driver does not answer (as the
# containers' health check, services/trainer/health.py --max-age-s)
STALE_AFTER_S = 90.0

_CACHE = StatCache(max_entries=4)


def _text(v: Any) -> str | None:
    return v[:MAX_TEXT] if isinstance(v, str) else None


def _int(v: Any) -> int | None:
    return int(v) if isinstance(v, int) and not isinstance(v, bool) else None


def _number(v: Any) -> float | None:
    if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
        return float(v)
    return None


def _bool(v: Any) -> bool | None:
    return v if isinstance(v, bool) else None


def _node(n: Any) -> ClusterNode | None:
    if not isinstance(n, dict) or not isinstance(n.get("node_id"), str) or not isinstance(n.get("alive"), bool):
        return None
    res = n.get("resources") if isinstance(n.get("resources"), dict) else {}
    resources = {str(k)[:64]: x for k, v in list(res.items())[:MAX_RESOURCES] if (x := _number(v)) is not None}
    return ClusterNode(
        node_id=n["node_id"][:MAX_TEXT],
        ip=_text(n.get("ip")),
        hostname=_text(n.get("hostname")),
        alive=n["alive"],
        head=n.get("head") is True,
        resources=resources,
    )


def _part(name: str, p: Any, nodes: dict[str, ClusterNode]) -> ClusterPart | None:
    if not isinstance(p, dict):
        return None
    node_id = _text(p.get("node_id"))
    node = nodes.get(node_id or "")
    return ClusterPart(
        name=name[:MAX_TEXT],
        state=_text(p.get("state")),
        node_id=node_id,
        node_ip=_text(p.get("node_ip")) or (node.ip if node else None),
        hostname=_text(p.get("hostname")) or (node.hostname if node else None),
        node_alive=node.alive if node else None,
        pid=_int(p.get("pid")),
        restarts=_int(p.get("restarts")),
        actor=_text(p.get("actor")),
        placement=_text(p.get("placement")),
        generation=_int(p.get("generation")),
    )


def _parse(run_dir: Path, mtime: float) -> ClusterView:
    """The file's content; `age_s` and `stale` are filled in by `cluster_view` at each call."""
    empty = dict(updated=None, running=None, address=None, driver_node=None, nodes=[], parts=[])
    try:
        doc = parse_json(read_under(run_dir, ("nodes.json",), MAX_NODES_BYTES), "nodes.json")
    except Refused as e:
        why = f"not shown: {e}"
    except FileNotFoundError:
        raise
    except OSError as e:
        why = f"nodes.json cannot be read: {e.strerror}"
    else:
        why = None if isinstance(doc, dict) else "not shown: nodes.json is not a JSON object"
    if why is not None:
        log.warning("RUN/nodes.json of %s: %s", run_dir, why)
        return ClusterView(**empty, modified=mtime, error=why)
    malformed, truncated = 0, False
    raw_nodes = doc.get("nodes", [])
    if not isinstance(raw_nodes, list):
        malformed, raw_nodes = malformed + 1, []
    raw_parts = doc.get("parts", {})
    if not isinstance(raw_parts, dict):
        malformed, raw_parts = malformed + 1, {}
    nodes: dict[str, ClusterNode] = {}
    for n in raw_nodes:
        if len(nodes) >= MAX_ENTRIES:
            truncated = True
            break
        node = _node(n)
        if node is None:
            malformed += 1
        else:
            nodes[node.node_id] = node
    parts: list[ClusterPart] = []
    for name, p in sorted(raw_parts.items()):
        if len(parts) >= MAX_ENTRIES:
            truncated = True
            break
        part = _part(name, p, nodes)
        if part is None:
            malformed += 1
        else:
            parts.append(part)
    if malformed:
        log.warning("RUN/nodes.json of %s: %d entries of the wrong shape left out", run_dir, malformed)
    return ClusterView(
        updated=_number(doc.get("updated")),
        running=_bool(doc.get("running")),
        address=_text(doc.get("address")),
        driver_node=_text(doc.get("driver_node")),
        nodes=list(nodes.values()),
        parts=parts,
        modified=mtime,
        malformed=malformed,
        truncated=truncated,
        error=None,
    )


def cluster_view(run_dir: Path, now: float | None = None) -> ClusterView | None:
    """RUN/nodes.json as the overview shows it: None when there is no such file (the trainer has
    not run on Ray here), a view with `error` when it cannot be read."""
    path = RunFiles.of(run_dir).nodes
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        return ClusterView(updated=None, running=None, address=None, driver_node=None, nodes=[], parts=[],
                           modified=None, error=f"nodes.json cannot be read: {e.strerror}")
    try:
        view = _CACHE.get(path, st, lambda: _parse(Path(run_dir), st.st_mtime))
    except FileNotFoundError:  # removed meanwhile
        return None
    now = time.time() if now is None else now
    at = view.updated if view.updated is not None else view.modified
    age = max(0.0, now - at) if at is not None else None
    stale = bool(view.running and age is not None and age > STALE_AFTER_S)
    return view.model_copy(update={"age_s": age, "stale": stale})
