"""Policy-Paced Learning: how much synthetic data the learner sees, and which (ALGORITHMS.md §1).

`schedule` holds the entropy pacing, `selection` the Q-aware choice between the success and
failure pools, `mixer` composes batches from the store. The arithmetic has no torch or Ray in it.
"""

from worldsample.ppl.config import PPLConfig
from worldsample.ppl.schedule import EntropyPacer
from worldsample.ppl.selection import q_aware_lambda, zero_weights_breaking_bound

__all__ = ["EntropyPacer", "PPLConfig", "q_aware_lambda", "zero_weights_breaking_bound"]
