"""Export a pixel policy (frozen encoder + the registry's MLP actor) to one ONNX file the robot PC
runs with onnxruntime, without torch (worldsample/policy/onnx_actor.py).

Inputs, batch 1: `image_<cam>` uint8 (1, H, W, 3) per encoder camera, in the encoder's order, then
every vector key of the policy config other than the latent (e.g. `proprio`) as float32 (1, dim).
Outputs: `action` float32 (1, A), the deterministic action the numpy actor computes (the squashed
mean); for a stochastic policy also `pre_tanh_mean` and `log_std` (clipped to [-5, 2]), from which
the runner samples an exploratory action as the numpy actor does.

A policy version with a `policy.onnx` holds, besides it, the usual `config.json` (obs: the latent
and the vector keys) and `actor.safetensors`, and the encoder's checkpoint (`encoder.json`,
`encoder.safetensors`), so the learner side can rebuild the same module. Imports torch.
"""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import numpy as np
import torch
from torch import nn

from worldsample.policy.actor import MLPActor
from worldsample.policy.config import PolicyConfig
from worldsample.policy.errors import PolicyError
from worldsample.policy.onnx_actor import ONNX_FILE, ONNX_FORMAT
from worldsample.policy.registry import PolicyRegistry
from worldsample.vision.encoder import Encoder, save_encoder

OPSET = 17


class VisionPolicy(nn.Module):
    """frames + vector keys -> action (and, when stochastic, the pre-tanh mean and log_std)."""

    def __init__(self, encoder: Encoder, config: PolicyConfig, tensors: dict[str, np.ndarray], latent_key: str):
        super().__init__()
        keys = [o.key for o in config.obs]
        if latent_key not in keys:
            raise PolicyError(f"policy config has no {latent_key!r} input (its obs are {keys})")
        latent_dim = next(o.dim for o in config.obs if o.key == latent_key)
        if latent_dim != encoder.config.latent_dim:
            raise PolicyError(f"policy takes {latent_key} of size {latent_dim}, the encoder makes "
                              f"{encoder.config.latent_dim}")
        self.encoder = encoder.eval()
        self.actor = MLPActor.from_tensors(config, tensors).eval()
        self.config = config
        self.latent_key = latent_key
        self.camera_keys = list(encoder.config.keys)
        self.vector_keys = [k for k in keys if k != latent_key]

    @property
    def input_names(self) -> list[str]:
        return self.camera_keys + self.vector_keys

    @property
    def output_names(self) -> list[str]:
        return ["action", "pre_tanh_mean", "log_std"] if self.config.stochastic else ["action"]

    def forward(self, *inputs: torch.Tensor):
        frames, vectors = inputs[: len(self.camera_keys)], inputs[len(self.camera_keys) :]
        z = self.encoder(*frames)
        given = dict(zip(self.vector_keys, vectors, strict=True))
        x = torch.cat([z if o.key == self.latent_key else given[o.key] for o in self.config.obs], dim=1)
        a = self.actor
        h = a.features(x)
        u = a.mean(h)
        if a.log_std is None:
            return a.squash(u)
        return a.squash(u), u, torch.clamp(a.log_std(h), -5.0, 2.0)

    def example_inputs(self) -> tuple[torch.Tensor, ...]:
        c = self.encoder.config
        frames = [torch.zeros(1, c.height, c.width, 3, dtype=torch.uint8) for _ in self.camera_keys]
        dims = {o.key: o.dim for o in self.config.obs}
        return (*frames, *(torch.zeros(1, dims[k]) for k in self.vector_keys))


def export_onnx(
    encoder: Encoder, config: PolicyConfig, tensors: dict[str, np.ndarray], path: Path | str, latent_key: str = "latent"
) -> Path:
    """Write the ONNX file of encoder + actor to `path` (checked with onnx.checker)."""
    import onnx

    module = VisionPolicy(encoder, config, tensors, latent_key)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings(), torch.no_grad():
        # torch 2.13 calls the TorchScript exporter deprecated; it needs no onnxscript and exports
        # this small static graph in well under a second (the dynamo exporter takes ~10 s here)
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.onnx.export(
            module, module.example_inputs(), str(path), input_names=module.input_names,
            output_names=module.output_names, opset_version=OPSET, dynamo=False,
        )
    model = onnx.load(str(path))
    meta = {
        "format": ONNX_FORMAT,
        "policy_version": str(config.version),
        "latent_key": latent_key,
        "cameras": ",".join(encoder.config.cameras),
    }
    for k, v in meta.items():
        model.metadata_props.add(key=k, value=v)
    onnx.checker.check_model(model, full_check=True)
    tmp = path.with_name(f".{path.name}.tmp")
    onnx.save(model, str(tmp))
    tmp.replace(path)
    return path


def publish_vision_policy(
    run_dir: Path | str, encoder: Encoder, config: PolicyConfig, tensors: dict[str, np.ndarray],
    latent_key: str = "latent",
) -> int:
    """Publish the next policy version with `policy.onnx` (the bridge runs it with onnxruntime),
    config.json, actor.safetensors and the encoder checkpoint; returns the version."""

    def extra(tmp: Path, config: PolicyConfig, tensors: dict[str, np.ndarray]) -> None:
        export_onnx(encoder, config, tensors, tmp / ONNX_FILE, latent_key)
        enc_dir = save_encoder(encoder, tmp / ".encoder")
        for f in enc_dir.iterdir():
            f.replace(tmp / f.name)
        shutil.rmtree(enc_dir)

    return PolicyRegistry(run_dir).publish(config, tensors, extra=extra)
