"""A world-model version's ONNX export (onnx_export.py) run by onnxruntime on one thread, without
torch: what the bridge's Best-of-N search imagines with (robot_bridge/core/search.py).

    wm = OnnxWorldModel(RUN / "world_model" / "v000003")
    wm.check_layout({"proprio": (4,), "state": (39,)}, action_dim=4)   # the robot's observations
    z, vec = wm.encode({"proprio": p, "state": s})                      # (B, C, g, g), (B, D)
    out = wm.step(history, actions, domain)                             # next, reward, success, done, vector

Opening checks, each failure a CheckpointError that says what to do: model.json is a world-model
checkpoint, it has an ONNX export (an export that failed at save time says why), the files exist
with the sha256 model.json records, onnxruntime opens them, and their inputs and outputs are the
ones the checkpoint's config implies. The success and done thresholds are the calibrated ones saved
in model.json's config.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path

import numpy as np
from pydantic import ValidationError

from worldsample.onnxrt import cpu_session
from worldsample.world_model.config import WorldModelConfig
from worldsample.world_model.errors import CheckpointCorruptError, CheckpointError, CheckpointMismatchError

STEP_FILE, ENCODE_FILE = "model.onnx", "encode.onnx"  # what onnx_export.py writes
ONNX_FORMAT = "worldsample-world-model-onnx"


def _session(path: Path, threads: int):
    return cpu_session(path, threads, CheckpointError, CheckpointCorruptError)


class OnnxWorldModel:
    def __init__(self, version_dir: Path | str, threads: int = 1):
        self.dir = Path(version_dir)
        doc_path = self.dir / "model.json"
        try:
            doc = json.loads(doc_path.read_text())
            self.cfg = WorldModelConfig.model_validate(doc["config"])
            self.version = int(doc["version"])
        except FileNotFoundError:
            raise CheckpointError(f"{doc_path} is missing: no world-model version in {self.dir}") from None
        except (ValueError, KeyError, TypeError, ValidationError) as e:
            raise CheckpointMismatchError(f"{doc_path} is not a readable world-model checkpoint: {e}") from None
        info = doc.get("onnx") or {}
        if "error" in info:
            raise CheckpointError(f"world model v{self.version} has no ONNX export: it failed when the version was "
                                  f"saved ({info['error']})")
        if info.get("format") != ONNX_FORMAT or set(info.get("files", {})) != {STEP_FILE, ENCODE_FILE}:
            raise CheckpointError(f"world model v{self.version} ({self.dir}) has no ONNX export (model.onnx, "
                                  "encode.onnx); it was saved by an older WorldSample: train a new version")
        for name, sha in info["files"].items():
            f = self.dir / name
            if not f.is_file():
                raise CheckpointError(f"{f} is missing (model.json lists it): the version is incomplete")
            if hashlib.sha256(f.read_bytes()).hexdigest() != sha:
                raise CheckpointCorruptError(f"{f} does not match the sha256 in model.json: modified or truncated")
        self.noise_draws = int(info.get("noise_draws", 0))
        self._encode = _session(self.dir / ENCODE_FILE, threads)
        self._step = _session(self.dir / STEP_FILE, threads)
        c = self.cfg
        self.history, self.action_dim = c.dynamics.history, c.action_dim
        self.latent_shape = (c.latent_channels, c.latent_grid, c.latent_grid)
        self.context_noise = c.dynamics.context_noise_infer
        self.stochastic = self.noise_draws > 0 or self.context_noise > 0
        self.residual = c.autoencoder.residual_decode
        self.success_threshold, self.done_threshold = c.heads.success_threshold, c.heads.done_threshold
        self.vector_keys = dict(c.vector_keys)
        self._check_graphs()

    def _check_graphs(self) -> None:
        c, K, A, lat = self.cfg, self.history, self.action_dim, list(self.latent_shape)
        want_enc = {k: [c.image_size, c.image_size, 3] for k in c.image_keys}
        want_enc |= {k: [n] for k, n in c.vector_keys.items()}
        want_step = {"history": [K, *lat], "actions": [K, A], "domain": []}
        if self.context_noise:
            want_step["context_noise"] = [K, *lat]
        if self.noise_draws:
            want_step["noise"] = [self.noise_draws, *lat]
        for name, sess, want in [(ENCODE_FILE, self._encode, want_enc), (STEP_FILE, self._step, want_step)]:
            have = {i.name: list(i.shape)[1:] for i in sess.get_inputs()}
            if have != want:
                raise CheckpointMismatchError(f"{self.dir / name} takes {have}; its model.json implies {want}")
        outs = {o.name for o in self._step.get_outputs()}
        want_out = {"next", "reward", "success", "done"} | ({"vector"} if c.vector_keys else set())
        if outs != want_out:
            raise CheckpointMismatchError(f"{self.dir / STEP_FILE} outputs {sorted(outs)}, expected {sorted(want_out)}")

    def check_layout(self, specs: Mapping[str, tuple[int, ...]], action_dim: int) -> None:
        """Raise CheckpointMismatchError unless the robot observes every key the model reads, with its
        shape, and takes the model's action size."""
        c = self.cfg
        want = {k: (c.image_size, c.image_size, 3) for k in c.image_keys} | {k: (n,) for k, n in c.vector_keys.items()}
        for key, shape in want.items():
            have = specs.get(key)
            if have is None or (int(np.prod(have)) != shape[0] if len(shape) == 1 else tuple(have) != shape):
                raise CheckpointMismatchError(
                    f"world model v{self.version} reads {key} of shape {shape}; the robot has "
                    f"{tuple(have) if have is not None else 'no such observation'} (its observations: "
                    f"{ {k: tuple(v) for k, v in specs.items()} }): train the world model on this robot's data")
        if action_dim != self.action_dim:
            raise CheckpointMismatchError(f"world model v{self.version} takes {self.action_dim} actions, the robot "
                                          f"{action_dim}")

    @property
    def keys(self) -> list[str]:
        return [*self.cfg.image_keys, *self.cfg.vector_keys]

    def encode(self, obs: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray | None]:
        """Observations key -> (B, ...) to normalised latents (B, C, g, g) and their decoded vectors (B, D)."""
        feed = {k: np.ascontiguousarray(obs[k], np.uint8) for k in self.cfg.image_keys}
        b = len(obs[self.keys[0]])
        feed |= {k: np.asarray(obs[k], np.float32).reshape(b, n) for k, n in self.vector_keys.items()}
        out = self._encode.run(None, feed)
        return out[0], (out[1] if self.vector_keys else None)

    def step(self, history: np.ndarray, actions: np.ndarray, domain: np.ndarray,
             context_noise: np.ndarray | None = None, noise: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """history (B, K, C, g, g), actions (B, K, A) ending with the action to take, domain int64 (B,);
        the noise inputs as the module docstring says. Returns next, reward, success, done (and vector)."""
        feed = {"history": np.asarray(history, np.float32), "actions": np.asarray(actions, np.float32),
                "domain": np.asarray(domain, np.int64)}
        if self.context_noise:
            feed["context_noise"] = np.asarray(context_noise, np.float32)
        if self.noise_draws:
            feed["noise"] = np.asarray(noise, np.float32)
        names = [o.name for o in self._step.get_outputs()]
        return dict(zip(names, self._step.run(names, feed), strict=True))
