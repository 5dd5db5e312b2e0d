"""Errors of the world model; each says what was wrong and what to do."""

from worldsample.errors import WorldSampleError


class WorldModelError(WorldSampleError):
    """Base class of world-model errors."""


class NotEnoughDataError(WorldModelError):
    """The store has no episodes (or none long enough) for what was asked."""


class CheckpointError(WorldModelError):
    """A checkpoint is missing or unreadable."""


class CheckpointCorruptError(CheckpointError):
    """A checkpoint's tensors do not match the checksum recorded beside them (tampered or torn)."""


class CheckpointMismatchError(CheckpointError):
    """A checkpoint does not fit the model it is loaded into (format, architecture or tensors)."""
