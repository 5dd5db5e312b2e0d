"""A small vector-only store and an untrained world model for synthesiser tests.

The world model is untrained on purpose: its output layer is drawn at random, so the imagined
states wander off the data by a controllable amount (`spread`), which is what the filters are for.
"""

import numpy as np
import torch

from worldsample.store import EpisodeStore, GroupSchema, KeySpec
from worldsample.world_model.config import WorldModelConfig
from worldsample.world_model.imagine import Imaginer
from worldsample.world_model.model import WorldModel

ACTION_DIM = 2
LOW, HIGH = -np.ones(ACTION_DIM, np.float32), np.ones(ACTION_DIM, np.float32)


def state_store(path, episodes: int = 6, length: int = 20, seed: int = 0) -> EpisodeStore:
    """`real` episodes whose state stays in [0, 1] x [0, 0.2] x [0.5, 0.5]."""
    store = EpisodeStore(path, create=True)
    schema = GroupSchema.build({"state": KeySpec(dtype="float32", shape=(3,), finite=True)}, ACTION_DIM, chunk_len=8)
    store.ensure_group("real", schema)
    rng = np.random.default_rng(seed)
    with store.writer("real") as w:
        for _ in range(episodes):
            t = np.linspace(0.0, 1.0, length, dtype=np.float32)
            state = np.stack([t, 0.2 * rng.uniform(size=length), np.full(length, 0.5)], axis=1).astype(np.float32)
            w.append_episode(
                {"state": state, "action": rng.uniform(-1, 1, (length, ACTION_DIM)).astype(np.float32),
                 "reward": np.zeros(length, np.float32), "done": np.zeros(length, bool),
                 "success": np.zeros(length, bool)},
                domain="real",
            )
    return store


def imaginer(spread: float, ensemble: int = 1, seed: int = 0) -> Imaginer:
    cfg = WorldModelConfig.model_validate(
        {
            "image_keys": [],
            "vector_keys": {"state": 3},
            "action_dim": ACTION_DIM,
            "autoencoder": {"vector_latent_dim": 2, "vector_grid": 2},
            "dynamics": {"history": 2, "width": 16, "blocks": 1, "cond_dim": 16, "ensemble": ensemble},
        }
    )
    torch.manual_seed(seed)
    model = WorldModel(cfg)
    with torch.no_grad():  # the output layer starts at zero ("no change"); make each member move differently
        for m in model.dynamics.members:
            m.out[-1].weight.normal_(0, spread)
    return Imaginer(model.eval())
