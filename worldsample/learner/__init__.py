"""The RL learner: RLlib's SAC Learner and RLModule (new API stack), fed by the PPL mixer.

Import `worldsample.learner.sac` explicitly: it loads Ray and torch.
"""

from worldsample.learner.config import LearnerConfig

__all__ = ["LearnerConfig"]
