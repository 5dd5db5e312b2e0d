"""`worldsample train`: starts Ray (local, or a cluster by address), runs the loop's parts as Ray
actors and the loop itself (worldsample/loop/loop.py) in this process until the budget is spent.
A local Ray ends with this process, however it ends (services/trainer/local_ray.py)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path

from services.trainer.actors import NAMESPACE, ray_maker
from services.trainer.local_ray import LocalRay
from worldsample.config import RunConfig
from worldsample.loop.loop import Loop, check_run_dir, schedule_for
from worldsample.loop.parts import build_parts
from worldsample.loop.summary import TrainSummary

__all__ = ["TrainSummary", "train"]


def train(run_dir: Path, cfg: RunConfig, resume: bool = False, address: str | None = None,
          on_round: Callable[[dict], None] | None = None) -> TrainSummary:
    import ray

    run_dir = Path(run_dir).resolve()
    store = check_run_dir(run_dir, resume)
    # a local cluster gets a reaper, so none of it outlives this process however it ends
    with nullcontext() if address else LocalRay(run_dir) as local:
        if local is None:
            options, logs = {}, "the Ray session logs of the node that ran it"
        else:
            options, logs = {"num_cpus": 2, "_temp_dir": str(local.temp_dir)}, str(local.logs)
        ray.init(address=address, namespace=NAMESPACE, include_dashboard=False, log_to_driver=False,
                 logging_level=logging.WARNING, ignore_reinit_error=True, **options)
        try:
            parts = build_parts(run_dir, cfg, store, make=ray_maker(ray, logs))
            return Loop(run_dir, cfg.loop, parts, schedule_for(cfg.loop), resume=resume, on_round=on_round).run()
        finally:
            ray.shutdown()
