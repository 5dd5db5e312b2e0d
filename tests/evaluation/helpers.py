"""A run directory with a store, policies and a world model whose heads are set by hand.

The world model is untrained except for its success head, rigged so that success depends on the
first action dimension alone: success logit ~ silu(silu(GAIN * a0)) + BIAS, so probability above
0.5 for a0 above about 0.35, and below it for a0 <= 0.2. Its dynamics predict "no change" (the
output layer starts at zero), so the policy keeps seeing the start. Policies are linear without
hidden layers: action = tanh(W obs + b) with W = 0, so a0 = tanh(b0) whatever they see; a
stochastic one has a log_std head. Everything matches the simulated arm: `state` (39), 4 actions.
"""

import numpy as np
import torch

from worldsample.paths import RunFiles
from worldsample.policy import ObsInput, PolicyConfig, PolicyRegistry
from worldsample.store import EpisodeStore, GroupSchema, KeySpec
from worldsample.world_model import checkpoint
from worldsample.world_model.config import WorldModelConfig
from worldsample.world_model.model import WorldModel

STATE, ACTIONS = 39, 4
GAIN, BIAS = 10.0, -3.0


def rigged_model(kind: str = "regression", reward: float = 0.5, done_logit: float = -8.0, seed: int = 0,
                 history: int = 2, gain: float = GAIN) -> WorldModel:
    """`gain` < 0 turns the preference around: a0 below about -0.35 succeeds."""
    cfg = WorldModelConfig.model_validate({
        "image_keys": [], "vector_keys": {"state": STATE}, "action_dim": ACTIONS,
        "autoencoder": {"vector_latent_dim": 4, "vector_grid": 2},
        "dynamics": {"history": history, "width": 8, "blocks": 1, "cond_dim": 8},
        "generator": {"kind": kind, "diffusion_steps": 2, "drift_group": 2},
    })
    torch.manual_seed(seed)
    model = WorldModel(cfg)
    net = model.dynamics.member(0)
    width = cfg.dynamics.width
    with torch.no_grad():
        for p in [*net.act.parameters(), *net.heads.parameters(), *net.domain.parameters()]:
            p.zero_()
        net.act[0].weight[0, (history - 1) * ACTIONS] = gain  # the current action's first dimension
        net.act[2].weight[0, 0] = 1.0
        net.heads[0].weight[0, width] = 1.0  # cond[0]
        net.heads[2].weight[1, 0] = 1.0
        net.heads[2].bias.copy_(torch.tensor([reward, BIAS, done_logit]))
        if kind != "regression":  # make the generator's noise reach the latents
            net.out[-1].weight.normal_(0, 0.05)
    return model.eval()


def policy_tensors(a0: float, stochastic: bool = False, log_std: float = 0.0):
    cfg = PolicyConfig(obs=[ObsInput(key="state", dim=STATE)], action_dim=ACTIONS, hidden=[],
                       action_low=[-1.0] * ACTIONS, action_high=[1.0] * ACTIONS, stochastic=stochastic)
    t = {"mean.weight": np.zeros((ACTIONS, STATE), np.float32),
         "mean.bias": np.array([np.arctanh(a0), 0, 0, 0], np.float32)}
    if stochastic:
        t["log_std.weight"] = np.zeros((ACTIONS, STATE), np.float32)
        t["log_std.bias"] = np.full(ACTIONS, log_std, np.float32)
    return cfg, t


def make_run(path, a0s=(-0.8, 0.1, 0.6, 0.9), episodes: int = 10, length: int = 6, model: WorldModel | None = None,
             stochastic: bool = False):
    """A run: `real` episodes of `state` (ids 4 and 9 held out), one policy per a0, a world model v1."""
    store = EpisodeStore(path, create=True)
    schema = GroupSchema.build({"state": KeySpec(dtype="float32", shape=(STATE,), finite=True)}, ACTIONS,
                               chunk_len=8)
    store.ensure_group("real", schema)
    rng = np.random.default_rng(0)
    with store.writer("real") as w:
        for _ in range(episodes):
            w.append_episode({"state": rng.normal(0, 0.1, (length, STATE)).astype(np.float32),
                              "action": rng.uniform(-1, 1, (length, ACTIONS)).astype(np.float32),
                              "reward": np.zeros(length, np.float32), "done": np.zeros(length, bool),
                              "success": np.zeros(length, bool)}, domain="real")
    reg = PolicyRegistry(path)
    for a0 in a0s:
        reg.publish(*policy_tensors(a0, stochastic=stochastic))
    checkpoint.save(RunFiles.of(path).world_model, model if model is not None else rigged_model())
    return path


class PointMass(WorldModel):
    """A world model whose latent is the state itself (padded to the latent grid): a step adds
    `step_size` times the action to state[:4], predicts reward `reward` and never a success or a
    done (both heads at sigmoid(-8)). Where a chunk of actions ends is known exactly: the start plus
    `step_size` times the sum of its actions."""

    def __init__(self, step_size: float = 0.1, reward: float = 0.5, history: int = 2):
        super().__init__(rigged_model(history=history).cfg)
        self.step_size, self.reward = step_size, reward
        self.eval()

    def encode(self, obs: dict) -> torch.Tensor:
        v = torch.as_tensor(np.asarray(obs["state"]), dtype=torch.float32).reshape(len(obs["state"]), -1)
        g = self.cfg.latent_grid
        v = torch.nn.functional.pad(v, (0, (-v.shape[1]) % (g * g)))
        return v.view(len(v), -1, g, g)

    def decode(self, z: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"state": z.reshape(len(z), -1)[:, :STATE]}

    def step(self, history, actions, domain, member=0, noise=None):
        last = history[:, -1]
        flat = last.reshape(len(last), -1).clone()
        flat[:, :ACTIONS] += self.step_size * actions[:, -1]
        b = len(last)
        never = torch.full((b,), float(torch.sigmoid(torch.tensor(-8.0))))
        return flat.view_as(last), {"reward": torch.full((b,), self.reward), "success": never, "done": never}
