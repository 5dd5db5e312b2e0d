"""Counterfactual synthesis: branch perturbed action sequences off real states and let the world
model imagine the outcomes (ALGORITHMS.md §1, "Counterfactual branching")."""

from worldsample.synth.branching import perturb_actions
from worldsample.synth.config import SynthConfig

__all__ = ["SynthConfig", "perturb_actions"]
