"""Which policy version to deploy, from imagined scores, and the `recommended` pointer.

    RUN/policies/recommended   "v000007": the recommended version, beside `latest`, written the same
                               way (temp file + rename), so a reader never sees half a name

`recommend` picks the version with the best imagined success, then the best soft success
probability, then the best imagined return; on a full tie the newer version (more training).
Only versions that exist in the registry are considered. Importing this module loads no torch:
the bridge follows the pointer with it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from worldsample.atomic import atomic_write_text
from worldsample.errors import ConfigError
from worldsample.paths import RunFiles
from worldsample.versioned import VersionedDir, version_name

RECOMMENDED = "recommended"


class RecommendedDir(VersionedDir):
    """The policy registry's directory, read through the `recommended` pointer instead of `latest`:
    `latest()` returns the recommended version (None when nothing was recommended yet), so a
    `VersionWatcher` over it follows recommendations."""

    @property
    def pointer(self) -> Path:
        return self.root / RECOMMENDED


class FollowRecommended:
    """What a policy reader follows with `policy: recommended`: the recommended version, or `latest`
    while nothing was recommended yet (the first policy of a run is not scored before it runs).
    Has the `latest()` a `VersionWatcher` polls."""

    def __init__(self, root: Path | str):
        self.recommended, self.registry = RecommendedDir(root), VersionedDir(root)

    def latest(self) -> int | None:
        v = self.recommended.latest()
        return v if v is not None else self.registry.latest()


def recommend(scores: Mapping[int, tuple[float, ...]], existing: Iterable[int]) -> int:
    """The version to deploy: the highest score tuple (compared in order), the newest on a tie.
    `scores`: version -> (imagined success, success probability, return) or any comparable tuple."""
    have = set(existing)
    cands = {v: tuple(s) for v, s in scores.items() if v in have}
    if not cands:
        raise ConfigError(
            f"none of the scored versions {sorted(scores)} is in the policy registry (it has {sorted(have)})"
        )
    return max(cands, key=lambda v: (cands[v], v))


def write_recommended(run_dir: str | Path, version: int, evidence: dict | None = None) -> Path:
    """Point RUN/policies/recommended at `version` (which must exist) and keep why in
    RUN/reports/recommended.json; returns the pointer's path."""
    files = RunFiles.of(run_dir)
    vdir = VersionedDir(files.policies)
    if version not in vdir.versions():
        raise ConfigError(f"policy version {version} does not exist in {files.policies}")
    pointer = RecommendedDir(files.policies).pointer
    atomic_write_text(pointer, version_name(version) + "\n")
    files.reports.mkdir(parents=True, exist_ok=True)
    doc = {"kind": "recommended_policy", "recommended": f"v{version}", "version": version, "time": time.time(),
           **(evidence or {})}
    atomic_write_text(files.reports / "recommended.json", json.dumps(doc, indent=1, allow_nan=False))
    return pointer


def read_recommended(run_dir: str | Path) -> int | None:
    """The recommended version, or None when there is none (a malformed pointer raises VersionError)."""
    return RecommendedDir(RunFiles.of(run_dir).policies).latest()
