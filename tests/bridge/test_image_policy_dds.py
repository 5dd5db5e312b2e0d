"""A pixel policy on the robot path: an encoder + actor trained here from rendered expert episodes
(behaviour cloning, no task state), exported to ONNX, then run by the bridge with onnxruntime
against the simulated arm over DDS on loopback, its camera rendered by MuJoCo. What the bridge
stored is what the ONNX policy computes from the stored frame and proprioception alone."""

import numpy as np

from tests.bridge.helpers import Rig, small_profile
from worldsample.policy.onnx_actor import ONNX_FILE, OnnxActor
from worldsample.policy.onnx_export import publish_vision_policy
from worldsample.policy.registry import PolicyRegistry
from worldsample.store import EpisodeStore
from worldsample.store.verify import verify_store

SIZE = 32


def expert_episodes(episodes: int = 2, steps: int = 30):
    """Rendered corner frames, proprio and the scripted expert's actions, as pretraining data."""
    from worldsample.sim import ScriptedExpert, SimArmConfig, make_env
    from worldsample.vision.pretrain import DemoData

    env = make_env(SimArmConfig(cameras=["corner"], image_size=SIZE, include_state=False), seed=0)
    expert = ScriptedExpert(env)
    frames, proprio, actions, ids = [], [], [], []
    for e in range(episodes):
        obs, _ = env.reset(seed=e)
        assert "state" not in obs
        for _ in range(steps):
            a = expert.act()
            frames.append(obs["image_corner"])
            proprio.append(obs["proprio"])
            actions.append(a)
            ids.append(e)
            obs, _, term, trunc, _ = env.step(a)
            if term or trunc:
                break
    env.close()
    return DemoData(cameras=["corner"], images={"corner": np.stack(frames)}, proprio=np.stack(proprio),
                    action=np.stack(actions).astype(np.float32), episode=np.asarray(ids))


def test_a_pixel_policy_drives_the_simulated_arm_through_the_bridge(tmp_path):
    from worldsample.vision.pretrain import PretrainConfig, pretrain

    result = pretrain(expert_episodes(), PretrainConfig(latent_dim=16, channels=[8, 8], strides=[2, 2], hidden=[32],
                                                        steps=30, batch_size=32))
    assert result.history[-1]["bc"] < result.history[0]["bc"]  # it learnt something from the frames
    run = tmp_path / "run"
    cfg, tensors = result.policy()
    version = publish_vision_policy(run, result.encoder, cfg, tensors)
    vdir = PolicyRegistry(run).dir.path(version)
    actor = OnnxActor(vdir / ONNX_FILE, config=cfg.model_copy(update={"version": version}))
    assert sorted(actor.images) == ["image_corner"] and sorted(actor.vectors) == ["proprio"]  # no task state

    profile = small_profile(tmp_path, **{"sim.images": "render"})
    with Rig(tmp_path, profile, run) as rig:
        op = rig.op
        op.wait_ready()
        st = op.record_episode()
        assert st["policy_version"] == version and st["episodes"]["committed"] == 1, st
        assert rig.bridge.stop() == 0

    assert verify_store(run).ok
    reader = EpisodeStore(run).reader("real")
    (rec,) = reader.episode_records()
    assert rec.policy_version == version
    ep = reader.episode(rec.episode)
    frames = ep["image_corner"]
    assert frames.shape[1:] == (SIZE, SIZE, 3) and frames.std() > 10  # a rendered scene, not a blank frame
    assert not ep["intervention"].any()
    # every stored action is the ONNX policy's on the stored frame and proprio (limits do not bind here)
    for k in range(len(ep["action"])):
        want = actor.act({"image_corner": frames[k], "proprio": ep["proprio"][k]})
        np.testing.assert_allclose(ep["action"][k], want, atol=1e-5)
    assert np.ptp(ep["action"], axis=0).max() > 1e-3  # the actions follow what the camera sees
