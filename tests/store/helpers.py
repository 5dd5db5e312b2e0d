"""Small deterministic episodes for store tests. proprio[0] holds the step index, so a test can
tell exactly which step a sampled value came from."""

import numpy as np

from worldsample.store import EpisodeStore, GroupSchema, KeySpec

IMG = (8, 8, 3)


def small_schema(chunk_len: int = 4) -> GroupSchema:
    obs = {
        "image_cam": KeySpec(dtype="uint8", shape=IMG, kind="image", camera="cam"),
        "proprio": KeySpec(dtype="float32", shape=(3,), finite=True),
    }
    return GroupSchema.build(obs, action_dim=2, chunk_len=chunk_len)


def make_episode(seed: int, length: int, terminal: bool = False) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    t = np.arange(length, dtype=np.float32)
    proprio = np.stack([t, np.full(length, seed, np.float32), rng.normal(size=length).astype(np.float32)], axis=1)
    done = np.zeros(length, bool)
    done[-1] = terminal
    return {
        "image_cam": rng.integers(0, 255, (length, *IMG), dtype=np.uint8),
        "proprio": proprio,
        "action": rng.uniform(-1, 1, (length, 2)).astype(np.float32),
        "reward": rng.uniform(0, 1, length).astype(np.float32),
        "done": done,
        "success": done.copy(),
    }


def new_store(tmp_path, group: str = "demo", chunk_len: int = 4, retention=None) -> EpisodeStore:
    store = EpisodeStore(tmp_path, create=True)
    store.ensure_group(group, small_schema(chunk_len), retention)
    return store


def demo_and_real_store(tmp_path, demos: int = 2, real: int = 1) -> EpisodeStore:
    """A store with `demos` terminal demo episodes of 12 steps and `real` real episodes of 10: enough for
    a `Learning` to behaviour-clone and take a few updates."""
    store = new_store(tmp_path, group="demo")
    store.ensure_group("real", store.schema("demo"))
    with store.writer("demo") as w:
        for s in range(1, demos + 1):
            w.append_episode(make_episode(s, 12, terminal=True))
    with store.writer("real") as w:
        for s in range(demos + 1, demos + real + 1):
            w.append_episode(make_episode(s, 10))
    return store
