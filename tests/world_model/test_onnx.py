"""The world model's ONNX export: written with every checkpoint version, equal to torch within 1e-4
(encode, one step of dynamics, the heads, the decoded vectors) for every generator, and opened by
the torch-free runner only when it is complete, intact and the one its model.json describes."""

import json

import numpy as np
import pytest
import torch

from worldsample.world_model import checkpoint
from worldsample.world_model.config import WorldModelConfig
from worldsample.world_model.errors import CheckpointCorruptError, CheckpointError, CheckpointMismatchError
from worldsample.world_model.model import WorldModel
from worldsample.world_model.onnx_model import OnnxWorldModel

VECTORS = {"proprio": 4, "state": 7}


def random_model(images: bool = False, seed: int = 0, **changes) -> WorldModel:
    """Small, with every weight and statistic moved off its initial value (zero-initialised output
    and FiLM layers would make a parity check vacuous)."""
    cfg = WorldModelConfig.model_validate({
        "image_keys": ["image_corner"] if images else [], "vector_keys": VECTORS, "image_size": 16,
        "autoencoder": {"latent_channels": 2, "width": 8, "vector_latent_dim": 4, "vector_grid": 2},
        "dynamics": {"history": 3, "width": 8, "blocks": 2, "cond_dim": 8},
        "generator": {"diffusion_steps": 3, "consistency_steps": 2, "drift_group": 2},
    } | changes)
    torch.manual_seed(seed)
    model = WorldModel(cfg)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.2)
        for name in ("vec_mean", "lat_mean"):
            getattr(model, name).normal_(0, 0.5)
        for name in ("vec_std", "lat_std", "delta_std"):
            getattr(model, name).uniform_(0.5, 2.0)
        model.reward_scale.fill_(3.0)
    return model.eval()


def observations(cfg: WorldModelConfig, b: int, rng) -> dict[str, np.ndarray]:
    obs = {k: rng.integers(0, 256, (b, cfg.image_size, cfg.image_size, 3), dtype=np.uint8) for k in cfg.image_keys}
    return obs | {k: rng.normal(0, 1, (b, n)).astype(np.float32) for k, n in cfg.vector_keys.items()}


def torch_step(model, hist, acts, dom, ctx_noise, noise):
    """WorldModel.predict as the Imaginer calls it, its noise draws taken from the given arrays in order."""
    draws = iter(range(noise.shape[1] if noise is not None else 0))
    h = torch.from_numpy(hist)
    if ctx_noise is not None:
        h = h + model.cfg.dynamics.context_noise_infer * torch.from_numpy(ctx_noise)
    with torch.no_grad():
        nxt, heads, _ = model.predict(h, torch.from_numpy(acts), torch.from_numpy(dom),
                                      lambda shape: torch.from_numpy(noise[:, next(draws)]))
        dec = model.decode(nxt)
    return nxt.numpy(), {k: v.numpy() for k, v in heads.items()}, np.concatenate(
        [dec[k].numpy() for k in model.cfg.vector_keys], axis=1)


@pytest.mark.parametrize(("kind", "images", "extra"), [
    ("regression", False, {}),
    ("diffusion", False, {}),
    ("consistency", False, {}),
    ("drift", False, {}),
    ("regression", False, {"dynamics": {"history": 3, "width": 8, "blocks": 2, "cond_dim": 8,
                                        "context_noise_infer": 0.3}}),
    ("regression", True, {}),
    # the state profile's model: the normalised vector as its latent, a quaternion made canonical on the way in,
    # values that repeat the previous step's (in both keys: the offsets of the second count)
    ("regression", False, {"autoencoder": {"latent_channels": 2, "width": 8, "vector_identity": True, "vector_grid": 1},
                           "quaternions": {"state": [2]},
                           "previous_frame": {"proprio": [2, 0, 2], "state": [6, 0, 1]}}),
    # as the loop has it: two quaternions (the object's, and the previous frame's), two members, the step their mean
    ("regression", False, {"autoencoder": {"latent_channels": 2, "width": 8, "vector_identity": True, "vector_grid": 1},
                           "quaternions": {"proprio": [0], "state": [2]}, "previous_frame": {"state": [6, 0, 1]},
                           "dynamics": {"history": 3, "width": 8, "blocks": 2, "cond_dim": 8, "ensemble": 2,
                                        "predict": "mean"}}),
])
def test_onnx_matches_torch(tmp_path, kind, images, extra):
    model = random_model(images, generator={"kind": kind, "diffusion_steps": 3, "consistency_steps": 2,
                                            "drift_group": 2}, **extra)
    path = checkpoint.save(tmp_path / "wm", model)
    doc = json.loads(path.read_text())
    assert doc["onnx"]["files"].keys() == {"model.onnx", "encode.onnx"} and (path.parent / "model.onnx").is_file()
    wm = OnnxWorldModel(path.parent)
    cfg, rng, b = model.cfg, np.random.default_rng(1), 5
    assert wm.version == 1 and wm.noise_draws == {"regression": 0, "diffusion": 1, "consistency": 2, "drift": 1}[kind]

    obs = observations(cfg, b, rng)
    z, vec = wm.encode(obs)
    with torch.no_grad():
        want_z = model.encode(obs)
        want_vec = torch.cat([model.decode(want_z)[k] for k in cfg.vector_keys], dim=1).numpy()
    np.testing.assert_allclose(z, want_z.numpy(), rtol=0, atol=1e-4)
    np.testing.assert_allclose(vec, want_vec, rtol=0, atol=1e-4)

    K, A, lat = cfg.dynamics.history, cfg.action_dim, wm.latent_shape
    for _ in range(3):
        hist = rng.normal(0, 1, (b, K, *lat)).astype(np.float32)
        acts = rng.uniform(-1, 1, (b, K, A)).astype(np.float32)
        dom = rng.integers(0, 2, b).astype(np.int64)
        ctx_noise = rng.normal(0, 1, hist.shape).astype(np.float32) if wm.context_noise else None
        noise = rng.normal(0, 1, (b, wm.noise_draws, *lat)).astype(np.float32) if wm.noise_draws else None
        out = wm.step(hist, acts, dom, ctx_noise, noise)
        nxt, heads, dec = torch_step(model, hist, acts, dom, ctx_noise, noise)
        assert np.abs(nxt - hist[:, -1]).max() > 1e-2  # the step does something
        np.testing.assert_allclose(out["next"], nxt, rtol=0, atol=1e-4)
        for k in ("reward", "success", "done"):
            np.testing.assert_allclose(out[k], heads[k], rtol=0, atol=1e-4)
        np.testing.assert_allclose(out["vector"], dec, rtol=0, atol=1e-4)
        if cfg.previous_frame:  # the repeated values are the last frame's, exactly, in the export too
            with torch.no_grad():
                last = model.decode(torch.from_numpy(hist[:, -1]))
            start = dict(zip(cfg.vector_keys, np.cumsum([0, *cfg.vector_keys.values()])))
            for k, (at, of, n) in cfg.previous_frame.items():
                np.testing.assert_allclose(out["vector"][:, start[k] + at : start[k] + at + n], last[k][:, of : of + n],
                                           rtol=0, atol=1e-4)
    if len(model.quat_at):  # q and -q in an earlier frame of the history (what the bridge's search may hold): one step
        at = model.quat_at.numpy()
        scale = (model.lat_std * model.vec_std).detach().numpy()[at][..., None, None]
        shift = (model.lat_mean * model.vec_std + model.vec_mean).detach().numpy()[at][..., None, None]
        flipped = hist.copy()
        flipped[:, 0, at] = (-(hist[:, 0, at] * scale + shift) - shift) / scale
        assert np.abs(flipped - hist).max() > 1e-2
        again = wm.step(flipped, acts, dom, ctx_noise, noise)
        np.testing.assert_allclose(again["next"], out["next"], rtol=0, atol=1e-4)
        np.testing.assert_allclose(torch_step(model, flipped, acts, dom, ctx_noise, noise)[0], nxt, rtol=0, atol=1e-4)
    if noise is not None:  # the noise inputs are used (and each draw where the sampler takes it)
        other = wm.step(hist, acts, dom, ctx_noise, noise[:, ::-1].copy() + 1.0)
        assert np.abs(other["next"] - out["next"]).max() > 1e-4


def test_the_calibrated_thresholds_travel_with_the_export(tmp_path):
    model = random_model()
    model.cfg.heads.success_threshold, model.cfg.heads.done_threshold = 0.37, 0.81
    wm = OnnxWorldModel(checkpoint.save(tmp_path / "wm", model).parent)
    assert (wm.success_threshold, wm.done_threshold) == (0.37, 0.81)


def test_missing_damaged_or_old_exports_are_refused_with_their_cause(tmp_path):
    vdir = checkpoint.save(tmp_path / "wm", random_model()).parent
    OnnxWorldModel(vdir)
    onnx_bytes = (vdir / "model.onnx").read_bytes()
    (vdir / "model.onnx").write_bytes(onnx_bytes[:-10])
    with pytest.raises(CheckpointCorruptError, match="sha256"):
        OnnxWorldModel(vdir)
    (vdir / "model.onnx").unlink()
    with pytest.raises(CheckpointError, match="model.onnx is missing"):
        OnnxWorldModel(vdir)
    doc = json.loads((vdir / "model.json").read_text())
    del doc["onnx"]
    (vdir / "model.json").write_text(json.dumps(doc))
    with pytest.raises(CheckpointError, match="older WorldSample"):
        OnnxWorldModel(vdir)
    with pytest.raises(CheckpointError, match="model.json is missing"):
        OnnxWorldModel(tmp_path / "nothing")


def test_a_failed_export_keeps_the_checkpoint_and_says_why(tmp_path, monkeypatch):
    import worldsample.world_model.onnx_export as onnx_export

    def broken(*args, **kwargs):
        (args[1] / "model.onnx").write_bytes(b"half")
        raise RuntimeError("unsupported operator")

    monkeypatch.setattr(onnx_export, "export_world_model", broken)
    path = checkpoint.save(tmp_path / "wm", random_model())
    assert not list(path.parent.glob("*.onnx"))
    checkpoint.load(path)  # the torch checkpoint is intact
    with pytest.raises(CheckpointError, match="failed when the version was saved.*unsupported operator"):
        OnnxWorldModel(path.parent)


def test_the_robot_layout_is_checked(tmp_path):
    wm = OnnxWorldModel(checkpoint.save(tmp_path / "wm", random_model(images=True)).parent)
    robot = {"image_corner": (16, 16, 3), "proprio": (4,), "state": (7,), "wrench": (6,)}
    wm.check_layout(robot, action_dim=4)  # extra robot streams are fine
    with pytest.raises(CheckpointMismatchError, match=r"reads state of shape \(7,\); the robot has \(39,\)"):
        wm.check_layout(robot | {"state": (39,)}, action_dim=4)
    with pytest.raises(CheckpointMismatchError, match="the robot has no such observation"):
        wm.check_layout({k: v for k, v in robot.items() if k != "proprio"}, action_dim=4)
    with pytest.raises(CheckpointMismatchError, match="image_corner"):
        wm.check_layout(robot | {"image_corner": (32, 32, 3)}, action_dim=4)
    with pytest.raises(CheckpointMismatchError, match="takes 4 actions, the robot 7"):
        wm.check_layout(robot, action_dim=7)
