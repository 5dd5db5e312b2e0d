"""The run's own config (RUN/config.yaml and RUN/config_history.jsonl) and the runs beside it
(sibling directories of RUN that hold a metrics.jsonl), read-only, for the config view and the
overlaid curves.

Every file is opened with `artifacts.read_under`: one level at a time with O_NOFOLLOW, so a
symbolic link at any level (a sibling run, its metrics.jsonl, config.yaml) is refused, and with a
size limit. Parsed results are cached by the file's (device, inode, size, mtime).
"""

from __future__ import annotations

import math
import os
import stat
from array import array
from pathlib import Path
from typing import Any

from services.dashboard.artifacts import NAME_RE, Refused, StatCache, parse_json, read_under
from services.dashboard.errors import BadRequest, NotFound
from services.dashboard.models import ConfigFile, ConfigView, MetricsSeries, Series, SiblingRun, SiblingRuns
from worldsample.runlog.metrics import RESERVED, parse_row

MAX_CONFIG_BYTES = 1 << 20
MAX_HISTORY_BYTES = 8 << 20
MAX_HISTORY_ENTRIES = 500  # the newest entries of config_history.jsonl
MAX_SIBLING_RUNS = 32  # runs listed beside this one (newest metrics.jsonl first)
MAX_SCAN = 4096  # entries of the parent directory looked at
MAX_METRICS_BYTES = 64 << 20  # a sibling's metrics.jsonl
MAX_SERIES_NAMES = 64
MAX_LINE_BYTES = 1 << 20

_CACHE = StatCache(max_entries=8)  # parsed sibling metrics (a few runs at most) and config files


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except OSError:
        return None


# -- config ----------------------------------------------------------------------------------------


def _config_file(run_dir: Path) -> tuple[ConfigFile | None, str | None]:
    st = _lstat(run_dir / "config.yaml")
    if st is None:
        return None, "this run has no config.yaml (`worldsample run` writes it; `worldsample train` alone does not)"
    try:
        raw = read_under(run_dir, ("config.yaml",), MAX_CONFIG_BYTES)
    except Refused as e:
        return None, f"not shown: {e}"
    except OSError as e:
        return None, f"config.yaml cannot be read: {e.strerror}"
    return ConfigFile(text=raw.decode("utf-8", errors="replace"), size_bytes=len(raw), modified=st.st_mtime), None


def _history(run_dir: Path) -> tuple[list[dict[str, Any]], int, int, str | None]:
    """(newest entries, oldest first; lines read; malformed lines; why none could be read)."""
    path = run_dir / "config_history.jsonl"
    st = _lstat(path)
    if st is None:
        return [], 0, 0, None

    def parse() -> tuple[list[dict[str, Any]], int, int, str | None]:
        try:
            raw = read_under(run_dir, ("config_history.jsonl",), MAX_HISTORY_BYTES)
        except Refused as e:
            return [], 0, 0, f"not shown: {e}"
        except OSError as e:
            return [], 0, 0, f"config_history.jsonl cannot be read: {e.strerror}"
        entries, lines, bad = [], 0, 0
        for line in raw.splitlines():
            if not line.strip():
                continue
            lines += 1
            try:
                if len(line) > MAX_LINE_BYTES:
                    raise Refused("line longer than 1 MiB")
                entry = parse_json(line, "config_history.jsonl")
            except BadRequest:
                bad += 1
                continue
            if isinstance(entry, dict):
                entries.append(entry)
            else:
                bad += 1
        return entries[-MAX_HISTORY_ENTRIES:], lines, bad, None

    return _CACHE.get(path, st, parse)


def config_view(run_dir: Path) -> ConfigView:
    config, why = _config_file(run_dir)
    history, lines, bad, history_error = _history(run_dir)
    return ConfigView(
        config=config,
        config_error=why,
        history=history,
        history_lines=lines,
        history_malformed=bad,
        history_error=history_error,
    )


# -- runs side by side -----------------------------------------------------------------------------


def sibling_runs(run_dir: Path) -> SiblingRuns:
    """The directories beside RUN (same parent) that hold a regular metrics.jsonl, newest first,
    at most MAX_SIBLING_RUNS; symbolic links (the directory or its metrics.jsonl) are left out."""
    here = run_dir.resolve()
    found: list[tuple[float, str, int]] = []
    truncated = False
    with os.scandir(here.parent) as it:
        for i, e in enumerate(it):
            if i >= MAX_SCAN:
                truncated = True
                break
            if e.name == here.name or e.name.startswith(".") or not NAME_RE.match(e.name):
                continue
            if e.is_symlink() or not e.is_dir(follow_symlinks=False):
                continue
            st = _lstat(Path(e.path) / "metrics.jsonl")
            if st is None or not stat.S_ISREG(st.st_mode):
                continue
            found.append((st.st_mtime, e.name, st.st_size))
    found.sort(reverse=True)
    truncated = truncated or len(found) > MAX_SIBLING_RUNS
    return SiblingRuns(
        current=here.name,
        runs=[SiblingRun(name=n, modified=m, size_bytes=s) for m, n, s in found[:MAX_SIBLING_RUNS]],
        truncated=truncated,
        limit=MAX_SIBLING_RUNS,
    )


class _Parsed:
    def __init__(self):
        self.series: dict[str, tuple[array, array, array]] = {}
        self.rows = 0
        self.malformed = 0


def _parse_metrics(raw: bytes) -> _Parsed:
    out = _Parsed()
    for line in raw.splitlines():
        if not line.strip():
            continue
        try:
            if len(line) > MAX_LINE_BYTES:
                raise ValueError("line longer than 1 MiB")
            row = parse_row(parse_json(line, "metrics.jsonl"))
        except (ValueError, BadRequest):
            out.malformed += 1
            continue
        out.rows += 1
        for k, v in row.items():
            if k in RESERVED:
                continue
            s = out.series.get(k)
            if s is None:
                s = out.series[k] = (array("d"), array("d"), array("d"))
            s[0].append(row["step"])
            s[1].append(row["time"])
            s[2].append(v)
    return out


def _thin(s: tuple[array, array, array], max_points: int) -> Series:
    n = len(s[0])
    stride = max(1, math.ceil(n / max(1, max_points)))
    idx = list(range(0, n, stride))
    if idx and idx[-1] != n - 1:
        idx[-1] = n - 1
    return Series(
        step=[s[0][i] for i in idx],
        time=[s[1][i] for i in idx],
        value=[s[2][i] if math.isfinite(s[2][i]) else None for i in idx],
    )


def sibling_series(run_dir: Path, name: str, names: list[str] | None, max_points: int) -> MetricsSeries:
    if not NAME_RE.match(name) or ".." in name:
        raise BadRequest(f"bad run name {name!r}: use letters, digits and _ . - only")
    here = run_dir.resolve()
    if name == here.name:
        raise BadRequest(f"{name!r} is this run: its curves are at /api/metrics/series")
    if names and len(names) > MAX_SERIES_NAMES:
        raise BadRequest(f"at most {MAX_SERIES_NAMES} metrics per request, got {len(names)}")
    parent = here.parent
    path = parent / name / "metrics.jsonl"
    st = _lstat(path)
    if st is None:
        raise NotFound(f"no run {name!r} with a metrics.jsonl beside this one (see /api/runs)")
    try:
        parsed = _CACHE.get(path, st, lambda: _parse_metrics(read_under(parent, (name, "metrics.jsonl"),
                                                                        MAX_METRICS_BYTES)))
    except FileNotFoundError:
        raise NotFound(f"no run {name!r} with a metrics.jsonl beside this one (see /api/runs)") from None
    except OSError as e:
        raise NotFound(f"{name}/metrics.jsonl cannot be read: {e.strerror}") from None
    wanted = names or sorted(parsed.series)
    return MetricsSeries(
        series={n: _thin(parsed.series[n], max_points) for n in wanted if n in parsed.series},
        rows=parsed.rows,
        malformed=parsed.malformed,
    )
