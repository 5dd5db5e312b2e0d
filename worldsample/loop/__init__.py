"""The real-synthetic loop: its settings, the round as named steps (`loop.Loop`), and the library
objects each step calls (`learning`, `world_model`, `synthesis`, `robot`). No Ray here:
services/trainer runs the same objects as Ray actors. Import the submodules explicitly: some load
torch, Ray or MuJoCo when their objects are constructed."""

from worldsample.loop.config import LoopConfig

__all__ = ["LoopConfig"]
