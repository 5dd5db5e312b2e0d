"""`worldsample train`: starts Ray (local, or a cluster by address), runs the loop's parts as Ray
actors placed as services/trainer/placement.py says, and the loop itself (worldsample/loop/loop.py)
in this process until the budget is spent. RUN/nodes.json says which node each part runs on
(services/trainer/nodes.py). A local Ray ends with this process, however it ends
(services/trainer/local_ray.py)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path

from services.trainer.actors import NAMESPACE, ray_maker
from services.trainer.local_ray import LocalRay
from services.trainer.nodes import NodeMonitor
from services.trainer.placement import Placement, make_plan
from worldsample.config import RunConfig
from worldsample.loop.loop import Loop, check_run_dir, schedule_for
from worldsample.loop.parts import build_parts
from worldsample.loop.summary import TrainSummary
from worldsample.runlog import EventLog

__all__ = ["TrainSummary", "train"]
log = logging.getLogger(__name__)


def train(run_dir: Path, cfg: RunConfig, resume: bool = False, address: str | None = None,
          on_round: Callable[[dict], None] | None = None, placement: Placement | None = None,
          watch: Callable[[], None] | None = None) -> TrainSummary:
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
        events = EventLog(run_dir, source="trainer")

        def report(kind: str, message: str, level: str = "info", **data) -> None:
            getattr(log, level)(message)
            events.emit(kind, message, level=level, **data)

        try:
            driver_node = ray.get_runtime_context().get_node_id()
            plan = make_plan(placement or Placement(), cfg, ray.cluster_resources(), driver_node if address else None)
            cfg = plan.configure(cfg)
            nodes = sum(1 for n in ray.nodes() if n.get("Alive"))
            events.emit("placement", f"Ray {address or 'local'}: {nodes} node(s); {plan.describe()}",
                        address=address or "local", nodes=nodes)
            make = ray_maker(ray, logs, plan=plan, run_dir=run_dir, report=report)
            with NodeMonitor(ray, run_dir, make.parts, report, address):
                parts = build_parts(run_dir, cfg, store, make=make)
                return Loop(run_dir, cfg.loop, parts, schedule_for(cfg.loop), resume=resume, on_round=on_round,
                            watch=watch).run()
        finally:
            events.close()
            ray.shutdown()
