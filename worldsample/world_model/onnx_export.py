"""Export a world model to ONNX, for imagination without torch (the bridge's Best-of-N search,
robot_bridge/core/search.py, runs it with onnxruntime: worldsample/world_model/onnx_model.py).

Two files beside the checkpoint's tensors, any batch size B:

    encode.onnx  observations -> `latent` (B, C, g, g), normalised as the model's `encode` gives it,
                 and `vector` (B, D): that latent decoded back to the vector keys (the reference a
                 residual decode subtracts). Inputs: `image_<cam>` uint8 (B, H, W, 3) per image key,
                 then each vector key float32 (B, d), in the config's order.
    model.onnx   one step of dynamics as imagination takes it (`WorldModel.predict`): `history`
                 (B, K, C, g, g) latents, oldest first; `actions` (B, K, A), the last one the action to
                 take; `domain` int64 (B,); with context noise at imagination time `context_noise`
                 (B, K, C, g, g), added to the history times `context_noise_infer`; for a stochastic
                 generator `noise` (B, P, C, g, g), the P standard-normal draws its sampler takes (every
                 member's, with `dynamics.predict: mean`), in the order it takes them. Outputs:
                 `next` (B, C, g, g), `reward`, `success` and `done` probabilities (B,), and `vector`
                 (B, D), `next` decoded to the vector keys (absent without vector keys; images are not
                 decoded).

`WorldModel.predict` with the same noise gives the same outputs (tests/world_model/test_onnx.py).
The exporter is torch's TorchScript one (dynamo=False, as worldsample/policy/onnx_export.py),
opset 17; files carry IR 8, which onnxruntime 1.31 reads. Imports torch.
"""

from __future__ import annotations

import copy
import hashlib
import json
import warnings
from pathlib import Path

import torch
from torch import nn

from worldsample.world_model.model import WorldModel
from worldsample.world_model.onnx_model import ENCODE_FILE, ONNX_FORMAT, STEP_FILE

OPSET = 17
ONNX_FORMAT_VERSION = 1


def _vectors(model: WorldModel, z: torch.Tensor) -> torch.Tensor:
    """Normalised latents -> the decoded vector keys, concatenated in the config's order."""
    out = model.decode(z)
    return torch.cat([out[k] for k in model.cfg.vector_keys], dim=1)


class EncodeGraph(nn.Module):
    def __init__(self, model: WorldModel):
        super().__init__()
        self.model = model

    def forward(self, *inputs: torch.Tensor):
        cfg = self.model.cfg
        obs = dict(zip([*cfg.image_keys, *cfg.vector_keys], inputs, strict=True))
        images = {k: obs[k].permute(0, 3, 1, 2).float() / 127.5 - 1 for k in cfg.image_keys}
        vector = None
        if cfg.vector_keys:
            vector = (self.model.vector_cat(obs) - self.model.vec_mean) / self.model.vec_std
        raw = self.model.ae.encode(images, vector)
        z = (raw - self.model.lat_mean[:, None, None]) / self.model.lat_std[:, None, None]
        return (z, _vectors(self.model, z)) if cfg.vector_keys else z


class StepGraph(nn.Module):
    def __init__(self, model: WorldModel, draws: int):
        super().__init__()
        self.model, self.draws = model, draws
        self.context_noise = model.cfg.dynamics.context_noise_infer

    def forward(self, history: torch.Tensor, actions: torch.Tensor, domain: torch.Tensor, *noise: torch.Tensor):
        noise = list(noise)
        if self.context_noise:
            history = history + self.context_noise * noise.pop(0)
        draws = iter(range(self.draws))
        gen = noise[0] if self.draws else None
        nxt, heads, _ = self.model.predict(history, actions, domain, lambda shape: gen[:, next(draws)])
        out = (nxt, heads["reward"], heads["success"], heads["done"])
        return (*out, _vectors(self.model, nxt)) if self.model.cfg.vector_keys else out


def noise_draws(model: WorldModel) -> int:
    """How many standard-normal tensors one step of the model's sampler draws."""
    cfg = model.cfg
    calls = [0]

    def count(shape):
        calls[0] += 1
        return torch.zeros(shape)

    g = cfg.latent_grid
    with torch.no_grad():
        model.predict(torch.zeros(1, cfg.dynamics.history, cfg.latent_channels, g, g),
                      torch.zeros(1, cfg.dynamics.history, cfg.action_dim), torch.zeros(1, dtype=torch.long), count)
    return calls[0]


def _export(module: nn.Module, args: tuple, names: list[str], outputs: list[str], path: Path, meta: dict) -> None:
    import onnx

    with warnings.catch_warnings(), torch.no_grad():
        # the TorchScript exporter is deprecated in torch 2.13 but needs no onnxscript; tracing warns
        # about Python loops over tensors (the sampler's noise levels), which it unrolls as constants
        warnings.simplefilter("ignore")
        torch.onnx.export(module, args, str(path), input_names=names, output_names=outputs, opset_version=OPSET,
                          dynamo=False, dynamic_axes={n: {0: "batch"} for n in [*names, *outputs]})
    proto = onnx.load(str(path))
    for k, v in meta.items():
        proto.metadata_props.add(key=k, value=v)
    onnx.checker.check_model(proto, full_check=True)
    onnx.save(proto, str(path))


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def export_world_model(model: WorldModel, directory: Path | str, version: int) -> dict:
    """Write encode.onnx and model.onnx into `directory`; returns what model.json records of them."""
    directory = Path(directory)
    model = copy.deepcopy(model).cpu().eval()
    cfg, b = model.cfg, 2
    K, C, g, A = cfg.dynamics.history, cfg.latent_channels, cfg.latent_grid, cfg.action_dim
    draws = noise_draws(model) if model.generator.stochastic else 0
    meta = {
        "format": ONNX_FORMAT,
        "format_version": str(ONNX_FORMAT_VERSION),
        "wm_version": str(version),
        "config": json.dumps(cfg.model_dump(mode="json")),
        "noise_draws": str(draws),
    }
    obs_in = [torch.zeros(b, cfg.image_size, cfg.image_size, 3, dtype=torch.uint8) for _ in cfg.image_keys]
    obs_in += [torch.zeros(b, n) for n in cfg.vector_keys.values()]
    vec_out = ["vector"] if cfg.vector_keys else []
    _export(EncodeGraph(model), tuple(obs_in), [*cfg.image_keys, *cfg.vector_keys], ["latent", *vec_out],
            directory / ENCODE_FILE, meta)
    step_in = [torch.zeros(b, K, C, g, g), torch.zeros(b, K, A), torch.zeros(b, dtype=torch.long)]
    names = ["history", "actions", "domain"]
    if cfg.dynamics.context_noise_infer:
        step_in.append(torch.zeros(b, K, C, g, g))
        names.append("context_noise")
    if draws:
        step_in.append(torch.zeros(b, draws, C, g, g))
        names.append("noise")
    _export(StepGraph(model, draws), tuple(step_in), names, ["next", "reward", "success", "done", *vec_out],
            directory / STEP_FILE, meta)
    return {
        "format": ONNX_FORMAT,
        "format_version": ONNX_FORMAT_VERSION,
        "opset": OPSET,
        "noise_draws": draws,
        "files": {name: _sha256(directory / name) for name in (STEP_FILE, ENCODE_FILE)},
    }
