"""Unit quaternions without the double cover: q and -q are the same rotation, and a pose message may
carry either (Meta-World's object quaternions, from a rotation matrix, change sign mid-episode when
the conversion switches branch). A world model fed both sees a jump of up to 2 in each component
where nothing moved.

No choice of sign per frame is continuous everywhere: the canonical form (scalar part w >= 0, x, y,
z, w order) is unique, but an object turned through half a turn (w crossing 0) jumps from q to
about -q in one step. So a single frame is made canonical, and a sequence of frames takes, frame by
frame, the sign nearest its neighbour's (`align_quaternions`): the rotation then changes only by
what the object did."""

from __future__ import annotations

import numpy as np


def _sign_flipped(q, negative):
    return q * (1 - 2 * (negative.astype(q.dtype) if isinstance(q, np.ndarray) else negative.to(q.dtype)))


def canonical_quaternions(x, starts):
    """`x` (..., d) numpy array or torch tensor with a unit quaternion (x, y, z, w) at each of `starts`:
    a copy with every quaternion whose w is negative negated. Traceable by torch.onnx (no branches)."""
    if not starts:
        return x
    out = x.copy() if isinstance(x, np.ndarray) else x.clone()
    for s in starts:
        q = x[..., s : s + 4]
        out[..., s : s + 4] = _sign_flipped(q, q[..., 3:4] < 0)
    return out


def align_quaternions(x, ref, starts):
    """`x` (..., d) with each quaternion at `starts` negated where its dot product with the same
    quaternion of `ref` (same shape, or one that broadcasts) is negative: the sign nearest `ref`'s.
    numpy arrays or torch tensors."""
    if not starts:
        return x
    out = x.copy() if isinstance(x, np.ndarray) else x.clone()
    for s in starts:
        q = x[..., s : s + 4]
        out[..., s : s + 4] = _sign_flipped(q, (q * ref[..., s : s + 4]).sum(-1)[..., None] < 0)
    return out
