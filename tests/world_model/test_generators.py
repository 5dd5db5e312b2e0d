"""Every generator: shapes, finite losses, determinism under a seed, uncertainty."""

import numpy as np
import pytest
import torch

from tests.world_model.helpers import SIZE, episode, tiny_config
from worldsample.world_model.drift_field import drift_field
from worldsample.world_model.imagine import Imaginer
from worldsample.world_model.model import WorldModel

KINDS = ["regression", "diffusion", "consistency", "drift"]


def untrained(kind: str, **dyn) -> WorldModel:
    torch.manual_seed(0)
    cfg = tiny_config(kind)
    if dyn:
        cfg = cfg.model_copy(update={"dynamics": cfg.dynamics.model_copy(update=dyn)})
    model = WorldModel(cfg)
    with torch.no_grad():  # the output layer starts at zero ("no change"); give it something to say
        for m in model.dynamics.members:
            m.out[-1].weight.normal_(0, 0.05)
    return model.eval()


def context(b=3, k=2, t=5):
    rng = np.random.default_rng(1)
    eps = [episode(rng, k + t) for _ in range(b)]
    ctx = {key: np.stack([e[key][:k] for e in eps]) for key in ("image_corner", "proprio")}
    return ctx, np.stack([e["action"][k : k + t] for e in eps]), np.stack([e["action"][: k - 1] for e in eps])


@pytest.mark.parametrize("kind", KINDS)
def test_shapes_and_determinism(kind):
    im = Imaginer(untrained(kind))
    ctx, acts, past = context()
    a = im.rollout(ctx, acts, context_actions=past, seed=7)
    b = im.rollout(ctx, acts, context_actions=past, seed=7)
    c = im.rollout(ctx, acts, context_actions=past, seed=8)
    assert a.latents.shape == (3, 5, 6, SIZE // 4, SIZE // 4)  # 4 image channels + 2 proprio channels
    assert a.frames["image_corner"].shape == (3, 5, SIZE, SIZE, 3) and a.frames["image_corner"].dtype == np.uint8
    assert a.frames["proprio"].shape == (3, 5, 4)
    for key in ("reward", "success", "done"):
        assert getattr(a, key).shape == (3, 5)
    assert ((a.success >= 0) & (a.success <= 1)).all()
    assert torch.equal(a.latents, b.latents)
    assert torch.equal(a.latents, c.latents) == (kind == "regression")


@pytest.mark.parametrize("kind", KINDS)
def test_loss_is_finite_and_trains_the_backbone(kind):
    model = untrained(kind)
    net = model.dynamics.member(0)
    z = torch.randn(4, 2, 6, 4, 4)
    ctx = net.context(z, torch.zeros(4, 2, 4), torch.zeros(4, dtype=torch.long))
    loss = model.generator.loss(net, ctx, torch.randn(4, 6, 4, 4))
    loss.backward()
    assert torch.isfinite(loss)
    assert net.stem_in.weight.grad.abs().sum() > 0 and net.trunk[0].c1.weight.grad.abs().sum() > 0


def test_single_frame_context_is_padded():
    im = Imaginer(untrained("regression"))
    ctx, acts, _ = context(k=1)
    out = im.rollout(ctx, acts)
    assert out.latents.shape[:2] == (3, 5)


def test_uncertainty_from_ensemble_and_samples():
    ctx, acts, past = context()
    ens = Imaginer(untrained("regression", ensemble=2)).rollout(ctx, acts, context_actions=past, uncertainty=True)
    assert ens.uncertainty.shape == (3, 5) and (ens.uncertainty > 0).all()
    drift = Imaginer(untrained("drift")).rollout(ctx, acts, context_actions=past, uncertainty=True, samples=3)
    assert (drift.uncertainty > 0).all()
    reg = Imaginer(untrained("regression")).rollout(ctx, acts, context_actions=past, uncertainty=True)
    assert (reg.uncertainty == 0).all()


def test_drift_field_points_to_the_data_and_away_from_negatives():
    x = torch.tensor([[[0.0, 0.0], [1.0, 0.0]]])  # two generated samples
    pos = torch.tensor([[[0.0, 3.0]]])
    v = drift_field(x, pos, x.clone(), torch.eye(2, dtype=torch.bool), [0.05, 0.2])
    assert (v[0, :, 1] > 0).all()  # towards the positive
    assert v[0, 0, 0] < 0 < v[0, 1, 0]  # away from each other
    same = drift_field(pos.expand(1, 2, 2), pos, pos.expand(1, 2, 2), torch.eye(2, dtype=torch.bool), [0.1])
    assert torch.allclose(same, torch.zeros_like(same), atol=1e-5)  # at the data: no drift


@pytest.mark.parametrize("kind,steps", [("consistency", 3), ("diffusion", 1)])
def test_multi_step_samplers(kind, steps):
    model = untrained(kind)
    field = "consistency_steps" if kind == "consistency" else "diffusion_steps"
    model.generator = type(model.generator)(model.cfg.generator.model_copy(update={field: steps}))
    assert model.generator.passes == steps
    ctx, acts, past = context()
    a = Imaginer(model).rollout(ctx, acts, context_actions=past, seed=3)
    b = Imaginer(model).rollout(ctx, acts, context_actions=past, seed=3)
    assert torch.equal(a.latents, b.latents) and torch.isfinite(a.latents).all()
