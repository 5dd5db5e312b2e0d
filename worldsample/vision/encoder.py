"""The pixel encoder: one small conv trunk per camera, then Linear -> LayerNorm -> tanh to a
latent vector of `latent_dim` (the SAC-AE / DrQ encoder, sized for 64x64 frames on one CPU core).

Input: per camera a uint8 (B, H, W, 3) batch, top row first, as the store, the simulated arm and
the bridge hold frames; scaling to [-0.5, 0.5] and the move to channels-first happen inside the
module, so the exported ONNX file takes the frames as they come. Output: float32 (B, latent_dim)
in [-1, 1].

A checkpoint is a directory with `encoder.json` (EncoderConfig) and `encoder.safetensors`
(float32 tensors named as in `Encoder.state_dict()`); loading validates both and unpickles nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from pydantic import BaseModel, ConfigDict, Field, model_validator
from torch import nn

from worldsample.errors import WorldSampleError
from worldsample.policy.onnx_actor import ENCODER_FILE
from worldsample.vision.checkpoint import load_module, save_module

CONFIG_FILE, TENSORS_FILE = ENCODER_FILE, "encoder.safetensors"


class VisionError(WorldSampleError):
    """An encoder checkpoint is missing or malformed, or frames do not fit the encoder."""


def image_key(camera: str) -> str:
    """The observation key of a camera's frames (`image_<camera>`), as in the store and the bridge."""
    return f"image_{camera}"


class EncoderConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Literal["worldsample-encoder"] = "worldsample-encoder"
    format_version: Literal[1] = 1
    cameras: list[str] = Field(min_length=1, max_length=8, description="camera names; inputs in this order")
    height: int = Field(64, ge=8, le=1024)
    width: int = Field(64, ge=8, le=1024)
    latent_dim: int = Field(50, gt=0, le=4096)
    channels: list[int] = Field(default=[32, 32, 32, 32], min_length=1, max_length=8)
    strides: list[int] = Field(default=[2, 2, 1, 1], min_length=1, max_length=8)
    kernel: int = Field(3, ge=1, le=11)
    source: dict[str, Any] = Field(default_factory=dict, description="provenance (data, steps, losses)")

    @model_validator(mode="after")
    def _check(self) -> EncoderConfig:
        for c in self.cameras:
            if not c or not all(ch.isalnum() or ch == "_" for ch in c):
                raise ValueError(f"camera name {c!r} must be letters, digits and _")
        if len(set(self.cameras)) != len(self.cameras):
            raise ValueError(f"cameras repeat: {self.cameras}")
        if len(self.channels) != len(self.strides):
            raise ValueError("channels and strides need one entry per conv layer")
        if any(c <= 0 for c in self.channels) or any(s <= 0 for s in self.strides):
            raise ValueError("channels and strides must be positive")
        h, w = self.feature_hw
        if h <= 0 or w <= 0:
            raise ValueError(f"{self.height}x{self.width} frames are too small for these conv layers")
        return self

    @property
    def feature_hw(self) -> tuple[int, int]:
        h, w = self.height, self.width
        for s in self.strides:
            h, w = (h - self.kernel) // s + 1, (w - self.kernel) // s + 1
        return h, w

    @property
    def keys(self) -> list[str]:
        return [image_key(c) for c in self.cameras]


class Encoder(nn.Module):
    def __init__(self, config: EncoderConfig):
        super().__init__()
        self.config = config
        self.trunks = nn.ModuleList()
        for _ in config.cameras:
            layers: list[nn.Module] = []
            c_in = 3
            for c, s in zip(config.channels, config.strides, strict=True):
                layers += [nn.Conv2d(c_in, c, config.kernel, stride=s), nn.ReLU()]
                c_in = c
            self.trunks.append(nn.Sequential(*layers))
        h, w = config.feature_hw
        self.fc = nn.Linear(len(config.cameras) * config.channels[-1] * h * w, config.latent_dim)
        self.norm = nn.LayerNorm(config.latent_dim)

    def forward(self, *images: torch.Tensor) -> torch.Tensor:
        """uint8 (or 0..255 float) (B, H, W, 3) frames, one per camera in `config.cameras` order."""
        if len(images) != len(self.trunks):
            raise VisionError(f"encoder takes {len(self.trunks)} camera(s) {self.config.cameras}, got {len(images)}")
        feats = []
        for trunk, img in zip(self.trunks, images, strict=True):
            x = img.permute(0, 3, 1, 2).to(torch.float32) / 255.0 - 0.5
            feats.append(trunk(x).flatten(1))
        return torch.tanh(self.norm(self.fc(torch.cat(feats, dim=1))))

    def encode(self, frames: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """The latent of a batch given as {`image_<cam>`: (B, H, W, 3)}; other keys are ignored."""
        return self(*(frames[k] for k in self.config.keys))


def save_encoder(encoder: Encoder, directory: Path | str) -> Path:
    """Write `encoder.json` and `encoder.safetensors` into `directory` (each replaced atomically)."""
    return save_module(encoder, encoder.config, directory, "encoder")


def load_encoder(directory: Path | str) -> Encoder:
    """The encoder saved in `directory`, in eval mode; VisionError says what is missing or wrong."""
    return load_module(directory, "encoder", EncoderConfig, Encoder, VisionError, "encoder checkpoint")


def encode_frames(
    encoder: Encoder, frames: Mapping[str, np.ndarray], batch_size: int = 256
) -> np.ndarray:
    """Latents (N, latent_dim) float32 of N frames per camera given as {`image_<cam>`: (N, H, W, 3) uint8},
    in batches of `batch_size` without gradients; a single frame per camera (H, W, 3) gives (latent_dim,).
    Keys other than the encoder's cameras are ignored, so a whole observation dict can be passed."""
    cfg = encoder.config
    want = (cfg.height, cfg.width, 3)
    arrays, single = [], None
    for k in cfg.keys:
        if k not in frames:
            raise VisionError(f"encoder wants {k} ({cfg.height}x{cfg.width}x3 uint8); given {sorted(frames)}")
        a = np.asarray(frames[k])
        one = a.ndim == 3
        if one:
            a = a[None]
        if a.dtype != np.uint8 or a.shape[1:] != want:
            raise VisionError(f"{k} is {a.dtype} {a.shape[1:]} per frame, the encoder wants uint8 {want}")
        if single is not None and (one != single or len(a) != len(arrays[0])):
            raise VisionError(f"cameras {cfg.keys} hold different numbers of frames")
        single = one
        arrays.append(a)
    n = len(arrays[0])
    out = np.empty((n, cfg.latent_dim), np.float32)
    was_training = encoder.training
    encoder.eval()
    try:
        with torch.no_grad():
            for lo in range(0, n, batch_size):
                batch = [torch.from_numpy(np.ascontiguousarray(a[lo : lo + batch_size])) for a in arrays]
                out[lo : lo + batch_size] = encoder(*batch).numpy()
    finally:
        encoder.train(was_training)
    return out[0] if single else out
