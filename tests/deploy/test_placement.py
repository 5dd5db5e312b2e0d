"""How the trainer places its parts on a cluster (services/trainer/placement.py), from the cluster's
resources as `ray.cluster_resources()` reports them: GPUs for the learner and the world model when
there are any, a custom resource where asked, the driver's node for the rest; bad options are one
clear error before anything runs. The placement on a real cluster: tests/deploy/test_multinode.py."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from services.cli.main import app
from services.trainer.placement import RESOURCE_SHARE, Placement, make_plan
from worldsample.config import RunConfig, load_config
from worldsample.errors import ConfigError

CPU_ONLY = {"CPU": 4.0, "memory": 1e9, "node:127.0.0.2": 1.0, "wm_node": 1.0}
ONE_GPU = {**CPU_ONLY, "GPU": 1.0}
DRIVER = "a" * 56


def strategy_node(opts: dict) -> str | None:
    s = opts.get("scheduling_strategy")
    return None if s is None else (s.node_id, s.soft)


def test_cpu_cluster_keeps_parts_beside_the_driver_and_places_by_resource():
    plan = make_plan(Placement.from_cli(["world_model=wm_node"]), RunConfig(), CPU_ONLY, DRIVER)
    assert plan.gpu_parts == ()
    learner = plan.options("learner")
    assert "num_gpus" not in learner and learner["num_cpus"] == 0
    assert strategy_node(learner) == (DRIVER, False)
    assert (learner["max_restarts"], learner["max_task_retries"]) == (0, 0)  # a dead learner ends the run
    wm = plan.options("world_model")
    assert wm["resources"] == {"wm_node": RESOURCE_SHARE} and strategy_node(wm) is None
    assert wm["max_task_retries"] == -1 and wm["max_restarts"] > 2  # restarted by Ray, the call retried
    moved = plan.options("world_model", moved=True)  # --on-node-loss continue: without its resource
    assert "resources" not in moved and strategy_node(moved) == (DRIVER, False)
    assert plan.configure(RunConfig()) == RunConfig()  # nothing to change on CPU


def test_gpu_cluster_puts_learner_and_world_model_on_gpus():
    plan = make_plan(Placement(), RunConfig(), ONE_GPU, DRIVER)
    assert plan.gpu_parts == ("learner", "world_model") and plan.gpu_share == 0.5  # both on the one GPU
    for part in ("learner", "world_model"):
        opts = plan.options(part)
        assert opts["num_gpus"] == 0.5 and strategy_node(opts) is None  # wherever the GPU is
    assert "num_gpus" not in plan.options("synth") and strategy_node(plan.options("synth")) == (DRIVER, False)
    cfg = plan.configure(RunConfig())
    assert cfg.loop.world_model.train.device == "cuda" and cfg.loop.learner.num_gpus_per_learner == 1
    two = make_plan(Placement(), RunConfig(), {**ONE_GPU, "GPU": 4.0}, DRIVER)
    assert two.gpu_share == 1.0
    off = make_plan(Placement(gpu="off"), RunConfig(), ONE_GPU, DRIVER)
    assert off.gpu_parts == () and off.configure(RunConfig()) == RunConfig()
    # remote RLlib learners ask for their own GPUs: the learner part itself holds none
    remote = load_config(None, ["loop.learner.num_learners=2", "loop.learner.bc_pretrain_steps=0"])
    assert make_plan(Placement(), remote, ONE_GPU, DRIVER).gpu_parts == ("world_model",)


def test_impossible_placements_are_refused_before_anything_starts():
    with pytest.raises(ConfigError, match="no node of the Ray cluster has resource 'gpu_box'"):
        make_plan(Placement.from_cli(["learner=gpu_box"]), RunConfig(), CPU_ONLY, DRIVER)
    with pytest.raises(ConfigError, match="has no GPU"):
        make_plan(Placement(gpu="on"), RunConfig(), CPU_ONLY, DRIVER)
    cuda = load_config(None, ["loop.world_model.train.device=cuda"])
    with pytest.raises(ConfigError, match="asks for a GPU"):
        make_plan(Placement(), cuda, CPU_ONLY, DRIVER)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--place", "world_model"], "expected PART=RESOURCE"),
        (["--place", "critic=wm_node"], "unknown part 'critic'"),
        (["--place", "learner=GPU"], "bad resource name 'GPU'"),
        (["--gpu", "maybe"], "bad placement option gpu"),
        (["--on-node-loss", "panic"], "bad placement option on_node_loss"),
        (["--node-wait-s", "0"], "bad placement option node_wait_s"),
    ],
)
def test_bad_placement_options_are_one_line_errors(tmp_path, args, message):
    res = CliRunner().invoke(app, ["train", str(tmp_path / "none"), *args], env={"COLUMNS": "200"})
    assert res.exit_code != 0 and message in res.output, res.output
    assert "Traceback" not in res.output and not (tmp_path / "none").exists()  # nothing written
