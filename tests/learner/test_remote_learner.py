"""The scale-out path: the same SACAgent API with the learner in a remote Ray actor."""

import gymnasium as gym
import numpy as np
import pytest
import ray

from worldsample.learner import LearnerConfig, sac


@pytest.fixture
def local_ray(tmp_path):
    # address="local": a Ray of this test's own, never a cluster already running on the machine; in a
    # temp dir of its own (short, under /tmp: Ray's unix sockets), not /tmp/ray's session files, with
    # a reaper that ends it should this process die
    from services.trainer.local_ray import LocalRay

    with LocalRay(tmp_path) as local:
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
                 _temp_dir=str(local.temp_dir))
        try:
            yield
        finally:
            ray.shutdown()


def test_remote_learner_trains_probes_and_exports(local_ray):
    with pytest.raises(ValueError, match="bc_pretrain_steps needs the in-process learner"):
        LearnerConfig(num_learners=1)
    cfg = LearnerConfig(
        obs_keys=["proprio"],
        hidden=[16, 16],
        batch_size=16,
        num_learners=1,
        critic_warmup_updates=1,
        critics=3,
        bc_pretrain_steps=0,
        bc_weight=1.0,
    )
    a = sac.SACAgent(cfg, 3, gym.spaces.Box(-1, 1, (2,), np.float32))
    rng = np.random.default_rng(0)
    b = {
        "obs/proprio": rng.normal(size=(16, 3)).astype(np.float32),
        "next_obs/proprio": rng.normal(size=(16, 3)).astype(np.float32),
        "action": rng.uniform(-1, 1, (16, 2)).astype(np.float32),
        "reward": np.ones(16, np.float32),
        "done": np.zeros(16, bool),
        "n_step": np.ones(16, np.int64),
        "bc_mask": np.ones(16, np.float32),
    }
    before = a.actor_tensors()
    a.update(b)  # critic warm-up: the actor is frozen on the remote learner too
    assert all(np.array_equal(before[k], v) for k, v in a.actor_tensors().items())
    m = a.update(b)
    assert np.isfinite(m["qf_loss"]) and np.isfinite(m["qf_extra_loss"]) and np.isfinite(m["bc_mse"])
    after = a.actor_tensors()
    assert any(not np.array_equal(before[k], after[k]) for k in before)
    q = a.q_values(b)
    assert q.shape == (16,) and np.isfinite(a.entropy(b))
    act = a.act({"proprio": np.zeros(3, np.float32)})
    assert act.shape == (2,) and (np.abs(act) <= 1).all()
    a.close()
