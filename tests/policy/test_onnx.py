"""Pixel policies exported to ONNX: parity with torch and the numpy actor, and the checks of the
onnxruntime runner the bridge uses (missing file, cameras that do not match, config mismatch)."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from robot_bridge.core.policy_source import PolicySource
from worldsample.policy import NumpyActor, ObsInput, PolicyConfig, PolicyError, PolicyRegistry
from worldsample.policy.onnx_actor import OnnxActor
from worldsample.policy.onnx_export import VisionPolicy, export_onnx, publish_vision_policy
from worldsample.vision import Encoder, EncoderConfig, encode_frames

ROOT = Path(__file__).resolve().parents[2]
LATENT = 24


def make(cameras, stochastic=True, size=64, seed=0):
    torch.manual_seed(seed)
    enc = Encoder(EncoderConfig(cameras=cameras, height=size, width=size, latent_dim=LATENT)).eval()
    cfg = PolicyConfig(obs=[ObsInput(key="latent", dim=LATENT), ObsInput(key="proprio", dim=4)], action_dim=4,
                       hidden=[64, 32], action_low=[-1, -2, 0, -1], action_high=[1, 2, 1, 3], stochastic=stochastic,
                       layer_norm=True, obs_normalization=True)
    rng = np.random.default_rng(seed)
    tensors = {k: rng.normal(0, 0.3, s).astype(np.float32) for k, s in cfg.tensor_shapes().items()}
    tensors["obs_std"] = np.abs(tensors["obs_std"]) + 0.5
    return enc, cfg, tensors


def observation(cameras, rng, size=64):
    obs = {f"image_{c}": rng.integers(0, 256, (size, size, 3), dtype=np.uint8) for c in cameras}
    obs["proprio"] = rng.normal(size=4).astype(np.float32)
    return obs


@pytest.mark.parametrize("cameras", [["corner"], ["corner", "gripperPOV"]])
def test_onnx_matches_torch_and_the_numpy_actor(tmp_path, cameras):
    enc, cfg, tensors = make(cameras)
    path = export_onnx(enc, cfg, tensors, tmp_path / "policy.onnx")
    ort_actor = OnnxActor(path, cfg, expect={**{f"image_{c}": (64, 64, 3) for c in cameras}, "proprio": (4,)})
    assert ort_actor.cameras == cameras and ort_actor.vectors == {"proprio": 4} and ort_actor.stochastic
    module = VisionPolicy(enc, cfg, tensors, "latent")
    numpy_actor = NumpyActor(cfg, tensors)
    rng = np.random.default_rng(1)
    for _ in range(4):
        obs = observation(cameras, rng)
        with torch.no_grad():
            want = module(*(torch.from_numpy(obs[f"image_{c}"])[None] for c in cameras),
                          torch.from_numpy(obs["proprio"])[None])[0][0].numpy()
        got = ort_actor.act(obs)
        assert got.shape == (4,) and got.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)
        # the same squashed mean the numpy actor computes from the encoder's latent
        z = encode_frames(enc, obs)
        np.testing.assert_allclose(got, numpy_actor.act({"latent": z, "proprio": obs["proprio"]}), atol=1e-5)
        # exploration draws its noise as the numpy actor does
        explored = ort_actor.act(obs, explore=True, rng=np.random.default_rng(7))
        np.testing.assert_allclose(explored, numpy_actor.act({"latent": z, "proprio": obs["proprio"]}, explore=True,
                                                             rng=np.random.default_rng(7)), atol=1e-4)
        assert not np.allclose(explored, got)
        narrow = ort_actor.act(obs, explore=True, rng=np.random.default_rng(7), noise_scale=0.3)
        np.testing.assert_allclose(narrow, numpy_actor.act({"latent": z, "proprio": obs["proprio"]}, explore=True,
                                                           rng=np.random.default_rng(7), noise_scale=0.3), atol=1e-4)
        assert np.abs(narrow - got).sum() < np.abs(explored - got).sum()


def test_runner_rejects_files_that_do_not_fit(tmp_path):
    enc, cfg, tensors = make(["corner"], stochastic=False)
    path = export_onnx(enc, cfg, tensors, tmp_path / "policy.onnx")
    with pytest.raises(PolicyError, match="missing"):
        OnnxActor(tmp_path / "nothing.onnx")
    with pytest.raises(PolicyError, match=r"image_corner.*no such camera.*image_gripperPOV"):
        OnnxActor(path, cfg, expect={"image_gripperPOV": (64, 64, 3), "proprio": (4,)})
    with pytest.raises(PolicyError, match=r"image_corner as \(64, 64, 3\).*\(480, 640, 3\)"):
        OnnxActor(path, cfg, expect={"image_corner": (480, 640, 3), "proprio": (4,)})
    with pytest.raises(PolicyError, match="proprio of size 4"):
        OnnxActor(path, cfg, expect={"image_corner": (64, 64, 3), "proprio": (7,)})
    actor = OnnxActor(path, cfg, expect={"image_corner": (64, 64, 3), "image_topview": (64, 64, 3), "proprio": (4,)})
    with pytest.raises(PolicyError, match="deterministic"):
        actor.act(observation(["corner"], np.random.default_rng(0)), explore=True)
    with pytest.raises(PolicyError, match="uint8"):
        actor.act({"image_corner": np.zeros((64, 64, 3), np.float32), "proprio": np.zeros(4, np.float32)})
    # a config.json that does not describe the file
    wide = cfg.model_copy(update={"obs": [ObsInput(key="latent", dim=LATENT), ObsInput(key="proprio", dim=7)]})
    with pytest.raises(PolicyError, match="config.json"):
        OnnxActor(path, wide)
    with pytest.raises(PolicyError, match="stochastic"):
        OnnxActor(path, cfg.model_copy(update={"stochastic": True}))
    (tmp_path / "garbage.onnx").write_bytes(b"\x08\x07not a model")
    with pytest.raises(PolicyError, match="cannot load"):
        OnnxActor(tmp_path / "garbage.onnx")
    # an ONNX file that is not one of ours
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["action"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("action", TensorProto.FLOAT, [1, 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.save(model, str(tmp_path / "other.onnx"))
    with pytest.raises(PolicyError, match="not a WorldSample pixel policy"):
        OnnxActor(tmp_path / "other.onnx")


def test_bridge_runs_a_published_pixel_policy_and_keeps_the_numpy_path(tmp_path):
    shapes = {"image_corner": (64, 64, 3), "proprio": (4,)}
    src = PolicySource(tmp_path, shapes, action_dim=4)
    enc, cfg, tensors = make(["corner"])
    assert publish_vision_policy(tmp_path, enc, cfg, tensors) == 1
    vdir = tmp_path / "policies" / "v000001"
    assert {"policy.onnx", "config.json", "actor.safetensors", "encoder.json", "encoder.safetensors"} <= {
        p.name for p in vdir.iterdir()}
    assert src.refresh() is True and isinstance(src.actor, OnnxActor) and src.version == 1
    obs = observation(["corner"], np.random.default_rng(3))
    hold = np.zeros(4, np.float32)
    np.testing.assert_array_equal(src.act(obs, hold), OnnxActor(vdir / "policy.onnx", cfg).act(obs))

    # a pixel policy for another camera is refused with the reason, the working one is kept
    other, cfg2, t2 = make(["gripperPOV"], seed=1)
    assert publish_vision_policy(tmp_path, other, cfg2, t2) == 2
    assert src.refresh() is False and src.version == 1 and "image_gripperPOV" in src.error
    # a pixel version whose onnx file went missing is refused with that reason (not as a numpy MLP
    # that wants a `latent` the robot does not have)
    publish_vision_policy(tmp_path, enc, cfg, tensors)
    (tmp_path / "policies" / "v000003" / "policy.onnx").unlink()
    assert src.refresh() is False and src.version == 1
    assert "pixel policy" in src.error and "v000003/policy.onnx is missing" in src.error

    # a state policy still runs as the numpy MLP
    state = PolicyConfig(obs=[ObsInput(key="proprio", dim=4)], action_dim=4, hidden=[8], action_low=[-1] * 4,
                         action_high=[1] * 4)
    PolicyRegistry(tmp_path).publish(state, {k: np.full(s, 0.1, np.float32) for k, s in state.tensor_shapes().items()})
    assert src.refresh() is True and isinstance(src.actor, NumpyActor) and src.version == 4


def test_the_robot_side_runs_the_onnx_policy_without_torch(tmp_path):
    enc, cfg, tensors = make(["corner"])
    publish_vision_policy(tmp_path, enc, cfg, tensors)
    code = (
        "import sys, numpy as np\n"
        "from robot_bridge.core.policy_source import PolicySource\n"
        f"src = PolicySource({str(tmp_path)!r}, {{'image_corner': (64, 64, 3), 'proprio': (4,)}}, 4)\n"
        "assert src.refresh(), src.error\n"
        "a = src.act({'image_corner': np.zeros((64, 64, 3), np.uint8), 'proprio': np.zeros(4, np.float32)}, None)\n"
        "assert a.shape == (4,) and np.isfinite(a).all()\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('torch', 'ray', 'onnx')\n"
        "       or m.startswith('worldsample.vision')]\n"
        "assert not bad, bad\n"
        "print(type(src.actor).__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=120, capture_output=True,
                         text=True)
    assert out.stdout.strip() == "OnnxActor"
