"""Policies (RUN/policies/), evaluation reports (RUN/reports/*.json) and the comparison table.

The trainer writes the policies; evaluation code writes the reports. Without them the lists are
empty and the comparison table comes from the store alone (per policy version, per group). Contracts:

- a policy is a directory `RUN/policies/<name>/` (or a single file there); its `meta.json`
  (or `config.json`), a JSON object, is shown as is (version, step, created, ...);
- a report is `RUN/reports/<name>.json`, a JSON object; when it has `policies`, a list of
  objects with `policy` and some of `episodes`, `success_rate`, `mean_return`, `mean_length`,
  `interventions_per_episode`, each becomes a row of the comparison table (a report with a
  top-level `policy` is one row).
"""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

from services.dashboard.data import RunData
from services.dashboard.errors import BadRequest, NotFound
from services.dashboard.models import ComparisonRow, PolicyEntry, ReportEntry
from worldsample.paths import RunFiles

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
MAX_JSON_BYTES = 5 << 20
META_FILES = ("meta.json", "config.json", "policy.json")
ROW_FIELDS = ("episodes", "success_rate", "mean_return", "mean_length", "interventions_per_episode")


def _read_json(path: Path, limit: int = MAX_JSON_BYTES) -> Any:
    if path.stat().st_size > limit:
        raise BadRequest(f"{path.name} is larger than {limit >> 20} MiB")
    return json.loads(path.read_bytes())


def _safe_child(root: Path, name: str) -> Path:
    """`root/name` for a plain name only: no separators, no dot-dot, no links out of root."""
    if not NAME_RE.match(name) or ".." in name:
        raise BadRequest(f"bad name {name!r}: use letters, digits and _ . - only")
    path = root / name
    try:
        path.resolve().relative_to(root.resolve())
    except ValueError:
        raise BadRequest(f"{name!r} points outside {root.name}/") from None
    return path


def list_policies(run_dir: Path) -> list[PolicyEntry]:
    root = RunFiles.of(run_dir).policies
    if not root.is_dir():
        return []
    out = []
    for p in sorted(root.iterdir()):
        if p.name.startswith(".") or not NAME_RE.match(p.name) or p.is_symlink():
            continue
        files = sorted(f.name for f in p.iterdir() if f.is_file()) if p.is_dir() else [p.name]
        size = sum((p / f).stat().st_size for f in files) if p.is_dir() else p.stat().st_size
        meta: dict[str, Any] = {}
        for m in META_FILES if p.is_dir() else ():
            if (p / m).is_file():
                try:
                    got = _read_json(p / m, 1 << 20)
                    meta = got if isinstance(got, dict) else {"value": got}
                except (OSError, ValueError, BadRequest) as e:
                    meta = {"unreadable": f"{m}: {e}"[:300]}
                break
        out.append(PolicyEntry(name=p.name, modified=p.stat().st_mtime, size_bytes=size, files=files[:50], meta=meta))
    return out


def list_reports(run_dir: Path) -> list[ReportEntry]:
    root = RunFiles.of(run_dir).reports
    if not root.is_dir():
        return []
    out = []
    for p in sorted(root.glob("*.json")):
        if p.name.startswith(".") or not NAME_RE.match(p.name) or p.is_symlink():
            continue
        st = p.stat()
        try:
            body = _read_json(p)
            summary = (
                {k: v for k, v in body.items() if isinstance(v, (str, int, float, bool)) or v is None}
                if isinstance(body, dict)
                else {}
            )
        except (OSError, ValueError, BadRequest) as e:
            summary = {"unreadable": str(e)[:300]}
        out.append(
            ReportEntry(
                name=p.name, modified=st.st_mtime, size_bytes=st.st_size, summary=dict(list(summary.items())[:20])
            )
        )
    return out


def read_report(run_dir: Path, name: str) -> Any:
    root = RunFiles.of(run_dir).reports
    path = _safe_child(root, name)
    if not path.name.endswith(".json") or not path.is_file() or path.is_symlink():
        raise NotFound(f"no report {name!r} in reports/ (reports: {[r.name for r in list_reports(run_dir)] or 'none'})")
    try:
        return _read_json(path)
    except ValueError as e:
        raise BadRequest(f"report {name!r} is not valid JSON: {e}") from e


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def report_rows(run_dir: Path) -> list[ComparisonRow]:
    rows = []
    for rep in list_reports(run_dir):
        try:
            body = read_report(run_dir, rep.name)
        except (OSError, BadRequest, NotFound):
            continue
        if not isinstance(body, dict):
            continue
        items = body.get("policies") if isinstance(body.get("policies"), list) else [body] if "policy" in body else []
        for it in items:
            if not isinstance(it, dict) or "policy" not in it:
                continue
            vals = {f: _num(it.get(f)) for f in ROW_FIELDS}
            eps = vals.pop("episodes")
            rows.append(
                ComparisonRow(
                    policy=str(it["policy"])[:64],
                    source=f"report/{rep.name}",
                    episodes=int(eps) if eps is not None else None,
                    **vals,
                )
            )
    return rows


def store_rows(data: RunData) -> list[ComparisonRow]:
    """Per (group, policy version) figures from the stored episodes (synthetic ones excluded)."""
    acc: dict[tuple[str, str], list] = defaultdict(list)
    for g, rec in data.records():
        if g == "synthetic":
            continue
        name = (
            f"v{rec.policy_version}" if rec.policy_version is not None else ("expert" if g == "demo" else "unversioned")
        )
        acc[(g, name)].append(rec)
    rows = []
    for (g, name), recs in sorted(acc.items()):
        n = len(recs)
        rows.append(
            ComparisonRow(
                policy=name,
                source=f"store/{g}",
                episodes=n,
                success_rate=sum(r.success for r in recs) / n,
                mean_return=sum(r.episode_return for r in recs) / n,
                mean_length=sum(r.length for r in recs) / n,
                interventions_per_episode=sum(r.interventions for r in recs) / n,
            )
        )
    return rows
