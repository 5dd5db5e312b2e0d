"""The dashboard: a FastAPI app (REST, server-sent events, images) and its offline web page.

`create_app(run_dir, settings)` builds the app for one run directory; `worldsample dashboard RUN`
serves it with uvicorn. It reads the store and the run's service files (worldsample.runlog) and
writes only control requests, into RUN/control/. See docs/dashboard.md.
"""

from services.dashboard.app import create_app
from services.dashboard.settings import DashboardSettings

__all__ = ["DashboardSettings", "create_app"]
