"""SAC through RLlib's LearnerGroup, with batches composed outside RLlib.

RLlib's SAC training step samples its own env runners synchronously; a real robot cannot wait for
that, so we build only the LearnerGroup and call `update()` with batches from the PPL mixer. PPL's
per-sample weights go in the `weights` column: RLlib's continuous SAC loss multiplies only the
critics' Huber TD losses by it, so `PPLSACLearner` turns the actor and temperature losses into
weighted means with the same weights (a row the mixer dropped trains nothing). It also adds what
the mixer needs from the current networks: Q-values and the actor's entropy on given states.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import math

import gymnasium as gym
import numpy as np
import torch
from ray.rllib.algorithms.sac import SACConfig
from ray.rllib.algorithms.sac.sac_learner import QF_PREDS, QF_TWIN_PREDS
from ray.rllib.algorithms.sac.torch.sac_torch_learner import SACTorchLearner
from ray.rllib.core.columns import Columns
from ray.rllib.core.learner.learner import POLICY_LOSS_KEY
from ray.rllib.core.models.base import ENCODER_OUT
from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig
from ray.rllib.core.rl_module.rl_module import RLModuleSpec
from ray.rllib.policy.sample_batch import MultiAgentBatch, SampleBatch

from worldsample.learner.config import LearnerConfig
from worldsample.learner.ensemble import EXTRA_PREDS, EnsembleSACTorchRLModule
from worldsample.learner.fast_update import FastUpdateMixin, adam_kernel
from worldsample.store.sampler import Batch

MODULE = "default_policy"
CQL_SAMPLES = 4  # learner.cql_weight: uniform and policy actions per state, each
_WEIGHT_EPS = 1e-8  # a batch whose weights are all 0 gives zero actor and temperature losses, not 0 / 0


class PPLSACLearner(FastUpdateMixin, SACTorchLearner):
    """SAC learner with read-only probes for Policy-Paced Learning, and an optional behaviour-cloning
    term on demonstration samples (the `bc_mask` column) in the actor loss."""

    actor_frozen = False
    _anchor = None  # learner.anchor_weight: (encoder, head) of the actor frozen after behaviour cloning
    _actor_skip = False  # this minibatch's `actor_step` column is 0: only the critics step (learner.actor_every)
    _ema = None  # learner.actor_ema: (encoder, head), the Polyak-averaged actor that is exported and evaluated

    def configure_optimizers_for_module(self, module_id, config=None) -> None:
        super().configure_optimizers_for_module(module_id, config)
        module = self._module[module_id]
        if getattr(module, "num_critics", 2) > 2:
            params = module.extra_critic_params()
            self.register_optimizer(
                module_id=module_id,
                optimizer_name="qf_extra",
                optimizer=torch.optim.Adam(params, eps=1e-7, **adam_kernel(params, self.rllib_reference)),
                params=params,
                lr_or_lr_schedule=config.critic_lr,
            )

    def _extra_critic_loss(self, module_id, config, batch, fwd_out) -> torch.Tensor:
        """Critics 2..N-1 of an ensemble regress onto the same weighted Bellman target as RLlib's two."""
        alpha = torch.exp(self.curr_log_alpha[module_id]).detach()
        soft_q_next = fwd_out["q_target_next"] - alpha * fwd_out["logp_next_resampled"]
        q_next = (1.0 - batch[Columns.TERMINATEDS].float()) * soft_q_next
        target = (batch[Columns.REWARDS] + (config.gamma ** batch["n_step"]) * q_next).detach()
        huber = torch.nn.HuberLoss(reduction="none", delta=1.0)
        return sum(torch.mean(batch["weights"] * huber(pred, target)) for pred in fwd_out[EXTRA_PREDS])

    def set_actor_frozen(self, frozen: bool) -> None:
        """Critic warm-up: while frozen, only the critics learn (actor and temperature keep their values)."""
        self.actor_frozen = bool(frozen)

    def _uncompiled_update(self, batch, **kwargs):
        out = super()._uncompiled_update(batch, **kwargs)
        rate = float(self.config.learner_config_dict.get("actor_ema", 0.0))
        if rate > 0 and not (self.actor_frozen or self._actor_skip):  # after every step the actor took
            self._ema_step(rate)
        return out

    def _ema_step(self, rate: float) -> None:
        if self._ema is None:  # no behaviour cloning to start from: the actor as it is now
            self.reset_ema()
            return
        with torch.no_grad():
            torch._foreach_lerp_(*self._ema_params, rate)

    def reset_ema(self) -> None:
        """learner.actor_ema: the average starts again from the actor as it is now."""
        self._set_ema(self._actor_copy())

    def _set_ema(self, pair) -> None:
        """The averaged (encoder, head), and its parameters beside the learning actor's, in one order."""
        self._ema = pair
        if pair is not None:
            module = self.module[MODULE].unwrapped()
            self._ema_params = ([p for net in pair for p in net.parameters()],
                                [p for net in (module.pi_encoder, module.pi) for p in net.parameters()])

    def compute_gradients(self, loss_per_module, **kwargs):
        grads = super().compute_gradients(loss_per_module, **kwargs)
        if self.actor_frozen or self._actor_skip:
            for name in ("policy", "alpha"):  # the critics (all of an ensemble) keep learning
                frozen_params = self.filter_param_dict_for_optimizer(self._params, self.get_optimizer(MODULE, name))
                for pid, p in frozen_params.items():
                    grads.pop(pid, None)
                    p.grad = None  # Adam skips parameters without a gradient
        return grads

    def _compute_loss_for_module_continuous(self, *, module_id, config, batch, fwd_out):
        # RLlib's loss gives the critics' losses (weighted) and its metrics; the actor and temperature
        # losses it leaves in `_temp_losses` are unweighted means and are replaced here
        self._actor_skip = "actor_step" in batch and not bool(batch["actor_step"][0])
        if not config.learner_config_dict.get("backup_entropy", True):
            # the target without the next state's entropy bonus: RLlib's loss and the extra critics' read it here
            fwd_out = {**fwd_out, "logp_next_resampled": torch.zeros_like(fwd_out["logp_next_resampled"])}
        super()._compute_loss_for_module_continuous(module_id=module_id, config=config, batch=batch, fwd_out=fwd_out)
        weights = batch["weights"].float()
        self._weighted_actor_and_alpha_losses(module_id, weights, fwd_out)
        if EXTRA_PREDS in fwd_out:
            extra = self._extra_critic_loss(module_id, config, batch, fwd_out)
            self._temp_losses[(module_id, "qf_extra_loss")] = extra
            self.metrics.log_value((module_id, "qf_extra_loss"), extra, window=1)
        cql_weight = float(config.learner_config_dict.get("cql_weight", 0.0))
        if cql_weight > 0:
            self._add_conservative_term(module_id, cql_weight, batch, weights, fwd_out)
        bc_weight = float(config.learner_config_dict.get("bc_weight", 0.0))
        std_weight = float(config.learner_config_dict.get("bc_std_weight", 0.0))
        if (bc_weight > 0 or std_weight > 0) and "bc_mask" in batch:
            self._add_bc_term(module_id, bc_weight, std_weight, batch, weights, fwd_out)
        anchor_weight = float(config.learner_config_dict.get("anchor_weight", 0.0))
        if anchor_weight > 0 and self._anchor is not None:
            self._add_anchor_term(module_id, anchor_weight, batch, weights, fwd_out)
        # the total is reported only: each optimiser steps on its own entry of `_temp_losses`
        return sum(loss for (mid, _), loss in self._temp_losses.items() if mid == module_id)

    def _add_conservative_term(self, module_id, weight: float, batch, weights: torch.Tensor, fwd_out) -> None:
        """CQL (Kumar et al. 2020) on every critic: the soft maximum of its Q over actions drawn
        uniformly and from the policy, `CQL_SAMPLES` of each per state, minus its Q on the batch's own
        action, times `weight`, added to that critic's loss. It lowers Q where the data has no actions,
        so the actor cannot climb the critics' extrapolation errors away from what was played. With
        `mc_return` in the batch (learner.cql_calibrated, Cal-QL) the policy actions' Q enters as
        max(Q, mc_return): a critic already below the return the data earned is not pushed further."""
        module = self.module[module_id].unwrapped()
        obs = batch[Columns.OBS]
        n, m = obs.shape[0], CQL_SAMPLES
        low, high = (torch.as_tensor(v, device=obs.device) for v in (module.action_space.low,
                                                                    module.action_space.high))
        with torch.no_grad():
            uniform = low + (high - low) * torch.rand(m * n, low.shape[0], device=obs.device)
            dist = module.get_train_action_dist_cls().from_logits(fwd_out[Columns.ACTION_DIST_INPUTS].detach())
            policy = torch.cat([dist.sample() for _ in range(m)])
        q = _critic_qs(module, {Columns.OBS: obs.repeat(2 * m, 1), Columns.ACTIONS: torch.cat([uniform, policy])})
        q = q.reshape(q.shape[0], 2 * m, n)  # (critics, the m uniform then the m policy samples, n)
        if "mc_return" in batch:  # Cal-QL: the policy's actions are pushed down no lower than the data's return
            q = torch.cat([q[:, :m], torch.maximum(q[:, m:], batch["mc_return"].float()[None, None])], dim=1)
        soft_max = torch.logsumexp(q, dim=1) - math.log(2 * m)  # (critics, n)
        data = torch.cat([fwd_out[QF_PREDS][None], fwd_out[QF_TWIN_PREDS][None],
                          *([fwd_out[EXTRA_PREDS]] if EXTRA_PREDS in fwd_out else [])])
        gap = (weights * (soft_max - data)).sum(-1) / weights.sum().clamp(min=_WEIGHT_EPS)  # per critic
        for key, part in (("qf_loss", gap[0]), ("qf_twin_loss", gap[1]), ("qf_extra_loss", gap[2:].sum())):
            if (module_id, key) in self._temp_losses:
                self._temp_losses[(module_id, key)] = self._temp_losses[(module_id, key)] + weight * part
        self.metrics.log_value((module_id, "cql_gap"), gap.mean(), window=1)

    def _weighted_actor_and_alpha_losses(self, module_id, weights: torch.Tensor, fwd_out) -> None:
        """RLlib's actor loss E[alpha * log pi - Q] and temperature loss -E[log alpha * (log pi + H_target)]
        as means weighted by the batch's per-sample weights: sum(w * l) / sum(w). With every weight 1
        they are RLlib's means."""
        log_alpha = self.curr_log_alpha[module_id]
        logp = fwd_out["logp_resampled"]
        norm = weights.sum().clamp(min=_WEIGHT_EPS)
        actor_loss = (weights * (torch.exp(log_alpha).detach() * logp - fwd_out["q_curr"])).sum() / norm
        alpha_loss = -(weights * (log_alpha * (logp.detach() + self.target_entropy[module_id]))).sum() / norm
        self._temp_losses[(module_id, POLICY_LOSS_KEY)] = actor_loss
        self._temp_losses[(module_id, "alpha_loss")] = alpha_loss
        # the same keys RLlib logged a moment ago (window 1: the last value is the one reported)
        self.metrics.log_dict({POLICY_LOSS_KEY: actor_loss, "alpha_loss": alpha_loss}, key=module_id, window=1)

    def _add_bc_term(
        self, module_id, bc_weight: float, std_weight: float, batch, weights: torch.Tensor, fwd_out
    ) -> None:
        """TD3+BC on the rows a human drove (`bc_mask`), added to the actor loss; zero-weight rows take
        no part, neither in the term nor in its scale."""
        mask = batch["bc_mask"].float() * weights
        module = self.module[module_id]
        mean = fwd_out[Columns.ACTION_DIST_INPUTS].chunk(2, dim=-1)[0]  # unsquashed; squash as the env sees it
        sq = ((self._squash(module, mean) - batch[Columns.ACTIONS]) ** 2).sum(-1)
        bc = (sq * mask).sum() / mask.sum().clamp(min=1.0)
        # TD3+BC scaling: the BC term is measured against the size of Q, so it neither vanishes
        # as returns grow nor dominates when they are small
        bc_loss = bc_weight * _q_scale(weights, fwd_out) * bc
        if std_weight > 0:
            # the spread follows the policy's competence on what the human did: the likelihood of
            # the human's actions with the mean held fixed trains only the log-std, so the entropy
            # falls as the imitation error does (the signal PPL paces on)
            nll = self._spread_nll(module, batch[Columns.OBS], fwd_out[Columns.ACTION_DIST_INPUTS],
                                   batch[Columns.ACTIONS])
            bc_loss = bc_loss + std_weight * (nll * mask).sum() / mask.sum().clamp(min=1.0)
            self.metrics.log_value((module_id, "bc_nll"), (nll * mask).sum() / mask.sum().clamp(min=1.0), window=1)
        key = (module_id, POLICY_LOSS_KEY)
        self._temp_losses[key] = self._temp_losses[key] + bc_loss
        if bc_weight > 0:
            self.metrics.log_value((module_id, "bc_mse"), bc, window=1)

    def _add_anchor_term(self, module_id, weight: float, batch, weights: torch.Tensor, fwd_out) -> None:
        """learner.anchor_weight: the squared distance of the actor's squashed mean action to the frozen
        behaviour-cloned copy's, on every row (weighted), x mean |Q| as the BC term, added to the actor loss."""
        module = self.module[module_id]
        mean = fwd_out[Columns.ACTION_DIST_INPUTS].chunk(2, dim=-1)[0]
        with torch.no_grad():
            encoder, head = self._anchor
            ref = head(encoder({Columns.OBS: batch[Columns.OBS]})[ENCODER_OUT]).chunk(2, dim=-1)[0]
        sq = ((self._squash(module, mean) - self._squash(module, ref)) ** 2).sum(-1)
        dist = (weights * sq).sum() / weights.sum().clamp(min=_WEIGHT_EPS)
        key = (module_id, POLICY_LOSS_KEY)
        self._temp_losses[key] = self._temp_losses[key] + weight * _q_scale(weights, fwd_out) * dist
        self.metrics.log_value((module_id, "anchor_mse"), dist, window=1)

    def _actor_copy(self) -> tuple[torch.nn.Module, torch.nn.Module]:
        """(encoder, head): a copy of the actor as it is now, outside every optimiser."""
        module = self.module[MODULE].unwrapped()
        return tuple(copy.deepcopy(net).requires_grad_(False).eval() for net in (module.pi_encoder, module.pi))

    def take_anchor(self) -> None:
        """Freeze a copy of the actor as it is now (after behaviour cloning) for learner.anchor_weight."""
        self._anchor = self._actor_copy()

    def anchor_state(self) -> dict[str, np.ndarray]:
        """The frozen copy's weights (empty without one): they travel in the trainer checkpoint."""
        return _copy_state(self._anchor)

    def load_anchor(self, state: dict[str, np.ndarray]) -> None:
        self._anchor = self._loaded_copy(state)

    def ema_state(self) -> dict[str, np.ndarray]:
        """The averaged actor's weights (empty without one), for the trainer checkpoint."""
        return _copy_state(self._ema)

    def load_ema(self, state: dict[str, np.ndarray]) -> None:
        self._set_ema(self._loaded_copy(state))

    def _loaded_copy(self, state: dict[str, np.ndarray]):
        """A copy of the actor's structure with the saved weights of `_copy_state`; None for an empty state."""
        if not state:
            return None
        pair = self._actor_copy()
        for part, net in zip(("encoder", "head"), pair):
            prefix = f"{part}."
            net.load_state_dict({k[len(prefix):]: torch.as_tensor(np.asarray(v)) for k, v in state.items()
                                 if k.startswith(prefix)})
        return pair

    def _spread_nll(self, module, obs: torch.Tensor, dist_inputs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """Per-row -log pi(a|s) of the squashed Gaussian with its mean and the actor's features detached:
        the gradient reaches the log-std rows of the (linear) head only, never the features the mean
        is computed from (measured: through the shared encoder, this term undid what the actor learnt)."""
        mean = dist_inputs.chunk(2, dim=-1)[0]
        feats = module.pi_encoder({Columns.OBS: obs})[ENCODER_OUT]
        log_std = module.pi(feats.detach()).chunk(2, dim=-1)[1]
        dist = module.get_train_action_dist_cls().from_logits(torch.cat([mean.detach(), log_std], dim=-1))
        return -dist.logp(self._inside_bounds(module, actions))

    def _inside_bounds(self, module, a: torch.Tensor) -> torch.Tensor:
        """The likelihood of a squashed Gaussian needs actions strictly inside the action box."""
        low, high = (torch.as_tensor(v, device=a.device) for v in (module.action_space.low, module.action_space.high))
        return low + ((2.0 * (a - low) / (high - low) - 1.0).clamp(-0.995, 0.995) + 1.0) * 0.5 * (high - low)

    def _squash(self, module, u: torch.Tensor) -> torch.Tensor:
        low, high = (torch.as_tensor(x, device=u.device) for x in (module.action_space.low, module.action_space.high))
        return low + (torch.tanh(u) + 1.0) * 0.5 * (high - low)

    def bc_pretrain(
        self, obs: np.ndarray, actions: np.ndarray, steps: int, batch_size: int, seed: int
    ) -> dict[str, float]:
        """Behaviour cloning of the actor on (obs, action) pairs with the actor's own optimiser:
        the squashed mean regresses onto the actions (squared error), and the spread is fitted by
        likelihood around that mean (mean and features detached), so the exploring policy starts with noise the
        size of its own imitation error."""
        module = self.module[MODULE]
        optim = self.get_optimizer(MODULE, "policy")
        dist_cls = module.get_train_action_dist_cls()
        gen = torch.Generator().manual_seed(seed)
        x = torch.as_tensor(obs, device=self._device)
        a = torch.as_tensor(actions, device=self._device)
        a_in = self._inside_bounds(module, a)
        mse = nll = torch.zeros(())
        # a remote learner wraps the module in DistributedDataParallel: its gradient hooks must not
        # count these backward passes as a step of its own
        sync_off = module.no_sync() if hasattr(module, "no_sync") else contextlib.nullcontext()
        with sync_off:
            for _ in range(steps):
                mse, nll = self._bc_step(module, optim, dist_cls, x, a, a_in, gen, batch_size)
        optim.zero_grad(set_to_none=True)  # leave no gradients behind for RLlib's next update
        if self.config.learner_config_dict.get("anchor_weight", 0.0) > 0:
            self.take_anchor()
        if self.config.learner_config_dict.get("actor_ema", 0.0) > 0:
            self.reset_ema()  # the average starts at the behaviour-cloned actor
        return {"bc_mse": float(mse.detach()), "bc_nll": float(nll.detach())}

    def _bc_step(self, module, optim, dist_cls, x, a, a_in, gen, batch_size):
        idx = torch.randint(0, len(x), (batch_size,), generator=gen)
        feats = module.pi_encoder({"obs": x[idx]})[ENCODER_OUT]
        mean = module.pi(feats).chunk(2, dim=-1)[0]
        log_std = module.pi(feats.detach()).chunk(2, dim=-1)[1]  # the spread trains the head only
        mse = ((self._squash(module, mean) - a[idx]) ** 2).sum(-1).mean()
        nll = -dist_cls.from_logits(torch.cat([mean.detach(), log_std], dim=-1)).logp(a_in[idx]).mean()
        optim.zero_grad(set_to_none=True)
        (mse + nll).backward()
        optim.step()
        return mse, nll

    @torch.no_grad()
    def ppl_q_values(self, obs: np.ndarray, actions: np.ndarray) -> np.ndarray:
        module = self.module[MODULE]
        batch = {
            "obs": torch.as_tensor(obs, device=self._device),
            "actions": torch.as_tensor(actions, device=self._device),
        }
        return module.compute_q_values(batch).cpu().numpy()

    @torch.no_grad()
    def ppl_entropy(self, obs: np.ndarray, samples: int = 4) -> float:
        """-E[log pi(a|s)] over the given states, by sampling the squashed Gaussian."""
        module = self.module[MODULE]
        out = module.forward_inference({"obs": torch.as_tensor(obs, device=self._device)})
        dist = module.get_train_action_dist_cls().from_logits(out["action_dist_inputs"])
        logp = torch.stack([dist.logp(dist.sample()) for _ in range(samples)])
        return float(-logp.mean())

    def actor_tensors(self) -> dict[str, np.ndarray]:
        """The weights of the actor the robot runs (pi encoder MLP + pi head) as numpy arrays, named as in
        RLlib: the averaged actor with learner.actor_ema, else the learning one."""
        if self._ema is not None:
            sd = {f"{name}.{k}": v for name, net in zip(("pi_encoder", "pi"), self._ema)
                  for k, v in net.state_dict().items()}
        else:
            sd = self.module[MODULE].state_dict()
        return {
            k: v.detach().cpu().float().numpy().copy()
            for k, v in sd.items()
            if k.startswith(("pi_encoder.", "pi.net."))
        }

    @torch.no_grad()
    def deterministic_actions(self, obs: np.ndarray) -> np.ndarray:
        """The mean action of the actor the robot runs (the averaged one with learner.actor_ema)."""
        module = self.module[MODULE]
        x = torch.as_tensor(obs, device=self._device)
        if self._ema is not None:
            encoder, head = self._ema
            mean = head(encoder({Columns.OBS: x})[ENCODER_OUT]).chunk(2, dim=-1)[0]
        else:
            mean = module.forward_inference({"obs": x})["action_dist_inputs"].chunk(2, dim=-1)[0]
        # the squashed Gaussian's mode; RLlib's to_deterministic() would return it unsquashed
        return self._squash(module, mean).cpu().numpy()


def _copy_state(pair) -> dict[str, np.ndarray]:
    """The weights of an (encoder, head) copy of the actor as flat numpy arrays; {} for None."""
    if pair is None:
        return {}
    return {f"{part}.{k}": v.detach().cpu().numpy() for part, net in zip(("encoder", "head"), pair)
            for k, v in net.state_dict().items()}


def _q_scale(weights: torch.Tensor, fwd_out) -> torch.Tensor:
    """TD3+BC's scale for an imitation term: the critics' weighted mean |Q| on the batch, held fixed."""
    return ((weights * fwd_out["q_curr"].abs()).sum() / weights.sum().clamp(min=_WEIGHT_EPS)).detach()


def _critic_qs(module, batch: dict) -> torch.Tensor:
    """(critics, B): every critic's Q of the batch's actions, with gradients into the critics."""
    if isinstance(module, EnsembleSACTorchRLModule):
        return module._all_q(batch)
    return torch.stack([module._qf_forward_train_helper(batch, module.qf_encoder, module.qf),
                        module._qf_forward_train_helper(batch, module.qf_twin_encoder, module.qf_twin)])


def flatten_obs(batch: Batch, keys: list[str], prefix: str = "obs/") -> np.ndarray:
    columns = [batch[f"{prefix}{k}"].reshape(len(batch[f"{prefix}{k}"]), -1) for k in keys]
    return np.concatenate(columns, axis=1).astype(np.float32)


class SACAgent:
    """One SAC learner (local, or a group of remote Ray learners) behind a small numpy API."""

    def __init__(self, cfg: LearnerConfig, obs_dim: int, action_space: gym.spaces.Box, rllib_reference: bool = False,
                 obs_stats: tuple[np.ndarray, np.ndarray] | None = None):
        """`rllib_reference`: RLlib's own per-optimiser backward passes, Adam and target updates instead of
        fast_update.py's (the same weights; for comparing them). `obs_stats`: (mean, std) per observation
        dimension, which learner.obs_norm needs."""
        self.cfg = cfg
        self.obs_space = gym.spaces.Box(-np.inf, np.inf, (obs_dim,), np.float32)
        self.obs_mean: np.ndarray | None = None  # learner.obs_norm: all; what the numpy side normalises with
        self.obs_std: np.ndarray | None = None
        stats = None if cfg.obs_norm == "off" else self._checked_stats(obs_stats)
        if cfg.obs_norm == "all":
            self.obs_mean, self.obs_std = stats
        self.action_space = action_space
        if cfg.target_entropy is not None:
            self.target_entropy = cfg.target_entropy
        else:
            self.target_entropy = -float(np.prod(action_space.shape)) / 2
        torch.manual_seed(cfg.seed)
        algo = (
            SACConfig()
            .api_stack(enable_rl_module_and_learner=True, enable_env_runner_and_connector_v2=True)
            .environment(observation_space=self.obs_space, action_space=action_space)
            .training(
                gamma=cfg.gamma,
                actor_lr=cfg.lr,
                critic_lr=cfg.lr,
                alpha_lr=cfg.alpha_lr or cfg.lr,
                tau=cfg.tau,
                initial_alpha=cfg.initial_alpha,
                target_entropy=self.target_entropy,
                twin_q=True,
                train_batch_size_per_learner=cfg.batch_size,
            )
            .rl_module(**self._module_args(cfg, stats if cfg.obs_norm == "critics" else None))
            .learners(
                num_learners=cfg.num_learners,
                num_gpus_per_learner=cfg.num_gpus_per_learner,
                learner_class=PPLSACLearner,
                learner_config_dict={"bc_weight": cfg.bc_weight, "bc_std_weight": cfg.bc_std_weight,
                                     "backup_entropy": cfg.backup_entropy, "cql_weight": cfg.cql_weight,
                                     "anchor_weight": cfg.anchor_weight, "actor_ema": cfg.actor_ema,
                                     "rllib_reference": rllib_reference},
            )
            .debugging(seed=cfg.seed)
        )
        self.group = algo.build_learner_group()
        self.updates = 0
        self._actor_frozen = False
        self._unreported = 0  # learner calls whose metrics no report has covered yet

    def _checked_stats(self, stats) -> tuple[np.ndarray, np.ndarray]:
        """(mean, std floored at obs_norm_min_std) as float32, or a ValueError that says what is wrong."""
        if stats is None:
            raise ValueError(f"learner.obs_norm: {self.cfg.obs_norm} needs the observation statistics (obs_stats)")
        mean, std = (np.asarray(x, np.float32) for x in stats)
        if mean.shape != (self.obs_space.shape[0],) or std.shape != mean.shape:
            raise ValueError(f"observation statistics of shape {mean.shape}/{std.shape}, "
                             f"the learner's observation has {self.obs_space.shape[0]} dimensions")
        if not (np.isfinite(mean).all() and np.isfinite(std).all()):
            raise ValueError("observation statistics must be finite")
        return mean, np.maximum(std, np.float32(self.cfg.obs_norm_min_std))

    def set_obs_stats(self, mean: np.ndarray, std: np.ndarray) -> None:
        """learner.obs_norm: all: the statistics the numpy side normalises with (a resumed run's own)."""
        self.obs_mean, self.obs_std = self._checked_stats((mean, std))

    def _norm(self, x: np.ndarray) -> np.ndarray:
        if self.obs_mean is None:
            return x
        return np.clip((x - self.obs_mean) / self.obs_std, -self.cfg.obs_clip, self.cfg.obs_clip).astype(np.float32)

    @staticmethod
    def _module_args(cfg: LearnerConfig, critic_stats: tuple[np.ndarray, np.ndarray] | None = None) -> dict:
        model = DefaultModelConfig(
            fcnet_hiddens=cfg.hidden, fcnet_activation="relu", fcnet_use_layernorm=cfg.layer_norm, head_fcnet_hiddens=[]
        )
        if cfg.critic == "mlp":
            from worldsample.learner.mlp_critic import MLPCriticEnsembleModule, MLPCriticSACCatalog, MLPCriticSACModule

            module = MLPCriticSACModule if cfg.critics == 2 else MLPCriticEnsembleModule
            spec = RLModuleSpec(module_class=module, catalog_class=MLPCriticSACCatalog)
        elif cfg.critics == 2:
            return {"model_config": model}  # RLlib's own twin-Q module
        else:
            spec = RLModuleSpec(module_class=EnsembleSACTorchRLModule)
        extra = ({"num_critics": cfg.critics, "target_subset": cfg.target_subset, "actor_q": cfg.actor_q}
                 if cfg.critics > 2 else {})
        if critic_stats is not None:  # learner.obs_norm: critics (mlp_critic.py)
            extra["critic_obs_norm"] = [critic_stats[0].tolist(), critic_stats[1].tolist(), cfg.obs_clip]
        return {"rl_module_spec": spec, "model_config": {**dataclasses.asdict(model), **extra}}

    def _on_learner(self, fn, **kwargs):
        """Run fn on the (first) learner: in-process, or inside the remote Ray learner actor."""
        if not self.cfg.num_learners:
            return fn(self.group._learner, **kwargs)
        return next(iter(self.group.foreach_learner(fn, **kwargs))).get()

    def close(self) -> None:
        self.group.shutdown()

    def update(self, batch: Batch, report: bool | None = True) -> dict[str, float]:
        """One gradient step on a mixer batch (keys obs/<k>, next_obs/<k>, action, reward, done,
        n_step, weights). Returns the learner's scalar metrics (see update_many for `report`)."""
        return self.update_many([batch], report)

    def update_many(self, batches: list[Batch], report: bool | None = True) -> dict[str, float]:
        """One gradient step per batch, in order, in as few learner calls as the critic warm-up allows
        (one, unless the warm-up ends among them): the same steps as that many `update` calls,
        without paying RLlib's per-call conversion and metrics for each. All batches have one size.
        Returns the learner's scalar metrics after the last step, covering every call since the last
        report; `report` False: none ({}), the metrics wait for a later report; None: a report once
        `learner.metrics_every` calls are unreported (the loop's cadence), else {}."""
        if not batches:
            return {}
        sizes = {len(b["action"]) for b in batches}
        if len(sizes) != 1:
            raise ValueError(f"update_many needs batches of one size, got sizes {sorted(sizes)}")
        n = sizes.pop()
        results: dict[str, float] = {}
        while batches:
            frozen = self.updates < self.cfg.critic_warmup_updates
            k = min(len(batches), self.cfg.critic_warmup_updates - self.updates) if frozen else len(batches)
            chunk, batches = batches[:k], batches[k:]
            if frozen != self._actor_frozen:
                self._on_learner(lambda learner, f: learner.set_actor_frozen(f), f=frozen)
                self._actor_frozen = frozen
            sb = _concat([self._sample_batch(b, self.updates + i) for i, b in enumerate(chunk)])
            kw = {"minibatch_size": n, "num_epochs": 1, "shuffle_batch_per_epoch": False} if k > 1 else {}
            self._unreported += 1
            due = self._unreported >= self.cfg.metrics_every if report is None else report and not batches
            out = self.group.update(batch=MultiAgentBatch({MODULE: sb}, env_steps=len(sb)),
                                    _no_metrics_reduce=not due, **kw)
            self.updates += k
            if due:
                self._unreported = 0
                results = self._scalars(out[0])
        return results

    def report(self) -> dict[str, float]:
        """The learner's scalar metrics over the calls since the last report ({} when there were none)."""
        if not self._unreported:
            return {}
        self._unreported = 0
        return self._scalars(self._on_learner(lambda learner: learner.report()))

    @staticmethod
    def _scalars(out: dict) -> dict[str, float]:
        return {k: _scalar(v) for k, v in out.get(MODULE, {}).items() if _scalar(v) is not None}

    def _sample_batch(self, batch: Batch, index: int) -> SampleBatch:
        """`index`: the run's count of updates before this one (the actor steps on every `actor_every`-th;
        the `actor_step` column exists only when actor_every > 1)."""
        n = len(batch["action"])
        extra = {}
        if self.cfg.actor_every > 1:
            extra["actor_step"] = np.full(n, (index + 1) % self.cfg.actor_every == 0, np.float32)
        if self.cfg.cql_calibrated:
            if "mc_return" not in batch:
                raise ValueError("learner.cql_calibrated needs each batch's Monte-Carlo returns (mc_return: "
                                 "GroupSampler(returns_to_go=True))")
            extra["mc_return"] = batch["mc_return"].astype(np.float32)
        return SampleBatch(
            {
                "obs": self._norm(flatten_obs(batch, self.cfg.obs_keys)),
                "new_obs": self._norm(flatten_obs(batch, self.cfg.obs_keys, "next_obs/")),
                "actions": batch["action"].astype(np.float32),
                "rewards": batch["reward"].astype(np.float32),
                "terminateds": batch["done"].astype(bool),
                "truncateds": np.zeros(n, bool),
                "n_step": batch["n_step"].astype(np.int64),
                "weights": batch.get("weights", np.ones(n, np.float32)).astype(np.float32),
                "bc_mask": batch.get("bc_mask", np.zeros(n, np.float32)).astype(np.float32),
                **extra,
            }
        )

    def bc_pretrain(self, obs: np.ndarray, actions: np.ndarray, steps: int) -> dict[str, float]:
        """Behaviour-clone the actor before online learning; returns the final losses."""
        return self._on_learner(
            lambda learner, o, a: learner.bc_pretrain(o, a, steps, self.cfg.batch_size, self.cfg.seed),
            o=self._norm(obs.astype(np.float32)),
            a=actions.astype(np.float32),
        )

    def anchor_state(self) -> dict[str, np.ndarray]:
        return self._on_learner(lambda learner: learner.anchor_state())

    def load_anchor(self, state: dict[str, np.ndarray]) -> None:
        self._on_learner(lambda learner, st: learner.load_anchor(st), st=state)

    def take_anchor(self) -> None:
        """Freeze the actor as it is now as the anchor (learner.anchor_weight)."""
        self._on_learner(lambda learner: learner.take_anchor())

    def ema_state(self) -> dict[str, np.ndarray]:
        """learner.actor_ema: the averaged actor's weights ({} without one)."""
        return self._on_learner(lambda learner: learner.ema_state())

    def load_ema(self, state: dict[str, np.ndarray]) -> None:
        """The averaged actor from `ema_state`; an empty state starts the average at the actor as it is."""
        if state:
            self._on_learner(lambda learner, st: learner.load_ema(st), st=state)
        elif self.cfg.actor_ema:
            self._on_learner(lambda learner: learner.reset_ema())

    def q_values(self, batch: Batch) -> np.ndarray:
        obs = self._norm(flatten_obs(batch, self.cfg.obs_keys))
        return self._on_learner(
            lambda learner, o, a: learner.ppl_q_values(o, a), o=obs, a=batch["action"].astype(np.float32)
        )

    def entropy(self, batch: Batch) -> float:
        obs = self._norm(flatten_obs(batch, self.cfg.obs_keys))
        return self._on_learner(lambda learner, o: learner.ppl_entropy(o), o=obs)

    def actor_tensors(self) -> dict[str, np.ndarray]:
        return self._on_learner(lambda learner: learner.actor_tensors())

    def act(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        """Deterministic action for one observation dict (evaluation)."""
        x = self._norm(np.concatenate([np.asarray(obs[k], np.float32).reshape(-1) for k in self.cfg.obs_keys])[None])
        return self._on_learner(lambda learner, o: learner.deterministic_actions(o), o=x)[0]


def _concat(batches: list[SampleBatch]) -> SampleBatch:
    if len(batches) == 1:
        return batches[0]
    return SampleBatch({k: np.concatenate([b[k] for b in batches]) for k in batches[0].keys()})


def _scalar(v) -> float | None:
    try:
        x = v.peek() if hasattr(v, "peek") else v
        x = float(x.item() if hasattr(x, "item") else x)
    except (TypeError, ValueError, RuntimeError):
        return None
    return x
