"""The real-synthetic loop: a round is a sequence of named steps, and a schedule says which.

    collect              lock-step only: one real episode from the collector (the simulated arm)
    observe              see what the store committed since the last round; no new step, no round
    refresh_world_model  continual post-training of the world model, every `wm_every_episodes`
    synthesise           counterfactual branches off real states, every `synth_every_episodes`
    learn                the algorithm's updates on mixer batches for the new real steps
    export               the actor to the policy registry, every `export_every_episodes`
    evaluate             success on held-out initial states, every `eval_every_episodes`
    log                  one row of metrics per round
    checkpoint           learner, mixer and synthesis state, every `checkpoint_every_episodes`

LOCKSTEP (`loop.robot=sim`) collects itself and waits for world-model training and synthesis inside
the round: reproducible per seed. ASYNC (`loop.robot=bridge`) learns from what the bridge commits on
the robot's clock and runs world-model training and synthesis beside the learner, picking up their
results when ready. Cadences count committed episodes in both. The parts are called through
`worldsample.loop.calls` and may be Ray actors (services/trainer) or in-process objects (tests).

Operator requests (RUN/control, from the dashboard) and the caller's `watch` (e.g. whether the robot's
processes are alive) are followed before every step of every round, idle rounds included, and before
pretraining: a pause (or an e-stop) holds the loop at the next step boundary, so no
learner update, collection or export happens until a resume; labels are written into the store
(store/labels.py), where the learner's and the world model's readers pick them up. The loop keeps
its entry in RUN/status.json fresh while it runs (worldsample.loop.heartbeat).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from worldsample.errors import RunDirectoryError, StoreError
from worldsample.loop.calls import Job, Part, get
from worldsample.loop.checkpoint import load_checkpoint, save_checkpoint
from worldsample.loop.config import LoopConfig
from worldsample.loop.heartbeat import TrainerHeartbeat
from worldsample.loop.summary import TrainSummary, human_share
from worldsample.paths import RunFiles
from worldsample.runlog import ControlChannel, ControlCommand, ControlKind, EventLog, MetricsWriter
from worldsample.store import EpisodeStore
from worldsample.versioned import VersionedDir, VersionError

ROUND = ("collect", "observe", "refresh_world_model", "synthesise", "learn", "export", "evaluate", "log", "checkpoint")
EVAL_SEED0 = 10_000  # held-out initial states: far from the seeds that training episodes use
HOLDS = (ControlKind.pause, ControlKind.resume, ControlKind.estop)  # requests that pause or resume the loop
TRAINER_KINDS = {*HOLDS, ControlKind.label}


@dataclass(frozen=True)
class Schedule:
    name: str
    steps: tuple[str, ...]
    wait_background: bool  # world-model training and synthesis finish inside the round

    @property
    def collects(self) -> bool:
        return "collect" in self.steps


LOCKSTEP = Schedule("lockstep", ROUND, wait_background=True)
ASYNC = Schedule("async", tuple(s for s in ROUND if s != "collect"), wait_background=False)


def schedule_for(loop: LoopConfig) -> Schedule:
    return LOCKSTEP if loop.robot == "sim" else ASYNC


@dataclass
class Parts:
    learner: Part
    collector: Part | None = None  # lock-step: steps the arm and commits one episode per call
    evaluator: Part | None = None
    world_model: Part | None = None
    synth: Part | None = None


@dataclass
class _Round:
    index: int
    row: dict = field(default_factory=dict)
    new_steps: int = 0
    episodes_before: int = 0
    episodes_now: int = 0


class _Metrics:
    """metrics.jsonl, mirrored to TensorBoard scalars when asked."""

    def __init__(self, run_dir: Path, tensorboard: bool):
        self.jsonl = MetricsWriter(run_dir)
        self.tb = None
        if tensorboard:
            from worldsample.runlog.tensorboard import TensorBoardScalars

            self.tb = TensorBoardScalars(run_dir)

    def log(self, step: int, row: dict) -> None:
        self.jsonl.log(step, row)
        if self.tb is not None:
            self.tb.log(step, row)

    def close(self) -> None:
        self.jsonl.close()
        if self.tb is not None:
            self.tb.close()


def check_run_dir(run_dir: Path, resume: bool) -> EpisodeStore:
    """The run's store, after checking the run can be trained (demos present; a trainer only on resume)."""
    if RunFiles.of(run_dir).trainer.exists() and not resume:
        raise RunDirectoryError(
            f"{run_dir} already has a trainer; pass --resume to continue it, or use a new run directory"
        )
    store = EpisodeStore(run_dir)
    if "demo" not in store.groups:
        raise RunDirectoryError(
            f"{run_dir} has no demonstrations (no `demo` group in its store). On a robot, record them through the "
            f"bridge: `worldsample demos record --profile PROFILE.yaml --run {run_dir}` (docs/teleop.md); on the "
            f"simulated arm: `worldsample demos collect --out {run_dir}`"
        )
    return store


def wait_for_robot(store: EpisodeStore, collector: Part | None, loop: LoopConfig, poll_s: float = 0.5) -> None:
    """Lock-step: the collector is constructed (it creates the `real` group). With the bridge, the
    recorder owns the `real` group (its schema comes from the robot profile): wait until it exists."""
    if collector is not None:
        get(collector, "ready")
        return
    deadline = time.monotonic() + loop.bridge_wait_s
    while "real" not in store.groups:
        if time.monotonic() > deadline:
            raise RunDirectoryError(f"no `real` group in {store.root} after {loop.bridge_wait_s:.0f} s: is "
                                    "`worldsample bridge --run` running on this run directory?")
        time.sleep(poll_s)


def _wm_scalars(report: dict) -> dict[str, float]:
    """The summary's fidelity per horizon and its heads' precision/recall (left out where undefined)."""
    out = {f"wm_eval/h{h}/{name}": v for h, row in report["horizons"].items() for name, v in row.items()}
    for head, row in report.get("heads", {}).items():
        out.update({f"wm_eval/{head}_{k}": float(row[k]) for k in ("precision", "recall") if row.get(k) is not None})
    return out


class Loop:
    def __init__(self, run_dir: Path, loop: LoopConfig, parts: Parts, schedule: Schedule, resume: bool = False,
                 on_round: Callable[[dict], None] | None = None, idle_s: float = 1.0, status_every_s: float = 2.0,
                 pause_poll_s: float = 0.5, watch: Callable[[], None] | None = None):
        self.run_dir, self.cfg, self.parts, self.schedule = Path(run_dir), loop, parts, schedule
        self.resume, self.on_round, self.idle_s, self.pause_poll_s = resume, on_round, idle_s, pause_poll_s
        # called at every step boundary, idle rounds and pauses included: raises to stop the run (a dead
        # robot process commits nothing, so a check made only after a round would never come)
        self.watch = watch
        self.ckpt_root = RunFiles.of(run_dir).trainer
        self.store = EpisodeStore(run_dir)
        self.real = self.store.reader("real", cache=False)
        self.metrics = _Metrics(self.run_dir, loop.tensorboard)
        self.events, self.control = EventLog(self.run_dir, source="trainer"), ControlChannel(self.run_dir)
        self.status = TrainerHeartbeat(self.run_dir, status_every_s, schedule.name)
        self.summary = TrainSummary()
        self.wm_job, self.synth_job = Job(schedule.wait_background), Job(schedule.wait_background)
        self.recommend_job = Job(schedule.wait_background)
        self.paused = False
        self.seen_steps = 0
        self.next_round = 0
        self.start_episodes = self.episodes_now = 0
        self.round = _Round(0)

    # -- the whole run --------------------------------------------------------------------------
    def run(self) -> TrainSummary:
        t0 = time.perf_counter()
        self.status.start()
        try:
            self.start()
            while self.seen_steps < self.cfg.real_steps:
                self.run_round()
            self.finish()
        except BaseException as e:
            self.status.stop("error", "error", detail=f"{type(e).__name__}: {e}")
            raise
        else:
            self.status.stop("stopped", "finished", detail=f"trained on {self.seen_steps} real steps")
        finally:
            self.metrics.close()
            self.events.close()
        self.summary.seconds = time.perf_counter() - t0
        return self.summary

    def run_round(self) -> bool:
        """The schedule's steps in order, each after following operator requests (a pause holds the
        round before its next step); False when the round ended early (nothing new committed)."""
        self.round = _Round(self.next_round)
        for step in self.schedule.steps:
            self.hold()
            if getattr(self, step)() is False:
                return False
        if self.on_round:
            self.on_round(self.round.row)
        self.next_round += 1
        return True

    def start(self) -> None:
        """Resume from the latest checkpoint or warm-start the learner; then the first evaluation."""
        learner, synth = self.parts.learner, self.parts.synth
        self._restore_pause()
        self.hold()
        restored = load_checkpoint(self.ckpt_root) if self.resume else None
        pre = None  # the warm start's row, when there was one
        if restored:
            parts, meta = restored
            get(learner, "load_state", parts["learner"])
            if synth is not None and "synth" in parts:
                get(synth, "load_state", parts["synth"])
            self.next_round = int(meta["round"]) + 1
            self.events.emit("resume", f"resumed at round {self.next_round}", round=self.next_round)
            self.status.set(learner_step=int(parts["learner"].get("updates", 0)), policy_version=_latest(
                RunFiles.of(self.run_dir).policies), wm_version=_latest(RunFiles.of(self.run_dir).world_model))
        else:
            self.status.set(learner_step=0)
            pre = get(learner, "pretrain")
            if pre:
                version = get(learner, "export", {"round": -1, "real_steps": 0, "pretrain": True})
                self.status.set(policy_version=int(version))
                self.events.emit(
                    "pretrain",
                    f"behaviour cloning on {int(pre['pretrain/transitions'])} demo transitions, "
                    f"action error {pre['pretrain/bc_mse']:.3f}",
                )
        self.real.refresh()
        # the store is the truth: episodes committed after the checkpoint count once
        self.seen_steps = self.real.num_steps
        if pre:  # at the store's count: a run resumed before its first checkpoint was published counts on
            self.metrics.log(self.seen_steps, pre)
        if self._evaluates():
            row = self._eval_row()
            self.summary.success_before = row["eval/success_rate"]
            self.metrics.log(self.seen_steps, row)
        self.start_episodes = self.episodes_now = self.real.num_episodes
        self.status.set(state="paused" if self.paused else "running", phase="paused" if self.paused else "training",
                        real_steps=self.seen_steps, write=True)

    def finish(self) -> None:
        """Collect background work, final checkpoint and export, final evaluation, world-model fidelity."""
        learner, synth, s = self.parts.learner, self.parts.synth, self.summary
        late: dict = {}  # background work that finished after the last round: logged, not lost
        for job in (self.wm_job, self.synth_job, self.recommend_job):
            late.update(job.finish())
        if late:
            self.metrics.log(self.seen_steps, late)
            s.wm_versions = int(late.get("wm/version", s.wm_versions))
        learner_state = get(learner, "state")
        parts = {"learner": learner_state, **({"synth": get(synth, "state")} if synth is not None else {})}
        self._save(parts, round_=self.next_round - 1)
        final = get(learner, "export", {"round": self.next_round, "real_steps": self.seen_steps, "final": True})
        self._recommend(final)
        rec = self.recommend_job.finish()
        if rec:
            self.metrics.log(self.seen_steps, rec)
            s.recommended = int(rec["recommend/version"]) if "recommend/version" in rec else None
        if self._evaluates():
            row = self._eval_row(self.cfg.final_eval_episodes)
            s.success_after = row["eval/success_rate"]
            self.metrics.log(self.seen_steps, row)
        if self.parts.evaluator is not None:
            get(self.parts.evaluator, "close")
        if self.parts.world_model is not None and self.cfg.wm_eval_horizons:
            s.wm_eval = get(self.parts.world_model, "evaluate", self.cfg.wm_eval_horizons)
            if s.wm_eval:
                self.metrics.log(self.seen_steps, _wm_scalars(s.wm_eval))
        s.real_steps, s.episodes, s.updates = self.seen_steps, self.real.num_episodes, int(learner_state["updates"])
        s.human_last_quarter = human_share(self.real.episode_records(), int(0.75 * self.cfg.real_steps))
        self.status.set(learner_step=s.updates, real_steps=self.seen_steps, wm_version=s.wm_versions or None)
        self.events.emit("done", f"trained on {self.seen_steps} real steps")

    # -- operator requests ------------------------------------------------------------------------
    def follow_control(self) -> bool:
        """Apply pause / resume / e-stop and label requests; True while paused."""
        for cmd in self.control.poll("trainer", TRAINER_KINDS):
            if cmd.kind == ControlKind.label:
                self._label(cmd)
                continue
            was, self.paused = self.paused, cmd.kind != ControlKind.resume
            what = "paused" if self.paused else "resumed"
            self.events.emit(cmd.kind.value, f"training {what} by request" + (f": {cmd.reason}" if cmd.reason else ""),
                             request=cmd.id, real_steps=self.seen_steps)
            self.control.ack("trainer", cmd, note=f"training {what}" if was != self.paused else f"training was {what}")
            self.status.set(state="paused" if self.paused else "running", phase="paused" if self.paused else "training",
                            paused=self.paused, write=True)
        return self.paused

    def hold(self) -> None:
        """Follow operator requests; while paused, wait here (the status heartbeat goes on) for a resume.
        The watch is asked first and at every poll, so what it watches stops a paused run too."""
        if self.watch:
            self.watch()
        while self.follow_control():
            time.sleep(self.pause_poll_s)
            if self.watch:
                self.watch()

    def _label(self, cmd: ControlCommand) -> None:
        """An operator's verdict on a stored episode, written into the store beside it: the learner's
        reward and the world model's success labels follow it from their readers' next refresh."""
        verdict = "success" if cmd.success else "failure"
        try:
            self.store.labels(cmd.group).append(cmd.episode, bool(cmd.success), source=cmd.source, request=cmd.id,
                                                reason=cmd.reason)
        except (StoreError, OSError) as e:
            self.control.ack("trainer", cmd, result="rejected", note=str(e))
            self.events.emit("label_rejected", f"label {cmd.group}/{cmd.episode} {verdict} not stored: {e}",
                             level="warning", group=cmd.group, episode=cmd.episode, request=cmd.id)
            return
        self.control.ack("trainer", cmd, note=f"{cmd.group}/episode {cmd.episode} labelled {verdict} in the store")
        self.events.emit("episode_labelled", f"{cmd.group}/episode {cmd.episode} labelled {verdict} by {cmd.source}",
                         group=cmd.group, episode=cmd.episode, success=bool(cmd.success), request=cmd.id)

    def _restore_pause(self) -> None:
        """A trainer (re)started on a run that its operator paused stays paused: the newest pause,
        resume or e-stop request a trainer acted on decides (a request not acted on yet is delivered)."""
        for cmd, acks in self.control.history(limit=100_000):
            if cmd.kind in HOLDS and any(a.consumer == "trainer" and a.result == "done" for a in acks):
                if cmd.kind != ControlKind.resume:
                    self.paused = True
                    self.events.emit("pause", f"still paused: the last {cmd.kind.value} request stands until a resume",
                                     request=cmd.id)
                    self.status.set(state="paused", phase="paused", paused=True, write=True)
                return

    # -- the steps of a round -----------------------------------------------------------------------
    def collect(self) -> None:
        ep = get(self.parts.collector, "episode", self.cfg.seed + self.round.index)
        self.round.row.update({f"episode/{k}": float(v) for k, v in ep.items() if v is not None})

    def observe(self) -> bool:
        self.real.refresh()
        new, self.seen_steps = self.real.num_steps - self.seen_steps, self.real.num_steps
        if new <= 0:
            time.sleep(self.idle_s)
            return False
        self.round.new_steps = new
        # cadences count committed episodes (one per round in lock-step, any number with the bridge)
        self.round.episodes_before, self.episodes_now = self.episodes_now, self.real.num_episodes
        self.round.episodes_now = self.episodes_now
        return True

    def refresh_world_model(self) -> None:
        if self.parts.world_model is not None and self._due(self.cfg.wm_every_episodes):
            self.wm_job.start(lambda: self.parts.world_model.call("train"))
        self.round.row.update(self.wm_job.poll())

    def synthesise(self) -> None:
        if self.parts.synth is not None and self._due(self.cfg.synth_every_episodes):
            self.synth_job.start(lambda: self.parts.synth.call("generate"))
        self.round.row.update(self.synth_job.poll())

    def learn(self) -> None:
        row = get(self.parts.learner, "learn", self.round.new_steps)
        if not self.schedule.collects:
            # the robot went on committing while the learner learned: the steps it has not learned from yet
            self.real.refresh()
            row = {**row, "learner/lag_steps": float(max(0, self.real.num_steps - self.seen_steps))}
        self.round.row.update(row)
        if "learner/updates" in row:
            self.status.set(learner_step=int(row["learner/updates"]))

    def export(self) -> None:
        if self._due(self.cfg.export_every_episodes):
            source = {"round": self.round.index, "real_steps": self.seen_steps}
            version = get(self.parts.learner, "export", source)
            self.round.row["policy/version"] = float(version)
            self._recommend(version)
        self.round.row.update(self.recommend_job.poll())

    def _recommend(self, version: int) -> None:
        """Score the exported policy in the world model (beside the learner, like world-model training)."""
        if self.parts.world_model is not None and self.cfg.recommend:
            self.recommend_job.start(lambda: self.parts.world_model.call("recommend", version))

    def evaluate(self) -> None:
        if self._evaluates() and self._due(self.cfg.eval_every_episodes, first=False):
            self.round.row.update(self._eval_row())

    def log(self) -> None:
        row = self.round.row
        row["real_steps"] = float(self.seen_steps)
        self.metrics.log(self.seen_steps, row)
        if "batch/synthetic_share" in row:
            self.summary.synthetic_share = row["batch/synthetic_share"]
            self.summary.synthetic_share_sum += row["batch/synthetic_share"]
            self.summary.synthetic_share_rounds += 1
        self.summary.wm_versions = int(row.get("wm/version", self.summary.wm_versions))
        self.status.set(real_steps=self.seen_steps, round=self.round.index, write=True,
                        policy_version=int(row["policy/version"]) if "policy/version" in row else None,
                        wm_version=int(row["wm/version"]) if "wm/version" in row else None)

    def checkpoint(self) -> None:
        if self._due(self.cfg.checkpoint_every_episodes):
            parts = {"learner": get(self.parts.learner, "state")}
            if self.parts.synth is not None:
                parts["synth"] = get(self.parts.synth, "state")
            self._save(parts, round_=self.round.index)

    # -- helpers ----------------------------------------------------------------------------------
    def _due(self, every: int, first: bool = True) -> bool:
        """Due in this round: a multiple of `every` committed episodes was crossed (or, with
        `first`, this is the first round of the run)."""
        r = self.round
        first_round = first and r.episodes_before == self.start_episodes
        return first_round or r.episodes_now // every > r.episodes_before // every

    def _evaluates(self) -> bool:
        return self.parts.evaluator is not None and self.cfg.eval_episodes > 0

    def _eval_row(self, episodes: int | None = None) -> dict[str, float]:
        """One evaluation as a metrics row: the rate, and the counts and the policy version it
        evaluated, so that the dashboard can put a confidence interval on each version's success
        (`eval/policy_version` is absent while no policy is published: random actions)."""
        ev = get(self.parts.evaluator, "evaluate", episodes or self.cfg.eval_episodes, EVAL_SEED0)
        self.summary.evals.append((self.seen_steps, ev["success_rate"], ev["policy_version"]))
        row = {"eval/success_rate": float(ev["success_rate"])}
        if ev.get("episodes") is not None and ev.get("successes") is not None:  # counts not made up when not told
            row.update({"eval/episodes": float(ev["episodes"]), "eval/successes": float(ev["successes"])})
        if ev.get("policy_version") is not None:
            row["eval/policy_version"] = float(ev["policy_version"])
        if ev.get("searched_steps"):  # loop.search: the evaluation's steps whose action Best-of-N chose
            row["eval/searched_steps"] = float(ev["searched_steps"])
        return row

    def _save(self, parts: dict, round_: int) -> None:
        meta = {"round": round_, "real_steps": self.seen_steps, "real_episodes": self.real.num_episodes}
        save_checkpoint(self.ckpt_root, parts, meta)


def _latest(root: Path) -> int | None:
    """The newest published version under `root` (policies, world model), for the status on resume."""
    try:
        return VersionedDir(root).latest()
    except (VersionError, OSError):
        return None
