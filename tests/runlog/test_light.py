"""The run-log contracts stay light: the bridge and the trainer import them without a web stack."""

import subprocess
import sys


def test_importing_runlog_pulls_no_web_or_store_stack():
    code = (
        "import sys, worldsample, worldsample.runlog, services.cli.dashboard_cmd\n"
        "heavy = [m for m in ('fastapi', 'starlette', 'uvicorn', 'zarr', 'torch', 'ray') if m in sys.modules]\n"
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
