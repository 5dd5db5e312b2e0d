"""Success per policy version, with Wilson 95 % intervals: the trainer's evaluations (rows of
RUN/metrics.jsonl) beside the online episodes the robot ran with each version (the store's
`real` group, `policy_version` in each commit record).

An evaluation row carries `eval/success_rate`, `eval/episodes`, `eval/successes` and, once a
policy is published, `eval/policy_version` (a row without it evaluated random actions: version
null). The trainer evaluates on the same held-out initial states every time (seeds from
EVAL_SEED0, deterministic actions), so repeated evaluations of one version are not pooled: the
interval is the newest evaluation's, and `evaluations` says how many there were. A row whose
figures do not hold together (counts that are not whole numbers, successes above episodes, a
rate that disagrees with its counts, a negative version) is skipped and counted; rows of older
runs with a rate only are counted as `rate_only_rows` (no interval without the counts).

Online episodes apply the operator's label where there is one (counted as `labelled`);
damaged episodes are set aside by the store's reader and counted here.
"""

from __future__ import annotations

import math
from collections import defaultdict

from services.dashboard.data import RunData
from services.dashboard.models import VersionEval, VersionOnline, VersionRow, VersionTable
from worldsample.evaluation.intervals import wilson
from worldsample.runlog.metrics import MetricsReader

CONFIDENCE = 0.95
ONLINE_GROUP = "real"
MAX_VERSIONS = 500
MAX_EVAL_ROWS = 20_000
MAX_REASONS = 5
RATE, EPISODES, SUCCESSES, VERSION = "eval/success_rate", "eval/episodes", "eval/successes", "eval/policy_version"


def _whole(v: float | None) -> int | None:
    return int(v) if v is not None and math.isfinite(v) and v == int(v) else None


def _eval_rows(metrics: MetricsReader) -> tuple[list[tuple[int, int, int, int | None, float]], int, int, list[str]]:
    """([(step, episodes, successes, version, time)], skipped, rate_only, reasons), in file order."""
    cols = {n: metrics.series(n, max_points=MAX_EVAL_ROWS) for n in (RATE, EPISODES, SUCCESSES, VERSION)}
    at = {n: {(s, t): v for s, t, v in zip(*c, strict=True)} for n, c in cols.items()}
    keys = list(dict.fromkeys([*zip(*cols[RATE][:2], strict=True), *zip(*cols[EPISODES][:2], strict=True)]))
    out, skipped, rate_only, reasons = [], 0, 0, []

    def skip(why: str) -> None:
        nonlocal skipped
        skipped += 1
        if len(reasons) < MAX_REASONS:
            reasons.append(why)

    for key in keys:
        step = int(key[0])
        rate, n, k, ver = (at[c].get(key) for c in (RATE, EPISODES, SUCCESSES, VERSION))
        if n is None and k is None:  # a rate without its counts (older runs, evaluators that do not count)
            rate_only += 1
            continue
        ni, ki = _whole(n), _whole(k)
        if ni is None or ki is None or ni < 1 or not 0 <= ki <= ni:
            skip(f"step {step}: {EPISODES}={n!r}, {SUCCESSES}={k!r} are not 0 <= successes <= episodes, episodes >= 1")
            continue
        if rate is not None and not (math.isfinite(rate) and abs(rate - ki / ni) < 1e-6):
            skip(f"step {step}: {RATE}={rate!r} disagrees with {ki}/{ni}")
            continue
        vi = _whole(ver) if ver is not None else None
        if ver is not None and (vi is None or vi < 0):
            skip(f"step {step}: {VERSION}={ver!r} is not a version number")
            continue
        out.append((step, ni, ki, vi, key[1]))
    return out, skipped, rate_only, reasons


def _ci(k: int, n: int) -> tuple[float, float]:
    return wilson(k, n, CONFIDENCE)


def version_table(data: RunData, metrics: MetricsReader) -> VersionTable:
    rows, skipped, rate_only, reasons = _eval_rows(metrics)
    evals: dict[int | None, list[tuple[int, int, int, int | None, float]]] = defaultdict(list)
    for r in rows:
        evals[r[3]].append(r)
    online: dict[int | None, list[tuple[bool, int, int, bool]]] = defaultdict(list)
    damaged = 0
    if ONLINE_GROUP in data.groups():
        labels = data.labels(ONLINE_GROUP)
        for _, rec in data.records(ONLINE_GROUP):
            lab = labels.get(rec.episode)
            online[rec.policy_version].append(
                (lab.success if lab is not None else rec.success, rec.interventions, rec.length, lab is not None)
            )
    damaged = sum(1 for g, ep, _ in data.damaged() if g == ONLINE_GROUP and ep is not None)

    out = []
    for v in sorted(set(evals) | set(online), key=lambda x: (x is not None, x if x is not None else -1)):
        ev = None
        if evals[v]:
            step, n, k, _, _ = evals[v][-1]
            lo, hi = _ci(k, n)
            ev = VersionEval(evaluations=len(evals[v]), step=step, episodes=n, successes=k, success_rate=k / n,
                             ci_low=lo, ci_high=hi)
        on = None
        if online[v]:
            eps = online[v]
            n, k = len(eps), sum(1 for e in eps if e[0])
            lo, hi = _ci(k, n)
            steps = sum(e[2] for e in eps)
            on = VersionOnline(episodes=n, successes=k, success_rate=k / n, ci_low=lo, ci_high=hi,
                               labelled=sum(1 for e in eps if e[3]),
                               intervention_share=sum(e[1] for e in eps) / steps if steps else 0.0,
                               episodes_with_intervention=sum(1 for e in eps if e[1] > 0))
        out.append(VersionRow(version=v, name=f"v{v}" if v is not None else "none", evaluation=ev, online=on))
    truncated = len(out) > MAX_VERSIONS
    return VersionTable(confidence=CONFIDENCE, online_group=ONLINE_GROUP, versions=out[-MAX_VERSIONS:],
                        truncated=truncated, eval_rows=len(rows), rate_only_rows=rate_only, skipped_rows=skipped,
                        skipped_reasons=reasons, damaged_episodes=damaged)
