"""The keyboard teleop without DDS: key parsing, a terminal's inferred releases, the key -> action map in
the policy's units (hold-to-intervene, the gripper latch, episode keys), and the node's messages in the
arm's units. tests/bridge/test_teleop_dds.py runs it against the simulated arm over DDS."""

import json
import os
import threading

import numpy as np
import pytest

from robot_bridge.codec import String, decode, encode
from robot_bridge.core.limits import ActionScale
from robot_bridge.profile import load_profile
from robot_bridge.teleop.keyboard import KeyboardDevice, KeyMap
from robot_bridge.teleop.keys import KeyEvent, ScriptedKeys, TerminalKeys, parse_keys
from robot_bridge.teleop.node import TeleopNode, policy_hold
from robot_bridge.teleop.record import DEMO_GROUP, demo_profile, record_demos, run_teleop
from tests.bridge.helpers import small_profile


def test_parse_keys():
    assert parse_keys("wA \r\n\x7f") == ["w", "a", "space", "enter", "enter", "backspace"]
    assert parse_keys("\x1b[A\x1b[B\x1bOC\x1b[D") == ["up", "down", "right", "left"]
    assert parse_keys("\x1b[15~q\x1b\x03y") == ["q", "y"]  # F5, a lone ESC and Ctrl-C are no keys


class FakeClock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def test_a_terminal_key_is_held_while_it_repeats_and_released_after_the_repeats_stop():
    r, w = os.pipe()
    clock = FakeClock()
    with os.fdopen(r, "rb", buffering=0) as stream:
        keys = TerminalKeys(stream, release_after_s=0.5, clock=clock)
        os.write(w, b"w")
        assert keys.read(1.0) == [KeyEvent("w", True)]
        for _ in range(5):  # auto-repeat every 0.1 s: still the same hold, no new press, no release
            clock.t += 0.1
            os.write(w, b"w")
            assert keys.read(1.0) == []
        clock.t += 0.4
        assert keys.read(0.0) == []  # 0.4 s since the last repeat: still held
        clock.t += 0.2
        assert keys.read(0.0) == [KeyEvent("w", False)]
        os.write(w, b"y")
        assert keys.read(1.0) == [KeyEvent("y", True)]
        os.close(w)  # the pipe ends: what is held is released
        assert keys.read(1.0) == [KeyEvent("y", False)]
        assert keys.eof


def device(hold=(0, 0, 0, 0), **kw):
    src = ScriptedKeys()
    return src, KeyboardDevice(src, np.asarray(hold, np.float32), **kw)


def test_hold_to_intervene_maps_keys_to_normalised_deltas():
    src, dev = device()
    assert dev.read(0).action is None  # hands off: the policy drives
    src.press("w")
    np.testing.assert_array_equal(dev.read(0).action, [0, 0.5, 0, 0])  # +y at half the range
    src.press("a")
    np.testing.assert_array_equal(dev.read(0).action, [-0.5, 0.5, 0, 0])
    src.press("d")  # opposite keys cancel
    np.testing.assert_array_equal(dev.read(0).action, [0, 0.5, 0, 0])
    src.release("a", "d", "w")
    assert dev.read(0).action is None  # released: handed back
    src.press("space")  # takeover standing still
    np.testing.assert_array_equal(dev.read(0).action, [0, 0, 0, 0])
    src.release("space")
    src.press("f")
    np.testing.assert_array_equal(dev.read(0).action, [0, 0, -0.5, 0])
    src.release("f")
    assert dev.read(0).action is None


def test_gripper_latch_speed_and_an_asymmetric_hold():
    src, dev = device(hold=(0, -1, 0.5, 0), speed=1.0)
    src.tap("g")  # latched, but no takeover by itself
    assert dev.read(0).action is None and dev.gripper == 1.0
    src.press("up", "down", "r")
    # up+down cancel at the hold; +z from the hold 0.5 all the way to +1; the gripper closed (+1)
    np.testing.assert_array_equal(dev.read(0).action, [0, -1, 1, 1])
    src.release("down", "r")
    src.tap("g")
    np.testing.assert_array_equal(dev.read(0).action, [0, 1, 0.5, -1])  # +y from the hold -1 to +1; open
    src.release("up")
    src, dev = device(hold=(0, -1, 0.5, 0), speed=0.5)
    src.press("s", "f")  # toward -1 from a hold at the range's low end: no motion; half way from 0.5 to -1
    np.testing.assert_allclose(dev.read(0).action, [0, -1, -0.25, 0])
    with pytest.raises(ValueError):
        KeyboardDevice(ScriptedKeys(), np.zeros(4), speed=0)


def test_keys_give_commands_once_per_press_and_always_gives_an_action():
    src, dev = device(always=True, keymap=KeyMap().without("stop"))
    np.testing.assert_array_equal(dev.read(0).action, [0, 0, 0, 0])  # a demonstration: the person always drives
    for k in ("enter", "y", "n", "x", "backspace", "e", "u", "c", "q"):
        src.press(k)
    assert dev.read(0).commands == ["start", "success", "failure", "rerecord", "estop", "release_estop",
                                    "clear_fault", "quit"]  # no `stop` in this map
    assert dev.read(0).commands == []  # still held: no repeat
    with pytest.raises(ValueError, match="bound twice"):
        KeyMap(commands={"w": "start"})
    with pytest.raises(ValueError, match="unknown teleop command"):
        KeyMap(commands={"z": "explode"})
    src, dev = device(hold=(0, 0))  # a 2-entry action: no z keys, no gripper
    src.press("r", "g", "d")
    np.testing.assert_array_equal(dev.read(0).action, [0.5, 0])


class FakeTransport:
    def __init__(self):
        self.sent: dict[str, list[bytes]] = {}
        self.subs = {}

    def publisher(self, topic, typename, qos):
        self.sent.setdefault(topic, [])
        return self.sent[topic].append

    def subscribe(self, topic, typename, qos, cb):
        self.subs[topic] = cb


def test_the_node_publishes_takeovers_in_arm_units_and_commands_on_their_topics(tmp_path):
    low, high = [-0.3, -0.1, 0.0, -1.0], [0.3, 0.5, 1.0, 1.0]
    prof = load_profile(small_profile(tmp_path, **{"action.low": low, "action.high": high}))
    hold = policy_hold(prof)
    np.testing.assert_allclose(ActionScale(prof.action).to_arm(hold), [0, 0, 0, 0], atol=1e-7)  # hold in arm units
    src = ScriptedKeys()
    t = FakeTransport()
    quit_ = threading.Event()
    node = TeleopNode(prof, t, KeyboardDevice(src, hold, speed=1.0), rate_hz=50, on_quit=quit_.set)
    stop = threading.Event()
    node.start(stop)
    try:
        src.press("w")
        src.tap("y")
        src.tap("e")
        src.tap("q")
        assert quit_.wait(10)
        waited = 0
        while len(t.sent["/worldsample/intervention"]) < 3 and waited < 200:
            stop.wait(0.05)
            waited += 1
    finally:
        stop.set()
        node.join()
    msgs = [np.asarray(decode(m, "std_msgs/msg/Float32MultiArray").data) for m in t.sent["/worldsample/intervention"]]
    assert len(msgs) >= 3
    for m in msgs:
        np.testing.assert_allclose(m, [0, 0.5, 0, 0], atol=1e-6)  # +y all the way: the range's high end
    assert [json.loads(decode(m, "std_msgs/msg/String").data) for m in t.sent["/worldsample/command"]] == [
        {"cmd": "success"}]
    assert [decode(m, "std_msgs/msg/Bool").data for m in t.sent["/worldsample/estop"]] == [True]
    assert node.stats()["commands"] == {"success": 1, "estop": 1, "quit": 1}


def test_demos_need_the_demo_profile(tmp_path):
    path = small_profile(tmp_path)
    prof = demo_profile(path, ["episode.auto_start=true", "episode.group=real"])  # the demo settings win
    assert prof.episode.group == DEMO_GROUP and not prof.episode.auto_start and prof.episode.max_steps_failure
    assert not prof.reset.keys
    with pytest.raises(ValueError, match="demo_profile"):
        record_demos(load_profile(path), tmp_path / "run", FakeTransport(), None, threading.Event())


def test_the_trainer_names_the_real_arm_fix_for_missing_demos(tmp_path):
    from worldsample.errors import RunDirectoryError
    from worldsample.loop.loop import check_run_dir
    from worldsample.store import EpisodeStore

    EpisodeStore(tmp_path / "run", create=True)
    with pytest.raises(RunDirectoryError) as e:
        check_run_dir(tmp_path / "run", resume=False)
    assert "worldsample demos record --profile" in str(e.value) and "worldsample demos collect" in str(e.value)


def test_run_teleop_watches_the_bridge_and_ends_on_quit(tmp_path):
    prof = load_profile(small_profile(tmp_path))
    src, t, stop = ScriptedKeys(), FakeTransport(), threading.Event()
    dev = KeyboardDevice(src, policy_hold(prof))
    done: list[dict] = []
    th = threading.Thread(target=lambda: done.append(run_teleop(prof, t, dev, stop, status_line=False)))
    th.start()
    try:
        for _ in range(200):  # the node subscribes to the bridge's status as it starts
            if "/worldsample/status" in t.subs:
                break
            stop.wait(0.01)
        t.subs["/worldsample/status"](encode(String(json.dumps({"state": "running", "step": 3}))), 0)
        src.tap("enter")
        src.tap("q")
        th.join(10)
    finally:
        stop.set()
        th.join(10)
    assert done and done[0]["commands"] == {"start": 1, "quit": 1}
    assert stop.is_set()
