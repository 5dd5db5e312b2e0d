"""RUN/events.jsonl: typed events."""

from __future__ import annotations

import pytest

from worldsample.runlog import EventLog, EventReader, RunLogError


def test_emit_and_tail(tmp_path):
    log = EventLog(tmp_path, source="trainer")
    log.emit("policy_published", "policy v3", version=3)
    log.emit("estop", "pressed", level="warning")
    r = EventReader(tmp_path, keep=1)
    new = r.refresh()
    assert [e.kind for e in new] == ["policy_published", "estop"] and new[0].data == {"version": 3}
    assert [e.kind for e in r.events] == ["estop"] and r.total == 2
    with (tmp_path / "events.jsonl").open("a") as f:
        f.write('{"time": 1, "kind": "BAD KIND"}\n')
    assert r.refresh() == [] and r.malformed == 1
    log.close()


@pytest.mark.parametrize("kind,level", [("Bad Kind", "info"), ("ok", "fatal")])
def test_bad_events_are_refused(tmp_path, kind, level):
    with pytest.raises(RunLogError):
        EventLog(tmp_path).emit(kind, level=level)
