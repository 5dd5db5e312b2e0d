"""The `dds` transport: cyclonedds-python speaking ROS 2 wire conventions, no ROS install needed.

ROS topic `/a/b` is DDS topic `rt/a/b` with type `pkg::msg::dds_::Name_` (see dds_types.py).
Samples go in and out as raw CDR through cyclonedds' private `_clayer` write/take functions, so
the shared codec does all (de)serialisation and a 640x480 frame costs one copy. That private API
is why cyclonedds is pinned (==11.0.1); tests/bridge/test_dds.py fails loudly if it changes.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict

from cyclonedds._clayer import ddspy_take, ddspy_write
from cyclonedds.core import DDSException, InstanceState, Listener, Policy, Qos, SampleState, ViewState
from cyclonedds.domain import Domain, DomainParticipant
from cyclonedds.pub import DataWriter
from cyclonedds.sub import DataReader
from cyclonedds.topic import Topic

from robot_bridge.errors import TransportError
from robot_bridge.transport.base import Publish, QosEvents, QosSpec, RawCallback
from robot_bridge.transport.dds_types import idl_type

log = logging.getLogger(__name__)

_ANY = SampleState.Any | ViewState.Any | InstanceState.Any

# Loopback-only discovery without multicast (what ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST does).
# Large datagrams and a bigger receive buffer (capped by net.core.rmem_max) keep best-effort
# camera frames from being lost a fragment at a time while the receiver is busy.
LOOPBACK_XML = (
    '<CycloneDDS><Domain id="any"><General><AllowMulticast>false</AllowMulticast>'
    '<Interfaces><NetworkInterface address="127.0.0.1"/></Interfaces><MaxMessageSize>65500B</MaxMessageSize></General>'
    '<Internal><SocketReceiveBufferSize min="default" max="4MiB"/></Internal>'
    "<Discovery><ParticipantIndex>auto</ParticipantIndex><MaxAutoParticipantIndex>32</MaxAutoParticipantIndex>"
    '<Peers><Peer address="127.0.0.1"/></Peers></Discovery></Domain></CycloneDDS>'
)


def dds_topic_name(topic: str) -> str:
    if not topic.startswith("/"):
        raise TransportError(f"ROS topic names are absolute here, got {topic!r}")
    return "rt" + topic


def _qos(spec: QosSpec) -> Qos:
    rel = Policy.Reliability.Reliable(0) if spec.reliability == "reliable" else Policy.Reliability.BestEffort
    return Qos(rel, Policy.History.KeepLast(spec.depth), Policy.Durability.Volatile)


class _ReaderListener(Listener):
    def __init__(self, topic: str, callback: RawCallback, events: QosEvents):
        super().__init__()
        self.topic, self.callback, self.events = topic, callback, events

    def on_data_available(self, reader):
        if reader is None:  # Cyclone delivered while the reader was being deleted (close racing a sample)
            return
        while True:
            got = ddspy_take(reader._ref, _ANY, 32)
            if isinstance(got, int) or not got:
                return
            now = time.time_ns()
            for data, info in got:
                if not info.valid_data:
                    continue
                try:
                    self.callback(data, now)
                except Exception:  # a bug in a handler must not kill Cyclone's receive thread
                    log.exception("handler of %s failed", self.topic)

    def on_requested_incompatible_qos(self, reader, status):
        self.events.incompatible_qos += 1
        log.warning("QoS mismatch on %s: a publisher offers QoS this subscription cannot accept", self.topic)

    def on_sample_lost(self, reader, status):
        self.events.samples_lost += 1

    def on_sample_rejected(self, reader, status):
        self.events.samples_rejected += 1


class _WriterListener(Listener):
    def __init__(self, topic: str, events: QosEvents):
        super().__init__()
        self.topic, self.events = topic, events

    def on_offered_incompatible_qos(self, writer, status):
        self.events.incompatible_qos += 1
        log.warning("QoS mismatch on %s: a subscriber requests QoS this publisher does not offer", self.topic)


# Cyclone configures a domain once per process; later participants in it share that config.
_CONFIGURED: dict[int, Domain] = {}


class DdsTransport:
    """`types`: the profile's MessageTypes (its typestore and custom `.msg` types); Jazzy's stock
    messages when None."""

    def __init__(self, domain_id: int = 0, config_xml: str | None = None, types=None):
        try:
            if config_xml and domain_id not in _CONFIGURED:
                _CONFIGURED[domain_id] = Domain(domain_id, config_xml)
            self.participant = DomainParticipant(domain_id)
        except DDSException as e:
            raise TransportError(f"cannot join DDS domain {domain_id}: {e}") from e
        self._topics: dict[str, Topic] = {}
        self._entities: list = []
        self._events: dict[str, QosEvents] = defaultdict(QosEvents)
        self._lock = threading.Lock()
        self._writers: dict[str, DataWriter] = {}
        self.types = types

    def _topic(self, topic: str, typename: str) -> Topic:
        with self._lock:
            if topic not in self._topics:
                self._topics[topic] = Topic(self.participant, dds_topic_name(topic), idl_type(typename, self.types))
            t = self._topics[topic]
        if t.data_type is not idl_type(typename, self.types):
            raise TransportError(f"topic {topic} is already used with another type than {typename}")
        return t

    def subscribe(self, topic: str, typename: str, qos: QosSpec, callback: RawCallback) -> None:
        listener = _ReaderListener(topic, callback, self._events[topic])
        reader = DataReader(self.participant, self._topic(topic, typename), qos=_qos(qos), listener=listener)
        self._entities.append(reader)

    def publisher(self, topic: str, typename: str, qos: QosSpec) -> Publish:
        writer = DataWriter(
            self.participant,
            self._topic(topic, typename),
            qos=_qos(qos),
            listener=_WriterListener(topic, self._events[topic]),
        )
        self._entities.append(writer)
        self._writers[topic] = writer

        def publish(raw: bytes) -> None:
            pad = -len(raw) % 4
            ret = ddspy_write(writer._ref, raw + b"\x00" * pad if pad else raw)
            if ret < 0:
                raise TransportError(f"DDS write on {topic} failed (code {ret}): the bytes are not a valid {typename}")

        return publish

    def matched_subscribers(self, topic: str) -> int:
        return len(self._writers[topic].get_matched_subscriptions())

    def qos_events(self) -> dict[str, QosEvents]:
        return dict(self._events)

    def close(self) -> None:
        self._entities.clear()
        self._topics.clear()
        self._writers.clear()
        self.participant = None
