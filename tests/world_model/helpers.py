"""A predictable toy world: a bright square on a fixed background that moves by the action.

The next frame is a deterministic function of the frame and the action, so a world model can be
checked against the copy-last-frame baseline in seconds.
"""

import numpy as np

from worldsample.store import EpisodeStore, GroupSchema, KeySpec
from worldsample.world_model.config import WorldModelConfig

SIZE = 16
SQUARE = 4


def schema() -> GroupSchema:
    obs = {
        "image_corner": KeySpec(dtype="uint8", shape=(SIZE, SIZE, 3), kind="image", camera="corner"),
        "proprio": KeySpec(dtype="float32", shape=(4,), finite=True),
    }
    return GroupSchema.build(obs, action_dim=4, chunk_len=16)


def render(pos: np.ndarray) -> np.ndarray:
    yy, xx = np.mgrid[0:SIZE, 0:SIZE]
    img = np.stack([20 + 4 * xx, 40 + 3 * yy, np.full_like(xx, 60)], axis=-1).astype(np.float32)
    x, y = int(round(pos[0])), int(round(pos[1]))
    img[y : y + SQUARE, x : x + SQUARE] = (230, 200, 40)
    return img.astype(np.uint8)


def episode(rng: np.random.Generator, length: int) -> dict[str, np.ndarray]:
    lim = SIZE - SQUARE
    pos = rng.integers(0, lim // SQUARE + 1, 2) * float(SQUARE)  # on the latent grid: a move is a cell shift
    frames, prop, acts, rew = [], [], [], []
    for _ in range(length):
        a = np.zeros(4, np.float32)
        # always a move that stays inside, so copying the last frame is always wrong
        a[:2] = [rng.choice([m for m in (-1.0, 1.0) if 0 <= p + SQUARE * m <= lim]) for p in pos]
        frames.append(render(pos))
        prop.append(np.array([pos[0], pos[1], 0, 0], np.float32))
        acts.append(a)
        pos = np.clip(pos + SQUARE * a[:2], 0, lim)
        rew.append(-np.abs(pos - lim / 2).sum())
    done = np.zeros(length, bool)
    done[-1] = True
    return {
        "image_corner": np.stack(frames),
        "proprio": np.stack(prop),
        "action": np.stack(acts),
        "reward": np.array(rew, np.float32),
        "done": done,
        "success": done.copy(),
    }


def toy_store(path, episodes: int = 10, length: int = 24, seed: int = 0, group: str = "demo") -> EpisodeStore:
    store = EpisodeStore(path, create=True)
    store.ensure_group(group, schema())
    rng = np.random.default_rng(seed)
    with store.writer(group) as w:
        for _ in range(episodes):
            w.append_episode(episode(rng, length), domain="real")
    return store


def tiny_config(kind: str = "regression", **train) -> WorldModelConfig:
    return WorldModelConfig.model_validate(
        {
            "image_size": SIZE,
            "autoencoder": {"latent_channels": 4, "width": 8, "vector_latent_dim": 2},
            "dynamics": {"history": 2, "width": 24, "blocks": 2, "cond_dim": 32},
            "generator": {"kind": kind, "diffusion_steps": 4, "drift_group": 4},
            "train": {"batch": 16, "ae_steps": 60, "dyn_steps": 60, "ae_lr": 3e-3, "dyn_lr": 2e-3, **train},
        }
    )
