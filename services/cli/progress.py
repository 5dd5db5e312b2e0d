"""The live progress line of `worldsample run` and `worldsample train`.

A daemon thread prints one line every `every_s` seconds while training runs, whether or not a
round ended meanwhile (a long learn step or world-model training must not look like a hang), to a
terminal and to a log file alike:

    training  real steps 1,234/4,000 (31%)  episodes 12  eval 45% (best 60%)  human 52%  synthetic 6%
              lag 0 steps  elapsed 2:10  left ~4:50  dashboard http://127.0.0.1:8765/

What each field is: real steps the learner has seen of the budget; committed real episodes;
the last and best evaluation; the share of the steps a human drove over the last `HUMAN_WINDOW`
episodes; the last batch's synthetic share; the lag: real steps the store has committed that
the learner has not yet learned from; elapsed time, and the time left at the rate so far.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from rich.console import Console

HUMAN_WINDOW = 10  # episodes the human share is taken over


def _clock(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class TrainingProgress:
    def __init__(self, run: Path, budget: int, console: Console, every_s: float = 10.0,
                 dashboard: str | None = None):
        self.run, self.budget, self.console = Path(run), budget, console
        self.every_s, self.dashboard = every_s, dashboard
        self.learned: int | None = None  # real steps of the last logged round
        self.synthetic: float | None = None
        self.eval_last: float | None = None
        self.eval_best: float | None = None
        self.t0 = time.monotonic()
        self._rate_start: tuple[float, int] | None = None  # (time, learned steps) of the first round
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._reader = None

    # -- what the loop tells ----------------------------------------------------------------------
    def on_round(self, row: dict) -> None:
        with self._lock:
            self.learned = int(row.get("real_steps", self.learned or 0))
            if self._rate_start is None:
                self._rate_start = (time.monotonic(), self.learned)
            if "batch/synthetic_share" in row:
                self.synthetic = float(row["batch/synthetic_share"])
            if "eval/success_rate" in row:
                self.eval_last = float(row["eval/success_rate"])
                self.eval_best = max(self.eval_last, self.eval_best if self.eval_best is not None else 0.0)

    # -- what the store tells -------------------------------------------------------------------------
    def _committed(self) -> tuple[int, int, float | None]:
        """(committed real steps, episodes, human share of the last episodes); zeros before the group exists."""
        from worldsample.store import EpisodeStore

        try:
            if self._reader is None:
                store = EpisodeStore(self.run)
                if "real" not in store.groups:
                    return 0, 0, None
                self._reader = store.reader("real", cache=False)
            self._reader.refresh()
            records = self._reader.episode_records()
        except Exception:  # status is for people: a store mid-write never stops the line
            return 0, 0, None
        recent = records[-HUMAN_WINDOW:]
        steps = sum(r.length for r in recent)
        human = sum(r.interventions for r in recent) / steps if steps else None
        return sum(r.length for r in records), len(records), human

    def line(self) -> str:
        committed, episodes, human = self._committed()
        with self._lock:
            learned, synthetic = self.learned, self.synthetic
            last, best, start = self.eval_last, self.eval_best, self._rate_start
        now = time.monotonic()
        seen = learned if learned is not None else 0
        parts = [f"training  real steps {seen:,}/{self.budget:,} ({100 * seen / max(self.budget, 1):.0f}%)",
                 f"episodes {episodes}"]
        if last is not None:
            parts.append(f"eval {100 * last:.0f}% (best {100 * best:.0f}%)")
        if human is not None:
            parts.append(f"human {100 * human:.0f}%")
        if synthetic is not None:
            parts.append(f"synthetic {100 * synthetic:.0f}%")
        parts.append(f"lag {max(0, committed - seen):,} steps" if learned is not None else "learner starting")
        parts.append(f"elapsed {_clock(now - self.t0)}")
        if start is not None and seen > start[1] and now > start[0]:
            rate = (seen - start[1]) / (now - start[0])
            parts.append(f"left ~{_clock(max(0, self.budget - seen) / rate)}")
        if self.dashboard:
            parts.append(f"dashboard {self.dashboard}")
        return "  ".join(parts)

    # -- the thread -------------------------------------------------------------------------------------
    def _beat(self) -> None:
        while not self._stop.wait(self.every_s):
            self.console.print(self.line(), highlight=False, soft_wrap=True)

    def __enter__(self) -> TrainingProgress:
        self._thread = threading.Thread(target=self._beat, name="training-progress", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
