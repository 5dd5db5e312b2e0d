"""Serving the app with uvicorn: in the foreground (the CLI) or in a thread (tests, benchmarks)."""

from __future__ import annotations

import socket
import threading
import time

import uvicorn


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def uvicorn_config(app, host: str, port: int, log_level: str = "warning") -> uvicorn.Config:
    # uvicorn takes httptools and uvloop when installed (about half the CPU per request), h11 and asyncio otherwise
    return uvicorn.Config(app, host=host, port=port, log_level=log_level, access_log=False, timeout_graceful_shutdown=2)


class BackgroundServer:
    """uvicorn serving `app` on host:port from a daemon thread; a context manager."""

    def __init__(self, app, host: str = "127.0.0.1", port: int | None = None):
        self.host, self.port = host, port or free_port(host)
        self.server = uvicorn.Server(uvicorn_config(app, self.host, self.port))
        self.thread = threading.Thread(target=self.server.run, name="dashboard-server", daemon=True)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, timeout: float = 20.0) -> BackgroundServer:
        self.thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"dashboard server did not start on {self.url}")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
