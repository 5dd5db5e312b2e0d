"""The robot's exploration noise over a run: the scale of the policy's spread the arm samples with,
falling from a start to an end scale as committed real steps grow (HIL-SERL's human steps in less
once the arm strays less). One function, used by the lock-step loop's arm and by the bridge."""

from __future__ import annotations


def explore_scale_at(start: float, end: float | None, span: tuple[float, float], committed: int) -> float:
    """`start` until `span[0]` committed steps, `end` from `span[1]` on, linear between (`end` None: `start`)."""
    if end is None:
        return start
    lo, hi = span
    if committed >= hi:
        return end
    if committed <= lo:
        return start
    return start + (committed - lo) / (hi - lo) * (end - start)
