"""A driver for tests/deploy/test_multinode.py: one restartable part (named world_model, as the
trainer's) placed by a custom resource through services/trainer's own maker, called in a loop.
Each result and each report of the part's supervision is one JSON line on stdout; a PartFailedError
ends it with an "error" line.

    python -m tests.deploy.lost_node_driver ADDRESS RUN_DIR ON_NODE_LOSS NODE_WAIT_S
"""

from __future__ import annotations

import json
import os
import sys
import time


class Steps:
    """Stands in for the world model: a call takes a moment and says where it ran."""

    def __init__(self, run_dir: str):
        self.run_dir = run_dir

    def step(self, i: int) -> dict:
        import ray

        time.sleep(0.2)
        return {"i": i, "node_id": ray.get_runtime_context().get_node_id(), "pid": os.getpid()}


def emit(**line) -> None:
    print(json.dumps({"t": time.time(), **line}), flush=True)


def main() -> None:
    import ray

    from services.trainer.actors import NAMESPACE, PartFailedError, ray_maker
    from services.trainer.placement import Placement, make_plan
    from worldsample.config import RunConfig

    address, run_dir, on_node_loss, wait_s = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
    ray.init(address=address, namespace=NAMESPACE, include_dashboard=False, log_to_driver=False)
    placement = Placement(resources={"world_model": "wm_node"}, on_node_loss=on_node_loss, node_wait_s=wait_s)
    plan = make_plan(placement, RunConfig(), ray.cluster_resources(), ray.get_runtime_context().get_node_id())

    def report(kind: str, message: str, level: str = "info", **data) -> None:
        emit(kind="report", event=kind, message=message, **data)

    make = ray_maker(ray, plan=plan, run_dir=None, report=report)
    part = make("world_model", Steps, (run_dir,))
    emit(kind="driver", node_id=ray.get_runtime_context().get_node_id())
    try:
        for i in range(100_000):
            emit(kind="result", **part.call("step", i).result())
    except PartFailedError as e:
        emit(kind="error", message=str(e))
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
