"""Where the trainer's parts run on a Ray cluster, and what it does when a node goes away.

    learner, world_model   on GPU nodes when the cluster has GPUs (`--gpu auto`, the default): each
                           takes half a GPU when the cluster has one, a whole one when it has more;
                           on CPU otherwise. `--gpu on` refuses a cluster without GPUs, `--gpu off`
                           keeps them on CPU (a config that asks for a GPU itself still gets one)
    --place PART=RESOURCE  the part needs a custom Ray resource, so it runs only on the nodes started
                           with it (`ray start --resources '{"wm_node": 1}'`); it takes 0.01 of it,
                           so several parts can share such a node
    the other parts        on the driver's node (node affinity; Ray's soft affinity spills to other
                           nodes even when the driver's has room): the simulated arm, the evaluator
                           and synthesis stay next to the driver and the run directory unless placed
    --on-node-loss         wait: report it and wait for a node with the part's resources (Ray starts
                           the part again there), fail after --node-wait-s; continue: report it and
                           start the part again without its custom resource, beside the driver

The world model and synthesis keep their state on disk (the run's world-model versions, the trainer
checkpoint): Ray restarts them when their process dies and retries the call in flight, and on a lost
node the policy above applies. The learner, the simulated arm and the evaluator end the run when their
process dies (one line; resume with --resume), as before.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from worldsample.config import RunConfig
from worldsample.errors import ConfigError

PARTS = ("sim", "evaluator", "learner", "world_model", "synth")
GPU_PARTS = ("learner", "world_model")
# their state lives on disk: Ray may restart them and retry the call in flight
RESTARTABLE = ("world_model", "synth")
RESOURCE_SHARE = 0.01
RESERVED = ("CPU", "GPU", "memory", "object_store_memory")
_RESOURCE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")


class Placement(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    gpu: Literal["auto", "on", "off"] = Field("auto", description="learner and world model on GPU nodes")
    resources: dict[str, str] = Field(default_factory=dict, description="part -> custom Ray resource it needs")
    on_node_loss: Literal["wait", "continue"] = "wait"
    node_wait_s: float = Field(600.0, gt=0, description="wait mode: how long to wait for a node to come back")

    @field_validator("resources")
    @classmethod
    def _known_parts(cls, v: dict[str, str]) -> dict[str, str]:
        for part, res in v.items():
            if part not in PARTS:
                raise ValueError(f"unknown part {part!r}: one of {', '.join(PARTS)}")
            if not _RESOURCE_RE.match(res) or res in RESERVED:
                raise ValueError(f"bad resource name {res!r} for {part}: a custom resource name such as wm_node")
        return v

    @classmethod
    def from_cli(
        cls, place: list[str] | None = None, gpu: str = "auto", on_node_loss: str = "wait", node_wait_s: float = 600.0
    ) -> Placement:
        resources = {}
        for item in place or []:
            part, sep, res = item.partition("=")
            if not sep or not part or not res:
                raise ConfigError(f"--place {item!r}: expected PART=RESOURCE, e.g. world_model=wm_node")
            resources[part.strip()] = res.strip()
        try:
            return cls(gpu=gpu, resources=resources, on_node_loss=on_node_loss, node_wait_s=node_wait_s)
        except ValidationError as e:
            err = e.errors()[0]
            where = ".".join(str(x) for x in err["loc"])
            raise ConfigError(f"bad placement option {where}: {err['msg']}") from None


def _learner_local(cfg: RunConfig) -> bool:
    return cfg.loop.learner.num_learners == 0


@dataclass(frozen=True)
class Plan:
    """A placement resolved against one cluster: the Ray options of each part."""

    placement: Placement
    gpu_share: float  # of each GPU part; 0: CPU
    gpu_parts: tuple[str, ...]
    driver_node: str | None = None

    def options(self, part: str, moved: bool = False) -> dict[str, Any]:
        """Ray actor options for `part` (name and namespace are the caller's). `moved`: started again
        after its node was lost, without its custom resource."""
        opts: dict[str, Any] = {"num_cpus": 0}
        restartable = part in RESTARTABLE
        # restartable: enough for several lost nodes in a run, few enough that a crash loop ends; the
        # others never: a dead learner ends the run whether it died inside a call or between two (a
        # restart between calls went on with the learner rolled back to its last checkpoint)
        opts["max_restarts"] = 10 if restartable else 0
        opts["max_task_retries"] = -1 if restartable else 0
        if part in self.gpu_parts:
            opts["num_gpus"] = self.gpu_share
        res = self.placement.resources.get(part)
        if res and not moved:
            opts["resources"] = {res: RESOURCE_SHARE}
        elif part not in self.gpu_parts and self.driver_node:
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            opts["scheduling_strategy"] = NodeAffinitySchedulingStrategy(self.driver_node, soft=False)
        return opts

    def where(self, part: str) -> str:
        """Where `part` may run, in words (for messages)."""
        bits = []
        if part in self.gpu_parts:
            bits.append(f"{self.gpu_share:g} GPU")
        res = self.placement.resources.get(part)
        if res:
            bits.append(f"resource {res}")
        return " and ".join(bits) or ("the driver's node" if self.driver_node else "any node")

    def configure(self, cfg: RunConfig) -> RunConfig:
        """The run's config with the GPU parts set to use the GPU they are given."""
        if not self.gpu_parts:
            return cfg
        data = cfg.model_dump(mode="json")
        loop = data["loop"]
        if "world_model" in self.gpu_parts and not str(loop["world_model"]["train"]["device"]).startswith("cuda"):
            loop["world_model"]["train"]["device"] = "cuda"
        if "learner" in self.gpu_parts and loop["learner"]["num_gpus_per_learner"] == 0:
            loop["learner"]["num_gpus_per_learner"] = 1  # the in-process learner uses the GPU its actor holds
        return RunConfig.model_validate(data)

    def describe(self) -> str:
        gpu = (
            f"learner and world model on GPU ({self.gpu_share:g} GPU each)"
            if self.gpu_parts
            else "learner and world model on CPU"
        )
        placed = ", ".join(f"{p} on nodes with {r}" for p, r in self.placement.resources.items())
        return f"{gpu}{'; ' + placed if placed else ''}; on node loss: {self.placement.on_node_loss}"


def make_plan(placement: Placement, cfg: RunConfig, cluster: dict[str, float], driver_node: str | None) -> Plan:
    """Resolve `placement` against the cluster's total resources (`ray.cluster_resources()`)."""
    gpus = float(cluster.get("GPU", 0.0))
    for part, res in placement.resources.items():
        if res not in cluster:
            raise ConfigError(
                f"--place {part}={res}: no node of the Ray cluster has resource {res!r}; start one "
                f"with `ray start --address HEAD:PORT --resources '{{\"{res}\": 1}}'`"
            )
    asks = {
        "world_model": str(cfg.loop.world_model.train.device).startswith("cuda"),
        "learner": _learner_local(cfg) and cfg.loop.learner.num_gpus_per_learner > 0,
    }
    if placement.gpu == "on" and gpus == 0:
        raise ConfigError(
            "--gpu on: the Ray cluster has no GPU; add a GPU node (ray start --num-gpus N) or use --gpu auto"
        )
    wanted = tuple(p for p in GPU_PARTS if asks[p] or (placement.gpu != "off" and gpus > 0))
    if wanted and gpus == 0:
        raise ConfigError(
            "the config asks for a GPU (loop.world_model.train.device=cuda or "
            "loop.learner.num_gpus_per_learner > 0) but the Ray cluster has none"
        )
    # a learner with remote RLlib learners holds no GPU itself: its learners ask for their own
    # (loop.learner.num_gpus_per_learner)
    wanted = tuple(p for p in wanted if p != "learner" or _learner_local(cfg))
    share = min(1.0, gpus / len(GPU_PARTS)) if wanted else 0.0
    return Plan(placement, round(share, 4), wanted if share else (), driver_node)
