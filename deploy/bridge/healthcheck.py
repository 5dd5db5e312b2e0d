"""Health check of the bridge's container: its heartbeat in RUN/status.json (robot_bridge/run_link.py
writes it every few seconds while the bridge runs).

    python3 /app/deploy/bridge/healthcheck.py RUN [--max-age-s 30]   exit 0: healthy; 1: not (one line why)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


def check(run_dir: Path, max_age_s: float = 30.0) -> str | None:
    """None when healthy, else why not."""
    from worldsample.runlog import StatusFile

    status = StatusFile(run_dir).read()
    bridge = status.services.get("bridge") if status is not None else None
    if bridge is None:
        return f"no bridge heartbeat in {run_dir}/status.json yet"
    if bridge.state in ("stopped", "error"):
        return f"the bridge is {bridge.state}: {bridge.detail}"
    age = time.time() - bridge.heartbeat
    if age > max_age_s:
        return f"the bridge's heartbeat is {age:.0f} s old"
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path, help="the run directory the bridge records into")
    ap.add_argument("--max-age-s", type=float, default=30.0, help="oldest acceptable heartbeat")
    args = ap.parse_args(argv)
    why = check(args.run, args.max_age_s)
    print("healthy" if why is None else f"unhealthy: {why}")
    return 0 if why is None else 1


if __name__ == "__main__":
    sys.exit(main())
