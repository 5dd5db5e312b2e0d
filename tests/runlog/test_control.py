"""RUN/control/: requests from the dashboard, delivered at least once to each consumer."""

from __future__ import annotations

import json
import time

import pytest

from worldsample.runlog import ControlChannel, ControlCommand, ControlError, ControlKind


def test_every_consumer_sees_every_request_once_acked(tmp_path):
    dash = ControlChannel(tmp_path)
    a = dash.send("pause", reason="lunch")
    b = dash.send(ControlKind.estop)
    trainer, bridge = ControlChannel(tmp_path), ControlChannel(tmp_path)
    got = trainer.poll("trainer")
    assert [c.id for c in got] == [a.id, b.id] and got[0].reason == "lunch"
    assert trainer.poll("trainer") == []  # given once per channel
    assert [c.kind for c in bridge.poll("bridge", {ControlKind.estop})] == [ControlKind.estop]
    trainer.ack("trainer", got[0])
    # a restarted trainer gets again what it did not acknowledge
    assert [c.id for c in ControlChannel(tmp_path).poll("trainer")] == [b.id]
    hist = dash.history()
    assert [c.id for c, _ in hist] == [b.id, a.id]
    acks = {c.id: {x.consumer: x.result for x in acks} for c, acks in hist}
    assert acks[a.id] == {"trainer": "done", "bridge": "ignored"} and acks[b.id] == {}


def test_motion_requests_expire(tmp_path):
    ch = ControlChannel(tmp_path)
    old = ControlCommand(kind=ControlKind.start_episode, time=time.time() - 60, expires=time.time() - 50)
    ch.send(old)
    fresh = ch.send("start_episode")
    assert fresh.expires is not None and fresh.expires > time.time()
    assert ch.send("estop").expires is None
    got = ControlChannel(tmp_path).poll("bridge")
    assert got[0].id == fresh.id and old.id not in {c.id for c in got}
    ack = json.loads((tmp_path / "control" / "acks" / "bridge" / f"{old.id}.json").read_text())
    assert ack["result"] == "expired"


def test_label_requests_carry_their_episode(tmp_path):
    ch = ControlChannel(tmp_path)
    cmd = ch.send("label", group="real", episode=4, success=False)
    assert (cmd.group, cmd.episode, cmd.success) == ("real", 4, False)
    with pytest.raises(ControlError):
        ch.send("label", group="real")
    with pytest.raises(ControlError):
        ch.send("pause", episode=3)
    with pytest.raises(ControlError):
        ch.send("self_destruct")


def test_bad_consumer_names_and_malformed_files(tmp_path):
    ch = ControlChannel(tmp_path)
    with pytest.raises(ControlError):
        ch.poll("../trainer")
    ch.send("resume")
    (tmp_path / "control" / "requests" / f"00000000000000000001-{'a' * 32}.json").write_text("{broken")
    assert [c.kind for c in ch.poll("trainer")] == [ControlKind.resume]
    names = sorted(p.name for p in (tmp_path / "control" / "requests").iterdir())
    assert not any(n.endswith(".tmp") for n in names)  # writes are atomic: no temp files left
