"""Mirror of RUN/metrics.jsonl as TensorBoard scalars in RUN/tensorboard/ (`tensorboard --logdir RUN`).

metrics.jsonl stays the record the dashboard reads; this is for people who live in TensorBoard.
tensorboardX writes the event files (no TensorFlow, no tensorboard package needed to write).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

from worldsample.paths import RunFiles


class TensorBoardScalars:
    def __init__(self, run_dir: Path | str):
        from tensorboardX import SummaryWriter

        self._w = SummaryWriter(logdir=str(RunFiles.of(run_dir).tensorboard), flush_secs=10)

    def log(self, step: int, values: Mapping[str, float]) -> None:
        for name, v in values.items():
            if isinstance(v, (int, float)) and math.isfinite(v):
                self._w.add_scalar(name, float(v), global_step=int(step))

    def close(self) -> None:
        self._w.close()
