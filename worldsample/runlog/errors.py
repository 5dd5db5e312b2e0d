"""Errors of the run-directory file contracts."""

from worldsample.errors import WorldSampleError


class RunLogError(WorldSampleError):
    """A run-directory service file is missing, malformed, or was given bad data to write."""


class MetricsError(RunLogError):
    """A metrics row has a value that is not a finite number, or a reserved or malformed name."""


class ControlError(RunLogError):
    """A control request is malformed, or a consumer name is not allowed."""
