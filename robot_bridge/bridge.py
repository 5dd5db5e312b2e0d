"""The bridge process: wires a transport to the core and runs the control loop.

Subscribes the profile's sensor streams and control topics, publishes actions, robot commands
and status, records into RUN's store (group from the profile) and loads policies from RUN's
registry at episode boundaries. Stops on SIGINT/SIGTERM or after `duration`; an episode still
open then is discarded (or kept marked incomplete with `episode.keep_faulted`).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from functools import partial
from pathlib import Path

import numpy as np
from rich.markup import escape

from robot_bridge.codec import String, encode
from robot_bridge.core import decoders
from robot_bridge.core.controller import Controller, Outputs
from robot_bridge.core.policy_source import PolicySource
from robot_bridge.core.recorder import Recorder
from robot_bridge.core.state import Event
from robot_bridge.core.streams import StreamInput
from robot_bridge.profile import CameraStream, JointStream, RobotProfile, VectorStream, stream_typename
from robot_bridge.transport.base import RELIABLE_QOS, SENSOR_QOS, Transport
from worldsample.store import GroupSchema

log = logging.getLogger(__name__)


def stream_converter(s, profile: RobotProfile):
    """decoded message -> (stamp or None, observation array) for one profile stream."""
    if isinstance(s, CameraStream):
        fn = decoders.image_array if s.type.endswith("/Image") else decoders.compressed_array
        geometry = s.geometry  # native size -> crop -> stored size (worldsample.frames)
        return lambda m: fn(m, *s.native_size, s.channels, geometry)
    if isinstance(s, JointStream):
        return lambda m: decoders.joint_array(m, s.names, s.fields)
    if isinstance(s, VectorStream):
        return profile.vector_mapping(s).read
    return decoders.wrench_array


class Bridge:
    def __init__(self, profile: RobotProfile, run_dir: Path, transport: Transport, run_policy: bool = True):
        """`run_policy=False`: no policy is loaded, a step nobody drives holds (`demos record`)."""
        self.p, self.transport = profile, transport
        self.search = None
        if profile.episode.search is not None:  # the world model is checked first, before the store or a topic
            from robot_bridge.core.search_source import SearchSource

            self.search = SearchSource(profile.episode.search, Path(run_dir), profile.obs_specs(), profile.action.dim,
                                       profile.episode.group)
        schema = GroupSchema.build(profile.obs_specs(), profile.action.dim, profile.episode.chunk_len)
        self.recorder = Recorder(Path(run_dir), profile.episode.group, schema, max_backlog=profile.episode.max_backlog)
        shapes = {k: v.shape for k, v in profile.obs_specs().items()}
        self.policy = PolicySource(Path(run_dir), shapes, profile.action.dim, explore=profile.episode.explore,
                                   follow=profile.episode.policy, enabled=run_policy,
                                   explore_scale=profile.episode.explore_scale)
        self.keep_interrupted = True  # shutdown commits an open episode as `interrupted`; False: dropped
        types = profile.msg_types
        self.inputs = {s.key: StreamInput(s.key, stream_typename(s), stream_converter(s, profile), decode=types.decode)
                       for s in profile.streams}
        for s in profile.streams:
            transport.subscribe(s.topic, stream_typename(s), s.qos, self.inputs[s.key])
        c = profile.control
        action_msg = profile.action_mapping()
        pub_action = transport.publisher(profile.action.topic, profile.action.type, RELIABLE_QOS)
        pub_robot = transport.publisher(c.robot_command, "std_msgs/msg/String", RELIABLE_QOS)
        pub_status = transport.publisher(c.status, "std_msgs/msg/String", RELIABLE_QOS)
        self.actions_sent = 0

        def send_action(a: np.ndarray) -> None:
            pub_action(action_msg.encode(a, time.time_ns()))
            self.actions_sent += 1

        self.last_status: dict = {}

        def send_status(st: dict) -> None:
            self.last_status = st
            pub_status(encode(String(json.dumps(st))))

        out = Outputs(
            action=send_action, robot_command=lambda d: pub_robot(encode(String(json.dumps(d)))), status=send_status
        )
        self.controller = ctl = Controller(profile, self.inputs, out, self.recorder, self.policy, self.search)
        ctl.status_extra = lambda: {
            "qos_events": {t: vars(e) for t, e in transport.qos_events().items() if any(vars(e).values())}
        }
        transport.subscribe(c.command, "std_msgs/msg/String", RELIABLE_QOS, ctl.on_command)
        transport.subscribe(c.estop, "std_msgs/msg/Bool", RELIABLE_QOS, ctl.on_estop)
        transport.subscribe(c.intervention, profile.action.type, SENSOR_QOS, ctl.on_intervention)
        transport.subscribe(c.robot_event, "std_msgs/msg/String", RELIABLE_QOS, ctl.on_robot_event)
        if c.success:
            transport.subscribe(c.success, "std_msgs/msg/Bool", SENSOR_QOS, ctl.on_success)

    def run(self, stop: threading.Event, on_tick=None) -> None:
        try:
            self.controller.run(stop, on_tick)
        finally:
            self.shutdown()

    def shutdown(self) -> None:
        ctl = self.controller
        if ctl.sm.active:
            if self.keep_interrupted:
                ctl._finish("interrupted", Event.END, time.time_ns())
            else:
                ctl.abandon(time.time_ns())
        self.recorder.close()

    def stats(self) -> dict:
        """Figures for benchmarks and the final summary."""
        lat = np.asarray(self.recorder.stats.latency_ms or [np.nan])
        write = np.asarray(self.recorder.stats.write_ms or [np.nan])
        periods = np.asarray(self.controller.periods_ms or [np.nan])[1:]
        nominal = 1e3 / self.p.control_rate_hz
        return {
            "topics": {
                k: i.counters.as_dict() | {"transport_ms": _pcts(np.asarray(i.counters.transport_ms or [np.nan]))}
                for k, i in self.inputs.items()
            },
            "obs_to_store_ms": _pcts(lat),
            "handoff_to_store_ms": _pcts(write),
            "period_jitter_ms": {
                "p50": float(np.nanmedian(np.abs(periods - nominal))) if periods.size else None,
                "p99": float(np.nanpercentile(np.abs(periods - nominal), 99)) if periods.size else None,
            },
            "overruns": self.controller.overruns,
            "recorder_backlog_max": self.recorder.backlog_max,
            "episodes": vars(self.recorder.stats) | {"latency_ms": None, "write_ms": None},
            "actions_sent": self.actions_sent,
        }


def _pcts(a: np.ndarray) -> dict:
    return {"p50": float(np.nanmedian(a)), "p99": float(np.nanpercentile(a, 99)), "n": int(a.size)}


def status_text(st: dict) -> str:
    if not st:
        return "bridge: starting"
    eps = st["episodes"]
    rx = " ".join(f"{k}:{v['accepted']}" + (f"[red](-{sum(v['rejected'].values())})[/]" if v["rejected"] else "")
                  for k, v in st["topics"].items())
    fault = f" [red]{escape(st['fault'])}[/]" if st.get("fault") else ""
    if not fault and st.get("stale_causes"):
        fault = " [yellow]" + escape("; ".join(st["stale_causes"].values())) + "[/]"
    return (
        f"[bold]{st['state']}[/]{fault} step {st['step']} | policy v{st['policy_version']} | "
        f"episodes {eps['committed']} kept, {eps['discarded']} dropped | "
        f"jitter p99 {st['loop']['jitter_p99_ms']} ms | {rx}"
    )


def run_bridge(profile: RobotProfile, run_dir: Path, transport: Transport, stop: threading.Event,
               duration: float | None = None, stats_out: Path | None = None, status_line: bool = True) -> dict:
    import sys

    from robot_bridge.console import StatusLine
    from robot_bridge.keys import HELP, KeyReader
    from robot_bridge.live_frames import LiveFrameWriter
    from robot_bridge.run_link import RunLink

    # The loop thread competes for the GIL with DDS callbacks and the recorder; a shorter switch
    # interval (default 5 ms) lets it take the GIL back soon after its sleep ends.
    sys.setswitchinterval(0.0005)
    bridge = Bridge(profile, run_dir, transport)
    RunLink(Path(run_dir), bridge.controller).start(stop)  # dashboard requests in, robot state out
    if profile.live_frames_hz > 0:  # the newest frame per camera, for the dashboard's robot panel
        LiveFrameWriter(Path(run_dir), bridge.inputs, profile.live_frames_hz).start(stop)
    keys = None
    if profile.reset.keys and KeyReader.available():
        keys = KeyReader(bridge.controller)
        keys.start(stop)
        print(f"bridge: reset strategy {profile.reset.strategy}; {HELP}", file=sys.stderr, flush=True)
    if duration is not None:
        timer = threading.Timer(duration, stop.set)
        timer.daemon = True
        timer.start()
    with StatusLine(status_line) as line:
        bridge.run(stop, on_tick=partial(_refresh, line, bridge))
        line.update(status_text(bridge.last_status))
    if keys is not None:
        keys.join()  # gives the terminal back
    stats = bridge.stats()
    if stats_out is not None:
        Path(stats_out).write_text(json.dumps(stats, indent=2, default=str))
    return stats


def _refresh(line, bridge: Bridge, _seen: list = [None]) -> None:  # noqa: B006 - last status shown
    if bridge.last_status is not _seen[0]:
        _seen[0] = bridge.last_status
        line.update(status_text(bridge.last_status))
