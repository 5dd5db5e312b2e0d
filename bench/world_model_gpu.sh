#!/usr/bin/env bash
# The world-model benchmark with GPU-sized settings on a CUDA device (about 8 minutes on one
# H100/H200-class GPU once the data exists; collecting it first adds about 4 minutes of CPU
# rendering). Extra arguments go to bench/world_model.py, e.g. --data DIR to reuse data.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
[ -x "$PY" ] || PY=python3
export MUJOCO_GL=${MUJOCO_GL:-egl}
"$PY" -c "import torch, sys; ok = torch.cuda.is_available(); print('cuda:', torch.cuda.get_device_name(0) if ok else 'none'); sys.exit(0 if ok else 3)"
exec "$PY" bench/world_model.py --device cuda --threads 4 --config configs/world_model/gpu.yaml \
  --ae-steps 2000 --dyn-steps 2000 --drift-batch 16 --per-episode 8 --fps-seconds 2 \
  --out "${OUT:-bench/out/world_model_gpu}" "$@"
