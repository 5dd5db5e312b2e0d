"""The per-update bookkeeping of RLlib's SAC learner, done in fewer, larger torch calls.

bench/learner.py profiles one `SACAgent.update` of the twin MLP critic at [128, 128]/128 against a
plain torch SAC of the same arithmetic. Three costs of RLlib 2.60's SAC learner that are not
arithmetic, replaced here with the same results:

- one backward pass per optimiser (`qf`, `qf_twin`, `policy`, `alpha`, `qf_extra`), each with
  `retain_graph=True`: the losses touch disjoint parameters (the Bellman targets are detached,
  the critics are frozen in the actor's loss, alpha is detached outside its own loss), so one
  backward pass of their sum gives every parameter the gradient its own loss gives it;
- single-tensor Adam: the optimisers step with `foreach` kernels (one call per group of tensors);
- a finiteness check of every gradient, twice, each with its own host sync (`torch.isfinite(g).all()`
  per parameter before setting it and again per optimiser before stepping): one `torch._foreach_norm`
  over all gradients and one check of the stacked norms; only if that finds a non-finite value
  does RLlib's own per-parameter path run (zeroing or skipping as its config says);
- Polyak averaging through `state_dict()` / `load_state_dict()` per network pair, once per
  learner call: one `torch._foreach_lerp_` over all target parameters after every gradient step,
  so a call with several minibatches (`SACAgent.update_many`, the update-to-data ratio inside one
  learner call) is the same as that many calls.

tests/learner/test_fast_update.py runs the same updates both ways (`rllib_reference` restores
RLlib's three paths) and compares every weight. Determinism per seed is unchanged.
"""

from __future__ import annotations

import torch
from ray.rllib.algorithms.dqn.dqn_learner import DQNLearner
from ray.rllib.core.learner.utils import update_target_network
from ray.rllib.core.rl_module.apis import TargetNetworkAPI
from ray.rllib.utils.metrics import ALL_MODULES, NUM_TARGET_UPDATES


class FastUpdateMixin:
    """Put before RLlib's SACTorchLearner in the bases."""

    @property
    def rllib_reference(self) -> bool:
        """RLlib's own backward passes, Adam and target updates (`SACAgent(..., rllib_reference=True)`)."""
        return bool(self.config.learner_config_dict.get("rllib_reference", False))

    def configure_optimizers_for_module(self, module_id, config=None) -> None:
        super().configure_optimizers_for_module(module_id, config)
        if not self.rllib_reference:
            for _, optim in self.get_optimizers_for_module(module_id):
                for group in optim.param_groups:
                    group["foreach"] = True

    def compute_gradients(self, loss_per_module, **kwargs):
        if self.rllib_reference:
            return super().compute_gradients(loss_per_module, **kwargs)
        grads = {}
        for module_id in set(loss_per_module) - {ALL_MODULES}:
            optims = self.get_optimizers_for_module(module_id)
            for _, optim in optims:
                optim.zero_grad(set_to_none=True)
            total = sum(self._temp_losses.pop((module_id, name + "_loss")) for name, _ in optims)
            total.backward()
            for _, optim in optims:
                params = self.filter_param_dict_for_optimizer(self._params, optim)
                grads.update({pid: p.grad for pid, p in params.items()})
        if self._temp_losses:
            raise RuntimeError(f"losses without an optimiser: {sorted(self._temp_losses)}")
        return grads

    def apply_gradients(self, gradients_dict) -> None:
        if (self.rllib_reference or self.config.torch_skip_nan_gradients or self._grad_scalers is not None
                or self._lr_scheduler_classes is not None):
            return super().apply_gradients(gradients_dict)
        grads = [g for g in gradients_dict.values() if g is not None]
        if grads and not bool(torch.isfinite(torch.stack(torch._foreach_norm(grads))).all()):
            return super().apply_gradients(gradients_dict)  # RLlib's warnings and nan/inf handling
        for pid, grad in gradients_dict.items():
            self._params[pid].grad = grad
        for module_id, names in self._module_optimizers.items():
            for name in names:
                self.get_optimizer(module_id, name).step()

    def _uncompiled_update(self, batch, **kwargs):
        out = super()._uncompiled_update(batch, **kwargs)
        if not self._rllib_targets():
            self._polyak_step()  # after every gradient step, also when one call holds several
        return out

    def after_gradient_based_update(self, *, timesteps) -> None:
        if self._rllib_targets():
            return super().after_gradient_based_update(timesteps=timesteps)
        # DQNLearner's part is the target update, done per gradient step in _uncompiled_update
        super(DQNLearner, self).after_gradient_based_update(timesteps=timesteps)

    def _rllib_targets(self) -> bool:
        """RLlib's target updates: for the reference, or when they are not every step (its
        `target_network_update_freq` counts environment steps, once per learner call)."""
        return self.rllib_reference or any(
            self.config.get_config_for_module(mid).target_network_update_freq > 0 for mid in self.module._rl_modules)

    def _polyak_step(self) -> None:
        for module_id, module in self.module._rl_modules.items():
            if not isinstance(module.unwrapped(), TargetNetworkAPI):
                continue
            tau = self.config.get_config_for_module(module_id).tau
            pairs = module.unwrapped().get_target_network_pairs()
            online = [p for main, _ in pairs for p in main.parameters()]
            target = [p for _, tgt in pairs for p in tgt.parameters()]
            if len(online) != len(target) or any(a.shape != b.shape for a, b in zip(online, target)):
                for main, tgt in pairs:  # not parameter-for-parameter: RLlib's own update
                    update_target_network(main_net=main, target_net=tgt, tau=tau)
            else:
                with torch.no_grad():
                    torch._foreach_lerp_(target, online, tau)
            self.metrics.log_value((module_id, NUM_TARGET_UPDATES), 1, reduce="lifetime_sum")
