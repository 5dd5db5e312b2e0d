"""`RUN/metrics.jsonl`: scalar training metrics, one JSON object per line.

    {"step": 1200, "time": 1767.3e6, "loss/critic": 0.41, "ppl/synthetic_share": 0.12}

`step` (int, the learner's step or the real-step count) and `time` (unix seconds) are reserved;
every other key is a metric name (letters, digits and `_ . / : -`) with a number. Non-finite
values are written as the strings "NaN", "Infinity" and "-Infinity" (plain JSON has no NaN) so
that a diverging loss stays visible. A row need not carry every metric.
"""

from __future__ import annotations

import math
import re
import threading
import time as _time
from array import array
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from worldsample.paths import RunFiles
from worldsample.runlog.errors import MetricsError
from worldsample.runlog.jsonl import JsonlAppender, JsonlTail

NAME_RE = re.compile(r"^[A-Za-z0-9_.:/-]{1,128}$")
RESERVED = ("step", "time")
_NONFINITE_OUT = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def _encode(name: str, value: Any) -> float | int | str:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise MetricsError(f"metric {name!r}: {value!r} is not a number") from None
    if math.isfinite(v):
        return v
    return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")


class MetricsWriter:
    """Appends metric rows to RUN/metrics.jsonl. Safe to share between threads."""

    def __init__(self, run_dir: Path | str, fsync: bool = False):
        self.path = RunFiles.of(run_dir).metrics
        self._out = JsonlAppender(self.path, fsync=fsync)

    def log(self, step: int, values: Mapping[str, Any] | None = None, *, time: float | None = None, **kw: Any) -> None:
        merged = {**(values or {}), **kw}
        if not merged:
            raise MetricsError("a metrics row needs at least one value")
        row: dict[str, Any] = {"step": int(step), "time": float(time if time is not None else _time.time())}
        for name, value in merged.items():
            if name in RESERVED or not NAME_RE.match(name):
                raise MetricsError(f"bad metric name {name!r}: use 1-128 of [A-Za-z0-9_.:/-], not 'step' or 'time'")
            row[name] = _encode(name, value)
        self._out.append(row)

    def close(self) -> None:
        self._out.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def parse_row(obj: Any) -> dict[str, Any]:
    """A validated row: {"step": int, "time": float, name: float}. Raises ValueError if malformed."""
    if not isinstance(obj, dict):
        raise ValueError("a metrics line must be a JSON object")
    step, t = obj.get("step"), obj.get("time")
    if not isinstance(step, int) or isinstance(step, bool):
        raise ValueError(f"'step' must be an integer, got {step!r}")
    if not isinstance(t, (int, float)) or isinstance(t, bool):
        raise ValueError(f"'time' must be a number, got {t!r}")
    row: dict[str, Any] = {"step": step, "time": float(t)}
    for k, v in obj.items():
        if k in RESERVED or not isinstance(k, str) or not NAME_RE.match(k):
            continue
        if isinstance(v, str) and v in _NONFINITE_OUT:
            row[k] = _NONFINITE_OUT[v]
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            row[k] = float(v)
        elif v is not None and not isinstance(v, bool):
            raise ValueError(f"metric {k!r} has a non-numeric value {v!r}")
    return row


class _Series:
    __slots__ = ("steps", "times", "values")

    def __init__(self):
        self.steps, self.times, self.values = array("d"), array("d"), array("d")

    def add(self, step: float, t: float, v: float) -> None:
        self.steps.append(step)
        self.times.append(t)
        self.values.append(v)

    def halve(self) -> None:
        """Keep every other point (and the last): long runs keep their whole history, coarser."""
        for name in self.__slots__:
            a = getattr(self, name)
            kept = a[::2]
            if (len(a) - 1) % 2:
                kept.append(a[-1])
            setattr(self, name, kept)


class MetricsReader:
    """Tails RUN/metrics.jsonl into per-metric series kept in memory. Thread-safe.

    `max_points` bounds each series: past it, the series is thinned to every other point."""

    def __init__(self, run_dir: Path | str, max_points: int = 200_000):
        self.path = RunFiles.of(run_dir).metrics
        self._tail = JsonlTail(self.path, parse=parse_row)
        self._series: dict[str, _Series] = {}
        self._max = max_points
        self._lock = threading.Lock()
        self.rows = 0
        self.last_step: int | None = None
        self.last_time: float | None = None

    @property
    def malformed(self) -> int:
        return self._tail.malformed

    def refresh(self) -> list[dict[str, Any]]:
        """Read the rows appended since the last call, and return them."""
        with self._lock:
            resets = self._tail.resets
            rows = self._tail.poll()
            if self._tail.resets != resets:  # the file was replaced: start the series over
                self._series.clear()
                self.rows = 0
            for row in rows:
                step, t = row["step"], row["time"]
                for k, v in row.items():
                    if k in RESERVED:
                        continue
                    s = self._series.get(k)
                    if s is None:
                        s = self._series[k] = _Series()
                    s.add(step, t, v)
                    if len(s.steps) > self._max:
                        s.halve()
                self.last_step, self.last_time = step, t
            self.rows += len(rows)
            return rows

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self._series)

    def latest(self) -> dict[str, tuple[float, float]]:
        """name -> (step, value) of each metric's last row."""
        with self._lock:
            return {k: (s.steps[-1], s.values[-1]) for k, s in self._series.items() if len(s.steps)}

    def series(self, name: str, since_step: float | None = None, max_points: int = 2000) -> tuple[list, list, list]:
        """(steps, times, values) of one metric, optionally after `since_step`, thinned to at
        most `max_points` by a uniform stride that always keeps the last point."""
        with self._lock:
            s = self._series.get(name)
            if s is None:
                return [], [], []
            lo = 0
            if since_step is not None:
                lo = _first_after(s.steps, since_step)
            n = len(s.steps) - lo
            stride = max(1, math.ceil(n / max(1, max_points)))
            idx = list(range(lo, len(s.steps), stride))
            if idx and idx[-1] != len(s.steps) - 1:
                idx[-1] = len(s.steps) - 1
            return [s.steps[i] for i in idx], [s.times[i] for i in idx], [s.values[i] for i in idx]


def _first_after(steps: array, since: float) -> int:
    """Index of the first step > since (steps are appended in nondecreasing order in practice;
    a run resumed from an older checkpoint may step back, so this is a plain scan from the end)."""
    i = len(steps)
    while i > 0 and steps[i - 1] > since:
        i -= 1
    return i
