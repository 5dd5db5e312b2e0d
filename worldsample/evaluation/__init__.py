"""Policy evaluation and search in the world model (docs/evaluation.md).

metrics     Pearson r, Spearman rho (average ranks for ties), MMRV (SIMPLER's convention)
starts      initial observations: held-out episodes of the store, or the simulated arm's resets
imagined    policies closed loop in the world model (`ClosedLoop`, `score_policy`)
real        the same policy on the simulated arm (`score_real`)
policies    `evaluate_policies`: both, the ranking metrics and the report under RUN/reports/
search      Best-of-N search with a per-decision time budget (`BestOfN`, `run_search`)
critic      the SAC learner's critic from a trainer checkpoint, in numpy (Best-of-N's value score)
recommend   the version to deploy and the RUN/policies/recommended pointer (no torch)
tracker     `RecommendationTracker`: score each exported policy as it appears (for the trainer)

Importing this package loads neither torch nor MuJoCo; the modules that need them do.
"""

from worldsample.evaluation.metrics import average_ranks, mmrv, pearson, ranking_report, spearman

__all__ = ["average_ranks", "mmrv", "pearson", "ranking_report", "spearman"]
