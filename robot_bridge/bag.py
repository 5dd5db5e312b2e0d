"""rosbag2 (MCAP or sqlite3) export from the episode store and import into it.

The work is in `bag_export` (store -> bag), `bag_import` (bag -> store) and `bag_common` (the
WorldSample topics, the episode list, the message types); this module keeps their names
importable from `robot_bridge.bag`.
"""

from robot_bridge.bag_common import EPISODE_TOPIC, STEP_TOPIC, STRING, _types, parse_episodes
from robot_bridge.bag_export import _step_times, _stream_message, _write_bag, check_export_schema, export_bag
from robot_bridge.bag_import import (
    BagImportError,
    ImportOptions,
    ImportReport,
    _Importer,
    _Sink,
    _topic_hint,
    bag_sha256,
    import_bag,
)

__all__ = [
    "EPISODE_TOPIC",
    "STEP_TOPIC",
    "STRING",
    "BagImportError",
    "ImportOptions",
    "ImportReport",
    "bag_sha256",
    "check_export_schema",
    "export_bag",
    "import_bag",
    "parse_episodes",
    # private, used by tests
    "_Importer",
    "_Sink",
    "_step_times",
    "_stream_message",
    "_topic_hint",
    "_types",
    "_write_bag",
]
