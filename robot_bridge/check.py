"""`robot check`: listen to every stream of a profile (over DDS, or in a rosbag2) and say what the
bridge would make of it, before recording anything.

Each stream goes through the bridge's own input path (`StreamInput` with `stream_converter`, the
same decoders, the same stamp rules), so what check calls rejected is what the bridge rejects. On
top of that it measures the publish rate against the profile's `rate_hz`, the stamp lag against
`staleness_ms`, the sizes and encodings actually sent, and the QoS events of the subscription
(made with the profile's QoS, as the bridge makes it). Any mismatch is a problem; a problem makes
`robot check` exit 1.
"""

from __future__ import annotations

import statistics
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from robot_bridge.bag_common import open_bag
from robot_bridge.codec import stamp_ns
from robot_bridge.core.streams import FUTURE_TOLERANCE_NS, StreamInput
from robot_bridge.errors import DecodeError
from robot_bridge.profile import CameraStream, JointStream, RobotProfile, VectorStream, stream_typename
from robot_bridge.transport.base import RELIABLE_QOS, Transport

RATE_LOW, RATE_HIGH = 0.5, 2.0  # measured / profile rate outside this band is a mismatch


@dataclass
class StreamReport:
    key: str
    topic: str
    typename: str
    required: bool
    rate_hz: float
    reliability: str
    input: StreamInput
    recv: list[int] = field(default_factory=list)  # receive (or bag log) times
    lags_ms: list[float] = field(default_factory=list)  # receive - header stamp
    unstamped: int = 0
    shapes: Counter = field(default_factory=Counter)  # "WxH enc", "N joints", "N values"
    frame_sizes: Counter = field(default_factory=Counter)  # cameras: "WxH" as published (decoded size)
    incompatible_qos: int = 0
    seen_types: set[str] = field(default_factory=set)  # from discovery or the bag's connections
    offered: set[str] = field(default_factory=set)  # publishers' reliability, from discovery
    reject_detail: dict[str, str] = field(default_factory=dict)  # reason -> the bridge's words, first seen
    problems: list[str] = field(default_factory=list)

    def on_raw(self, raw: bytes, recv_ns: int) -> None:
        self.recv.append(recv_ns)
        try:
            msg = self.input.decode(raw, self.typename)
        except DecodeError:
            msg = None  # the bridge's input counts it as malformed
        if msg is not None:
            self.shapes[_shape(msg)] += 1
            size = _frame_size(msg)
            if size:
                self.frame_sizes[size] += 1
            header = getattr(msg, "header", None)
            if header is not None and hasattr(header, "stamp"):
                stamp = stamp_ns(header)
                if stamp:
                    self.lags_ms.append((recv_ns - stamp) / 1e6)
                else:
                    self.unstamped += 1
        rejected = self.input.counters.rejected
        before = dict(rejected)
        self.input(raw, recv_ns)
        for reason, n in rejected.items():
            if n != before.get(reason, 0) and self.input.last_reject:
                self.reject_detail.setdefault(reason, self.input.last_reject[0])  # the first of each reason

    @property
    def received(self) -> int:
        return self.input.counters.received

    def measured_rate(self) -> float | None:
        if len(self.recv) < 3 or self.recv[-1] <= self.recv[0]:
            return None
        return (len(self.recv) - 1) / ((self.recv[-1] - self.recv[0]) / 1e9)


def _shape(msg) -> str:
    name = str(getattr(msg, "__msgtype__", "")).rsplit("/", 1)[-1]
    if name == "Image":
        return f"{msg.width}x{msg.height} {msg.encoding}"
    if name == "CompressedImage":
        return f"{msg.format or '?'} {_frame_size(msg) or '?'} ({msg.data.size} B)"
    if name == "JointState":
        return f"{len(msg.name)} joints"
    if name.endswith("MultiArray"):
        return f"{msg.data.size} values"
    return name


def _frame_size(msg) -> str | None:
    """'WxH' of an Image, or of a CompressedImage from its jpeg/png header (nothing decoded)."""
    name = str(getattr(msg, "__msgtype__", "")).rsplit("/", 1)[-1]
    if name == "Image":
        return f"{msg.width}x{msg.height}"
    if name != "CompressedImage":
        return None
    import io

    from PIL import Image as PILImage

    try:
        with PILImage.open(io.BytesIO(msg.data.tobytes())) as im:
            return f"{im.width}x{im.height}"
    except (OSError, ValueError, PILImage.DecompressionBombError):
        return None


def _expected(s) -> str:
    if isinstance(s, CameraStream):
        enc = "rgb8|bgr8|rgba8|bgra8" if s.channels == 3 else "mono8"
        if s.type.endswith("CompressedImage"):
            enc = "jpeg|png"
        g = s.geometry
        if not g.is_identity:
            return f"native {g.native[1]}x{g.native[0]} {enc}, stored {s.width}x{s.height}"
        return f"{s.width}x{s.height} {enc}"
    if isinstance(s, JointStream):
        return f"joints {','.join(s.names)}"
    if isinstance(s, VectorStream):
        return f"{s.dim} values" + (f" from {', '.join(s.fields)}" if s.fields else "")
    return "6 values"


@dataclass
class CheckReport:
    profile: RobotProfile
    source: str  # "DDS domain N for S s" or the bag's path
    seconds: float
    streams: list[StreamReport]
    action: dict = field(default_factory=dict)  # topic, type, subscribers / in the bag, problems

    @property
    def problems(self) -> list[str]:
        return [p for s in self.streams for p in s.problems] + self.action.get("problems", [])

    @property
    def ok(self) -> bool:
        return not self.problems


def _new_reports(profile: RobotProfile) -> list[StreamReport]:
    from robot_bridge.bridge import stream_converter

    out = []
    for s in profile.streams:
        typename = stream_typename(s)
        out.append(StreamReport(s.key, s.topic, typename, s.required, s.rate_hz, s.reliability,
                                StreamInput(s.key, typename, stream_converter(s, profile),
                                            decode=profile.msg_types.decode)))
    return out


def _judge(profile: RobotProfile, r: StreamReport, live: bool) -> None:
    """Fill r.problems: every reason the bridge would not get usable data from this stream."""
    s = next(x for x in profile.streams if x.key == r.key)
    p = r.problems
    wrong_types = {t for t in r.seen_types if t != r.typename}
    if wrong_types and not r.received:
        p.append(f"{r.topic}: published as {', '.join(sorted(wrong_types))}, profile says {r.typename}")
    if r.incompatible_qos:
        offered = f" (publisher offers {', '.join(sorted(r.offered))})" if r.offered else ""
        p.append(f"{r.topic}: QoS mismatch: the profile asks for {r.reliability}{offered}; "
                 f"set reliability: {'best_effort' if r.reliability == 'reliable' else 'reliable'} in the profile")
    if not r.received:
        if not p:
            where = "published" if live else "in the bag"
            if r.required:
                p.append(f"{r.topic}: no message {where}; the bridge would fault with this required stream stale")
        return
    c = r.input.counters
    for reason, n in sorted(c.rejected.items()):
        why = r.reject_detail.get(reason, "")
        p.append(f"{r.topic}: the bridge would reject {n} of {c.received} message(s) as {reason}"
                 + (f": {why}" if why else ""))
    rate = r.measured_rate()
    if rate is not None and not RATE_LOW * s.rate_hz <= rate <= RATE_HIGH * s.rate_hz:
        p.append(f"{r.topic}: rate {rate:.1f} Hz, profile says {s.rate_hz:g} Hz")
    if rate is not None and 1000 / rate > profile.staleness_ms:
        p.append(f"{r.topic}: a message every {1000 / rate:.0f} ms is staler than staleness_ms "
                 f"{profile.staleness_ms:g}; the bridge would fault")
    if r.lags_ms and live:
        lag = statistics.median(r.lags_ms)
        if lag > profile.staleness_ms:
            p.append(f"{r.topic}: header stamps are {lag:.0f} ms in the past (median), beyond staleness_ms "
                     f"{profile.staleness_ms:g}: clocks out of sync, or stamps of capture long ago")
        if lag < -FUTURE_TOLERANCE_NS / 1e6 and "stamp_in_future" not in c.rejected:
            p.append(f"{r.topic}: header stamps are {-lag:.0f} ms in the future (median)")


def _judge_action(profile: RobotProfile, action: dict, live: bool) -> None:
    p = action.setdefault("problems", [])
    act = profile.action
    if live:
        if not action.get("subscribers"):
            p.append(f"{act.topic}: no subscriber for the actions ({act.type}, reliable); the arm would not move")
    else:
        t = action.get("type")
        if t is None:
            p.append(f"{act.topic}: the action topic is not in the bag")
        elif t != act.type:
            p.append(f"{act.topic}: {t} in the bag, profile says {act.type}")


def _discovered(transport, topics: set[str]) -> dict[str, list[tuple[str, str]]]:
    """topic -> [(type name, reliability)] of the publishers DDS discovery knows (dds transport only)."""
    try:
        from cyclonedds.builtin import BuiltinDataReader, BuiltinTopicDcpsPublication
        from cyclonedds.core import Policy
    except ImportError:
        return {}
    participant = getattr(transport, "participant", None)
    if participant is None:
        return {}
    out: dict[str, list[tuple[str, str]]] = {}
    reader = BuiltinDataReader(participant, BuiltinTopicDcpsPublication)
    for ep in reader.take(N=4096):
        topic = ep.topic_name.removeprefix("rt")
        if topic not in topics:
            continue
        rel = "reliable"
        for pol in ep.qos or []:
            if pol == Policy.Reliability.BestEffort:
                rel = "best_effort"
        tn = ep.type_name
        out.setdefault(topic, []).append((_ros_type(tn), rel))
    return out


def _ros_type(dds_name: str) -> str:
    parts = dds_name.split("::")
    if len(parts) == 4 and parts[2] == "dds_":
        return f"{parts[0]}/{parts[1]}/{parts[3].removesuffix('_')}"
    return dds_name


def check_live(profile: RobotProfile, transport: Transport, seconds: float,
               stop: threading.Event | None = None) -> CheckReport:
    """Subscribe every stream with the profile's QoS (as the bridge does) for `seconds`."""
    reports = _new_reports(profile)
    for r, s in zip(reports, profile.streams, strict=True):
        transport.subscribe(s.topic, r.typename, s.qos, r.on_raw)
    act = profile.action
    transport.publisher(act.topic, act.type, RELIABLE_QOS)  # only to count the driver's subscribers
    (stop or threading.Event()).wait(seconds)
    events = transport.qos_events()
    subscribers = transport.matched_subscribers(act.topic)
    found = _discovered(transport, {s.topic for s in profile.streams})
    for r in reports:
        ev = events.get(r.topic)
        r.incompatible_qos = ev.incompatible_qos if ev else 0
        for typename, rel in found.get(r.topic, []):
            r.seen_types.add(typename)
            r.offered.add(rel)
        if r.received:
            r.seen_types.add(r.typename)
        _judge(profile, r, live=True)
    action = {"topic": act.topic, "type": act.type, "subscribers": subscribers}
    _judge_action(profile, action, live=True)
    return CheckReport(profile, f"DDS, {seconds:g} s", seconds, reports, action)


def check_bag(profile: RobotProfile, bag: Path) -> CheckReport:
    """The same checks on a rosbag2 (MCAP or sqlite3); the bag's log times stand for receive times."""
    bag = Path(bag)
    reader = open_bag(bag)
    reports = _new_reports(profile)
    by_topic = {r.topic: r for r in reports}
    try:
        types = {c.topic: c.msgtype for c in reader.connections}
        wanted = [c for c in reader.connections if c.topic in by_topic and c.msgtype == by_topic[c.topic].typename]
        for r in reports:
            if r.topic in types:
                r.seen_types.add(types[r.topic])
        t0 = t1 = None
        for conn, t, raw in reader.messages(connections=wanted):
            by_topic[conn.topic].on_raw(bytes(raw), t)
            t0 = t if t0 is None else t0
            t1 = t
        seconds = (t1 - t0) / 1e9 if t0 is not None else 0.0
    finally:
        reader.close()
    for r in reports:
        _judge(profile, r, live=False)
    action = {"topic": profile.action.topic, "type": types.get(profile.action.topic)}
    _judge_action(profile, action, live=False)
    return CheckReport(profile, str(bag), seconds, reports, action)


def camera_lines(report: CheckReport) -> list[str]:
    """Per camera: the native size it should publish, what it did publish, and what the crop and
    resize make of it (the stored, policy-size frame)."""
    out = []
    reports = {r.key: r for r in report.streams}
    for cam in report.profile.cameras:
        g, r = cam.geometry, reports[cam.key]
        seen = ", ".join(f"{k} x{n}" for k, n in r.frame_sizes.most_common(3)) or "nothing"
        steps = [f"native {g.native[1]}x{g.native[0]}"]
        if cam.crop is not None:
            b = g.box
            steps.append(f"crop {b.width}x{b.height} at ({b.left}, {b.top})")
        steps.append(f"stored {cam.width}x{cam.height}x{cam.channels}")
        how = "as published" if g.is_identity else "area-average resize"
        if abs(g.aspect_change - 1) > 0.01:
            how += f", aspect ratio x{g.aspect_change:.2f}"
        out.append(f"camera {cam.name}: {' -> '.join(steps)} ({how}); published: {seen}")
    return out


def render(report: CheckReport, console) -> None:
    """The per-stream table, then one line per problem (exactly what made the check fail)."""
    from rich.markup import escape
    from rich.table import Table

    p = report.profile
    table = Table(title=f"robot check: profile {p.name}, {report.source}", title_justify="left")
    for col in ("stream", "topic", "seen", "type", "QoS", "rate Hz (profile)", "sizes / encodings (profile)",
                "stamps", "bridge rejects", "ok"):
        table.add_column(col, overflow="fold")
    profile_streams = {s.key: s for s in p.streams}
    for r in report.streams:
        s = profile_streams[r.key]
        c = r.input.counters
        seen = f"yes ({c.received})" if c.received else ("no" if r.required else "no (optional)")
        typ = r.typename if not (r.seen_types - {r.typename}) else f"{', '.join(sorted(r.seen_types))} ≠ {r.typename}"
        qos = r.reliability + (" [red]incompatible[/]" if r.incompatible_qos else "")
        rate = r.measured_rate()
        rate_s = f"{rate:.1f} ({s.rate_hz:g})" if rate is not None else f"- ({s.rate_hz:g})"
        shapes = ", ".join(f"{k} x{n}" for k, n in r.shapes.most_common(3)) or "-"
        if r.lags_ms:
            stamps = f"lag {statistics.median(r.lags_ms):.0f} ms"
        else:
            stamps = "unstamped" if r.unstamped else "-"
        order = sum(c.rejected.get(k, 0) for k in ("out_of_order", "duplicate_stamp"))
        if order:
            stamps += f", {order} not increasing"
        rej = ", ".join(f"{k} {n}" for k, n in sorted(c.rejected.items())) or "none"
        ok = "[green]yes[/]" if not r.problems else "[red]NO[/]"
        table.add_row(escape(r.key), escape(r.topic), seen, escape(typ), qos, rate_s,
                      f"{escape(shapes)} ({escape(_expected(s))})", stamps, escape(rej), ok)
    a = report.action
    if "subscribers" in a:
        seen = f"{a['subscribers']} subscriber(s)"
    else:
        seen = "yes" if a.get("type") else "no"
    table.add_row("action", escape(a["topic"]), seen, escape(a.get("type") or "-"), "reliable", "-",
                  f"{p.action.dim} values", "-", "-", "[green]yes[/]" if not a.get("problems") else "[red]NO[/]")
    console.print(table)
    for line in camera_lines(report):
        console.print(escape(line), highlight=False, soft_wrap=True)
    for line in report.problems:
        console.print(f"[red]✗[/] {escape(line)}", highlight=False, soft_wrap=True)
    if report.ok:
        console.print(f"[green]ok:[/] every stream of {escape(p.name)} is as the profile says", highlight=False)
    else:
        console.print(f"[red]{len(report.problems)} problem(s)[/]: fix the driver or the profile, then run the "
                      "check again", highlight=False)
