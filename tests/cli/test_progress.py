"""The live progress line of `worldsample run` / `train`: printed on its own clock while training
runs (also when no round ends), with the store's and the loop's figures."""

import io
import threading

from rich.console import Console

from services.cli.progress import TrainingProgress
from tests.store.helpers import make_episode, new_store


class _Lines(io.StringIO):
    """A console file that signals each printed line."""

    def __init__(self):
        super().__init__()
        self.lines: list[str] = []
        self.new = threading.Event()
        self._part = ""

    def write(self, s: str) -> int:
        self._part += s
        while "\n" in self._part:
            line, self._part = self._part.split("\n", 1)
            self.lines.append(line)
            self.new.set()
        return len(s)


def _wait_lines(out: _Lines, n: int, timeout: float = 60.0) -> list[str]:
    while len(out.lines) < n:
        out.new.clear()
        assert out.new.wait(timeout), f"only {len(out.lines)} progress lines after {timeout} s: {out.lines}"
    return out.lines


def test_progress_lines_come_without_rounds_and_report_the_store_and_the_loop(tmp_path):
    store = new_store(tmp_path, group="real")
    with store.writer("real") as w:
        for seed in range(3):
            ep = make_episode(seed, 10)
            ep["intervention"] = ep["done"].copy()
            ep["intervention"][:5] = True  # 5 of 10 steps driven by the human
            w.append_episode(ep)
    out = _Lines()
    console = Console(file=out, width=400, force_terminal=False)
    with TrainingProgress(tmp_path, 100, console, every_s=0.05, dashboard="http://127.0.0.1:8765/") as progress:
        first = _wait_lines(out, 2)[:2]  # no round has ended: lines come all the same
        progress.on_round({"real_steps": 20, "learner/updates": 40, "batch/synthetic_share": 0.25,
                           "eval/success_rate": 0.6})
        progress.on_round({"real_steps": 20, "eval/success_rate": 0.4})
        n = len(out.lines)
        later = _wait_lines(out, n + 1)[n]
    assert all("learner starting" in line and "episodes 3" in line for line in first)
    assert "real steps 20/100 (20%)" in later
    assert "episodes 3" in later and "human 50%" in later
    assert "eval 40% (best 60%)" in later  # the last evaluation, and the best one
    assert "synthetic 25%" in later
    assert "lag 10 steps" in later  # 30 committed, 20 learned from
    assert "dashboard http://127.0.0.1:8765/" in later and "elapsed" in later


def test_progress_before_the_real_group_exists(tmp_path):
    progress = TrainingProgress(tmp_path, 50, Console(file=io.StringIO()))
    line = progress.line()
    assert "real steps 0/50" in line and "episodes 0" in line and "learner starting" in line
