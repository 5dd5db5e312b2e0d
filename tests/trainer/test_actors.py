"""Errors from the loop's Ray actors reach the driver as one line that says what to do: a
WorldSampleError as itself (from a method or from the constructor), a dead actor as a
PartFailedError naming the part and its log. The local Ray's reaper tidies up after a normal end."""

import os
from pathlib import Path

import pytest

from services.trainer.actors import PartFailedError, ray_maker
from services.trainer.local_ray import LocalRay
from worldsample.errors import WriterLockedError


def one_line(e: BaseException) -> str:
    text = str(e)
    assert "\n" not in text and "Traceback" not in text and "ray::" not in text, text
    return text


def test_actor_errors_become_one_line_errors(tmp_path):
    import ray

    class Part:
        def __init__(self, locked: bool = False):
            if locked:
                raise WriterLockedError("group 'real' already has a writer (pid 4242); stop it (kill 4242)")

        def ok(self):
            return os.getpid()

        def lock(self):
            raise WriterLockedError("group 'real' already has a writer (pid 77); stop it (kill 77)")

        def bug(self):
            raise KeyError("no such column\nsecond line")

        def crash(self):
            os._exit(3)

    with LocalRay(tmp_path) as local:
        ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False,
                 _temp_dir=str(local.temp_dir))
        try:
            make = ray_maker(ray, str(local.logs))
            part = make("learner", Part, ())
            assert part.call("ok").result() > 0
            with pytest.raises(WriterLockedError) as e:
                part.call("lock").result()
            assert "(pid 77)" in one_line(e.value)

            with pytest.raises(WriterLockedError) as e:  # the constructor's error, at the first call
                make("sim", Part, (True,)).call("ok").result()
            assert "(pid 4242)" in one_line(e.value)

            with pytest.raises(PartFailedError) as e:  # a bug: one line, its type and message
                part.call("bug").result()
            assert "learner part" in one_line(e.value) and "KeyError" in str(e.value) and "-v" in str(e.value)

            with pytest.raises(PartFailedError) as e:
                part.call("crash").result()
            text = one_line(e.value)
            assert "learner part" in text and str(local.logs) in text and "--resume" in text
        finally:
            ray.shutdown()
    assert not local.temp_dir.exists()
    assert list(Path(local.logs).glob("session_*/worker-*.err"))  # where the message says to look
