"""The simulated arm as a ROS 2 robot: publishes cameras, joint states and vector streams at the
profile's rates (sensor QoS), applies actions from the action topic (the latest one, held
between messages, like a real arm controller), answers reset commands, publishes success.

One scheduler thread owns the MuJoCo env and every timer, so nothing touches the env
concurrently. Images are MuJoCo renders of each profile camera (`sim.images: render`, the
default: the Meta-World camera `sim.cameras` maps it to, at the quality of `sim.render`, fast
settings by default) or a synthetic pattern whose first row encodes the physics step
(`synthetic`, cheaper still; tests check alignment with it). Each camera publishes at its native
size (`native`, or its stored size without one), as a real camera does; the bridge's crop and
resize (worldsample.frames) turn that into the stored frame. With `intervene=True` a simulated
human (InterventionExpert, with the run's `intervention` settings when given) watches the
received actions and publishes takeovers on the intervention topic.
"""

from __future__ import annotations

import heapq
import json
import logging
import queue
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from robot_bridge.codec import Bool, Header, Image, JointState, String, Time, decode, encode
from robot_bridge.errors import DecodeError, MessageRejected, ProfileError
from robot_bridge.profile import RobotProfile
from robot_bridge.transport.base import RELIABLE_QOS, SENSOR_QOS, Transport

if TYPE_CHECKING:
    from worldsample.sim.config import InterventionConfig

log = logging.getLogger(__name__)


def synthetic_image(height: int, width: int, step: int, base: np.ndarray) -> np.ndarray:
    """`base` with row 0 = the physics step as 4 little-endian bytes repeated; see `image_step`."""
    img = base.copy()
    code = np.frombuffer(np.uint32(step).tobytes(), np.uint8)
    img[0, :, :] = np.resize(code, (width, 1)) if img.shape[2] == 1 else np.resize(code, (width, img.shape[2]))
    return img


def image_step(img: np.ndarray) -> int:
    return int(np.frombuffer(img[0].reshape(-1)[:4].tobytes(), np.uint32)[0])


class SimRobot:
    def __init__(self, profile: RobotProfile, transport: Transport, intervene: bool = False, seed: int | None = None,
                 human: InterventionConfig | None = None):
        from worldsample.sim import InterventionExpert, SimArmConfig, make_env

        self.p, self.t = profile, transport
        cams = profile.cameras
        render = profile.sim.images == "render"
        # the arm publishes each camera at its native size, as a real camera does; the bridge crops and
        # resizes to the stored size (worldsample.frames), so the simulated arm goes through that path too
        sizes = [c.native_size for c in cams]
        if render and any(h != w or (h, w) != sizes[0] for h, w in sizes):
            raise ProfileError("sim.images=render needs square cameras of one native size, got "
                               + ", ".join(f"{c.name} {w}x{h}" for c, (h, w) in zip(cams, sizes, strict=True)))
        self._sim_cams = {c.name: profile.sim.sim_camera(c.name) for c in cams}
        if render:
            from worldsample.sim.config import CAMERA_NAMES

            unknown = {n: m for n, m in self._sim_cams.items() if m not in CAMERA_NAMES}
            if unknown:
                raise ProfileError(f"sim.images=render: camera(s) {sorted(unknown)} are no Meta-World camera; map "
                                   f"each to one in sim.cameras (e.g. {{{next(iter(unknown))}: corner}}), choose from "
                                   f"{list(CAMERA_NAMES)}, or set sim.images=synthetic")
        self.env = make_env(SimArmConfig(
            task=profile.sim.task, cameras=list(dict.fromkeys(self._sim_cams.values())) if render else [],
            image_size=sizes[0][0] if render and cams else 64, render=profile.sim.render,
            max_episode_steps=profile.episode.max_steps + 50,
        ))
        self._human = InterventionExpert(self.env, human) if intervene else None
        self.seed = profile.sim.seed if seed is None else seed
        self._rng = np.random.default_rng(self.seed)
        self._bases = {c.name: self._pattern(c, i) for i, c in enumerate(cams)}
        self.obs: dict[str, np.ndarray] | None = self.env.reset(seed=self.seed)[0]  # sensors stream from the start
        self.sim_step = 0
        self.done = True  # the arm holds still until the first reset command
        self.success = False
        self._action = np.asarray(profile.action.hold or [0.0] * profile.action.dim, np.float32)
        self._commands: queue.Queue = queue.Queue()
        self.published: Counter = Counter()
        self.actions_received = 0
        self.resets = 0
        self.physics_steps = 0
        # commands and physics steps: a step that applies no new command holds the last one; a command
        # replaced by the next before any step applied it is superseded (both count clock aliasing)
        self.held_steps = 0
        self.superseded = 0
        self._commanded = threading.Event()  # a command arrived that no physics step has applied yet
        self._last_physics = time.monotonic()
        self._hold_s = 1.5 / (profile.sim.physics_hz or profile.control_rate_hz)
        self.step_ms: deque[float] = deque(maxlen=10_000)  # wall time of recent physics steps, renders included

        c = profile.control
        self._pub = {s.topic: transport.publisher(s.topic, self._typename(s), SENSOR_QOS) for s in profile.streams}
        self._action_msg = profile.action_mapping()
        self._vector_msg = {v.key: profile.vector_mapping(v) for v in profile.vectors}
        self._pub_success = transport.publisher(c.success, "std_msgs/msg/Bool", SENSOR_QOS) if c.success else None
        self._pub_event = transport.publisher(c.robot_event, "std_msgs/msg/String", RELIABLE_QOS)
        if intervene:
            self._pub_intervention = transport.publisher(c.intervention, profile.action.type, RELIABLE_QOS)
        else:
            self._pub_intervention = None
        transport.subscribe(profile.action.topic, profile.action.type, RELIABLE_QOS, self._on_action)
        transport.subscribe(c.robot_command, "std_msgs/msg/String", RELIABLE_QOS, self._on_command)

    def _pattern(self, cam, i: int) -> np.ndarray:
        """A smooth gradient with a little noise: compresses about like a camera frame."""
        h, w = cam.native_size
        yy, xx = np.mgrid[0:h, 0:w]
        chans = [(xx * (1 + c) + yy * (2 + i) + 40 * c) % 256 for c in range(cam.channels)]
        img = np.stack(chans, axis=-1) + self._rng.integers(0, 8, (h, w, cam.channels))
        return np.clip(img, 0, 255).astype(np.uint8)

    @staticmethod
    def _typename(s) -> str:
        from robot_bridge.profile import stream_typename

        return stream_typename(s)

    # -- inputs (transport threads) -----------------------------------------------------------------
    def _on_action(self, raw: bytes, recv_ns: int) -> None:
        try:
            a = self._action_msg.decode(raw).astype(np.float32)
        except (DecodeError, MessageRejected):
            return
        if a.shape == self._action.shape and np.isfinite(a).all():
            self._action = a.copy()
            self.actions_received += 1
            if self._commanded.is_set():
                self.superseded += 1
            self._commanded.set()

    def _on_command(self, raw: bytes, recv_ns: int) -> None:
        try:
            cmd = json.loads(decode(raw, "std_msgs/msg/String").data)
        except (DecodeError, ValueError):
            return
        if isinstance(cmd, dict) and cmd.get("cmd") == "reset":
            self._commands.put(cmd)

    # -- timers (scheduler thread) -----------------------------------------------------------------
    def _reset(self, cmd: dict) -> None:
        episode = int(cmd.get("episode", 0))
        obs, _ = self.env.reset(seed=self.seed + episode)
        if self._human is not None:
            self._human.reset()
        self.obs, self.sim_step, self.done, self.success = obs, 0, False, False
        self._action = np.asarray(self.p.action.hold or [0.0] * self.p.action.dim, np.float32)
        self._commanded.clear()  # a command sent before the reset is no command for this episode
        self.resets += 1
        now = time.time_ns()
        self._publish_all_sensors(now)  # fresh data stamped after the reset before the ack
        if self._pub_success:
            self._pub_success(encode(Bool(False)))
        ev = {"event": "reset_done", "reset_id": cmd.get("reset_id"), "stamp_ns": now, "episode": episode}
        self._pub_event(encode(String(json.dumps(ev))))

    def _physics(self) -> None:
        while not self._commands.empty():
            self._reset(self._commands.get_nowait())
        commanded = self._commanded.is_set()
        self._commanded.clear()  # the step applies the newest command (read below), whichever set it
        if self.done or self.obs is None:
            return
        if not commanded:
            self.held_steps += 1
        if self._human is not None:
            action, took = self._human.filter(self._action)
            if took:
                self._pub_intervention(self._action_msg.encode(action, time.time_ns()))
        t0 = time.perf_counter()
        self.obs, _, terminated, truncated, info = self.env.step(self._action)
        self.step_ms.append(1000 * (time.perf_counter() - t0))
        self.physics_steps += 1
        self.sim_step += 1
        self.success = self.success or bool(info["success"])
        self.done = terminated or truncated
        if self._pub_success:
            self._pub_success(encode(Bool(self.success)))

    def _publish_camera(self, cam, now: int) -> None:
        if self.obs is None:
            return
        if self.p.sim.images == "render":
            img = self.obs[f"image_{self._sim_cams[cam.name]}"]
            if cam.channels == 1:  # a mono camera: ITU-R BT.601 luma of the render
                img = (img @ np.array([0.299, 0.587, 0.114])).round().astype(np.uint8)[..., None]
        else:
            img = synthetic_image(*cam.native_size, self.sim_step, self._bases[cam.name])
        (h, w), ch = img.shape[:2], img.shape[2]
        msg = Image(header=Header(Time.from_ns(now), cam.name), height=h, width=w,
                    encoding="rgb8" if ch == 3 else "mono8", step=w * ch, data=img.reshape(-1))
        self._send(cam.topic, msg)

    def _publish_joints(self, now: int) -> None:
        j = self.p.joints
        if self.obs is None or j is None:
            return
        pos = np.zeros(len(j.names))
        n = min(len(j.names), self.obs["proprio"].size)
        pos[:n] = self.obs["proprio"][:n]
        zeros = np.zeros(len(j.names))
        self._send(j.topic, JointState(header=Header(Time.from_ns(now), "base"), name=list(j.names),
                                       position=pos, velocity=zeros, effort=zeros))

    def _publish_vector(self, v, now: int) -> None:
        if self.obs is None:
            return
        src = self.obs.get(v.key, np.zeros(v.dim, np.float32)).reshape(-1)
        values = np.zeros(v.dim, np.float32)
        values[: min(v.dim, src.size)] = src[: v.dim]
        self._pub[v.topic](self._vector_msg[v.key].encode(values, now))
        self.published[v.topic] += 1

    def _publish_all_sensors(self, now: int) -> None:
        for cam in self.p.cameras:
            self._publish_camera(cam, now)
        self._publish_joints(now)
        for v in self.p.vectors:
            self._publish_vector(v, now)

    def _send(self, topic: str, msg) -> None:
        self._pub[topic](encode(msg))
        self.published[topic] += 1

    def physics_due(self, now: float) -> bool:
        """`sim.physics: command`: a step is due as soon as a command arrived that no step has applied,
        or, with none, 1.5 periods after the last step (the arm holds its last command, as a velocity
        controller does, and steps on at its rate)."""
        return self._commanded.is_set() or now - self._last_physics >= self._hold_s

    def _step_now(self) -> None:
        """`sim.physics: command`: one physics step, on a command or holding the last one."""
        self._last_physics = time.monotonic()
        self._physics()

    def timers(self) -> list[tuple[float, Callable[[int], None]]]:
        physics_hz = self.p.sim.physics_hz or self.p.control_rate_hz
        out = [] if self.p.sim.physics == "command" else [(physics_hz, lambda now: self._physics())]
        out += [(c.rate_hz, lambda now, c=c: self._publish_camera(c, now)) for c in self.p.cameras]
        if self.p.joints:
            out.append((self.p.joints.rate_hz, self._publish_joints))
        out += [(v.rate_hz, lambda now, v=v: self._publish_vector(v, now)) for v in self.p.vectors]
        return out

    def run(self, stop, on_second: Callable[[], None] | None = None) -> None:
        """Run every timer at its rate until `stop` is set (late timers skip, never burst); with
        `sim.physics: command`, a physics step as soon as each command arrives (`physics_due`)."""
        start = self._last_physics = time.monotonic()
        on_command = self.p.sim.physics == "command"
        heap = [(start, i, 1.0 / hz, fn) for i, (hz, fn) in enumerate(self.timers())]
        heap.append((start + 1.0, len(heap), 1.0, lambda now: on_second and on_second()))
        heapq.heapify(heap)
        while not stop.is_set():
            if on_command and self.physics_due(time.monotonic()):
                self._step_now()
                continue
            due, i, period, fn = heap[0]
            delay = due - time.monotonic()
            if on_command:
                delay = min(delay, self._last_physics + self._hold_s - time.monotonic())
            if delay > 0:
                if on_command:
                    self._commanded.wait(min(delay, 0.05))  # a command wakes it at once
                else:
                    time.sleep(min(delay, 0.05))
                continue
            fn(time.time_ns())
            nxt = due + period
            if nxt < time.monotonic():
                nxt = time.monotonic() + period
            heapq.heapreplace(heap, (nxt, i, period, fn))

    def close(self) -> None:
        self.env.close()


def run_sim_robot(profile: RobotProfile, transport: Transport, stop, duration: float | None = None,
                  intervene: bool = False, seed: int | None = None, wait_subscribers: float = 0.0,
                  stats_out=None, status_line: bool = True, human: InterventionConfig | None = None) -> dict:
    """The `sim-robot` command: run until `stop` is set or `duration` passes."""
    import threading
    from pathlib import Path

    from robot_bridge.console import StatusLine

    robot = SimRobot(profile, transport, intervene=intervene, seed=seed, human=human)
    deadline = time.monotonic() + wait_subscribers
    topics = [s.topic for s in profile.streams]
    while time.monotonic() < deadline and not all(transport.matched_subscribers(t) for t in topics):
        time.sleep(0.05)
    if duration is not None:
        timer = threading.Timer(duration, stop.set)
        timer.daemon = True
        timer.start()
    t0 = time.monotonic()
    with StatusLine(status_line) as line:
        def second() -> None:
            rates = " ".join(f"{t}:{n / max(time.monotonic() - t0, 1e-9):.0f}/s" for t, n in robot.published.items())
            line.update(f"[bold]sim-robot[/] reset {robot.resets} step {robot.sim_step} "
                        f"{'success ' if robot.success else ''}| actions {robot.actions_received} (held "
                        f"{robot.held_steps}, superseded {robot.superseded}) | {rates}")

        try:
            robot.run(stop, on_second=second)
        finally:
            robot.close()
    steps = np.asarray(robot.step_ms or [0.0])
    stats = {"published": dict(robot.published), "actions_received": robot.actions_received, "resets": robot.resets,
             "seconds": time.monotonic() - t0, "images": profile.sim.images, "physics": profile.sim.physics,
             "physics_steps": robot.physics_steps, "held_steps": robot.held_steps, "superseded": robot.superseded,
             "step_ms": {"p50": float(np.percentile(steps, 50)), "p99": float(np.percentile(steps, 99)),
                         "max": float(steps.max())}}
    if stats_out is not None:
        Path(stats_out).write_text(json.dumps(stats, indent=2))
    return stats
