"""The real-synthetic loop's settings and the pieces it runs per round (no Ray here: services/trainer
puts them in Ray actors)."""

from worldsample.loop.config import LoopConfig

__all__ = ["LoopConfig"]
