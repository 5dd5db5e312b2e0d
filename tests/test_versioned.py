"""Versioned directories: publish, the latest pointer, failed writes, and the newer-version watcher."""

import os

import pytest

from worldsample.errors import WorldSampleError
from worldsample.versioned import VersionedDir, VersionError, VersionWatcher


def writer(text):
    def write(tmp):
        (tmp / "data.txt").write_text(text)
        (tmp / "sub").mkdir()
        (tmp / "sub" / "more.txt").write_text(text * 2)

    return write


def leftovers(root):
    return sorted(p.name for p in root.iterdir() if p.name.startswith("."))


def test_publish_latest_versions(tmp_path):
    vd = VersionedDir(tmp_path / "root")
    assert vd.versions() == [] and vd.latest() is None  # the root does not even exist yet
    assert vd.publish(writer("a")) == 1
    assert vd.publish(writer("b")) == 2
    assert vd.versions() == [1, 2] and vd.latest() == 2
    assert vd.path(2) == tmp_path / "root" / "v000002"
    assert (vd.path(1) / "data.txt").read_text() == "a" and (vd.path(2) / "sub" / "more.txt").read_text() == "bb"
    assert (tmp_path / "root" / "latest").read_text() == "v000002\n"
    assert leftovers(vd.root) == []
    (vd.root / "eval").mkdir()  # other entries beside the versions are not versions
    (vd.root / "v7").mkdir()
    (vd.root / "v000009").write_text("a file, not a version")
    assert vd.versions() == [1, 2]


def test_numbers_follow_the_newest_directory(tmp_path):
    vd = VersionedDir(tmp_path)
    os.mkdir(tmp_path / "v000004")  # e.g. published by a writer that died before moving `latest`
    assert vd.publish(writer("x")) == 5 and vd.latest() == 5
    assert vd.publish(writer("y"), version=9) == 9 and vd.versions() == [4, 5, 9]
    with pytest.raises(VersionError, match="version 9 exists already"):
        vd.publish(writer("z"), version=7)
    assert vd.versions() == [4, 5, 9] and vd.latest() == 9 and leftovers(tmp_path) == []


def test_a_taken_number_is_never_overwritten(tmp_path):
    vd = VersionedDir(tmp_path)
    vd.publish(writer("first"))

    def racing_write(tmp):  # another writer publishes the same number while this one writes
        (tmp_path / "v000002").mkdir()
        (tmp_path / "v000002" / "data.txt").write_text("theirs")
        (tmp / "data.txt").write_text("ours")

    with pytest.raises(VersionError, match="another writer published version 2"):
        vd.publish(racing_write)
    assert (tmp_path / "v000002" / "data.txt").read_text() == "theirs"
    assert vd.latest() == 1 and leftovers(tmp_path) == []
    (tmp_path / "v000002" / "data.txt").unlink()  # an empty directory would be replaced by rename
    with pytest.raises(VersionError, match="exists already"):
        vd.publish(writer("again"), version=2)
    assert leftovers(tmp_path) == []


def test_a_failing_write_leaves_nothing(tmp_path):
    vd = VersionedDir(tmp_path)
    vd.publish(writer("good"))

    def broken(tmp):
        (tmp / "half.bin").write_bytes(b"\0" * 100)
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        vd.publish(broken)
    assert vd.versions() == [1] and vd.latest() == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest", "v000001"]


def test_a_malformed_pointer_is_a_clear_error(tmp_path):
    vd = VersionedDir(tmp_path)
    vd.publish(writer("a"))
    for bad in ("../../etc", "v1", "v000001/../x", "", "\xff\xfe"):
        (tmp_path / "latest").write_text(bad)
        with pytest.raises(VersionError, match="expected a version directory name like v000001") as e:
            vd.latest()
        assert str(tmp_path / "latest") in str(e.value) and isinstance(e.value, WorldSampleError)
    (tmp_path / "latest").write_bytes(b"\x80\x81garbage")
    with pytest.raises(VersionError, match="latest"):
        vd.latest()


def test_watcher_offers_each_new_version_until_accepted(tmp_path):
    vd = VersionedDir(tmp_path / "never-created")
    w = VersionWatcher(vd)
    assert w.poll() is None and w.seen is None  # a missing root is "nothing yet", not an error
    vd.publish(writer("a"))
    assert w.poll() == 1 and w.poll() == 1  # offered again until the caller took it
    w.accept(1)
    assert w.seen == 1 and w.poll() is None
    vd.publish(writer("b"))
    vd.publish(writer("c"))
    assert w.poll() == 3  # only the newest, never the ones in between
    # the caller failed to load v3: it does not accept, keeps v1, and is offered v3 again
    assert w.seen == 1 and w.poll() == 3
    w.accept(3)
    assert w.poll() is None
    (vd.root / "latest").write_text("garbage")
    with pytest.raises(VersionError):
        w.poll()
    assert w.seen == 3
