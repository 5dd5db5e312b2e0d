"""A tiny pixel task: the expert's action points at a bright square, so only the frames tell it."""

import numpy as np

from worldsample.store import EpisodeStore, GroupSchema, KeySpec

SIZE = 32
SQUARE = 6


def frame(pos: np.ndarray, size: int = SIZE) -> np.ndarray:
    yy, xx = np.mgrid[0:size, 0:size]
    img = np.stack([20 + 3 * xx, 40 + 2 * yy, np.full_like(xx, 60)], axis=-1).astype(np.uint8)
    x, y = int(pos[0]), int(pos[1])
    img[y : y + SQUARE, x : x + SQUARE] = (230, 200, 40)
    return img


def episode(rng: np.random.Generator, length: int, cameras=("corner",)) -> dict[str, np.ndarray]:
    lim = SIZE - SQUARE
    pos = rng.integers(0, lim + 1, 2)
    frames, acts = [], []
    for _ in range(length):
        frames.append(frame(pos))
        a = np.zeros(4, np.float32)
        a[:2] = (pos / lim - 0.5) * 1.6  # in [-0.8, 0.8]
        acts.append(a)
        pos = np.clip(pos + rng.integers(-3, 4, 2), 0, lim)
    out = {f"image_{c}": np.stack(frames) for c in cameras}
    # the time step only: the same in every episode, so it tells nothing about the action (and unlike
    # noise it cannot serve to memorise frames)
    out["proprio"] = np.repeat(np.arange(length, dtype=np.float32)[:, None] / length, 4, axis=1)
    out["action"] = np.stack(acts)
    return out


def toy_store(path, episodes: int = 6, length: int = 20, cameras=("corner",), seed: int = 0,
              group: str = "demo") -> EpisodeStore:
    obs = {f"image_{c}": KeySpec(dtype="uint8", shape=(SIZE, SIZE, 3), kind="image", camera=c) for c in cameras}
    obs["proprio"] = KeySpec(dtype="float32", shape=(4,), finite=True)
    store = EpisodeStore(path, create=True)
    store.ensure_group(group, GroupSchema.build(obs, action_dim=4, chunk_len=16))
    rng = np.random.default_rng(seed)
    with store.writer(group) as w:
        for _ in range(episodes):
            ep = episode(rng, length, cameras)
            done = np.zeros(length, bool)
            done[-1] = True
            w.append_episode({**ep, "reward": np.zeros(length, np.float32), "done": done, "success": done.copy()})
    return store
