"""One onnxruntime session on the CPU, as the robot PC runs every exported model (the pixel policy,
the world model's search step): a fixed number of intra-op threads, sequential execution, full
graph optimisation, quiet logs. Import errors and files onnxruntime cannot load become the caller's
own exception types, with the path and what to do."""

from __future__ import annotations

from pathlib import Path

ORT_PIN = "onnxruntime==1.31.1"


def cpu_session(path: Path, threads: int, missing: type[Exception], corrupt: type[Exception]):
    """An `onnxruntime.InferenceSession` for `path`; `missing(...)` without onnxruntime, `corrupt(...)`
    for a file it cannot load."""
    try:
        import onnxruntime as ort
    except ImportError:
        raise missing(f"{path} needs onnxruntime on this machine: pip install '{ORT_PIN}'") from None
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.log_severity_level = 3
    try:
        return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    except Exception as e:  # onnxruntime raises its own types (InvalidProtobuf, Fail, InvalidGraph...)
        raise corrupt(f"cannot load {path} with onnxruntime: {type(e).__name__}: {e}") from None
