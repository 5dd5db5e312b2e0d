"""Random shift (DrQ): pad a frame by `pad` pixels repeating its border, then crop a random window
of the original size, independently per frame. Done by index gathering, so any dtype (uint8
frames included) is kept and the result equals pad + crop exactly."""

from __future__ import annotations

import torch


def random_shift(frames: torch.Tensor, pad: int = 4, generator: torch.Generator | None = None) -> torch.Tensor:
    """Shift each frame of a (B, H, W, C) batch by a random integer offset in [-pad, pad] on each axis,
    repeating the border pixels; same shape and dtype. `pad=0` returns the batch unchanged."""
    if frames.ndim != 4:
        raise ValueError(f"random_shift wants a (B, H, W, C) batch, got shape {tuple(frames.shape)}")
    if pad < 0:
        raise ValueError(f"pad must be >= 0, got {pad}")
    if pad == 0:
        return frames
    b, h, w, _ = frames.shape
    dev = frames.device
    dy = torch.randint(-pad, pad + 1, (b, 1), generator=generator, device=dev)
    dx = torch.randint(-pad, pad + 1, (b, 1), generator=generator, device=dev)
    rows = (torch.arange(h, device=dev)[None, :] + dy).clamp_(0, h - 1)  # (B, H)
    cols = (torch.arange(w, device=dev)[None, :] + dx).clamp_(0, w - 1)  # (B, W)
    batch = torch.arange(b, device=dev)[:, None, None]
    return frames[batch, rows[:, :, None], cols[:, None, :]]
