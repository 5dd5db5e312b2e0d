"""The pixel encoder: random shift, checkpoints without pickle, batched encoding."""

import json

import numpy as np
import pytest
import torch

from worldsample.vision import Encoder, EncoderConfig, VisionError, encode_frames, load_encoder, save_encoder
from worldsample.vision.augment import random_shift


@pytest.mark.parametrize("dtype", [torch.uint8, torch.float32])
def test_random_shift_keeps_shape_and_dtype_and_is_a_padded_crop(dtype):
    pad, b, h, w = 2, 32, 8, 9
    x = torch.randint(0, 256, (b, h, w, 3)).to(dtype)
    y = random_shift(x, pad, torch.Generator().manual_seed(0))
    assert y.shape == x.shape and y.dtype == x.dtype
    padded = np.pad(x.numpy(), ((0, 0), (pad, pad), (pad, pad), (0, 0)), mode="edge")
    offsets = []
    for i in range(b):
        found = [(dy, dx) for dy in range(2 * pad + 1) for dx in range(2 * pad + 1)
                 if np.array_equal(padded[i, dy : dy + h, dx : dx + w], y[i].numpy())]
        assert found, f"frame {i} is not a crop of the edge-padded frame"
        offsets.append(found[0])
    assert len(set(offsets)) > 5  # offsets drawn per frame, not one for the batch
    assert random_shift(x, 0) is x
    with pytest.raises(ValueError, match="B, H, W, C"):
        random_shift(x[0], pad)


def test_encoder_shapes_and_range():
    cfg = EncoderConfig(cameras=["corner", "gripperPOV"], latent_dim=16)
    enc = Encoder(cfg).eval()
    a, b = (torch.randint(0, 256, (5, 64, 64, 3), dtype=torch.uint8) for _ in range(2))
    with torch.no_grad():
        z = enc(a, b)
        assert z.shape == (5, 16) and z.dtype == torch.float32 and z.abs().max() <= 1.0
        assert not torch.allclose(enc(a, b), enc(a, torch.zeros_like(b)))  # the second camera matters
    with pytest.raises(VisionError, match="2 camera"):
        enc(a)
    with pytest.raises(ValueError, match="too small"):
        EncoderConfig(cameras=["corner"], height=8, width=8)
    with pytest.raises(ValueError, match="repeat"):
        EncoderConfig(cameras=["corner", "corner"])


def test_checkpoint_round_trip_without_pickle(tmp_path):
    enc = Encoder(EncoderConfig(cameras=["corner"], height=32, width=32, latent_dim=8, channels=[8, 8], strides=[2, 1]))
    d = save_encoder(enc, tmp_path / "enc")
    assert sorted(p.name for p in d.iterdir()) == ["encoder.json", "encoder.safetensors"]
    back = load_encoder(d)
    assert back.config == enc.config and not back.training
    x = torch.randint(0, 256, (3, 32, 32, 3), dtype=torch.uint8)
    with torch.no_grad():
        torch.testing.assert_close(back(x), enc.eval()(x), rtol=0, atol=0)

    # a torch pickle in place of the safetensors file is refused, not unpickled
    torch.save(enc.state_dict(), d / "encoder.safetensors")
    with pytest.raises(VisionError, match="cannot read"):
        load_encoder(d)
    save_encoder(enc, d)
    cfg = json.loads((d / "encoder.json").read_text())
    (d / "encoder.json").write_text(json.dumps({**cfg, "latent_dim": 9}))
    with pytest.raises(VisionError, match="does not match"):
        load_encoder(d)
    (d / "encoder.json").write_text(json.dumps({**cfg, "evil": 1}))
    with pytest.raises(VisionError, match="invalid"):
        load_encoder(d)
    with pytest.raises(VisionError, match="no encoder checkpoint"):
        load_encoder(tmp_path / "nothing")


def test_encode_frames_batches_and_checks_inputs():
    enc = Encoder(EncoderConfig(cameras=["corner", "topview"], height=32, width=32, latent_dim=8))
    rng = np.random.default_rng(0)
    frames = {f"image_{c}": rng.integers(0, 256, (70, 32, 32, 3), dtype=np.uint8) for c in ("corner", "topview")}
    frames["proprio"] = np.zeros((70, 4), np.float32)  # other keys are ignored
    z = encode_frames(enc, frames, batch_size=16)
    with torch.no_grad():
        want = enc.eval()(*(torch.from_numpy(frames[k]) for k in ("image_corner", "image_topview"))).numpy()
    assert z.shape == (70, 8) and z.dtype == np.float32
    np.testing.assert_allclose(z, want, rtol=1e-5, atol=1e-5)
    one = encode_frames(enc, {k: v[3] for k, v in frames.items()})
    assert one.shape == (8,)
    np.testing.assert_allclose(one, want[3], rtol=1e-5, atol=1e-5)
    with pytest.raises(VisionError, match="image_topview"):
        encode_frames(enc, {"image_corner": frames["image_corner"]})
    with pytest.raises(VisionError, match="uint8"):
        encode_frames(enc, {"image_corner": frames["image_corner"][:, :16], "image_topview": frames["image_topview"]})
    with pytest.raises(VisionError, match="different numbers"):
        encode_frames(enc, {"image_corner": frames["image_corner"][:5], "image_topview": frames["image_topview"]})
