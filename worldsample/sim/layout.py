"""Where the simulated arm's 39-dim Meta-World state keeps what (no MuJoCo import: the world model's
evaluation and config read it). x, y, z per position; quaternions in (x, y, z, w) order."""

from __future__ import annotations

STATE_DIM = 39  # Meta-World: hand xyz, gripper, object pose padded to 14, previous frame, goal xyz
HAND, OBJECT, GOAL = slice(0, 3), slice(4, 7), slice(36, 39)
# the object's orientation in this frame and in the previous frame (the state repeats dims 0-17 at 18-35)
QUATERNIONS = [7, 25]
# (at, of, size): the next state's dims 18-35 are this state's dims 0-17
PREVIOUS_FRAME = (18, 0, 18)
# the parts a world model's state error is reported on
STATE_PARTS = {"hand": HAND, "gripper": slice(3, 4), "object": OBJECT, "object_rotation": slice(7, 11),
               "previous_frame": slice(18, 36), "goal": GOAL}
