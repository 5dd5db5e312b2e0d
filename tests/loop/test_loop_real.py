"""The loop's schedule on the real parts, in this process (no Ray): the simulated arm's collector,
the RLlib SAC learner, the world model's continual rounds, synthesis into the Zarr store, all at
tiny sizes. tests/loop/test_loop.py checks the same schedule against stand-ins; here every
assertion comes from what the real parts did: episodes committed to the store, learner updates
taken, world-model versions published, synthetic episodes written, checkpoints saved, each
observed before and after every call the loop made.

Then a crash after a few rounds (no final checkpoint) and a resume with new parts: the round, the
learner's updates, the world-model versions, the synthesis budget and the store's episodes all
continue from the checkpoint and the store."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from worldsample.config import load_config
from worldsample.loop.calls import Done, Local
from worldsample.loop.checkpoint import load_checkpoint
from worldsample.loop.loop import LOCKSTEP, ROUND, Loop, schedule_for
from worldsample.loop.parts import build_parts
from worldsample.paths import RunFiles
from worldsample.policy import PolicyRegistry
from worldsample.store import EpisodeStore
from worldsample.versioned import VersionedDir

from ..trainer.tiny import rows

STATE = Path(__file__).resolve().parents[2] / "configs" / "bench" / "state.yaml"
UTD, WM_EVERY, SYNTH_EVERY, EVAL_EVERY, CKPT_EVERY = 2, 2, 1, 2, 2
TINY = [
    "env.max_episode_steps=25",
    "demos.episodes=2",
    "loop.ppl.mode=ppl",
    "loop.interventions=true",
    "loop.eval_episodes=1",
    f"loop.eval_every_episodes={EVAL_EVERY}",
    "loop.export_every_episodes=1",
    f"loop.wm_every_episodes={WM_EVERY}",
    f"loop.synth_every_episodes={SYNTH_EVERY}",
    f"loop.checkpoint_every_episodes={CKPT_EVERY}",
    "loop.tensorboard=false",
    "loop.recommend=false",  # imagined scoring stops on a wall-clock budget; covered in tests/evaluation
    "loop.wm_eval_horizons=[1]",
    "loop.min_real_for_learning=1",  # every round learns: the demos alone are enough
    "loop.learner.hidden=[16,16]",
    "loop.learner.batch_size=16",
    f"loop.learner.utd={UTD}",
    "loop.learner.bc_pretrain_steps=5",
    "loop.learner.critic_warmup_updates=2",
    "loop.synth_branches=6",
    "loop.synth.horizon=3",
    "loop.world_model.train.ae_steps=5",
    "loop.world_model.train.dyn_steps=5",
    "loop.world_model.train.batch=8",
    "loop.world_model.train.holdout_every=2",
    "loop.world_model.dynamics.width=8",
    "loop.world_model.dynamics.blocks=1",
    "loop.world_model.dynamics.cond_dim=8",
    "loop.ppl.rho_max=0.9",
    "loop.ppl.kappa=0.01",
    "loop.ppl.q_probe=8",
]
# which step of a round each call of a part belongs to
STEP_OF = {
    ("collector", "episode"): "collect",
    ("world_model", "train"): "refresh_world_model",
    ("synth", "generate"): "synthesise",
    ("learner", "learn"): "learn",
    ("learner", "export"): "export",
    ("evaluator", "evaluate"): "evaluate",
    ("learner", "state"): "checkpoint",
    ("synth", "state"): "checkpoint",
}


@dataclass(frozen=True)
class Seen:
    """What is on disk and in the learner at one moment."""

    real: dict[int, int]  # committed real episode -> length
    synthetic: dict[int, int | None]  # committed synthetic episode -> the world-model version it was imagined in
    synthetic_steps: int
    wm_versions: tuple[int, ...]
    policies: tuple[int, ...]
    checkpoints: tuple[int, ...]
    updates: int


@dataclass(frozen=True)
class Call:
    part: str
    method: str
    args: tuple
    result: object
    before: Seen
    after: Seen


@dataclass(frozen=True)
class RoundEnd:
    row: dict  # the row the round logged
    seen: Seen  # after its last step (the checkpoint is written after the parts' last call)


class Trace:
    def __init__(self, run: Path):
        self.run, self.learning = run, None
        self.events: list[Call | RoundEnd] = []

    def seen(self) -> Seen:
        store, files = EpisodeStore(self.run), RunFiles.of(self.run)
        real = store.reader("real", cache=False).records if "real" in store.groups else {}
        synth = store.reader("synthetic", cache=False).records if "synthetic" in store.groups else {}
        return Seen(
            real={e: r.length for e, r in real.items()},
            synthetic={e: r.wm_version for e, r in synth.items()},
            synthetic_steps=sum(r.length for r in synth.values()),
            wm_versions=tuple(VersionedDir(files.world_model).versions()),
            policies=tuple(PolicyRegistry(self.run).versions()),
            checkpoints=tuple(VersionedDir(files.trainer).versions()),
            updates=int(self.learning.agent.updates),
        )

    def rounds(self) -> tuple[list[Call], list[tuple[list[Call], RoundEnd]], list[Call]]:
        """(calls before the first round, [(a round's calls, its end)], calls after the last round)."""
        before, done, current = None, [], []
        for e in self.events:
            if isinstance(e, RoundEnd):
                done.append((current, e))
                current = []
            elif before is None and e.method == "episode":
                before, current = current, [e]
            else:
                current.append(e)
        if before is None:  # no round yet: everything so far came before it
            before, current = current, []
        return before, done, current


class Traced:
    """A real part (in this process) whose every call is recorded with what it changed."""

    def __init__(self, name: str, part: Local, trace: Trace):
        self.name, self.part, self.trace = name, part, trace

    def call(self, method: str, *args) -> Done:
        before = self.trace.seen()
        done = self.part.call(method, *args)  # a Local part runs the call now
        self.trace.events.append(Call(self.name, method, args, done.result(), before, self.trace.seen()))
        return done


def traced_loop(run: Path, cfg, resume: bool = False) -> tuple[Loop, Trace]:
    parts, trace = build_parts(run, cfg, EpisodeStore(run)), Trace(run)
    trace.learning = parts.learner.obj
    collector = parts.collector
    for name in ("learner", "world_model", "synth"):
        setattr(parts, name, Traced(name, getattr(parts, name), trace))
    parts.collector, parts.evaluator = Traced("collector", collector, trace), Traced("evaluator", collector, trace)
    loop = Loop(run, cfg.loop, parts, schedule_for(cfg.loop), resume=resume,
                on_round=lambda row: trace.events.append(RoundEnd(dict(row), trace.seen())))
    return loop, trace


def due(n_after: int, every: int, first: bool) -> bool:
    """Lock-step: one episode a round. Due in the round after which `n_after` episodes are committed
    when that is a multiple of `every`, and in a run's first round (`first`)."""
    return first or n_after % every == 0


def check_rounds(trace: Trace, start_episodes: int) -> list[tuple[list[Call], RoundEnd]]:
    """Every round's steps in ROUND order at their cadences, each step's effect as configured."""
    _, rounds, _ = trace.rounds()
    assert rounds, "no round ran"
    for i, (calls, end) in enumerate(rounds):
        row = end.row
        n = start_episodes + i + 1  # committed real episodes after this round
        first = i == 0
        names = [(c.part, c.method) for c in calls]
        expected = [("collector", "episode")]
        expected += [("world_model", "train")] if due(n, WM_EVERY, first) else []
        expected += [("synth", "generate")] if due(n, SYNTH_EVERY, first) else []
        expected += [("learner", "learn"), ("learner", "export")]
        expected += [("evaluator", "evaluate")] if due(n, EVAL_EVERY, False) else []
        expected += [("learner", "state"), ("synth", "state")] if due(n, CKPT_EVERY, first) else []
        assert names == expected, f"round {i} ({n} episodes after it): {names}"
        steps = [ROUND.index(STEP_OF[c]) for c in names]
        assert steps == sorted(steps), f"round {i}: steps out of ROUND order: {names}"
        by = {(c.part, c.method): c for c in calls}

        # collect: exactly one new real episode, the next id
        ep = by[("collector", "episode")]
        new = sorted(set(ep.after.real) - set(ep.before.real))
        assert new == [n - 1] and len(ep.before.real) == n - 1, f"round {i}: committed {new}"
        length = ep.after.real[n - 1]
        assert ep.result["length"] == length and ep.result["episode"] == n - 1
        assert row["episode/length"] == length

        # learn: the round's new real steps, utd updates each, and nothing else updates the learner
        learn = by[("learner", "learn")]
        assert learn.args == (length,), f"round {i}: learned for {learn.args}, committed {length} steps"
        assert learn.after.updates - learn.before.updates == UTD * length
        assert row["learner/updates"] == learn.after.updates
        for c in calls:
            if c is not learn:
                assert c.after.updates == c.before.updates, f"round {i}: {c.part}.{c.method} updated the learner"

        # export: one new policy version a round (export_every_episodes=1)
        export = by[("learner", "export")]
        assert len(export.after.policies) == len(export.before.policies) + 1
        assert row["policy/version"] == export.result == export.after.policies[-1]

        # the world model: one new published version per training round, continual after the first
        if ("world_model", "train") in by:
            wm = by[("world_model", "train")]
            assert wm.after.wm_versions[:-1] == wm.before.wm_versions and len(wm.after.wm_versions) == len(
                wm.before.wm_versions) + 1
            assert wm.result["wm/version"] == wm.after.wm_versions[-1] == row["wm/version"]
            assert wm.result["wm/mode_loop"] == float(bool(wm.before.wm_versions))
        else:
            assert "wm/version" not in row

        # synthesis: only from a published world model, each synthetic episode tagged with the version
        # that imagined it (the latest when it ran)
        if ("synth", "generate") in by:
            syn = by[("synth", "generate")]
            written = {e: v for e, v in syn.after.synthetic.items() if e not in syn.before.synthetic}
            if not syn.before.wm_versions:
                assert not written and syn.result == {}
            else:
                assert set(written.values()) <= {syn.before.wm_versions[-1]}, written
                assert syn.after.synthetic_steps - syn.before.synthetic_steps == int(syn.result.get("synth/steps", 0))
        # checkpoint: one new trainer checkpoint when due, none otherwise
        saved = [v for v in end.seen.checkpoints if v not in calls[0].before.checkpoints]
        assert len(saved) == (1 if ("learner", "state") in by else 0), f"round {i}: checkpoints {saved} saved"

    every = [c for calls, _ in rounds for c in calls]
    # no synthetic episode ever exists without a world model that imagined it, and none before one was published
    for c in every:
        for e, version in c.after.synthetic.items():
            assert version is not None and version in c.after.wm_versions, (e, version)
        if not c.after.wm_versions:
            assert not c.after.synthetic
    return rounds


def test_the_real_parts_follow_the_lockstep_schedule_and_resume_continues_it(tmp_path):
    from worldsample.demos import collect_demos

    cfg = load_config(STATE, [*TINY, "loop.real_steps=1000"])
    assert schedule_for(cfg.loop) is LOCKSTEP
    run = tmp_path / "run"
    collect_demos(run, cfg, cfg.demos.episodes)

    # 1. four rounds, then the trainer dies: no finish, no final checkpoint
    loop, trace = traced_loop(run, cfg)
    loop.start()
    start, _, _ = trace.rounds()
    assert [(c.part, c.method) for c in start] == [("learner", "pretrain"), ("learner", "export"),
                                                   ("evaluator", "evaluate")]
    assert start[0].after.updates == 0 and start[0].result["pretrain/bc_steps"] == 5  # BC is not an update
    for _ in range(4):
        assert loop.run_round()
    # a fifth round's episode is committed after the last checkpoint, then the trainer dies mid-round
    collector = loop.parts.collector.part.obj
    collector.episode(cfg.loop.seed + 4)
    loop.metrics.close()
    loop.events.close()
    collector.close()  # the collector's writer lock goes with its (dead) process
    rounds = check_rounds(trace, start_episodes=0)
    synthetic = [c for calls, _ in rounds for c in calls if c.method == "generate"]
    assert any(c.after.synthetic_steps > c.before.synthetic_steps for c in synthetic), "no synthesis: not covered"
    # synthetic rows reach the learner only once the store holds synthetic episodes
    for calls, end in rounds:
        learn = next(c for c in calls if c.method == "learn")
        if not learn.before.synthetic:
            assert end.row.get("batch/synthetic_share", 0.0) == 0.0
    shares = [end.row.get("batch/synthetic_share", 0.0) for _, end in rounds]
    assert any(s > 0 for s in shares), f"synthetic data never reached the learner: {shares}"

    saved, meta = load_checkpoint(RunFiles.of(run).trainer)
    # the last checkpoint was after round 3 (4 episodes: every 2); its learner state is what round 3 left
    assert meta["round"] == 3 and meta["real_episodes"] == 4
    last_learn = next(c for c in rounds[3][0] if c.method == "learn")
    assert saved["learner"]["updates"] == last_learn.after.updates
    synth_written = rounds[3][0][-1].after.synthetic_steps  # what the store holds
    assert saved["synth"]["steps_written"] == synth_written == loop.parts.synth.part.obj.steps_written

    steps_before_resume = sum(EpisodeStore(run).reader("real", cache=False).records[e].length for e in range(5))
    versions_before = (VersionedDir(RunFiles.of(run).world_model).versions(), PolicyRegistry(run).versions())
    metrics_before = rows(run)

    # 2. resume with new parts: the checkpoint's round, learner and synthesis state, the store's episodes
    # two more rounds at least: an episode is at most 25 steps
    cfg2 = load_config(STATE, [*TINY, f"loop.real_steps={steps_before_resume + 26}"])
    loop3, trace3 = traced_loop(run, cfg2, resume=True)
    loop3.start()
    start3, _, _ = trace3.rounds()
    assert ("learner", "pretrain") not in [(c.part, c.method) for c in start3]  # no warm start again
    assert [(c.part, c.method) for c in start3] == [("learner", "load_state"), ("synth", "load_state"),
                                                    ("evaluator", "evaluate")]
    assert start3[0].after.updates == saved["learner"]["updates"]
    assert trace3.learning.rng.bit_generator.state == saved["learner"]["rng"]
    assert loop3.parts.synth.part.obj.steps_written == synth_written
    assert loop3.next_round == 4 and loop3.seen_steps == steps_before_resume  # the store is the truth: counted once
    while loop3.seen_steps < cfg2.loop.real_steps:
        assert loop3.run_round()
    loop3.finish()
    loop3.metrics.close()
    loop3.events.close()
    after = check_rounds(trace3, start_episodes=5)
    first = after[0][0]
    learn = next(c for c in first if c.method == "learn")
    assert learn.before.updates == saved["learner"]["updates"]  # continues from the checkpoint, not from 0
    wm = next(c for c in first if c.method == "train")  # due in the first round after a resume
    assert wm.result["wm/mode_loop"] == 1.0 and wm.after.wm_versions[-1] == versions_before[0][-1] + 1
    export = next(c for c in first if c.method == "export")
    assert export.result == versions_before[1][-1] + 1  # policy versions continue
    real = EpisodeStore(run).reader("real", cache=False)
    assert sorted(real.records) == list(range(5 + len(after)))  # no gap, nothing twice
    assert loop3.summary.real_steps == real.num_steps and loop3.summary.episodes == real.num_episodes
    new_rows = rows(run)[len(metrics_before):]
    assert min(r["step"] for r in new_rows) >= steps_before_resume  # metrics steps continue, never restart
    _, meta = load_checkpoint(RunFiles.of(run).trainer)
    assert meta["round"] == 4 + len(after) - 1 and meta["real_episodes"] == 5 + len(after)

