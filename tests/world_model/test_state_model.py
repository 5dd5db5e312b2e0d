"""The state profile's world model: canonical quaternions (q and -q are one rotation) in its inputs,
targets and evaluation, the normalised state as its latent (`vector_identity`), the previous frame a
state carries copied rather than predicted (`previous_frame`), and its held-out error per state part
against copying the last state."""

import logging

import numpy as np
import pytest
import torch

from worldsample.store import EpisodeStore, GroupSchema, KeySpec
from worldsample.world_model.config import WorldModelConfig
from worldsample.world_model.data import WindowSource
from worldsample.world_model.evaluate import evaluate_vectors
from worldsample.world_model.imagine import Imaginer
from worldsample.world_model.model import WorldModel
from worldsample.world_model.modes import fit_to_store, train_run
from worldsample.world_model.rotations import align_quaternions, canonical_quaternions
from worldsample.world_model.train import cache_keys

ROTATION = np.array([0.0, 0.0, 0.6, 0.8], np.float32)  # a rotation about z, as (x, y, z, w)


def test_canonical_quaternions_negate_only_those_with_a_negative_w():
    x = np.array([[9.0, 0.1, 0.2, 0.3, -0.9, 7.0], [9.0, -0.1, 0.2, 0.3, 0.9, 7.0]], np.float32)
    out = canonical_quaternions(x, [1])
    np.testing.assert_array_equal(out[0], np.float32([9.0, -0.1, -0.2, -0.3, 0.9, 7.0]))
    np.testing.assert_array_equal(out[1], x[1])
    assert x[0, 4] == -0.9  # a copy: the caller's array is left alone
    np.testing.assert_array_equal(canonical_quaternions(torch.from_numpy(x), [1]).numpy(), out)
    assert canonical_quaternions(x, []) is x


def test_a_quaternion_layout_that_does_not_fit_is_refused():
    with pytest.raises(ValueError, match="not a vector key"):
        WorldModelConfig(image_keys=[], vector_keys={"state": 7}, quaternions={"pose": [0]})
    with pytest.raises(ValueError, match=r"\[4\] do not fit"):
        WorldModelConfig(image_keys=[], vector_keys={"state": 7}, quaternions={"state": [0, 4]})


def schema(dim: int = 7) -> GroupSchema:
    return GroupSchema.build({"state": KeySpec(dtype="float32", shape=(dim,), finite=True)}, action_dim=2,
                             chunk_len=16)


def hand_store(path, dim: int, frame, episodes: int = 10, length: int = 20, seed: int = 0) -> EpisodeStore:
    """Episodes of a hand x, y moved by the action (2 dims); `frame(pos, prev, t)` makes each step's
    state from the position, the position one step earlier and the step."""
    rng = np.random.default_rng(seed)
    store = EpisodeStore(path, create=True)
    store.ensure_group("demo", schema(dim))
    with store.writer("demo") as w:
        for _ in range(episodes):
            pos = rng.uniform(-0.5, 0.5, 2)
            prev, states, acts = pos, [], []
            for t in range(length):
                a = rng.uniform(-1, 1, 2).astype(np.float32)
                states.append(np.asarray(frame(pos, prev, t), np.float32))
                acts.append(a)
                prev, pos = pos, pos + 0.05 * a
            append_episode(w, states, acts)
    return store


def append_episode(writer, states, actions) -> None:
    """One real episode of these states and actions, done at its last step, no reward or success."""
    n = len(states)
    done = np.zeros(n, bool)
    done[-1] = True
    writer.append_episode({"state": np.float32(states), "action": np.float32(actions), "done": done,
                           "reward": np.zeros(n, np.float32), "success": np.zeros(n, bool)}, domain="real")


def store_with_flips(path) -> EpisodeStore:
    """state = hand x, y, then a fixed rotation whose sign flips every step (what a pose message may
    carry), then a constant."""
    return hand_store(path, 7, lambda pos, prev, t: np.concatenate([pos, ROTATION * (-1) ** t, [0.3]]))


def state_config(**changes) -> WorldModelConfig:
    return WorldModelConfig.model_validate({
        "image_keys": [], "vector_keys": {"state": 7}, "action_dim": 2,
        "autoencoder": {"vector_identity": True, "vector_grid": 1},
        "dynamics": {"history": 2, "width": 32, "blocks": 2, "cond_dim": 32},
        "train": {"batch": 32, "ae_steps": 50, "dyn_steps": 400, "dyn_lr": 2e-3},
    } | changes)


def test_the_identity_latent_is_the_normalised_state_and_decodes_exactly():
    cfg = state_config(quaternions={"state": [2]})
    model = WorldModel(cfg).eval()
    assert cfg.latent_channels == 7 and not list(model.ae.parameters())
    with torch.no_grad():
        model.vec_mean.normal_(0, 1)
        model.vec_std.uniform_(0.5, 2)
        model.lat_mean.normal_(0, 1)
        model.lat_std.uniform_(0.5, 2)
    x = np.concatenate([np.random.default_rng(0).normal(0, 1, (5, 2)), -np.tile(ROTATION, (5, 1)),
                        np.ones((5, 1))], axis=1).astype(np.float32)
    with torch.no_grad():
        back = model.decode(model.encode({"state": x}))["state"].numpy()
    np.testing.assert_allclose(back, canonical_quaternions(x, [2]), atol=1e-5)  # the flipped sign comes back canonical


def test_fit_to_store_leaves_out_a_quaternion_layout_declared_for_another_size(tmp_path, caplog):
    store = EpisodeStore(tmp_path, create=True)
    store.ensure_group("demo", schema(dim=9))
    cfg = state_config(quaternions={"state": [2]})  # declared for 7 values
    with caplog.at_level(logging.WARNING):
        fitted = fit_to_store(cfg, store, "demo", images=False)
    assert fitted.vector_keys == {"state": 9} and fitted.quaternions == {}
    assert "quaternions of 'state' left out" in caplog.text
    store.ensure_group("real", schema(dim=7))
    assert fit_to_store(cfg, store, "real", images=False).quaternions == {"state": [2]}


@pytest.mark.parametrize("quaternions", [{"state": [2]}, {}])
def test_a_state_model_beats_copying_and_a_sign_flip_is_not_motion(tmp_path, quaternions):
    store_with_flips(tmp_path)
    torch.set_num_threads(1)
    model, _ = train_run(tmp_path, state_config(quaternions=quaternions), "demo", out_dir=tmp_path / "wm")
    src = WindowSource(EpisodeStore(tmp_path), {"demo": 1.0}, cache_keys(model.cfg), model.cfg.train.holdout_every,
                       split="heldout")
    parts = {"hand": ("state", slice(0, 2)), "rotation": ("state", slice(2, 6))}
    r = evaluate_vectors(model, src, horizons=[1, 4], per_episode=8, parts=parts)["horizons"]
    assert set(r["1"]) == {f"rmse_{p}{n}" for p in ("", "copy_", "velocity_") for n in ("state", "hand", "rotation")}
    # the hand moves by the action: the model predicts it better than copying the last position
    assert r["1"]["rmse_hand"] < 0.5 * r["1"]["rmse_copy_hand"] and r["4"]["rmse_hand"] < 0.5 * r["4"]["rmse_copy_hand"]
    if quaternions:  # canonical: the rotation never changes, and the model keeps it
        assert r["1"]["rmse_copy_rotation"] == 0.0 and r["4"]["rmse_rotation"] < 0.05
    else:  # raw: every step looks like a jump of 2 * |q| in the rotation, which copying gets wrong at odd steps
        assert r["1"]["rmse_copy_rotation"] > 0.5


def test_the_backbone_follows_the_latent_unless_named():
    assert state_config().backbone == "mlp"  # state only, one cell
    assert state_config(autoencoder={"vector_grid": 2}).backbone == "conv"
    cameras = WorldModelConfig(image_keys=["image_corner"], image_size=16)
    assert cameras.backbone == "conv"
    with pytest.raises(ValueError, match="backbone mlp is for state-only models"):
        WorldModelConfig(image_keys=["image_corner"], image_size=16, dynamics={"backbone": "mlp"})


def test_the_loops_state_model_and_the_image_profiles_keys():
    from worldsample.loop.config import LoopConfig
    from worldsample.sim.layout import PREVIOUS_FRAME, QUATERNIONS

    wm = LoopConfig().world_model
    assert wm.backbone == "mlp" and wm.autoencoder.vector_identity and wm.quaternions == {"state": QUATERNIONS}
    assert wm.previous_frame == {"state": PREVIOUS_FRAME} and wm.copies_previous_frame
    vision = LoopConfig.model_validate({"vision": {"enabled": True}, "recommend": False,
                                        "learner": {"obs_keys": ["latent", "proprio"]}}).world_model
    assert set(vision.vector_keys) == {"latent", "proprio"} and vision.quaternions == {}  # no state, no layout
    assert vision.previous_frame == {}


def store_with_previous_frame(path) -> EpisodeStore:
    """state = hand x, y, the hand's x, y one step earlier, a constant: the way Meta-World's state
    carries its previous frame."""
    return hand_store(path, 5, lambda pos, prev, t: np.concatenate([pos, prev, [0.3]]))


@pytest.mark.parametrize("declared", [True, False])
def test_the_previous_frame_is_copied_not_predicted(tmp_path, declared):
    store_with_previous_frame(tmp_path)
    torch.set_num_threads(1)
    cfg = state_config(vector_keys={"state": 5}, previous_frame={"state": [2, 0, 2]} if declared else {},
                       train={"batch": 32, "ae_steps": 0, "dyn_steps": 100})
    model, _ = train_run(tmp_path, cfg, "demo", out_dir=tmp_path / "wm")
    assert model.cfg.copies_previous_frame == declared
    src = WindowSource(EpisodeStore(tmp_path), {"demo": 1.0}, cache_keys(model.cfg), model.cfg.train.holdout_every,
                       split="heldout")
    r = evaluate_vectors(model, src, horizons=[1], per_episode=8, parts={"previous": ("state", slice(2, 4))})
    # imagined from real frames and real actions: every imagined frame repeats the one before it
    K, rng = model.cfg.dynamics.history, np.random.default_rng(1)
    real = np.stack([np.concatenate([p, p - 0.05, [0.3]]) for p in rng.uniform(-0.5, 0.5, (6, 2))]).astype(np.float32)
    out = Imaginer(model).rollout({"state": np.repeat(real[:, None], K, axis=1)},
                                  rng.uniform(-1, 1, (6, 5, 2)).astype(np.float32),
                                  context_actions=np.zeros((6, K - 1, 2), np.float32), domain=np.zeros(6, int), seed=0)
    frames = np.concatenate([real[:, None], out.frames["state"].reshape(6, 5, 5)], axis=1)
    gap = np.abs(frames[:, 1:, 2:4] - frames[:, :-1, 0:2]).max()
    if declared:
        assert r["horizons"]["1"]["rmse_previous"] < 1e-5 < r["horizons"]["1"]["rmse_copy_previous"]
        assert gap < 1e-5
    else:  # predicted: close, not exact
        assert r["horizons"]["1"]["rmse_previous"] > 1e-4 and gap > 1e-4


def test_a_previous_frame_layout_is_checked_and_applies_only_to_the_state_as_latent(tmp_path, caplog):
    with pytest.raises(ValueError, match="does not fit"):
        state_config(previous_frame={"state": [5, 0, 3]})
    with pytest.raises(ValueError, match="not a vector key"):
        state_config(previous_frame={"pose": [2, 0, 2]})
    assert state_config(previous_frame={"state": [4, 0, 2]}).copies_previous_frame
    # an encoder's latent is not the state: nothing to copy there
    encoded = state_config(previous_frame={"state": [4, 0, 2]}, autoencoder={"vector_identity": False})
    assert not encoded.copies_previous_frame and not len(WorldModel(encoded).repeat_at)
    store = EpisodeStore(tmp_path, create=True)
    store.ensure_group("demo", schema(dim=9))
    with caplog.at_level(logging.WARNING):
        fitted = fit_to_store(state_config(previous_frame={"state": [4, 0, 2]}), store, "demo", images=False)
    assert fitted.previous_frame == {} and "previous_frame of 'state' left out" in caplog.text


def test_align_quaternions_takes_the_sign_nearest_the_reference():
    q = np.array([[0.0, 0.0, 0.6, 0.8], [0.0, 0.0, 0.6, 0.8]], np.float32)
    ref = np.array([[0.0, 0.0, 0.7, 0.7], [0.0, 0.0, -0.7, -0.7]], np.float32)
    x = np.concatenate([np.ones((2, 1), np.float32), q], axis=1)  # a quaternion at offset 1
    r = np.concatenate([np.zeros((2, 1), np.float32), ref], axis=1)
    out = align_quaternions(x, r, [1])
    np.testing.assert_array_equal(out[0], x[0])
    np.testing.assert_array_equal(out[1], np.concatenate([[1.0], -q[1]]))  # only the quaternion turns
    np.testing.assert_array_equal(align_quaternions(torch.from_numpy(x), torch.from_numpy(r), [1]).numpy(), out)


def half_turn(theta: float) -> np.ndarray:
    """A rotation about x by `theta`, (x, y, z, w): w crosses 0 at theta = pi."""
    return np.array([np.sin(theta / 2), 0.0, 0.0, np.cos(theta / 2)], np.float32)


def test_a_window_through_a_half_turn_is_made_continuous_from_its_anchor():
    cfg = state_config(quaternions={"state": [2]})
    model = WorldModel(cfg).eval()
    with torch.no_grad():
        model.vec_mean.normal_(0, 0.1)
        model.vec_std.uniform_(0.5, 2)
    frames = np.stack([np.concatenate([[0.1 * t, 0.0], half_turn(2.6 + 0.3 * t), [0.3]]) for t in range(6)])
    frames = frames.astype(np.float32)
    with torch.no_grad():
        z = model.encode({"state": frames}).view(1, 6, 7, 1, 1)  # each frame canonical on its own
        canonical = model.decode(z[0])["state"].numpy()
        assert np.abs(np.diff(canonical[:, 2:6], axis=0)).max() > 1.5  # w crosses 0: canonical jumps
        for anchor in (0, 2, 5):
            aligned = model.decode(model.align_window(z, anchor)[0])["state"].numpy()
            np.testing.assert_allclose(aligned[anchor], canonical[anchor], atol=1e-5)  # the anchor keeps its sign
            np.testing.assert_allclose(aligned[:, [0, 1, 6]], frames[:, [0, 1, 6]], atol=1e-5)  # the rest untouched
            assert np.abs(np.diff(aligned[:, 2:6], axis=0)).max() < 0.2  # each step only by its motion
            np.testing.assert_allclose(np.abs(aligned), np.abs(frames), atol=1e-5)  # the same rotations
    encoded = WorldModel(state_config(quaternions={"state": [2]}, autoencoder={"vector_identity": False}))
    assert encoded.align_window(z, 0) is z  # an encoder's latent is not the state: nothing to align


def store_with_half_turns(path) -> EpisodeStore:
    """state = hand x, y moved by the action, an object turning about x at 0.25 rad a step from 2.0-2.8
    rad (so through the half turn, where w crosses 0), then a constant."""
    starts = iter(np.random.default_rng(7).uniform(2.0, 2.8, 10))
    theta0 = {}
    def frame(pos, prev, t):
        if t == 0:
            theta0["now"] = next(starts)
        return np.concatenate([pos, half_turn(theta0["now"] + 0.25 * t), [0.3]])
    return hand_store(path, 7, frame)


def test_a_state_model_predicts_a_turn_through_the_half_turn(tmp_path):
    store_with_half_turns(tmp_path)
    torch.set_num_threads(1)
    model, _ = train_run(tmp_path, state_config(quaternions={"state": [2]}), "demo", out_dir=tmp_path / "wm")
    src = WindowSource(EpisodeStore(tmp_path), {"demo": 1.0}, cache_keys(model.cfg), model.cfg.train.holdout_every,
                       split="heldout")
    r = evaluate_vectors(model, src, horizons=[1, 4], per_episode=8,
                         parts={"rotation": ("state", slice(2, 6))})["horizons"]
    # the turn is steady: predicted from the frames before, through the flip a canonical form has at w = 0
    for h in ("1", "4"):
        assert r[h]["rmse_rotation"] < 0.5 * r[h]["rmse_copy_rotation"], r
    # and extrapolating the last step's change, the evaluation's second baseline, follows it too
    assert r["1"]["rmse_velocity_rotation"] < 0.2 * r["1"]["rmse_copy_rotation"], r


def test_a_one_frame_model_is_scored_against_copying_alone(tmp_path):
    store_with_flips(tmp_path)
    torch.set_num_threads(1)
    cfg = state_config(quaternions={"state": [2]}, dynamics={"history": 1, "width": 32, "blocks": 2, "cond_dim": 32},
                       train={"batch": 32, "ae_steps": 10, "dyn_steps": 20})
    model, _ = train_run(tmp_path, cfg, "demo", out_dir=tmp_path / "wm")
    src = WindowSource(EpisodeStore(tmp_path), {"demo": 1.0}, cache_keys(model.cfg), model.cfg.train.holdout_every,
                       split="heldout")
    r = evaluate_vectors(model, src, horizons=[1, 2], per_episode=4)["horizons"]  # no past action to pass on
    assert set(r["1"]) == {"rmse_state", "rmse_copy_state"}  # one frame has no velocity to extrapolate


def coasting_store(path, episodes: int = 12, length: int = 24) -> EpisodeStore:
    """state = a hand x, y that coasts: its velocity decays by 0.8 a step and the action (2 dims) adds to it,
    so the last step's change says most of the next one's."""
    rng = np.random.default_rng(3)
    store = EpisodeStore(path, create=True)
    store.ensure_group("demo", schema(2))
    with store.writer("demo") as w:
        for _ in range(episodes):
            pos, vel = rng.uniform(-0.5, 0.5, 2), rng.uniform(-0.05, 0.05, 2)
            states, acts = [], []
            for _ in range(length):
                a = rng.uniform(-1, 1, 2)
                states.append(pos.copy())
                acts.append(a)
                vel = 0.8 * vel + 0.01 * a
                pos = pos + vel
            append_episode(w, states, acts)
    return store


def test_an_untrained_model_copies_or_extrapolates_by_its_velocity_prior():
    history = torch.randn(4, 3, 2, 1, 1)
    actions = torch.zeros(4, 3, 2)
    for prior, expected in ((0.0, history[:, -1]), (1.0, 2 * history[:, -1] - history[:, -2]),
                            (0.5, 1.5 * history[:, -1] - 0.5 * history[:, -2])):
        cfg = state_config(vector_keys={"state": 2}, dynamics={"history": 3, "width": 32, "blocks": 2,
                                                               "cond_dim": 32, "velocity_prior": prior})
        model = WorldModel(cfg).eval()  # the trunk starts at zero change beyond the prior
        with torch.no_grad():
            nxt, _ = model.step(history, actions, torch.zeros(4, dtype=torch.long))
        torch.testing.assert_close(nxt, expected)


def test_a_model_trained_with_the_velocity_prior_learns_what_extrapolation_misses(tmp_path):
    coasting_store(tmp_path)
    torch.set_num_threads(1)
    cfg = state_config(vector_keys={"state": 2}, dynamics={"history": 2, "width": 32, "blocks": 2, "cond_dim": 32,
                                                           "velocity_prior": 1.0, "context_noise": 0.0})
    model, _ = train_run(tmp_path, cfg, "demo", out_dir=tmp_path / "wm")
    src = WindowSource(EpisodeStore(tmp_path), {"demo": 1.0}, cache_keys(model.cfg), model.cfg.train.holdout_every,
                       split="heldout")
    r = evaluate_vectors(model, src, horizons=[1], per_episode=8)["horizons"]["1"]
    # trained on the change beyond the prior: a target without it would add the velocity twice
    assert r["rmse_velocity_state"] < 0.7 * r["rmse_copy_state"], r
    assert r["rmse_state"] < 0.7 * r["rmse_velocity_state"], r


def test_an_imagined_quaternion_stays_a_unit_rotation_however_far_the_network_moves_it():
    cfg = state_config(quaternions={"state": [2]})
    model = WorldModel(cfg).eval()
    with torch.no_grad():
        model.vec_std.fill_(0.1)
        model.dynamics.member(0).trunk[-1].bias.fill_(3.0)  # a large change on every channel
        state = torch.from_numpy(np.concatenate([[0.1, 0.2], ROTATION, [0.3]]).astype(np.float32))
        z = ((state - model.vec_mean) / model.vec_std)[None, None, :, None, None].repeat(1, 2, 1, 1, 1)
        nxt, _ = model.step(z, torch.zeros(1, 2, 2), torch.zeros(1, dtype=torch.long))
    out = model.decode(nxt)["state"][0]
    assert torch.linalg.norm(out[2:6]) == pytest.approx(1.0, abs=1e-5)
    assert abs(out[0] - state[0]) > 0.1  # the other channels moved as the network said, unscaled


def test_the_dynamics_reads_a_state_far_outside_its_data_at_the_clip_and_imagines_from_the_state_itself():
    far = torch.zeros(3, 2, 7, 1, 1)
    far[:, :, 4] = 50.0  # 50 standard deviations out on one channel
    edge = far.clamp(-5, 5)
    actions, domain = torch.randn(3, 2, 2), torch.zeros(3, dtype=torch.long)
    for clip, same in ((5.0, True), (0.0, False)):
        model = WorldModel(state_config(dynamics={"history": 2, "width": 32, "blocks": 2, "cond_dim": 32,
                                                  "input_clip": clip})).eval()
        net = model.dynamics.member(0)
        with torch.no_grad():
            a, b = net.context(far, actions, domain), net.context(edge, actions, domain)
            nxt, _ = model.step(far, actions, domain)
        assert torch.equal(a.features, b.features) == same
        assert torch.allclose(nxt[:, 4], far[:, -1, 4])  # an untrained model copies: the state is not clipped


@pytest.mark.parametrize("predict", ["first", "mean"])
def test_imagination_steps_with_member_0_or_the_members_mean(predict):
    """`dynamics.predict`: an imagined step is member 0's prediction, or the mean of every member's next
    state and heads with its quaternion made unit again; the disagreement is the same either way."""
    cfg = WorldModelConfig.model_validate({
        "image_keys": [], "vector_keys": {"state": 7}, "quaternions": {"state": [3]},
        "autoencoder": {"vector_identity": True, "vector_grid": 1},
        "dynamics": {"history": 2, "width": 16, "ensemble": 3, "predict": predict}})
    torch.manual_seed(0)
    model = WorldModel(cfg).eval()
    with torch.no_grad():
        for p in model.dynamics.parameters():  # members that disagree (zero-initialised outputs would not)
            p.add_(torch.randn_like(p) * 0.3)
    rng = np.random.default_rng(0)
    states = rng.normal(0, 0.3, (4, 2, 7)).astype(np.float32)
    states[..., 3:] = ROTATION
    actions = rng.uniform(-1, 1, (4, 1, cfg.action_dim)).astype(np.float32)
    im = Imaginer(model)
    out = im.rollout({"state": states}, actions, context_actions=actions, uncertainty=True)
    with torch.no_grad():
        hist = im.encode({"state": states.reshape(8, 7)}).view(4, 2, -1, 1, 1)
        acts = torch.from_numpy(np.concatenate([actions, actions], 1))
        steps = [model.step(hist, acts, torch.zeros(4, dtype=torch.long), i) for i in range(3)]
    members = torch.stack([s[0] for s in steps])
    want = steps[0][0] if predict == "first" else model.unit_quaternions(members.mean(0))
    np.testing.assert_allclose(out.latents[:, 0].numpy(), want.numpy(), atol=1e-5)
    success = steps[0][1]["success"] if predict == "first" else torch.stack([s[1]["success"] for s in steps]).mean(0)
    np.testing.assert_allclose(out.success[:, 0], success.numpy().reshape(-1), atol=1e-5)
    np.testing.assert_allclose(out.uncertainty[:, 0], members.var(0).mean(dim=(1, 2, 3)).numpy(), rtol=1e-4)
    q = model.decode(torch.from_numpy(out.latents[:, 0].numpy()))["state"][:, 3:].numpy()
    np.testing.assert_allclose(np.linalg.norm(q, axis=1), 1.0, atol=1e-4)  # the mean is a rotation again
    if predict == "mean":
        assert not np.allclose(want.numpy(), steps[0][0].numpy(), atol=1e-3)  # the mean is not member 0
