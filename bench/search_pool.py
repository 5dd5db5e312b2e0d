"""Pool Best-of-N results of `bench/policy_eval.py --search ... --out F.json` over runs: per setting
(score, horizon, N, spread) the base policy's and the search's success on each run, the mean gain
with a 95 % bootstrap interval (starts resampled within each run: the spread over initial states for
these trained policies, not over training seeds), the starts the search won and lost, and every
setting against the others on the same runs and starts.

    .venv/bin/python bench/search_pool.py OUT/*.json
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

import numpy as np


def load(paths: list[Path]) -> dict[str, dict[str, tuple[np.ndarray, np.ndarray]]]:
    """setting -> run -> (base successes, search successes), per start."""
    out: dict[str, dict] = defaultdict(dict)
    for p in paths:
        for s in json.loads(p.read_text())["searches"]:
            horizon = "-" if s["score"] in ("critic", "random") else s["horizon"]
            key = f"{s['score']}:{horizon}:{s['n']}:{s.get('spread')}"
            out[key][Path(s["run"]).name] = (np.asarray(s["base_successes"], float),
                                             np.asarray(s["search_successes"], float))
    return out


def interval(diffs: list[np.ndarray], rng: np.random.Generator, draws: int = 4000) -> tuple[float, float, float]:
    """Mean over runs of the mean difference per start, and its 95 % interval (starts resampled per run)."""
    boots = [np.mean([rng.choice(d, len(d)).mean() for d in diffs]) for _ in range(draws)]
    lo, hi = np.percentile(boots, [2.5, 97.5])
    return float(np.mean([d.mean() for d in diffs])), float(lo), float(hi)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", type=Path)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    arms = load(args.files)
    print("| setting (score:horizon:N:spread) | base -> search per run | mean base -> search | gain [95 % CI] "
          "| won / lost |")
    print("|---|---|---|---|---|")
    for key, runs in sorted(arms.items()):
        names = sorted(runs)
        per = ", ".join(f"{100 * runs[r][0].mean():.0f} -> {100 * runs[r][1].mean():.0f}" for r in names)
        g, lo, hi = interval([runs[r][1] - runs[r][0] for r in names], rng)
        won = sum(int(((runs[r][1] == 1) & (runs[r][0] == 0)).sum()) for r in names)
        lost = sum(int(((runs[r][1] == 0) & (runs[r][0] == 1)).sum()) for r in names)
        base, search = (np.mean([runs[r][i].mean() for r in names]) for i in (0, 1))
        print(f"| {key} | {per} | {100 * base:.1f} -> {100 * search:.1f} % | {100 * g:+.1f} [{100 * lo:+.1f}, "
              f"{100 * hi:+.1f}] | {won} / {lost} |")
    print("\n| setting | against | difference in success [95 % CI] |\n|---|---|---|")
    for a in sorted(arms):
        for b in sorted(arms):
            names = sorted(set(arms[a]) & set(arms[b]))
            if a >= b or not names:
                continue
            g, lo, hi = interval([arms[a][r][1] - arms[b][r][1] for r in names], rng)
            print(f"| {a} | {b} | {100 * g:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}] |")


if __name__ == "__main__":
    main()
