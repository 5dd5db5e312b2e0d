"""Unit quaternions without the double cover: q and -q are the same rotation, and a pose message may
carry either (Meta-World's object quaternions, from a rotation matrix, change sign mid-episode when
the conversion switches branch). A world model fed both sees a jump of up to 2 in each component
where nothing moved. The canonical form keeps the scalar part non-negative (x, y, z, w order)."""

from __future__ import annotations

import numpy as np


def canonical_quaternions(x, starts):
    """`x` (..., d) numpy array or torch tensor with a unit quaternion (x, y, z, w) at each of `starts`:
    a copy with every quaternion whose w is negative negated. Traceable by torch.onnx (no branches)."""
    if not starts:
        return x
    is_np = isinstance(x, np.ndarray)
    out = x.copy() if is_np else x.clone()
    for s in starts:
        q = x[..., s : s + 4]
        negative = q[..., 3:4] < 0
        out[..., s : s + 4] = q * (1 - 2 * (negative.astype(x.dtype) if is_np else negative.to(x.dtype)))
    return out
