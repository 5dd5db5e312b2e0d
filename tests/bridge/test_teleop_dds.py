"""The keyboard teleop against the simulated arm over loopback DDS.

1. `worldsample demos record` as its own process, its keys written to its stdin (the terminal reader
   on a pipe: a key held is a key written again and again), beside a sim-robot process: three
   demonstrations land in `demo`, labelled success (y), failure (n) and failure (max_steps), every
   step the person's, with the keys' actions stored.
2. A policy drives the arm (sim-robot + bridge processes); the teleop node here, on a scripted key
   stream, holds a takeover key: those steps, and only those, are stored as interventions with the
   person's action; releasing it hands back to the policy."""

import subprocess
import sys
import threading

import numpy as np

from robot_bridge.profile import load_profile
from robot_bridge.teleop.keyboard import KeyboardDevice
from robot_bridge.teleop.keys import ScriptedKeys
from robot_bridge.teleop.node import TeleopNode, policy_hold
from tests.bridge.helpers import ROOT, Operator, Proc, Rig, env_for, new_domain, small_profile
from worldsample.policy import ObsInput, PolicyConfig, PolicyRegistry, load_actor
from worldsample.store import EpisodeStore


def active(op, steps: int, what: str, timeout: float = 180) -> dict:
    return op.wait(lambda s: s["state"] in ("running", "intervened") and s["step"] >= steps, timeout, what)


class Holder:
    """Writes a key to a process's stdin every 50 ms while held, like a keyboard's auto-repeat."""

    def __init__(self, stdin):
        self.stdin, self.key = stdin, None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.wait(0.05):
            key = self.key
            if key is not None:
                self.write(key)

    def write(self, text: str) -> None:
        self.stdin.write(text.encode())
        self.stdin.flush()

    def close(self):
        self._stop.set()
        self._thread.join(5)


def test_demos_record_keeps_labelled_demonstrations_in_demo(tmp_path):
    run = tmp_path / "run"
    # no success topic: the labels come from the keys and max_steps only
    profile = small_profile(tmp_path, **{"episode.max_steps": 100, "control.success": None})
    domain = new_domain()
    with Proc(["sim-robot", "--profile", str(profile)], domain, tmp_path / "sim.log") as sim:
        log = open(tmp_path / "demos.log", "wb")
        rec = subprocess.Popen(
            [sys.executable, "-m", "services.cli.main", "demos", "record", "--profile", str(profile), "--run",
             str(run), "--episodes", "3", "--release-after", "0.3"],
            stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, env=env_for(domain), cwd=ROOT)
        op = Operator(domain)
        keys = Holder(rec.stdin)
        try:
            op.wait_ready(90)
            for n, (key, label) in enumerate((("w", "y"), ("d", "n"))):
                keys.write("\n")  # enter: start
                st = active(op, 3, f"demo {n} running")
                assert st["state"] == "intervened"  # the person drives from the first step
                keys.key = key  # hold the motion key for a while
                st = active(op, st["step"] + 10, f"demo {n} moving")
                keys.key = None  # released once no repeat came for --release-after (0.3 s): 6 steps at 20 Hz
                active(op, st["step"] + 12, f"demo {n} standing still")
                keys.write(label)
                st = op.wait(lambda s, n=n: s["episodes"]["committed"] == n + 1, 180, f"demo {n} kept")
                assert st["last_outcome"] == {"y": "success", "n": "failure"}[label]
            keys.write("\n")  # the third runs out of steps with no key pressed
            assert rec.wait(300) == 0, (tmp_path / "demos.log").read_text()  # --episodes 3: done by itself
        finally:
            keys.close()
            if rec.poll() is None:
                rec.kill()
                rec.wait(10)
            log.close()
            op.close()
            if sys.exc_info()[0] is not None:
                print((tmp_path / "demos.log").read_text()[-3000:], sim.output()[-3000:])
    out = (tmp_path / "demos.log").read_text()
    assert "3 demonstrations kept" in out, out

    store = EpisodeStore(run)
    assert "real" not in store.groups  # the demonstrations went to `demo` only
    reader = store.reader("demo")
    recs = reader.episode_records()
    assert [r.success for r in recs] == [True, False, False]
    assert [r.extra["outcome"] for r in recs] == ["success", "failure", "max_steps"]
    assert recs[2].length == 100 and recs[0].length < 100 and recs[1].length < 100
    hold = np.zeros(4, np.float32)
    for r, moved in zip(recs, ([0, 0.5, 0, 0], [0.5, 0, 0, 0], None), strict=True):
        ep = reader.episode(r.episode)
        assert ep["intervention"].all() and r.interventions == r.length  # every step the person's
        a = ep["action"]
        still = (a == hold).all(axis=1)
        if moved is None:
            assert still.all()
        else:
            moving = (a == np.asarray(moved, np.float32)).all(axis=1)
            assert moving.sum() >= 5 and (moving | still).all(), a  # the key's action or standing still
    ep0 = reader.episode(0)
    assert ep0["success"][-1] and ep0["reward"][-1] == 1.0 and ep0["done"][-1]
    assert not reader.episode(1)["success"].any()


PRE_TANH = [20.0, -20.0, 0.0, float(np.arctanh(0.5))]  # the policy's action: [+1, -1, 0, 0.5], whatever it sees


def constant_policy(run) -> None:
    cfg = PolicyConfig(obs=[ObsInput(key="proprio", dim=4), ObsInput(key="state", dim=39)], action_dim=4,
                       hidden=[8], action_low=[-1] * 4, action_high=[1] * 4)
    tensors = {k: np.zeros(s, np.float32) for k, s in cfg.tensor_shapes().items()}
    tensors["mean.bias"] = np.asarray(PRE_TANH, np.float32)
    PolicyRegistry(run).publish(cfg, tensors)


def test_a_held_takeover_key_marks_interventions_and_release_hands_back(tmp_path):
    run = tmp_path / "run"
    constant_policy(run)
    policy_action = load_actor(run).act({"proprio": np.zeros(4, np.float32), "state": np.zeros(39, np.float32)})
    profile = small_profile(tmp_path, **{"episode.max_steps": 400, "control.success": None,
                                         "action.low": [-0.3] * 4, "action.high": [0.3] * 4})
    prof = load_profile(profile)
    keys = ScriptedKeys()
    stop = threading.Event()
    with Rig(tmp_path, profile, run) as rig:
        op = rig.op
        node = TeleopNode(prof, op.t, KeyboardDevice(keys, policy_hold(prof)))  # the takeover device: hold to act
        node.start(stop)
        try:
            op.wait_ready(90)
            keys.tap("enter")
            st = active(op, 8, "the policy driving")
            assert st["state"] == "running" and node.published == 0  # no key held: nothing sent
            keys.press("w")
            st = op.wait(lambda s: s["state"] == "intervened", 180, "the takeover")
            active(op, st["step"] + 10, "steps under the takeover")
            keys.release("w")
            st = op.wait(lambda s: s["state"] == "running", 180, "the hand-back")
            active(op, st["step"] + 10, "the policy driving again")
            keys.tap("n")
            st = op.wait(lambda s: s["episodes"]["committed"] == 1, 180, "the episode kept")
            assert st["last_outcome"] == "failure"
            wire = np.stack(op.actions)
        finally:
            stop.set()
            node.join()
        assert rig.bridge.stop() == 0

    # on the wire, in arm units: the person's +y at half the range is 0.15 of the +/-0.3 arm
    assert np.isclose(wire, [0, 0.15, 0, 0], atol=1e-6).all(axis=1).sum() >= 5
    rec = EpisodeStore(run).reader("real").episode_records()[0]
    ep = EpisodeStore(run).reader("real").episode(0)
    flag = ep["intervention"]
    idx = np.flatnonzero(flag)
    assert len(idx) >= 5 and rec.interventions == len(idx)
    assert (np.diff(idx) == 1).all(), idx  # one takeover, held without a gap
    assert idx[0] >= 8 and idx[-1] <= len(flag) - 10, (idx, len(flag))  # the policy before and after it
    np.testing.assert_allclose(ep["action"][flag], np.tile([0, 0.5, 0, 0], (len(idx), 1)), atol=1e-6)  # normalised
    np.testing.assert_array_equal(ep["action"][~flag], np.tile(policy_action, (int((~flag).sum()), 1)))
    assert rec.success is False
