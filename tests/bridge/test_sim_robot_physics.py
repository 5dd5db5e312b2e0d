"""When the simulated arm steps its physics: with `sim.physics: command` (the default) one step per
arriving command, so a recorded control step holds exactly one sim step; with none arriving it holds
the last command and steps on at its rate. The steps it takes are the env's own, step for step."""

import numpy as np
import yaml

from robot_bridge.codec import array_msg, encode
from robot_bridge.profile import SimSpec, load_profile
from robot_bridge.sim_robot import SimRobot
from robot_bridge.transport.dds import LOOPBACK_XML, DdsTransport
from tests.bridge.helpers import SIM_PROFILE, new_domain
from worldsample.sim import SimArmConfig, make_env


def robot_and_env(tmp_path, **sim):
    data = yaml.safe_load(SIM_PROFILE.read_text())
    data["sim"].update(images="synthetic", seed=4, **sim)
    path = tmp_path / "profile.yaml"
    path.write_text(yaml.safe_dump(data))
    profile = load_profile(path)
    robot = SimRobot(profile, DdsTransport(new_domain(), LOOPBACK_XML))
    env = make_env(SimArmConfig(task=profile.sim.task, cameras=[], max_episode_steps=profile.episode.max_steps + 50))
    return profile, robot, env


def test_command_is_the_default():
    assert SimSpec().physics == "command"
    assert load_profile(SIM_PROFILE).sim.physics == "command"


def test_one_physics_step_per_command_and_the_last_one_held_when_none_comes(tmp_path):
    profile, robot, env = robot_and_env(tmp_path)
    hold_s = 1.5 / profile.control_rate_hz

    def command(a):
        robot._on_action(encode(array_msg(profile.action.type, np.asarray(a, np.float32), "action")), 0)

    try:
        robot._reset({"cmd": "reset", "episode": 0})
        env.reset(seed=4)
        t0 = robot._last_physics
        assert not robot.physics_due(t0)  # no command yet, and the hold period has not passed
        a1, a2, a3 = [0.0, 1.0, 0.0, 0.0], [1.0, 0.0, 0.0, -1.0], [0.0, -1.0, 0.5, 1.0]

        command(a1)
        assert robot.physics_due(t0)  # a command: due at once, whatever the clock says
        robot._step_now()
        expected = env.step(np.asarray(a1, np.float32))[0]
        np.testing.assert_array_equal(robot.obs["state"], expected["state"])
        assert not robot.physics_due(robot._last_physics)

        command(a2)
        command(a3)  # a2 is replaced before any step applied it
        robot._step_now()
        expected = env.step(np.asarray(a3, np.float32))[0]
        np.testing.assert_array_equal(robot.obs["state"], expected["state"])
        assert (robot.physics_steps, robot.held_steps, robot.superseded) == (2, 0, 1)

        last = robot._last_physics
        assert not robot.physics_due(last + 0.9 * hold_s)
        assert robot.physics_due(last + 1.01 * hold_s)  # none came: the arm steps on, holding a3
        robot._step_now()
        expected = env.step(np.asarray(a3, np.float32))[0]
        np.testing.assert_array_equal(robot.obs["state"], expected["state"])
        assert (robot.physics_steps, robot.held_steps, robot.superseded) == (3, 1, 1)

        command(a1)
        robot._reset({"cmd": "reset", "episode": 1})  # a command sent before a reset is not this episode's
        assert not robot.physics_due(robot._last_physics)
    finally:
        robot.close()
        robot.t.close()
        env.close()


def test_clock_physics_has_a_timer_of_its_own(tmp_path):
    timers = {}
    for physics in ("clock", "command"):
        _, robot, env = robot_and_env(tmp_path, physics=physics)
        try:
            timers[physics] = len(robot.timers())
        finally:
            robot.close()
            robot.t.close()
            env.close()
    assert timers["clock"] == timers["command"] + 1  # with commands stepping it, physics has no timer
