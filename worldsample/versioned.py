"""A directory of numbered versions with a `latest` pointer, and a watcher for newer versions.

    ROOT/v000001/ ...   one complete version per directory, never changed once published
    ROOT/v000002/ ...
    ROOT/latest         the newest published name ("v000002"), replaced last

A version is written into a temp directory inside ROOT, fsynced, and renamed into place; only then
is `latest` replaced (temp file + rename). A reader that follows `latest` therefore always finds a
complete version, and a crash mid-publish leaves at most a `.tmp-*` directory no reader looks at.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from worldsample.atomic import atomic_write_text
from worldsample.errors import WorldSampleError

LATEST = "latest"
_NAME = re.compile(r"^v(\d{6,})$")


class VersionError(WorldSampleError):
    """A versioned directory's pointer is malformed, or a version could not be published."""


def version_name(version: int) -> str:
    return f"v{version:06d}"


def parse_version_name(name: str) -> int | None:
    """The number of a version directory name (`v000003` -> 3), or None for any other name."""
    m = _NAME.match(name)
    return int(m.group(1)) if m and name == version_name(int(m.group(1))) else None


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_tree(top: Path) -> None:
    for d, _, files in os.walk(top):
        for f in files:
            _fsync(Path(d) / f)
        _fsync(Path(d))


class VersionedDir:
    def __init__(self, root: Path | str):
        self.root = Path(root)

    @property
    def pointer(self) -> Path:
        return self.root / LATEST

    def path(self, version: int) -> Path:
        return self.root / version_name(version)

    def versions(self) -> list[int]:
        """Every version directory present, published or being replaced, oldest first."""
        if not self.root.is_dir():
            return []
        found = (parse_version_name(p.name) for p in self.root.iterdir() if p.is_dir())
        return sorted(v for v in found if v is not None)

    def next_version(self) -> int:
        return max(self.versions(), default=0) + 1

    def latest(self) -> int | None:
        """The version `latest` names, or None when nothing was published (or ROOT does not exist)."""
        try:
            raw = self.pointer.read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return None
        text = raw.decode("utf-8", errors="replace").strip()
        version = parse_version_name(text)
        if version is None:
            raise VersionError(
                f"{self.pointer} holds {text[:40]!r}, expected a version directory name like v000001; "
                "write the name of the newest complete version there, or delete the file"
            )
        return version

    def publish(self, write: Callable[[Path], None], version: int | None = None) -> int:
        """Create the next version: `write(tmp_dir)` fills a temp directory, which is renamed into
        place before `latest` names it. `version` (default: after the newest present) lets a writer
        that stores the number inside its files fix it first; it must be newer than every version
        present. Raises VersionError if another writer took the number; nothing is left behind."""
        newest = max(self.versions(), default=0)
        version = newest + 1 if version is None else version
        if version <= newest:
            raise VersionError(f"cannot publish version {version} in {self.root}: version {newest} exists already")
        final = self.path(version)
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=self.root, prefix=".tmp-"))
        try:
            write(tmp)
            _fsync_tree(tmp)
            _rename_new(tmp, final, version)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        try:
            _fsync(self.root)
            atomic_write_text(self.pointer, version_name(version) + "\n")
        except BaseException:
            shutil.rmtree(final, ignore_errors=True)  # `latest` was not replaced: no reader can know it
            raise
        _fsync(self.root)
        return version


def _rename_new(tmp: Path, final: Path, version: int) -> None:
    taken = VersionError(f"{final} exists already: another writer published version {version}; publish again")
    if final.exists():  # rename would silently replace an empty directory
        raise taken
    try:
        os.rename(tmp, final)
    except OSError as e:
        if e.errno in (errno.EEXIST, errno.ENOTEMPTY):
            raise taken from None
        raise


class VersionWatcher:
    """Tells a reader when `latest` names a version it has not taken yet. The reader loads what
    `poll()` returns and calls `accept()` only when that worked, so a broken version is offered
    again on the next poll but never replaces the one in use."""

    def __init__(self, vdir: VersionedDir):
        self.vdir = vdir
        self._seen: int | None = None

    @property
    def seen(self) -> int | None:
        """The last accepted version (None before the first)."""
        return self._seen

    def poll(self) -> int | None:
        """The latest version if it differs from the accepted one, else None. A missing ROOT reads as
        nothing published; a malformed pointer raises VersionError."""
        latest = self.vdir.latest()
        return latest if latest is not None and latest != self._seen else None

    def accept(self, version: int) -> None:
        self._seen = version
