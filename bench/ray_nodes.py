"""Learner updates per second and world-model training steps per second with the trainer's parts on
one Ray node and on two, on this machine, in the same run (same run directory, config and seeds).

    .venv/bin/python bench/ray_nodes.py [--seconds 20] [--gpu auto|off]

A real Ray cluster of this machine (tests/deploy/cluster.py: `ray start --head`, then `ray start
--address` for the second node with the custom resource wm_node). The parts are the trainer's own
(worldsample/loop: Learning, WorldModelRounds, SimCollector for the `real` group), made as Ray actors
by services/trainer with its placement: 1 node, everything on the head; 2 nodes, the world model on
the second node (`--place world_model=wm_node`). The learner and the world model then train at the
same time, as in the asynchronous loop, for `--seconds`:

    learner updates/s      updates done by `learn` calls (50 new real steps each: 50 updates at UTD 1,
                           mixer sampling from the store included) per second of wall time
    world-model steps/s    autoencoder + dynamics steps of `train` calls (continual post-training
                           rounds, loading the store and saving each version included) per second

Both nodes share this machine's cores, so the second node adds no compute here: the ratio says what
the placement itself costs. On a machine with GPUs, `--gpu auto` (the trainer's default) puts the
learner and the world model on them (Ray gives each node of this machine its GPUs).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.deploy.cluster import LocalCluster  # noqa: E402

NEW_STEPS = 50  # real steps per learn call


def prepare(run: Path, cfg) -> None:
    """Demonstrations and two policy episodes in `real`, so that the learner and the world model have data."""
    from worldsample.demos import collect_demos
    from worldsample.loop.robot import SimCollector

    collect_demos(run, cfg, 3)
    sim = SimCollector(run, cfg.env, cfg.loop, cfg.intervention)
    for seed in range(2):
        sim.episode(seed)
    sim.close()


def measure(ray, run: Path, cfg, placement, seconds: float) -> dict:
    from services.trainer.actors import ray_maker
    from services.trainer.placement import make_plan
    from worldsample.loop.learning import Learning, learner_spaces
    from worldsample.loop.world_model import WorldModelRounds
    from worldsample.store import EpisodeStore

    plan = make_plan(placement, cfg, ray.cluster_resources(), ray.get_runtime_context().get_node_id())
    cfg = plan.configure(cfg)
    make = ray_maker(ray, plan=plan, run_dir=run)
    obs_dims, low, high = learner_spaces(EpisodeStore(run), cfg.loop)
    learner = make("learner", Learning, (str(run), cfg.loop, obs_dims, low, high))
    wm = make("world_model", WorldModelRounds, (str(run), cfg.loop))
    learner.call("learn", NEW_STEPS).result()  # warm up: imports, first batches
    wm.call("train").result()
    wm_steps = cfg.loop.world_model.train.ae_steps + cfg.loop.world_model.train.dyn_steps
    out = {"nodes": len([n for n in ray.nodes() if n["Alive"]])}

    def learn_loop(stop: float) -> None:
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() < stop:
            row = learner.call("learn", NEW_STEPS).result()
            n += NEW_STEPS if row else 0
        out["learner_updates_s"] = n / (time.perf_counter() - t0)

    def wm_loop(stop: float) -> None:
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() < stop:
            wm.call("train").result()
            n += wm_steps
        out["wm_steps_s"] = n / (time.perf_counter() - t0)

    stop = time.perf_counter() + seconds
    threads = [threading.Thread(target=f, args=(stop,)) for f in (learn_loop, wm_loop)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    info = {name: (part.info() or {}).get("node_id", "")[:8] for name, part in make.parts.items()}
    out["placement"] = info
    for part in make.parts.values():
        ray.kill(part.handle)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=20.0, help="measuring time per setting")
    ap.add_argument("--gpu", choices=("auto", "off"), default="auto", help="the trainer's --gpu")
    args = ap.parse_args()

    with LocalCluster() as cluster, tempfile.TemporaryDirectory(prefix="wsbench-") as tmp:
        os.environ.update({k: v for k, v in cluster.env.items() if k.startswith("RAY_")})
        import ray

        from services.trainer.actors import NAMESPACE
        from services.trainer.placement import Placement
        from worldsample.config import load_config

        cfg = load_config(
            None,
            [
                "env.cameras=[]",
                "env.max_episode_steps=100",
                "loop.min_real_for_learning=64",
                "loop.world_model.train.ae_steps=100",
                "loop.world_model.train.dyn_steps=100",
            ],
        )
        run = Path(tmp) / "run"
        prepare(run, cfg)
        t0 = time.perf_counter()
        cluster.start_head()
        print(f"head started in {time.perf_counter() - t0:.0f} s", flush=True)
        rows = []
        for nodes in (1, 2):
            if nodes == 2:
                cluster.add_node({"wm_node": 1}, cpus=1)
            ray.init(address=cluster.address, namespace=NAMESPACE, include_dashboard=False, log_to_driver=False)
            try:
                placement = Placement(gpu=args.gpu, resources={"world_model": "wm_node"} if nodes == 2 else {})
                rows.append(measure(ray, run, cfg, placement, args.seconds))
            finally:
                ray.shutdown()
            print(rows[-1], flush=True)

    one, two = rows
    print(
        f"\nlearner [{', '.join(map(str, cfg.loop.learner.hidden))}] batch {cfg.loop.learner.batch_size}, "
        f"world model {cfg.loop.world_model.train.ae_steps}+{cfg.loop.world_model.train.dyn_steps} steps a round, "
        f"{args.seconds:.0f} s each, {os.cpu_count()} cores"
    )
    print(f"{'Ray nodes':>10} {'learner updates/s':>18} {'world-model steps/s':>20}")
    for r in rows:
        print(f"{r['nodes']:>10} {r['learner_updates_s']:>18.1f} {r['wm_steps_s']:>20.1f}")
    print(
        f"{'2/1 ratio':>10} {two['learner_updates_s'] / one['learner_updates_s']:>18.2f} "
        f"{two['wm_steps_s'] / one['wm_steps_s']:>20.2f}"
    )


if __name__ == "__main__":
    main()
