"""Run an exported pixel policy (`policy.onnx`, see worldsample/policy/onnx_export.py) with
onnxruntime on one CPU thread: the robot PC needs neither torch nor Ray.

The file's inputs are checked when it is opened (uint8 `image_<cam>` (1, H, W, 3) frames and
float32 (1, dim) vectors; an `action` (1, A) output), against the policy's config.json when one is
given, and against the robot's observation shapes by `check_obs`; every mismatch is a PolicyError
that names the input, what the file wants and what the robot has.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from worldsample.onnxrt import cpu_session
from worldsample.policy.config import PolicyConfig
from worldsample.policy.errors import PolicyError

ONNX_FILE = "policy.onnx"
ENCODER_FILE = "encoder.json"  # the encoder checkpoint publish_vision_policy writes beside it (vision/encoder.py)
ONNX_FORMAT = "worldsample-policy-onnx"


class OnnxActor:
    def __init__(
        self,
        path: Path | str,
        config: PolicyConfig | None = None,
        expect: Mapping[str, tuple[int, ...]] | None = None,
        threads: int = 1,
    ):
        """Open `path`; with `config` (the version's config.json) check that the file fits it, with
        `expect` (observation key -> shape, e.g. the robot profile's) run `check_obs(expect)`."""
        self.path = Path(path)
        if not self.path.is_file():
            raise PolicyError(f"policy file {self.path} is missing: export the pixel policy to ONNX first "
                              "(worldsample.policy.onnx_export.publish_vision_policy)")
        self._session = cpu_session(self.path, threads, PolicyError, PolicyError)
        self.meta = dict(self._session.get_modelmeta().custom_metadata_map)
        if self.meta.get("format") != ONNX_FORMAT:
            fmt = self.meta.get("format")
            raise PolicyError(f"{self.path} is not a WorldSample pixel policy (metadata format={fmt!r})")
        self.images: dict[str, tuple[int, int, int]] = {}  # image_<cam> -> (H, W, 3)
        self.vectors: dict[str, int] = {}  # key -> dim
        for i in self._session.get_inputs():
            shape = list(i.shape)
            if not all(isinstance(d, int) for d in shape) or not shape or shape[0] != 1:
                raise PolicyError(f"{self.path}: input {i.name} has shape {shape}; expected a fixed batch of 1")
            if i.name.startswith("image_"):
                if i.type != "tensor(uint8)" or len(shape) != 4 or shape[3] != 3:
                    raise PolicyError(f"{self.path}: camera input {i.name} is {i.type} {shape}, expected uint8 "
                                      "(1, H, W, 3)")
                self.images[i.name] = (shape[1], shape[2], 3)
            elif i.type == "tensor(float)" and len(shape) == 2:
                self.vectors[i.name] = shape[1]
            else:
                raise PolicyError(f"{self.path}: input {i.name} is {i.type} {shape}, expected float32 (1, dim)")
        if not self.images:
            raise PolicyError(f"{self.path} takes no camera input")
        outputs = {o.name: list(o.shape) for o in self._session.get_outputs()}
        if "action" not in outputs or len(outputs["action"]) != 2 or not isinstance(outputs["action"][1], int):
            raise PolicyError(f"{self.path}: no action output of shape (1, A); outputs are {outputs}")
        self.action_dim = int(outputs["action"][1])
        self.stochastic = {"pre_tanh_mean", "log_std"} <= set(outputs)
        self._outputs = ["action", "pre_tanh_mean", "log_std"] if self.stochastic else ["action"]
        self.config = config
        self.version = config.version if config is not None else int(self.meta.get("policy_version", 0))
        if config is not None:
            self._check_config(config)
            self._low = np.asarray(config.action_low, np.float32)
            self._high = np.asarray(config.action_high, np.float32)
        if expect is not None:
            self.check_obs(expect)

    @property
    def cameras(self) -> list[str]:
        return [k[len("image_") :] for k in self.images]

    def _check_config(self, config: PolicyConfig) -> None:
        latent = self.meta.get("latent_key", "latent")
        want = {o.key: o.dim for o in config.obs if o.key != latent}
        if want != self.vectors:
            raise PolicyError(f"{self.path} takes vectors {self.vectors}; its config.json says {want} "
                              f"(besides {latent!r})")
        if config.action_dim != self.action_dim:
            raise PolicyError(
                f"{self.path} outputs {self.action_dim} actions; its config.json says {config.action_dim}"
            )
        if config.stochastic != self.stochastic:
            raise PolicyError(f"{self.path}: config.json says stochastic={config.stochastic}, the file has "
                              f"{'' if self.stochastic else 'no '}log_std output")

    def check_obs(self, specs: Mapping[str, tuple[int, ...]]) -> None:
        """Raise PolicyError unless every camera of the file exists in `specs` with its exact (H, W, 3)
        and every vector input with its size. Cameras the robot has and the policy ignores are fine."""
        cams = sorted(k for k in specs if k.startswith("image_"))
        for key, hw in self.images.items():
            shape = specs.get(key)
            if shape is None:
                raise PolicyError(f"policy v{self.version} ({self.path.name}) sees camera {key} at {hw[0]}x{hw[1]}; "
                                  f"the robot has no such camera (its cameras: {cams or 'none'})")
            if tuple(shape) != hw:
                raise PolicyError(f"policy v{self.version} ({self.path.name}) wants {key} as {hw}; the robot "
                                  f"gives {tuple(shape)}: set the camera's policy size in the profile")
        for key, dim in self.vectors.items():
            shape = specs.get(key)
            if shape is None or int(np.prod(shape)) != dim:
                raise PolicyError(f"policy v{self.version} wants {key} of size {dim}; the robot has {shape}")

    def act(
        self, obs: Mapping[str, np.ndarray], explore: bool = False, rng: np.random.Generator | None = None,
        noise_scale: float = 1.0,
    ) -> np.ndarray:
        """The deterministic action (A,) float32, or with `explore` a sample of a stochastic policy, its spread
        before the squash times `noise_scale` (1: the policy's own)."""
        feed: dict[str, np.ndarray] = {}
        for key, hw in self.images.items():
            img = np.asarray(obs[key])
            if img.dtype != np.uint8 or img.shape != hw:
                raise PolicyError(f"{key} is {img.dtype} {img.shape}; policy v{self.version} wants uint8 {hw}")
            feed[key] = np.ascontiguousarray(img)[None]
        for key, dim in self.vectors.items():
            feed[key] = np.asarray(obs[key], np.float32).reshape(1, dim)
        out = self._session.run(self._outputs, feed)
        if not explore:
            return np.asarray(out[0][0], np.float32)
        if not self.stochastic or self.config is None:
            raise PolicyError(f"policy v{self.version} is deterministic; it cannot explore")
        u, log_std = out[1][0], out[2][0]
        u = u + noise_scale * np.exp(log_std) * (rng or np.random.default_rng()).standard_normal(u.shape)
        return (self._low + (np.tanh(u) + 1.0) * 0.5 * (self._high - self._low)).astype(np.float32)
