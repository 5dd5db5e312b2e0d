"""Which parts a run needs, built through a `make` callable that decides where each one runs:
`local_part` in this process, or services/trainer's Ray actors.

    sim          SimCollector      lock-step only: the simulated arm, recording into `real`
    evaluator    Evaluator         with the bridge and eval_episodes > 0 (lock-step: the collector evaluates)
    learner      Learning          always
    world_model  WorldModelRounds  when the data mixer uses synthetic data
    synth        Synthesis         when the data mixer uses synthetic data
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from worldsample.config import RunConfig
from worldsample.loop.calls import Local, Part
from worldsample.loop.learning import Learning, learner_spaces
from worldsample.loop.loop import Parts, schedule_for, wait_for_robot
from worldsample.loop.robot import Evaluator, SimCollector
from worldsample.loop.synthesis import Synthesis
from worldsample.loop.world_model import WorldModelRounds
from worldsample.ppl.mixer import mixer_class
from worldsample.store import EpisodeStore

Make = Callable[[str, type, tuple], Part]


def local_part(name: str, cls: type, args: tuple[Any, ...]) -> Part:
    return Local(cls(*args))


def build_parts(run_dir: Path, cfg: RunConfig, store: EpisodeStore, make: Make = local_part) -> Parts:
    """Construct the run's parts in dependency order (the learner reads the `real` group, which the
    robot side creates first)."""
    loop, run = cfg.loop, str(run_dir)
    if schedule_for(loop).collects:
        collector = make("sim", SimCollector, (run, cfg.env, loop, cfg.intervention))
    else:
        collector = None
    wait_for_robot(store, collector, loop)
    evaluator = collector
    if collector is None and loop.eval_episodes:
        evaluator = make("evaluator", Evaluator, (run, cfg.env, loop))
    obs_dims, low, high = learner_spaces(store, loop)
    learner = make("learner", Learning, (run, loop, obs_dims, low, high))
    synthetic = mixer_class(loop.ppl).uses_synthetic
    world_model = make("world_model", WorldModelRounds, (run, loop)) if synthetic else None
    synth = make("synth", Synthesis, (run, loop, low, high)) if synthetic else None
    return Parts(learner=learner, collector=collector, evaluator=evaluator, world_model=world_model, synth=synth)
