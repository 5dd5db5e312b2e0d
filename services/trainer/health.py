"""Health check of a running trainer, for a container: its driver rewrites RUN/nodes.json at least
every 30 s while it runs (services/trainer/nodes.py), and only while Ray answers it.

    python -m services.trainer.health RUN [--max-age-s 90]     exit 0: healthy; 1: not (one line says why)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from worldsample.paths import RunFiles


def check(run_dir: Path, max_age_s: float = 90.0, now: float | None = None) -> str | None:
    """None when healthy, else why not."""
    path = RunFiles.of(run_dir).nodes
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        return f"no {path} yet: the trainer has not started its parts"
    except (OSError, ValueError) as e:
        return f"{path} is unreadable: {e}"
    if not doc.get("running"):
        return f"the trainer of {run_dir} has stopped"
    age = (time.time() if now is None else now) - float(doc.get("updated", 0.0))
    if age > max_age_s:
        return f"{path} is {age:.0f} s old: the trainer's driver or its Ray cluster does not answer"
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m services.trainer.health", description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path, help="the run directory")
    ap.add_argument("--max-age-s", type=float, default=90.0, help="oldest acceptable nodes.json")
    args = ap.parse_args(argv)
    why = check(args.run, args.max_age_s)
    print("healthy" if why is None else f"unhealthy: {why}")
    return 0 if why is None else 1


if __name__ == "__main__":
    sys.exit(main())
