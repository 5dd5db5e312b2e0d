"""Exception types. Each says what was wrong and, where it can, what to do about it."""


class WorldSampleError(Exception):
    """Base class for every error raised on purpose by WorldSample."""


class ConfigError(WorldSampleError):
    """A configuration file or override is invalid."""


class StoreError(WorldSampleError):
    """Base class for episode-store errors."""


class SchemaError(StoreError):
    """A group schema is malformed, or a group was opened with a schema it does not have."""


class EpisodeRejected(StoreError):
    """A step or episode failed validation at append; nothing was written for it."""


class WriterLockedError(StoreError):
    """Another process (or writer object) already holds the write lock of a group."""


class StoreCorruptError(StoreError):
    """Committed data is inconsistent with its commit record."""


class RunDirectoryError(WorldSampleError):
    """A run directory is missing, or exists where a new one was asked for."""


class RobotProcessError(WorldSampleError):
    """A process of the robot side (the bridge, the simulated arm) ended while the job needed it."""


class ExportError(WorldSampleError):
    """An export cannot be written as asked (the output exists, is a directory, ...)."""


class DatasetError(WorldSampleError):
    """A dataset to import is missing, malformed, of another version, or does not match its own description."""
