import json
import os

from typer.testing import CliRunner

from services.cli.main import app

from ..store.helpers import make_episode, new_store

runner = CliRunner()


def filled(tmp_path):
    store = new_store(tmp_path, chunk_len=4)
    with store.writer("demo") as w:
        for i in range(3):
            w.append_episode(make_episode(i, 10, terminal=True))
    return store


def test_help_on_every_command():
    commands = (
        [],
        ["store"],
        ["demos"],
        ["store", "info"],
        ["store", "verify"],
        ["demos", "collect"],
        ["run"],
        ["sim-robot"],
        ["bridge"],
        ["bag", "import"],
        ["bag", "export"],
        ["wm"],
        ["wm", "train"],
        ["wm", "eval"],
        ["train"],
        ["dashboard"],
    )
    for args in commands:
        res = runner.invoke(app, [*args, "--help"])
        assert res.exit_code == 0, (args, res.output)
        assert "Usage" in res.output


def test_info_and_verify_ok(tmp_path):
    filled(tmp_path)
    res = runner.invoke(app, ["store", "info", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert "demo" in res.output and "30" in res.output and "100%" in res.output
    res = runner.invoke(app, ["store", "verify", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert "3 committed episodes, 30 steps" in res.output


def test_verify_reports_changed_chunk(tmp_path):
    store = filled(tmp_path)
    # episode 1 starts at slot 12 (10 steps, padded to the 4-step chunk grid): chunk 3
    chunk = store.root / "demo" / "data" / "action" / "c" / "3" / "0"
    other = store.root / "demo" / "data" / "action" / "c" / "0" / "0"
    chunk.write_bytes(other.read_bytes())
    res = runner.invoke(app, ["store", "verify", str(tmp_path)])
    assert res.exit_code == 1
    assert "demo/episode 1: action does not match its checksum" in res.output


def test_verify_reports_missing_chunk_and_bad_record(tmp_path):
    store = filled(tmp_path)
    os.remove(store.root / "demo" / "data" / "reward" / "c" / "6")
    rec = store.root / "demo" / "commits" / "000000000.json"
    meta = json.loads(rec.read_text())
    meta["length"] = 11
    rec.write_text(json.dumps(meta))
    res = runner.invoke(app, ["store", "verify", str(tmp_path)])
    assert res.exit_code == 1
    assert "demo/episode 2: reward does not match its checksum" in res.output
    assert "demo/episode 0:" in res.output


def test_not_a_store_is_a_clear_error(tmp_path):
    res = runner.invoke(app, ["store", "info", str(tmp_path)])
    assert res.exit_code == 2
    assert "no episode store" in res.output
