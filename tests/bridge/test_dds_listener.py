"""The DDS reader's listener, at close: Cyclone may still call it while the reader is being deleted,
with no reader left to take from (seen in CI as an exception on Cyclone's receive thread)."""

from robot_bridge.transport.base import QosEvents
from robot_bridge.transport.dds import _ReaderListener


def test_a_delivery_racing_the_readers_deletion_is_ignored():
    got = []
    listener = _ReaderListener("/topic", lambda data, now: got.append(data), QosEvents())
    listener.on_data_available(None)  # what Entity.get_entity gives for a reader already gone
    assert got == []
