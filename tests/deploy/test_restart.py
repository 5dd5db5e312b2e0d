"""A part that Ray starts again after its process died takes its state from the run's latest trainer
checkpoint, and a call to a part whose state survives a restart is retried on the new process
(services/trainer/actors.py), on a local Ray."""

from __future__ import annotations

import os
import signal

from services.trainer.actors import ray_maker
from services.trainer.local_ray import LocalRay
from worldsample.loop.checkpoint import save_checkpoint
from worldsample.paths import RunFiles


def test_a_restarted_part_resumes_from_the_trainer_checkpoint(tmp_path):
    import ray

    class Counter:  # stands in for synthesis: `state` / `load_state` as the loop's parts have them
        def __init__(self, run_dir: str):
            self.n = 0

        def bump(self) -> tuple[int, int]:
            self.n += 1
            return os.getpid(), self.n

        def state(self) -> dict:
            return {"steps_written": self.n}

        def load_state(self, st: dict) -> None:
            self.n = int(st["steps_written"])

    save_checkpoint(RunFiles.of(tmp_path).trainer, {"synth": {"steps_written": 41}}, {"round": 3})
    with LocalRay(tmp_path) as local:
        ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False,
                 _temp_dir=str(local.temp_dir))
        try:
            part = ray_maker(ray, str(local.logs), run_dir=tmp_path)("synth", Counter, (str(tmp_path),))
            pid, n = part.call("bump").result()
            assert n == 1  # a first start is fresh: the loop itself restores on --resume
            os.kill(pid, signal.SIGKILL)
            # the next call reaches the process Ray started again (retried if it was sent to the dead one)
            pid_after, n_after = part.call("bump").result()
            assert pid_after != pid and n_after == 42
            assert part.info()["restarts"] == 1
        finally:
            ray.shutdown()
