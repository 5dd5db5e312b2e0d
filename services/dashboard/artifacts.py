"""Policies (RUN/policies/), evaluation reports (RUN/reports/*.json) and the comparison table.

The trainer writes the policies; evaluation code writes the reports. Without them the lists are
empty and the comparison table comes from the store alone (per policy version, per group). Contracts:

- a policy is a directory `RUN/policies/<name>/` (or a single file there); its `meta.json`
  (or `config.json`), a JSON object, is shown as is (version, step, created, ...);
- a report is `RUN/reports/<name>.json`, a JSON object; when it has `policies`, a list of
  objects with `policy` and some of `episodes`, `success_rate`, `mean_return`, `mean_length`,
  `interventions_per_episode`, each becomes a row of the comparison table (a report with a
  top-level `policy` is one row).

Files are read under RUN without following a symbolic link at any level (a linked folder, policy
or file is not listed and not served), at most MAX_JSON_BYTES each, and parsed with a bound on
nesting (MAX_DEPTH): a file that breaks a rule is an error for that item only. Summaries of
reports and policy metadata are cached by (inode, size, mtime), so the live overview does not
parse every report on every tick.
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import stat
import threading
from collections import Counter, OrderedDict, defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from services.dashboard.data import RunData
from services.dashboard.errors import BadRequest, NotFound
from services.dashboard.models import ComparisonRow, PolicyEntry, ReportEntry
from worldsample.evaluation.intervals import wilson
from worldsample.paths import RunFiles

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
MAX_JSON_BYTES = 5 << 20
MAX_META_BYTES = 1 << 20
MAX_DEPTH = 32  # nesting of objects and lists in a report or a policy's metadata
META_FILES = ("meta.json", "config.json", "policy.json")
ROW_FIELDS = ("episodes", "success_rate", "mean_return", "mean_length", "interventions_per_episode")


class Refused(BadRequest):
    """A file that is not served: a symbolic link, not a regular file, too large, too deep, not JSON."""


def read_under(run_dir: Path, parts: tuple[str, ...], limit: int) -> bytes:
    """The bytes of RUN/<parts...>, opened one level at a time without following a symbolic
    link at any level below RUN (O_NOFOLLOW, so a link swapped in meanwhile is refused too)."""
    where = "/".join(parts)
    fd = os.open(run_dir, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            flags = os.O_RDONLY | os.O_NOFOLLOW | (os.O_NONBLOCK if last else os.O_DIRECTORY)
            try:
                nxt = os.open(part, flags, dir_fd=fd)
            except OSError as e:
                if e.errno in (errno.ELOOP, errno.ENOTDIR) and os.path.islink(os.path.join(run_dir, *parts[: i + 1])):
                    raise Refused(f"{'/'.join(parts[: i + 1])} is a symbolic link: not followed") from None
                raise
            os.close(fd)
            fd = nxt
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Refused(f"{where} is not a regular file")
        if st.st_size > limit:
            raise Refused(f"{where} is larger than {limit >> 10} KiB")
        chunks, left = [], limit + 1
        while left > 0 and (got := os.read(fd, min(left, 1 << 20))):
            chunks.append(got)
            left -= len(got)
        raw = b"".join(chunks)
        if len(raw) > limit:
            raise Refused(f"{where} is larger than {limit >> 10} KiB")
        return raw
    finally:
        os.close(fd)


def parse_json(raw: bytes, where: str) -> Any:
    """JSON with at most MAX_DEPTH levels of nesting; NaN and infinities become null."""
    try:
        value = json.loads(raw, parse_constant=lambda _: None)
    except RecursionError:
        raise Refused(f"{where} is nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as e:
        raise Refused(f"{where} is not valid JSON: {str(e)[:200]}") from None
    stack = [(value, 1)]
    while stack:
        v, depth = stack.pop()
        children = v.values() if isinstance(v, dict) else v if isinstance(v, list) else ()
        for c in children:
            if isinstance(c, (dict, list)):
                if depth + 1 > MAX_DEPTH:
                    raise Refused(f"{where} is nested deeper than {MAX_DEPTH} levels")
                stack.append((c, depth + 1))
    return value


def _real_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)  # a symbolic link is not followed
    except OSError:
        return False


def _entries(root: Path) -> Iterator[os.DirEntry]:
    """Entries of a folder of RUN with a plain name, symbolic links left out."""
    if not _real_dir(root):
        return
    with os.scandir(root) as it:
        entries = sorted(it, key=lambda e: e.name)
    for e in entries:
        if not e.name.startswith(".") and NAME_RE.match(e.name) and not e.is_symlink():
            yield e


class StatCache:
    """Values computed from files, kept while the file's (device, inode, size, mtime) stay the
    same; at most `max_entries`, least recently used dropped first. `parses` counts computations
    per path."""

    def __init__(self, max_entries: int = 1024):
        self.max_entries = max_entries
        self._items: OrderedDict[str, tuple[tuple, Any]] = OrderedDict()
        self._lock = threading.Lock()
        self.parses: Counter[str] = Counter()

    def get(self, path: Path, st: os.stat_result, compute: Callable[[], Any]) -> Any:
        key, stamp = str(path), (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        with self._lock:
            hit = self._items.get(key)
            if hit is not None and hit[0] == stamp:
                self._items.move_to_end(key)
                return hit[1]
        value = compute()
        with self._lock:
            self.parses[key] += 1
            if len(self.parses) > 4 * self.max_entries:
                self.parses.clear()
            self._items[key] = (stamp, value)
            self._items.move_to_end(key)
            while len(self._items) > self.max_entries:
                self._items.popitem(last=False)
        return value


CACHE = StatCache()


def _safe_child(root: Path, name: str) -> Path:
    """`root/name` for a plain name only: no separators, no dot-dot."""
    if not NAME_RE.match(name) or ".." in name:
        raise BadRequest(f"bad name {name!r}: use letters, digits and _ . - only")
    return root / name


def _policy_meta(run_dir: Path, name: str, meta_file: str) -> dict[str, Any]:
    try:
        got = parse_json(read_under(run_dir, ("policies", name, meta_file), MAX_META_BYTES), meta_file)
        return got if isinstance(got, dict) else {"value": got}
    except (OSError, BadRequest) as e:
        return {"unreadable": f"{meta_file}: {e}"[:300]}


def _policy(run_dir: Path, p: os.DirEntry) -> PolicyEntry | None:
    st = p.stat(follow_symlinks=False)
    if p.is_file(follow_symlinks=False):
        return PolicyEntry(name=p.name, modified=st.st_mtime, size_bytes=st.st_size, files=[p.name], meta={})
    if not p.is_dir(follow_symlinks=False):
        return None
    with os.scandir(p.path) as it:
        inside = {e.name: e for e in it}
    files = sorted(n for n, e in inside.items() if not n.startswith(".") and e.is_file(follow_symlinks=False))
    size = sum(inside[n].stat(follow_symlinks=False).st_size for n in files)
    meta: dict[str, Any] = {}
    for m in META_FILES:
        e = inside.get(m)
        if e is None:
            continue
        if e.is_symlink():
            meta = {"unreadable": f"{m} is a symbolic link: not followed"}
        else:
            meta = CACHE.get(Path(e.path), e.stat(follow_symlinks=False), lambda m=m: _policy_meta(run_dir, p.name, m))
        break
    return PolicyEntry(name=p.name, modified=st.st_mtime, size_bytes=size, files=files[:50], meta=meta)


def list_policies(run_dir: Path) -> list[PolicyEntry]:
    out = []
    for p in _entries(RunFiles.of(run_dir).policies):
        try:
            entry = _policy(run_dir, p)
        except OSError:  # removed while listed
            continue
        if entry is not None:
            out.append(entry)
    return out


def _report_summary(run_dir: Path, name: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(summary, comparison rows) of one report, or ({"unreadable": why}, [])."""
    try:
        body = parse_json(read_under(run_dir, ("reports", name), MAX_JSON_BYTES), name)
    except (OSError, BadRequest) as e:
        return {"unreadable": str(e)[:300]}, []
    if not isinstance(body, dict):
        return {}, []
    summary = {k: v for k, v in body.items() if isinstance(v, (str, int, float, bool)) or v is None}
    items = body.get("policies") if isinstance(body.get("policies"), list) else [body] if "policy" in body else []
    rows = []
    for it in items:
        if not isinstance(it, dict) or "policy" not in it:
            continue
        vals = {f: _num(it.get(f)) for f in ROW_FIELDS}
        eps = vals.pop("episodes")
        rows.append(
            {
                "policy": str(it["policy"])[:64],
                "source": f"report/{name}",
                "episodes": int(eps) if eps is not None else None,
                **vals,
            }
        )
    return dict(list(summary.items())[:20]), rows


def _reports(run_dir: Path) -> list[tuple[os.DirEntry, os.stat_result, tuple[dict[str, Any], list[dict[str, Any]]]]]:
    out = []
    for p in _entries(RunFiles.of(run_dir).reports):
        if not p.name.endswith(".json") or not p.is_file(follow_symlinks=False):
            continue
        try:
            st = p.stat(follow_symlinks=False)
        except OSError:
            continue
        out.append((p, st, CACHE.get(Path(p.path), st, lambda name=p.name: _report_summary(run_dir, name))))
    return out


def list_reports(run_dir: Path) -> list[ReportEntry]:
    return [
        ReportEntry(name=p.name, modified=st.st_mtime, size_bytes=st.st_size, summary=summary)
        for p, st, (summary, _) in _reports(run_dir)
    ]


def read_report(run_dir: Path, name: str) -> Any:
    _safe_child(RunFiles.of(run_dir).reports, name)
    if not name.endswith(".json"):
        raise NotFound(f"no report {name!r} in reports/ (reports end in .json)")
    try:
        raw = read_under(run_dir, ("reports", name), MAX_JSON_BYTES)
    except FileNotFoundError:
        raise NotFound(
            f"no report {name!r} in reports/ (reports: {[r.name for r in list_reports(run_dir)] or 'none'})"
        ) from None
    except Refused as e:
        raise NotFound(f"report {name!r} is not served: {e}") from None
    except OSError as e:
        raise NotFound(f"report {name!r} cannot be read: {e.strerror}") from None
    return parse_json(raw, f"report {name!r}")


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def _with_interval(row: dict[str, Any]) -> dict[str, Any]:
    """The row with its Wilson 95 % interval, when episodes and rate give whole successes."""
    n, rate = row.get("episodes"), row.get("success_rate")
    if n is None or rate is None or n < 1 or not 0 <= rate <= 1 or abs(rate * n - round(rate * n)) > 1e-6:
        return row
    lo, hi = wilson(round(rate * n), n)
    return {**row, "ci_low": lo, "ci_high": hi}


def report_rows(run_dir: Path) -> list[ComparisonRow]:
    return [ComparisonRow(**_with_interval(row)) for _, _, (_, rows) in _reports(run_dir) for row in rows]


def store_rows(data: RunData) -> list[ComparisonRow]:
    """Per (group, policy version) figures from the stored episodes (synthetic ones excluded)."""
    acc: dict[tuple[str, str], list] = defaultdict(list)
    for g, rec in data.records():
        if g == "synthetic":
            continue
        name = (
            f"v{rec.policy_version}" if rec.policy_version is not None else ("expert" if g == "demo" else "unversioned")
        )
        acc[(g, name)].append(rec)
    rows = []
    for (g, name), recs in sorted(acc.items()):
        n, wins = len(recs), sum(r.success for r in recs)
        lo, hi = wilson(wins, n)
        rows.append(
            ComparisonRow(
                ci_low=lo,
                ci_high=hi,
                policy=name,
                source=f"store/{g}",
                episodes=n,
                success_rate=wins / n,
                mean_return=sum(r.episode_return for r in recs) / n,
                mean_length=sum(r.length for r in recs) / n,
                interventions_per_episode=sum(r.interventions for r in recs) / n,
            )
        )
    return rows
