"""The loop's parts as named Ray actors: placement, restarts and threads; no learning logic here
(that is in worldsample/loop/)."""

from __future__ import annotations

from typing import Any

NAMESPACE = "worldsample"
# parts that run torch: one intra-op thread each, so that on a small machine they share the cores
TORCH_PARTS = ("learner", "world_model", "synth")


class RayPending:
    def __init__(self, ray, ref):
        self.ray, self.ref = ray, ref

    def done(self) -> bool:
        return bool(self.ray.wait([self.ref], timeout=0)[0])

    def result(self) -> Any:
        return self.ray.get(self.ref)


class RayPart:
    """A Ray actor handle as a loop part (`call(method, *args) -> pending result`)."""

    def __init__(self, ray, handle):
        self.ray, self.handle = ray, handle

    def call(self, method: str, *args: Any) -> RayPending:
        return RayPending(self.ray, getattr(self.handle, method).remote(*args))


def _one_thread(cls: type) -> type:
    class OneThread(cls):
        def __init__(self, *args, **kwargs):
            import torch

            torch.set_num_threads(1)
            super().__init__(*args, **kwargs)

    OneThread.__name__ = OneThread.__qualname__ = cls.__name__  # Ray names the worker process after it
    return OneThread


def ray_maker(ray):
    """`make(name, cls, args)` for worldsample.loop.parts.build_parts: a named actor that Ray restarts
    if its process dies (state comes back from the trainer's checkpoints)."""

    def make(name: str, cls: type, args: tuple) -> RayPart:
        actor_cls = _one_thread(cls) if name in TORCH_PARTS else cls
        options = {"name": name, "namespace": NAMESPACE, "num_cpus": 0}
        handle = ray.remote(max_restarts=2, max_task_retries=0)(actor_cls).options(**options).remote(*args)
        return RayPart(ray, handle)

    return make
