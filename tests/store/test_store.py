"""EpisodeStore queries about groups: whether a group's writer is active."""

import os
import signal

import pytest

from worldsample.errors import StoreError

from .helpers import new_store
from .test_crash import start_writer


def test_writer_active_while_a_writer_in_this_process_holds_the_group(tmp_path):
    store = new_store(tmp_path, group="demo")
    store.ensure_group("real", store.schema("demo"))
    assert not store.writer_active("demo")
    with store.writer("demo"):
        assert store.writer_active("demo")
        assert not store.writer_active("real")  # one lock per group
    assert not store.writer_active("demo")


def test_writer_active_sees_a_writer_process_and_its_death(tmp_path):
    store = new_store(tmp_path)
    p = start_writer(tmp_path, count=10_000, step_sleep=0.01)
    try:
        assert p.stdout.readline().strip() == "ready", p.stderr.read()
        assert store.writer_active("demo")
    finally:
        os.kill(p.pid, signal.SIGKILL)
        p.communicate()
    assert not store.writer_active("demo")  # the kernel released the dead writer's lock


def test_writer_active_of_a_missing_group_is_an_error(tmp_path):
    store = new_store(tmp_path, group="demo")
    with pytest.raises(StoreError, match="group 'sim' does not exist"):
        store.writer_active("sim")
    with pytest.raises(StoreError, match="unknown group 'bogus'"):
        store.writer_active("bogus")
