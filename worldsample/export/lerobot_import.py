"""A LeRobotDataset v3.0 directory imported into a run's store as group `demo`, all or nothing.

The dataset is checked first (lerobot_read.py: metadata, episode table, data files), before
anything is written. A run without a `demo` group gets one built in a staging directory inside
RUN and renamed into RUN/store/demo when every episode is in, so a failure at any point leaves
the run as it was. A run that has a `demo` group must have the same schema (SchemaError
otherwise); every episode, frames included, is then read and checked once before the first is
appended.

Each episode's record keeps where it came from: `extra.lerobot` = {dataset, episode_index,
tasks}, `extra.task` (its first task) and `extra.control_rate_hz` (the dataset's fps); a dataset
written by `store export-lerobot` also gives back the original records' domain, domain_info,
policy version and extra.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from worldsample.errors import DatasetError, EpisodeRejected, StoreError
from worldsample.export.lerobot_read import DatasetPlan, episode_data, open_dataset
from worldsample.store import EpisodeStore
from worldsample.store.writer import coerce_value

GROUP = "demo"
Progress = Callable[[str, int, int], None]  # (phase, episodes done, episodes in all)


@dataclass
class LeRobotImport:
    run: Path
    group: str
    episodes: int
    frames: int
    ids: list[int]  # the new episodes' ids in the group
    features: dict[str, str]  # store key -> feature
    skipped: list[str] = field(default_factory=list)  # features the store has no place for
    defaulted: list[str] = field(default_factory=list)  # step keys the dataset lacks (reward 0, flags false)
    staged: bool = False  # the group was new: built aside and renamed into place


def _meta(plan: DatasetPlan, position: int, e: dict) -> dict[str, Any]:
    tasks = [t for t in (e.get("tasks") or []) if isinstance(t, str)]
    meta: dict[str, Any] = {"domain": "real", "extra": {}}
    records = (plan.sidecar or {}).get("records")
    if isinstance(records, list) and len(records) == len(plan.episodes) and isinstance(records[position], dict):
        rec = records[position]
        for k in ("domain", "domain_info", "policy_version", "extra"):
            if rec.get(k) is not None:
                meta[k] = rec[k]
    extra = dict(meta["extra"]) if isinstance(meta["extra"], dict) else {}
    extra["lerobot"] = {"dataset": plan.root.resolve().name, "episode_index": int(e["episode_index"]), "tasks": tasks}
    if tasks:
        extra.setdefault("task", tasks[0])
    extra.setdefault("control_rate_hz", plan.fps)
    meta["extra"] = extra
    return meta


def _check(plan: DatasetPlan, e: dict, steps: dict[str, np.ndarray]) -> None:
    """The writer's own checks (shapes, dtypes, finiteness), before anything is written."""
    n = int(e["length"])
    for k, spec in plan.schema.keys.items():
        try:
            coerce_value(k, spec, steps[k], leading=(n,))
        except EpisodeRejected as ex:
            raise DatasetError(f"episode {e['episode_index']}: {plan.features.get(k, k)}: {ex}") from ex


def _append_all(store: EpisodeStore, plan: DatasetPlan, progress: Progress | None) -> list[int]:
    ids = []
    total = len(plan.episodes)
    with store.writer(GROUP) as w:
        for position, (e, steps) in enumerate(episode_data(plan)):
            _check(plan, e, steps)
            ids.append(w.append_episode(steps, **_meta(plan, position, e)).episode)
            if progress is not None:
                progress("importing", position + 1, total)
    return ids


def import_lerobot(dataset: Path | str, run_dir: Path | str, progress: Progress | None = None) -> LeRobotImport:
    """Import every episode of the dataset into RUN's `demo` group (module docstring).

    DatasetError for a dataset that is missing, malformed or inconsistent; SchemaError when
    RUN's `demo` group has another schema. Either way nothing is written."""
    plan = open_dataset(dataset)
    run = Path(run_dir)
    if run.exists() and not run.is_dir():
        raise StoreError(f"{run} is a file; name a run directory")
    made_run = not run.exists()
    store = EpisodeStore(run) if (run / "store" / "zarr.json").exists() else None
    staged = store is None or GROUP not in store.groups
    if not staged:
        store.ensure_group(GROUP, plan.schema)  # SchemaError for another schema; writes nothing otherwise
        total = len(plan.episodes)
        for position, (e, steps) in enumerate(episode_data(plan)):
            _check(plan, e, steps)
            if progress is not None:
                progress("checking", position + 1, total)
        ids = _append_all(store, plan, progress)
    else:
        run.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=run, prefix=".import-lerobot-"))
        try:
            stage = EpisodeStore(tmp, create=True)
            stage.ensure_group(GROUP, plan.schema)
            ids = _append_all(stage, plan, progress)
            store = EpisodeStore(run, create=True)
            target = store.root / GROUP
            if target.exists():
                raise StoreError(f"a `{GROUP}` group appeared in {store.root} during the import; nothing was added")
            (stage.root / GROUP).rename(target)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            if made_run and run.is_dir() and not any(run.iterdir()):
                run.rmdir()
            raise
        shutil.rmtree(tmp, ignore_errors=True)
    return LeRobotImport(run, GROUP, len(ids), plan.frames, ids, plan.features, plan.skipped, plan.defaulted, staged)
