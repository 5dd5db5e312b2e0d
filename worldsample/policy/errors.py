"""Errors of the policy registry."""

from worldsample.errors import WorldSampleError


class PolicyError(WorldSampleError):
    """A policy version is missing, malformed, or does not fit the robot it is loaded for."""
