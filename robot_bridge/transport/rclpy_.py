"""The `rclpy` transport, for a ROS 2 (Jazzy) environment: raw CDR in and out, same codec.

`create_subscription(..., raw=True)` hands callbacks the serialized bytes and `publish` accepts
bytes, so the core and codec are shared with the dds transport. Sensor callbacks run in a
reentrant group on a multi-threaded executor; the bridge's control loop keeps its own thread.
Only importable where rclpy is (tests skip elsewhere). Use RMW_IMPLEMENTATION=rmw_cyclonedds_cpp.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict

from robot_bridge.errors import TransportError
from robot_bridge.transport.base import Publish, QosEvents, QosSpec, RawCallback

try:
    import rclpy
    from rclpy.callback_groups import ReentrantCallbackGroup
    from rclpy.executors import MultiThreadedExecutor
    from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
    from rosidl_runtime_py.utilities import get_message

    try:  # Iron and later
        from rclpy.event_handler import PublisherEventCallbacks, SubscriptionEventCallbacks
    except ImportError:  # Humble
        from rclpy.qos_event import PublisherEventCallbacks, SubscriptionEventCallbacks
except ImportError as e:  # pragma: no cover - depends on the environment
    raise TransportError(f"the rclpy transport needs a sourced ROS 2 environment ({e}); use --transport dds") from e


def _qos(spec: QosSpec) -> QoSProfile:
    rel = ReliabilityPolicy.RELIABLE if spec.reliability == "reliable" else ReliabilityPolicy.BEST_EFFORT
    return QoSProfile(reliability=rel, history=HistoryPolicy.KEEP_LAST, depth=spec.depth)


class RclpyTransport:
    def __init__(self, domain_id: int = 0, node_name: str = "worldsample_bridge"):
        self._context = rclpy.Context()
        rclpy.init(context=self._context, domain_id=domain_id)
        self.node = rclpy.create_node(node_name, context=self._context)
        self._group = ReentrantCallbackGroup()
        self._events: dict[str, QosEvents] = defaultdict(QosEvents)
        self._pubs: dict[str, object] = {}
        self._executor = MultiThreadedExecutor(num_threads=4, context=self._context)
        self._executor.add_node(self.node)
        self._thread = threading.Thread(target=self._executor.spin, name="rclpy-executor", daemon=True)
        self._thread.start()

    def subscribe(self, topic: str, typename: str, qos: QosSpec, callback: RawCallback) -> None:
        events = self._events[topic]

        def incompatible(_):
            events.incompatible_qos += 1

        self.node.create_subscription(
            get_message(typename), topic, lambda raw: callback(bytes(raw), time.time_ns()), _qos(qos), raw=True,
            callback_group=self._group, event_callbacks=SubscriptionEventCallbacks(incompatible_qos=incompatible),
        )

    def publisher(self, topic: str, typename: str, qos: QosSpec) -> Publish:
        events = self._events[topic]

        def incompatible(_):
            events.incompatible_qos += 1

        pub = self.node.create_publisher(get_message(typename), topic, _qos(qos),
                                         event_callbacks=PublisherEventCallbacks(incompatible_qos=incompatible))
        self._pubs[topic] = pub
        return pub.publish  # rclpy publishes serialized bytes as they are

    def matched_subscribers(self, topic: str) -> int:
        return self._pubs[topic].get_subscription_count()

    def qos_events(self) -> dict[str, QosEvents]:
        return dict(self._events)

    def close(self) -> None:
        self._executor.shutdown()
        self.node.destroy_node()
        rclpy.shutdown(context=self._context)
