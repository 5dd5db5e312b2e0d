"""EpisodeStore: the run's store, its groups, and the writer/readers of each group."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import zarr

from worldsample.errors import SchemaError, StoreError
from worldsample.store.labels import LabelLog
from worldsample.store.layout import (
    GROUPS,
    STORE_FORMAT,
    Retention,
    check_group_name,
    create_group,
    init_store,
    read_group_attrs,
    set_group_retention,
    store_path,
    writer_lock_path,
)
from worldsample.store.lock import WriterLock
from worldsample.store.reader import GroupReader
from worldsample.store.schema import GroupSchema
from worldsample.store.writer import GroupWriter


class EpisodeStore:
    def __init__(self, run_dir: Path | str, create: bool = False):
        self.run_dir = Path(run_dir)
        self.root = store_path(self.run_dir)
        if create:
            init_store(self.root)
        if not (self.root / "zarr.json").exists():
            raise StoreError(f"no episode store in {self.run_dir} (expected {self.root}/zarr.json)")
        fmt = zarr.open_group(str(self.root), mode="r").attrs.get("format")
        if fmt != STORE_FORMAT:
            raise StoreError(f"{self.root} is a zarr group but not a WorldSample store (format={fmt!r})")

    @property
    def groups(self) -> list[str]:
        return [g for g in GROUPS if (self.root / g / "zarr.json").exists()]

    def ensure_group(self, name: str, schema: GroupSchema, retention: Retention | None = None) -> None:
        """Create the group, or check that the existing one has the same schema.

        A `retention` given for an existing group replaces the one it has, so a bound configured
        after the group was created (or changed on resume) applies from the next writer on."""
        check_group_name(name)
        create_group(self.root, name, schema, retention)
        have, had_retention = read_group_attrs(self.root, name)
        if not have.compatible_with(schema):
            diff = sorted(k for k in set(have.keys) | set(schema.keys) if have.keys.get(k) != schema.keys.get(k))
            raise SchemaError(
                f"group {name!r} in {self.root} was created with another schema (keys differ: {diff}); "
                "use a new run directory for a different robot profile"
            )
        if retention is not None and retention != had_retention:
            set_group_retention(self.root, name, retention)

    def schema(self, name: str) -> GroupSchema:
        return read_group_attrs(self.root, name)[0]

    def writer(self, name: str) -> GroupWriter:
        return GroupWriter(self._group_path(name), name)

    def reader(self, name: str, keys: Iterable[str] | None = None, cache: bool = True) -> GroupReader:
        return GroupReader(self._group_path(name), name, keys=keys, cache=cache)

    def labels(self, name: str) -> LabelLog:
        """The operator labels of a group's episodes (store/labels.py)."""
        return LabelLog(self._group_path(name), name)

    def writer_active(self, name: str) -> bool:
        """Whether a writer holds the group's write lock now, in any process (this one included); never blocks."""
        path = self._group_path(name)
        return WriterLock(writer_lock_path(path), f"group {name!r} in {self.root}").is_locked_elsewhere()

    def _group_path(self, name: str) -> Path:
        check_group_name(name)
        path = self.root / name
        if not (path / "zarr.json").exists():
            raise StoreError(f"group {name!r} does not exist in {self.root}; it has {self.groups or 'no groups'}")
        return path
