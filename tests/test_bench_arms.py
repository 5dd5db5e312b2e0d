"""bench/sample_efficiency.py's arms: an arm cannot override the demonstrations, which every arm of a seed
shares (they are recorded once per seed before the arms run), so the mistake stops before any run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_an_arm_that_sets_the_demonstrations_is_refused_before_anything_runs(tmp_path):
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "sample_efficiency.py"), "--arms", "", "--arm", "d10",
                        "loop.ppl.mode=off", "demos.episodes=10", "--out", str(out)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode != 0
    assert "--arm d10 demos.episodes=10" in p.stderr and "--set" in p.stderr
    assert not out.exists()
