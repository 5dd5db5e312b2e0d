"""Behaviour cloning from pixels on the simulated arm: does the pretrained encoder see enough?

    MUJOCO_GL=egl .venv/bin/python bench/vision_bc.py                       # push-v3, corner+gripperPOV, 64x64
    MUJOCO_GL=egl .venv/bin/python bench/vision_bc.py --cameras corner --demos 30 --steps 1500 --eval 20

1. `--demos` scripted demonstrations are recorded into a temp run's store with `collect_demos`
   (observations: the cameras' frames and proprio only, no task state; seeds 0..demos-1).
2. The encoder and a BC actor over [latent, proprio] are pretrained from that store
   (`worldsample.vision.pretrain`, random shift, optional inverse dynamics), 3 episodes held out
   for a validation BC loss.
3. Both are exported to ONNX and published (`publish_vision_policy`); the bridge's runner
   (`OnnxActor`) drives the arm from `--eval` held-out starts (seeds 10000+), deterministic actions,
   no intervention. Printed: success k/N, the times of each stage, the policy's step latency.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("MUJOCO_GL", "egl")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--task", default="push-v3")
    ap.add_argument("--cameras", default="corner,gripperPOV")
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--demos", type=int, default=30)
    ap.add_argument("--steps", type=int, default=1500, help="pretraining steps")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--idm", type=float, default=0.0, help="inverse-dynamics loss weight (0 = BC only)")
    ap.add_argument("--threads", type=int, default=2, help="torch threads while training")
    ap.add_argument("--eval", type=int, default=20, help="held-out starts")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=None, help="write the figures as JSON here")
    ap.add_argument("--run", type=Path, default=None,
                    help="keep the run here (default: a temp dir); demos already in it are reused, not collected")
    args = ap.parse_args()

    from worldsample.config import DemoConfig, RunConfig
    from worldsample.demos import collect_demos
    from worldsample.policy import PolicyRegistry
    from worldsample.policy.onnx_actor import OnnxActor
    from worldsample.policy.onnx_export import publish_vision_policy
    from worldsample.sim import SimArmConfig, make_env
    from worldsample.vision.pretrain import PretrainConfig, load_demos, pretrain

    cams = args.cameras.split(",")
    env_cfg = SimArmConfig(task=args.task, cameras=cams, image_size=args.size, include_state=False)
    fig: dict = {"args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}}
    with tempfile.TemporaryDirectory() as tmp:
        run = args.run or Path(tmp)
        if (run / "store" / "demo").exists():
            print(f"demos: reusing those in {run}", flush=True)
        else:
            t0 = time.perf_counter()
            summary = collect_demos(run, RunConfig(env=env_cfg, demos=DemoConfig(episodes=args.demos)), args.demos)
            fig["collect"] = {"episodes": summary.episodes, "successes": summary.successes, "steps": summary.steps,
                              "seconds": round(time.perf_counter() - t0, 1)}
            print(f"demos: {summary.successes}/{summary.episodes} expert successes, {summary.steps} steps, "
                  f"{fig['collect']['seconds']} s", flush=True)

        train, val = load_demos(run, cams, max_episodes=args.demos).split(3, seed=args.seed)
        cfg = PretrainConfig(steps=args.steps, batch_size=args.batch, inverse_dynamics=args.idm, threads=args.threads,
                             seed=args.seed, eval_every=max(args.steps // 5, 1))
        res = pretrain(train, cfg, val=val, on_log=lambda e: print("  pretrain", {k: round(v, 4) for k, v in
                                                                                    e.items()}, flush=True))
        fig["pretrain"] = {"seconds": round(res.seconds, 1), "train_steps_of_data": len(train),
                           "history": res.history}
        print(f"pretrain: {args.steps} steps in {res.seconds:.0f} s, val BC {res.history[-1].get('val_bc'):.4f}",
              flush=True)

        version = publish_vision_policy(run, res.encoder, *res.policy())
        actor = OnnxActor(PolicyRegistry(run).dir.path(version) / "policy.onnx", PolicyRegistry(run).load()[0])
        env = make_env(env_cfg)
        actor.check_obs({k: s.shape for k, s in env.observation_space.spaces.items()})
        wins, lengths, act_ms = 0, [], []
        t0 = time.perf_counter()
        for i in range(args.eval):
            obs, _ = env.reset(seed=10_000 + i)
            n, done, success = 0, False, False
            while not done:
                t = time.perf_counter()
                a = actor.act(obs)
                act_ms.append((time.perf_counter() - t) * 1e3)
                obs, _, terminated, truncated, info = env.step(a)
                n, success = n + 1, bool(info["success"])
                done = success or terminated or truncated
            wins += int(success)
            lengths.append(n)
            print(f"  start {i}: {'success' if success else 'failure'} after {n} steps", flush=True)
        env.close()
        fig["eval"] = {"successes": wins, "starts": args.eval, "seconds": round(time.perf_counter() - t0, 1),
                       "mean_length": float(np.mean(lengths)), "act_ms_p50": float(np.median(act_ms)),
                       "act_ms_p99": float(np.percentile(act_ms, 99))}
    print(f"held-out BC success from pixels ({'+'.join(cams)} {args.size}x{args.size}, {args.demos} demos, "
          f"{args.steps} steps): {wins}/{args.eval}; policy step p50 {fig['eval']['act_ms_p50']:.2f} ms "
          f"(onnxruntime, 1 thread)")
    if args.out:
        args.out.write_text(json.dumps(fig, indent=2))


if __name__ == "__main__":
    main()
