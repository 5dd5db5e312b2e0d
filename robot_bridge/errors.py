"""Exception types of the bridge; each says what was wrong and what to do."""

from worldsample.errors import WorldSampleError


class BridgeError(WorldSampleError):
    """Base class of robot-bridge errors."""


class ProfileError(BridgeError):
    """A robot profile file is missing or invalid."""


class DecodeError(BridgeError):
    """A message's bytes are not valid CDR for its declared type."""


class MessageRejected(BridgeError):
    """A message decoded but its content is unusable (wrong encoding or size, NaN, stale stamp...)."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


class MessageTypeError(BridgeError, ValueError):
    """A message type, `.msg` file or field path named by a profile is unknown or unusable."""


class TransportError(BridgeError):
    """The middleware could not be set up or used (DDS domain, rclpy missing...)."""


class BagError(BridgeError):
    """A rosbag2 could not be read or written."""
