"""sim-robot renders by default: each profile camera publishes, over DDS, the MuJoCo render of the
Meta-World camera it maps to, frame for frame what the env renders for the same actions."""

import json
import time

import numpy as np
import pytest
import yaml

from robot_bridge.codec import String, array_msg, decode, encode
from robot_bridge.errors import ProfileError
from robot_bridge.profile import RobotProfile, SimSpec, load_profile
from robot_bridge.sim_robot import SimRobot
from robot_bridge.transport.base import RELIABLE_QOS, SENSOR_QOS
from robot_bridge.transport.dds import LOOPBACK_XML, DdsTransport
from tests.bridge.helpers import SIM_PROFILE, new_domain
from worldsample.sim import SimArmConfig, make_env

SIZE = 32


def two_camera_profile(tmp_path, **sim) -> RobotProfile:
    """The sim arm profile as shipped (its `sim:` section included) with an RGB corner and a mono wrist camera."""
    data = yaml.safe_load(SIM_PROFILE.read_text())
    corner = dict(data["cameras"][0], height=SIZE, width=SIZE)
    wrist = dict(corner, name="wrist", topic="/cam/wrist/image_raw", channels=1)
    data["cameras"] = [corner, wrist]
    data["sim"].update(sim)
    path = tmp_path / "profile.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_profile(path)


def wait(pred, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def test_render_is_the_default():
    assert SimSpec().images == "render"
    assert load_profile(SIM_PROFILE).sim.images == "render"


def test_each_camera_publishes_the_render_of_its_meta_world_camera(tmp_path):
    # physics on its clock: this test steps it by hand through the timers
    profile = two_camera_profile(tmp_path, cameras={"wrist": "gripperPOV"}, seed=3, physics="clock")
    domain = new_domain()
    robot = SimRobot(profile, DdsTransport(domain, LOOPBACK_XML))
    test = DdsTransport(domain, LOOPBACK_XML)
    frames: dict[str, list[np.ndarray]] = {"corner": [], "wrist": []}

    def on_frame(name):
        def cb(raw, _):
            msg = decode(raw, "sensor_msgs/msg/Image")
            assert msg.encoding == ("rgb8" if name == "corner" else "mono8")
            frames[name].append(np.asarray(msg.data, np.uint8).reshape(msg.height, msg.width, -1))
        return cb

    for cam in profile.cameras:
        test.subscribe(cam.topic, cam.type, SENSOR_QOS, on_frame(cam.name))
    command = test.publisher(profile.control.robot_command, "std_msgs/msg/String", RELIABLE_QOS)
    action = test.publisher(profile.action.topic, profile.action.type, RELIABLE_QOS)
    wait(lambda: all(robot.t.matched_subscribers(c.topic) for c in profile.cameras)
         and test.matched_subscribers(profile.action.topic) and test.matched_subscribers(profile.control.robot_command),
         10, "DDS discovery")
    physics, publish_corner, publish_wrist = [fn for _, fn in robot.timers()[:3]]

    command(encode(String(json.dumps({"cmd": "reset", "reset_id": 1, "episode": 0}))))
    wait(lambda: physics(time.time_ns()) or robot.resets == 1, 10, "the reset")  # then one step holding still
    push = np.array([0.0, 1.0, 0.0, 0.0], np.float32)  # the hand moves along +y, 1 cm a step
    action(encode(array_msg(profile.action.type, push, "action")))
    wait(lambda: robot.actions_received == 1, 10, "the action")

    received = []
    for _ in range(6):
        physics(time.time_ns())
        n = {k: len(v) for k, v in frames.items()}
        publish_corner(time.time_ns())
        publish_wrist(time.time_ns())
        wait(lambda n=n: all(len(v) > n[k] for k, v in frames.items()), 10, "the frames")
        received.append({k: v[-1] for k, v in frames.items()})
    robot.close()
    robot.t.close()
    test.close()

    # the same episode in the env: reset with the robot's seed, one step holding still, then the pushes
    env = make_env(SimArmConfig(task=profile.sim.task, cameras=["corner", "gripperPOV"], image_size=SIZE,
                                max_episode_steps=profile.episode.max_steps + 50))
    env.reset(seed=3)
    env.step(np.zeros(4, np.float32))
    for got in received:
        obs = env.step(push)[0]
        np.testing.assert_array_equal(got["corner"], obs["image_corner"])
        luma = (obs["image_gripperPOV"] @ np.array([0.299, 0.587, 0.114])).round()  # ITU-R BT.601
        np.testing.assert_array_equal(got["wrist"][..., 0], luma)
    env.close()
    # a moving arm, seen differently by the two cameras
    for cam in ("corner", "wrist"):
        assert np.abs(received[0][cam].astype(int) - received[-1][cam]).sum() > 0
    assert np.abs(received[-1]["corner"].mean(axis=-1) - received[-1]["wrist"][..., 0]).mean() > 10


def test_a_camera_that_is_no_meta_world_camera_needs_a_mapping(tmp_path):
    profile = two_camera_profile(tmp_path)  # "wrist" is not a Meta-World camera and is not mapped
    with pytest.raises(ProfileError, match=r"\['wrist'\].*sim\.cameras"):
        SimRobot(profile, transport=None)
    with pytest.raises(ProfileError, match=r"sim\.cameras.*unknown Meta-World camera.*'ceiling'"):
        two_camera_profile(tmp_path, cameras={"wrist": "ceiling"})


def test_the_main_jobs_render_settings_reach_the_simulated_arm():
    from services.cli.dds_robot import DEFAULT_PROFILE, profile_overrides
    from worldsample.config import load_config

    cfg = load_config(None, ["env.render.shadows=true", "env.render.multisample=4"])
    sim = load_profile(DEFAULT_PROFILE, profile_overrides(cfg)).sim
    assert sim.render == cfg.env.render and sim.render.shadows and sim.render.multisample == 4


def test_the_main_jobs_cameras_reach_the_simulated_arm_and_the_bridge():
    """The run's cameras and frame size become the profile's camera streams: the image profile's
    corner4 + gripperPOV (before, the main job recorded the profile's own `corner` whatever the run
    asked for, and the image profile's first update stopped on the missing cameras)."""
    from services.cli.dds_robot import DEFAULT_PROFILE, profile_overrides
    from worldsample.config import load_config

    shipped = load_profile(DEFAULT_PROFILE).cameras
    cfg = load_config(None, [])  # the embedded default asks for what the profile has: left as it is
    assert [c.name for c in shipped] == cfg.env.cameras
    assert load_profile(DEFAULT_PROFILE, profile_overrides(cfg)).cameras == shipped

    cfg = load_config(None, ["env.cameras=[corner4,gripperPOV]", "env.image_size=48"])
    cams = load_profile(DEFAULT_PROFILE, profile_overrides(cfg)).cameras
    assert [(c.name, c.height, c.width) for c in cams] == [("corner4", 48, 48), ("gripperPOV", 48, 48)]
    assert len({c.topic for c in cams}) == 2 and all(c.type == shipped[0].type and c.rate_hz == shipped[0].rate_hz
                                                     for c in cams)
    transport = DdsTransport(new_domain(), LOOPBACK_XML)
    robot = SimRobot(load_profile(DEFAULT_PROFILE, profile_overrides(cfg)), transport)
    try:  # what the simulated arm renders for them: the Meta-World cameras of those names, at that size
        assert robot.obs["image_corner4"].shape == robot.obs["image_gripperPOV"].shape == (48, 48, 3)
    finally:
        robot.close()
        transport.close()  # no DDS participant outlives the test

    cfg = load_config(None, ["env.cameras=[]"])
    assert load_profile(DEFAULT_PROFILE, profile_overrides(cfg)).cameras == []


def test_the_main_jobs_real_step_budget_reaches_the_bridge():
    from services.cli.dds_robot import DEFAULT_PROFILE, profile_overrides
    from worldsample.config import load_config

    cfg = load_config(None, ["loop.real_steps=1234"])
    episode = load_profile(DEFAULT_PROFILE, profile_overrides(cfg)).episode
    assert episode.auto_start and episode.auto_start_steps == 1234
    assert load_profile(DEFAULT_PROFILE).episode.auto_start_steps is None  # a profile alone sets no budget


def test_the_main_jobs_lag_bound_reaches_the_bridge():
    from services.cli.dds_robot import DEFAULT_PROFILE, profile_overrides
    from worldsample.config import load_config

    for value, expected in (("77", 77), ("null", None)):
        cfg = load_config(None, [f"loop.max_lag_steps={value}"])
        assert load_profile(DEFAULT_PROFILE, profile_overrides(cfg)).episode.max_policy_lag_steps == expected
    assert load_config(None, []).loop.max_lag_steps == 300
    assert load_profile(DEFAULT_PROFILE).episode.max_policy_lag_steps is None  # a profile alone never waits


def test_a_camera_with_a_native_size_is_rendered_there_and_cut_down_by_the_bridge(tmp_path):
    """The simulated arm publishes what a real camera would: frames of the camera's native size. The
    bridge's own converter (crop box, area resize: worldsample.frames) makes the stored frame of it.
    Before, the arm rendered at the stored size and the bridge rejected every frame as wrong_size."""
    from robot_bridge.bridge import stream_converter

    data = yaml.safe_load(SIM_PROFILE.read_text())
    data["cameras"][0].update(height=16, width=16, native={"height": 48, "width": 48},
                              crop={"top": 8, "left": 4, "height": 32, "width": 40})
    data["sim"].update(seed=5, physics="clock")  # the timers: physics first, then the camera
    path = tmp_path / "profile.yaml"
    path.write_text(yaml.safe_dump(data))
    profile = load_profile(path)
    cam = profile.cameras[0]
    domain = new_domain()
    robot = SimRobot(profile, DdsTransport(domain, LOOPBACK_XML))
    test = DdsTransport(domain, LOOPBACK_XML)
    got = []
    test.subscribe(cam.topic, cam.type, SENSOR_QOS, lambda raw, _: got.append(decode(raw, cam.type)))
    try:
        wait(lambda: robot.t.matched_subscribers(cam.topic), 10, "DDS discovery")
        publish = robot.timers()[1][1]
        publish(time.time_ns())
        wait(lambda: got, 10, "a frame")
    finally:
        robot.close()
        robot.t.close()
        test.close()

    msg = got[0]
    assert (msg.height, msg.width) == (48, 48)  # the native size on the wire, not the stored 16x16
    env = make_env(SimArmConfig(task=profile.sim.task, cameras=["corner"], image_size=48,
                                max_episode_steps=profile.episode.max_steps + 50))
    native = env.reset(seed=5)[0]["image_corner"]
    env.close()
    np.testing.assert_array_equal(np.asarray(msg.data, np.uint8).reshape(48, 48, 3), native)
    stamp, stored = stream_converter(cam, profile)(msg)
    assert stored.shape == (16, 16, 3)
    np.testing.assert_array_equal(stored, cam.geometry.apply(native))

    data["cameras"].append(dict(data["cameras"][0], name="gripperPOV", topic="/cam/wrist/image_raw",
                                native={"height": 32, "width": 32}, crop=None))
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ProfileError, match="one native size, got corner 48x48, gripperPOV 32x32"):
        SimRobot(load_profile(path), transport=None)


def test_the_main_jobs_exploration_scale_reaches_the_bridge():
    from services.cli.dds_robot import DEFAULT_PROFILE, profile_overrides
    from worldsample.config import load_config

    cfg = load_config(None, ["loop.explore_scale=0.4"])
    episode = load_profile(DEFAULT_PROFILE, profile_overrides(cfg)).episode
    assert episode.explore and episode.explore_scale == 0.4
    assert load_profile(DEFAULT_PROFILE, profile_overrides(load_config(None, []))).episode.explore_scale == 1.0
    # and its fall over the run, in committed steps of the run's budget
    cfg = load_config(None, ["loop.explore_scale_end=0.3", "loop.explore_anneal=[0.25,0.5]", "loop.real_steps=2000"])
    episode = load_profile(DEFAULT_PROFILE, profile_overrides(cfg)).episode
    assert (episode.explore_scale_end, episode.explore_anneal_steps) == (0.3, (500, 1000))
    assert [episode.explore_scale_at(n) for n in (0, 500, 750, 1000, 3000)] == pytest.approx([1, 1, 0.65, 0.3, 0.3])
    default = load_profile(DEFAULT_PROFILE, profile_overrides(load_config(None, []))).episode
    assert (default.explore_scale_end, default.explore_anneal_steps) == (0.1, (2000, 3000))
    off = load_profile(DEFAULT_PROFILE, profile_overrides(load_config(None, ["loop.explore_scale_end=null"])))
    assert off.episode.explore_scale_end is None and off.episode.explore_scale_at(10**6) == 1.0
