"""`worldsample train`: starts Ray and the loop's actors, and runs rounds until the budget is spent.

With `robot="sim"` each round is lock-step, for reproducible benchmarks: one real episode from
the sim actor, then `utd` learner updates per new real step, then (at their cadences) world-model
post-training, synthesis, export of the policy and evaluation. With `robot="bridge"` the bridge
commits real episodes on its own clock, the driver trains on whatever has arrived, and world-model
training and synthesis run beside the learner (their results are picked up when ready).
Cadences (`*_every_episodes`) count committed episodes in both modes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from services.trainer.state import load_checkpoint, save_checkpoint
from services.trainer.workers import Evaluator, LearnerWorker, SimWorker, SynthWorker, WorldModelWorker
from worldsample.config import RunConfig
from worldsample.errors import RunDirectoryError
from worldsample.runlog import ControlChannel, EventLog, MetricsWriter
from worldsample.store import EpisodeStore

log = logging.getLogger(__name__)
NAMESPACE = "worldsample"


@dataclass
class TrainSummary:
    real_steps: int = 0
    episodes: int = 0
    updates: int = 0
    success_before: float | None = None
    success_after: float | None = None
    synthetic_share: float = 0.0
    wm_versions: int = 0
    evals: list[tuple[int, float, int | None]] = field(default_factory=list)  # (real steps, success, policy version)
    wm_eval: dict = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def best(self) -> tuple[int, float, int | None] | None:
        """The best evaluated policy (the latest of equals): online RL is not monotone, and the
        registry keeps every version, so this one can be deployed instead of the last."""
        return max(reversed(self.evals), key=lambda e: e[1]) if self.evals else None


def _actor(ray, cls, name: str, *args):
    """A named actor that Ray restarts if its process dies (state comes back from checkpoints)."""
    return ray.remote(max_restarts=2, max_task_retries=0)(cls).options(name=name, namespace=NAMESPACE, num_cpus=0).remote(*args)


class _Background:
    """At most one call of a kind in flight. `wait=True` collects it at once (lock-step rounds)."""

    def __init__(self, ray, wait: bool):
        self.ray, self.wait, self.ref = ray, wait, None

    def start(self, call) -> None:
        if self.ref is None:
            self.ref = call()

    def poll(self) -> dict:
        if self.ref is None or not (self.wait or self.ray.wait([self.ref], timeout=0)[0]):
            return {}
        ref, self.ref = self.ref, None
        return self.ray.get(ref)

    def finish(self) -> dict:
        """Wait for a call still in flight; its result (or {})."""
        ref, self.ref = self.ref, None
        return self.ray.get(ref) if ref is not None else {}


class _Metrics:
    """metrics.jsonl, mirrored to TensorBoard scalars when asked."""

    def __init__(self, run_dir: Path, tensorboard: bool):
        from worldsample.runlog.tensorboard import TensorBoardScalars

        self.jsonl = MetricsWriter(run_dir)
        self.tb = TensorBoardScalars(run_dir) if tensorboard else None

    def log(self, step: int, row: dict) -> None:
        self.jsonl.log(step, row)
        if self.tb is not None:
            self.tb.log(step, row)

    def close(self) -> None:
        self.jsonl.close()
        if self.tb is not None:
            self.tb.close()


def _wm_scalars(report: dict) -> dict[str, float]:
    return {f"wm_eval/h{h}/{name}": v for h, row in report["horizons"].items() for name, v in row.items()}


def _wait_for_group(store: EpisodeStore, name: str, timeout_s: float) -> None:
    """With the bridge, the recorder owns the `real` group (its schema comes from the robot profile)."""
    deadline = time.monotonic() + timeout_s
    while name not in store.groups:
        if time.monotonic() > deadline:
            raise RunDirectoryError(f"no `{name}` group in {store.root} after {timeout_s:.0f} s: is `worldsample bridge --run` "
                                    "running on this run directory?")
        time.sleep(0.5)


def train(run_dir: Path, cfg: RunConfig, resume: bool = False, address: str | None = None,
          on_round: Callable[[dict], None] | None = None) -> TrainSummary:
    import ray

    loop = cfg.loop
    run_dir = Path(run_dir).resolve()
    ckpt_root = run_dir / "trainer"
    if ckpt_root.exists() and not resume:
        raise RunDirectoryError(f"{run_dir} already has a trainer; pass --resume to continue it, or use a new run directory")
    store = EpisodeStore(run_dir)
    if "demo" not in store.groups:
        raise RunDirectoryError(f"{run_dir} has no demonstrations; run `worldsample demos collect --out {run_dir}` first")
    schema = store.schema("demo")
    obs_dims = {k: int(np.prod(schema.keys[k].shape)) for k in loop.learner.obs_keys}
    low, high = -np.ones(schema.action_dim, np.float32), np.ones(schema.action_dim, np.float32)

    ray.init(address=address, namespace=NAMESPACE, include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING,
             ignore_reinit_error=True, **({} if address else {"num_cpus": 2}))
    metrics = _Metrics(run_dir, loop.tensorboard)
    events, control = EventLog(run_dir, source="trainer"), ControlChannel(run_dir)
    summary = TrainSummary()
    t0 = time.perf_counter()
    try:
        sim = _actor(ray, SimWorker, "sim", str(run_dir), cfg.env, loop, cfg.intervention) if loop.robot == "sim" else None
        if sim is not None:
            ray.get(sim.ready.remote())
        else:
            _wait_for_group(store, "real", loop.bridge_wait_s)
        # the lock-step sim evaluates itself; with the bridge, a separate copy of the simulated arm does
        evaluator = sim if sim is not None else (_actor(ray, Evaluator, "evaluator", str(run_dir), cfg.env, loop) if loop.eval_episodes else None)
        learner = _actor(ray, LearnerWorker, "learner", str(run_dir), loop, obs_dims, low, high)
        wm = _actor(ray, WorldModelWorker, "world_model", str(run_dir), loop) if loop.ppl.mode != "off" else None
        synth = _actor(ray, SynthWorker, "synth", str(run_dir), loop, low, high) if loop.ppl.mode != "off" else None

        start_episode, seen_steps = 0, 0
        restored = load_checkpoint(ckpt_root) if resume else None
        if restored:
            parts, meta = restored
            ray.get(learner.load_state.remote(parts["learner"]))
            if synth is not None and "synth" in parts:
                ray.get(synth.load_state.remote(parts["synth"]))
            start_episode = int(meta["round"]) + 1
            events.emit("resume", f"resumed at round {start_episode}", round=start_episode)
        else:
            pre = ray.get(learner.pretrain.remote())
            if pre:
                ray.get(learner.export.remote({"round": -1, "real_steps": 0, "pretrain": True}))
                metrics.log(0, pre)
                events.emit("pretrain", f"behaviour cloning on {int(pre['pretrain/transitions'])} demo transitions, action error {pre['pretrain/bc_mse']:.3f}")
        real = store.reader("real", cache=False)
        real.refresh()
        seen_steps = real.num_steps  # the store is the truth: episodes committed after the checkpoint count once
        if evaluator is not None and loop.eval_episodes:
            ev = ray.get(evaluator.evaluate.remote(loop.eval_episodes, 10_000))
            summary.success_before = ev["success_rate"]
            metrics.log(seen_steps, {"eval/success_rate": summary.success_before})
            summary.evals.append((seen_steps, ev["success_rate"], ev["policy_version"]))
        paused = False
        r = start_episode
        start_episodes = episodes_now = real.num_episodes
        # lock-step: world model and synthesis finish inside the round (reproducible); with the
        # bridge they run beside the learner and report when done
        wm_job, synth_job = _Background(ray, wait=sim is not None), _Background(ray, wait=sim is not None)
        while seen_steps < loop.real_steps:
            for cmd in control.poll("trainer"):
                if cmd.kind.value in ("pause", "resume", "estop"):
                    paused = cmd.kind.value != "resume"
                    events.emit(cmd.kind.value, f"training {'paused' if paused else 'resumed'} by request")
                    control.ack("trainer", cmd)
                else:
                    control.ack("trainer", cmd, result="ignored", note="the trainer does not relabel committed episodes")
            if paused:
                time.sleep(0.5)
                continue
            row: dict = {}
            if sim is not None:
                row.update({f"episode/{k}": float(v) for k, v in ray.get(sim.episode.remote(loop.seed + r)).items() if v is not None})
            real.refresh()
            new = real.num_steps - seen_steps
            seen_steps = real.num_steps
            if new <= 0:
                time.sleep(1.0)
                continue
            # cadences count committed episodes (one per round in lock-step, any number with the bridge)
            episodes_before, episodes_now = episodes_now, real.num_episodes

            def due(every: int, first: bool = True) -> bool:
                return (first and episodes_before == start_episodes) or episodes_now // every > episodes_before // every

            if wm is not None and due(loop.wm_every_episodes):
                wm_job.start(wm.train.remote)
            row.update(wm_job.poll())
            if synth is not None and due(loop.synth_every_episodes):
                synth_job.start(synth.generate.remote)
            row.update(synth_job.poll())
            row.update(ray.get(learner.train.remote(new * loop.learner.utd)))
            if due(loop.export_every_episodes):
                row["policy/version"] = float(ray.get(learner.export.remote({"round": r, "real_steps": seen_steps})))
            if evaluator is not None and loop.eval_episodes and due(loop.eval_every_episodes, first=False):
                ev = ray.get(evaluator.evaluate.remote(loop.eval_episodes, 10_000))
                row["eval/success_rate"] = ev["success_rate"]
                summary.evals.append((seen_steps, ev["success_rate"], ev["policy_version"]))
            row["real_steps"] = float(seen_steps)
            metrics.log(seen_steps, row)
            summary.synthetic_share = row.get("batch/synthetic_share", summary.synthetic_share)
            summary.wm_versions = int(row.get("wm/version", summary.wm_versions))
            if due(loop.checkpoint_every_episodes):
                parts = {"learner": ray.get(learner.state.remote())}
                if synth is not None:
                    parts["synth"] = ray.get(synth.state.remote())
                save_checkpoint(ckpt_root, r, parts, {"round": r, "real_steps": seen_steps, "real_episodes": real.num_episodes})
            if on_round:
                on_round(row)
            r += 1
        for job in (wm_job, synth_job):
            last = job.finish()
            summary.wm_versions = int(last.get("wm/version", summary.wm_versions))
        learner_state = ray.get(learner.state.remote())
        save_checkpoint(ckpt_root, r, {"learner": learner_state, **({"synth": ray.get(synth.state.remote())} if synth else {})},
                        {"round": r - 1, "real_steps": seen_steps, "real_episodes": real.num_episodes})
        ray.get(learner.export.remote({"round": r, "real_steps": seen_steps, "final": True}))
        if evaluator is not None and loop.eval_episodes:
            ev = ray.get(evaluator.evaluate.remote(loop.eval_episodes, 10_000))
            summary.success_after = ev["success_rate"]
            metrics.log(seen_steps, {"eval/success_rate": summary.success_after})
            summary.evals.append((seen_steps, ev["success_rate"], ev["policy_version"]))
        if evaluator is not None:
            ray.get(evaluator.close.remote())
        if wm is not None and loop.wm_eval_horizons:
            summary.wm_eval = ray.get(wm.evaluate.remote(loop.wm_eval_horizons))
            if summary.wm_eval:
                metrics.log(seen_steps, _wm_scalars(summary.wm_eval))
        summary.real_steps, summary.episodes, summary.updates = seen_steps, real.num_episodes, int(learner_state["updates"])
        events.emit("done", f"trained on {seen_steps} real steps")
    finally:
        metrics.close()
        events.close()
        ray.shutdown()
    summary.seconds = time.perf_counter() - t0
    return summary
