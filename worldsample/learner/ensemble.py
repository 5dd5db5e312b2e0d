"""A critic ensemble for RLlib's SAC RLModule (RLPD: N critics, targets from a random subset).

RLlib's default SAC module has one critic or a twin. `EnsembleSACTorchRLModule` keeps those two
as critics 0 and 1 (so RLlib's loss, logging and target updates still see them) and adds N - 2
more, each with its own target copy. Differences from the twin:

- Bellman target: the minimum over a random `target_subset` of the N target critics (RLPD's
  random 2-subset), drawn afresh for every batch;
- actor: the mean of all N critics (RLPD), or with `actor_q: min` their minimum (SAC-N's pessimism,
  as offline-to-online fine-tuning with a pessimistic Q-ensemble uses it);
- critic loss: every critic regresses onto the same target, with the batch's per-sample weights.

`num_critics = 2` is exactly RLlib's twin-Q SAC; this module is used only above that.
"""

from __future__ import annotations

from typing import Any

import torch
from ray.rllib.algorithms.sac.sac_learner import ACTION_DIST_INPUTS_NEXT, QF_PREDS, QF_TWIN_PREDS
from ray.rllib.algorithms.sac.torch.default_sac_torch_rl_module import DefaultSACTorchRLModule
from ray.rllib.core.columns import Columns
from ray.rllib.core.learner.utils import make_target_network
from ray.rllib.core.models.base import ENCODER_OUT

EXTRA_PREDS = "qf_extra_preds"  # (N - 2, B) predictions of critics 2..N-1


class EnsembleSACTorchRLModule(DefaultSACTorchRLModule):
    def setup(self):
        super().setup()
        self.num_critics = int(self.model_config.get("num_critics", 2))
        self.target_subset = int(self.model_config.get("target_subset", 2))
        self.actor_q = str(self.model_config.get("actor_q", "mean"))
        if self.actor_q not in ("mean", "min"):
            raise ValueError(f"actor_q must be mean or min, got {self.actor_q!r}")
        if not self.twin_q or self.num_critics < 2 or not 1 <= self.target_subset <= self.num_critics:
            raise ValueError(f"critic ensemble needs twin_q, num_critics >= 2 and 1 <= target_subset <= num_critics "
                             f"(got {self.num_critics}, {self.target_subset})")
        if not self.inference_only:
            self._build_extra_critics(self.num_critics - 2)

    # -- networks: critics 0 and 1 are RLlib's twin, critics 2..N-1 are built here ------------------
    def _build_extra_critics(self, n: int) -> None:
        """Critics 2..N-1 as separate encoder + head pairs (RLlib's critic networks)."""
        build_encoder, build_head = self.catalog.build_qf_encoder, self.catalog.build_qf_head
        self.qf_extra_encoders = torch.nn.ModuleList([build_encoder(framework="torch") for _ in range(n)])
        self.qf_extra_heads = torch.nn.ModuleList([build_head(framework="torch") for _ in range(n)])

    def extra_critic_attrs(self) -> list[str]:
        """The attributes that hold critics 2..N-1 (each has a `target_` copy)."""
        return ["qf_extra_encoders", "qf_extra_heads"]

    def extra_critic_params(self) -> list[torch.nn.Parameter]:
        return [p for name in self.extra_critic_attrs() for p in getattr(self, name).parameters()]

    def _extra_q(self, batch: dict, target: bool, members: list[int] | None = None,
                 squeeze: bool = True) -> torch.Tensor:
        """(k, B): the Q of extra critics `members` (indices into 0..N-3; all when None)."""
        pre = "target_" if target else ""
        encs, heads = getattr(self, pre + "qf_extra_encoders"), getattr(self, pre + "qf_extra_heads")
        idx = range(len(encs)) if members is None else members
        return torch.stack([self._qf_forward_train_helper(batch, encs[i], heads[i], squeeze=squeeze) for i in idx])

    def make_target_networks(self):
        super().make_target_networks()
        for name in self.extra_critic_attrs():
            setattr(self, "target_" + name, make_target_network(getattr(self, name)))

    def get_non_inference_attributes(self) -> list[str]:
        names = self.extra_critic_attrs()
        return [*super().get_non_inference_attributes(), *names, *("target_" + n for n in names)]

    def get_target_network_pairs(self):
        return [*super().get_target_network_pairs(),
                *((getattr(self, n), getattr(self, "target_" + n)) for n in self.extra_critic_attrs())]

    def _twin(self, target: bool) -> list[tuple[Any, Any]]:
        if target:
            return [(self.target_qf_encoder, self.target_qf), (self.target_qf_twin_encoder, self.target_qf_twin)]
        return [(self.qf_encoder, self.qf), (self.qf_twin_encoder, self.qf_twin)]

    def _all_q(self, batch: dict, target: bool = False, members: list[int] | None = None,
               squeeze: bool = True) -> torch.Tensor:
        """(k, B): the Q of critics `members` (from 0..N-1; all when None), the twin's first."""
        members = sorted(range(self.num_critics) if members is None else members)
        nets = self._twin(target)
        parts = [self._qf_forward_train_helper(batch, *nets[m], squeeze=squeeze)[None] for m in members if m < 2]
        extra = [m - 2 for m in members if m >= 2]
        if extra:
            parts.append(self._extra_q(batch, target, extra, squeeze))
        return torch.cat(parts)

    # -- the Q APIs RLlib and the learner call -----------------------------------------------------
    def compute_q_values(self, batch: dict[str, Any], squeeze: bool = True) -> torch.Tensor:
        """The actor's (and PPL's) Q: the ensemble mean."""
        return self._all_q(batch, squeeze=squeeze).mean(0)

    def forward_target(self, batch: dict[str, Any], squeeze: bool = True) -> torch.Tensor:
        members = torch.randperm(self.num_critics)[: self.target_subset].tolist()
        return self._all_q(batch, target=True, members=members, squeeze=squeeze).min(0).values

    def _forward_train_continuous(self, batch: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        curr = {Columns.OBS: batch[Columns.OBS], Columns.ACTIONS: batch[Columns.ACTIONS]}
        preds = self._all_q(curr)
        out[QF_PREDS], out[QF_TWIN_PREDS], out[EXTRA_PREDS] = preds[0], preds[1], preds[2:]

        logits = self.pi(self.pi_encoder({Columns.OBS: batch[Columns.OBS]})[ENCODER_OUT])
        logits_next = self.pi(self.pi_encoder({Columns.OBS: batch[Columns.NEXT_OBS]})[ENCODER_OUT])
        out[Columns.ACTION_DIST_INPUTS], out[ACTION_DIST_INPUTS_NEXT] = logits, logits_next
        dist_cls = self.get_train_action_dist_cls()
        actions, out["logp_resampled"] = dist_cls.from_logits(logits).rsample_and_logp()
        actions_next, logp_next = dist_cls.from_logits(logits_next).sample_and_logp()
        out["logp_next_resampled"] = logp_next.detach()

        # the actor's gradient flows through the critics' inputs, not into their weights
        params = [*(p for enc, head in self._twin(False) for p in (*enc.parameters(), *head.parameters())),
                  *self.extra_critic_params()]
        for p in params:
            p.requires_grad = False
        q_all = self._all_q({Columns.OBS: batch[Columns.OBS], Columns.ACTIONS: actions})
        out["q_curr"] = q_all.min(0).values if self.actor_q == "min" else q_all.mean(0)
        for p in params:
            p.requires_grad = True
        target_in = {Columns.OBS: batch[Columns.NEXT_OBS], Columns.ACTIONS: actions_next.detach()}
        out["q_target_next"] = self.forward_target(target_in).detach()
        return out
