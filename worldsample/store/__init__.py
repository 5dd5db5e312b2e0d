"""The Zarr v3 episode store: one per run, groups by provenance, crash-safe commits.

Start with `EpisodeStore`; see docs/store.md for the layout and the rules.
"""

from worldsample.store.labels import Label, LabelLog
from worldsample.store.layout import GROUPS, Provenance, Retention
from worldsample.store.reader import GroupReader
from worldsample.store.records import EpisodeRecord, SourceRef
from worldsample.store.sampler import GroupSampler, MixtureSampler, split_counts
from worldsample.store.schema import GroupSchema, KeySpec
from worldsample.store.store import EpisodeStore

__all__ = [
    "GROUPS",
    "EpisodeRecord",
    "EpisodeStore",
    "GroupReader",
    "GroupSampler",
    "GroupSchema",
    "KeySpec",
    "Label",
    "LabelLog",
    "MixtureSampler",
    "Provenance",
    "Retention",
    "SourceRef",
    "split_counts",
]
