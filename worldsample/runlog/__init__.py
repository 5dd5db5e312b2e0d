"""The run directory's service files: metrics, events, control requests and run status.

These are the contracts between the long-running processes (trainer, bridge) and the
dashboard. Each is a small versioned file format in RUN/, written atomically or appended
line by line, and read tolerantly. Only the standard library and pydantic are imported here,
so the bridge and the trainer can use it without pulling in a web stack. See docs/dashboard.md.
"""

from worldsample.paths import RunFiles
from worldsample.runlog.control import ControlChannel, ControlCommand, ControlKind
from worldsample.runlog.errors import ControlError, MetricsError, RunLogError
from worldsample.runlog.events import Event, EventLog, EventReader
from worldsample.runlog.metrics import MetricsReader, MetricsWriter
from worldsample.runlog.status import RobotState, RunStatus, ServiceState, StatusFile

__all__ = [
    "ControlChannel",
    "ControlCommand",
    "ControlError",
    "ControlKind",
    "Event",
    "EventLog",
    "EventReader",
    "MetricsError",
    "MetricsReader",
    "MetricsWriter",
    "RobotState",
    "RunFiles",
    "RunLogError",
    "RunStatus",
    "ServiceState",
    "StatusFile",
]
