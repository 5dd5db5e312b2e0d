"""`/docs`: Swagger UI served from this app, and the configured limits stated in the schema.

FastAPI's own /docs page loads Swagger UI from a CDN and starts it with an inline script; the
dashboard's content-security policy (`script-src 'self'`, no inline code) blocks both, so the
page stayed blank. Here the assets come from the `swagger-ui-py` package (Swagger UI 5, which
reads OpenAPI 3.1) and the start-up code is a script file of its own, all from this origin.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.responses import FileResponse, HTMLResponse, Response

from services.dashboard.settings import DashboardSettings

ASSETS = {"swagger-ui.css": "text/css", "swagger-ui-bundle.js": "text/javascript"}

PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{title} - API</title>
<link rel="stylesheet" href="/docs/assets/swagger-ui.css">
</head>
<body>
<div id="swagger-ui"></div>
<script src="/docs/assets/swagger-ui-bundle.js"></script>
<script src="/docs/start.js"></script>
</body>
</html>
"""

START = """window.ui = SwaggerUIBundle({
  url: "/openapi.json",
  dom_id: "#swagger-ui",
  presets: [SwaggerUIBundle.presets.apis],
  layout: "BaseLayout",
  deepLinking: true,
  persistAuthorization: false,
});
"""


def swagger_dir() -> Path | None:
    """Swagger UI's files as shipped by the swagger-ui-py package (None when it is missing)."""
    try:
        import swagger_ui
    except ImportError:
        return None
    d = Path(swagger_ui.__file__).parent / "static"
    return d if all((d / name).is_file() for name in ASSETS) else None


def install_docs(app: FastAPI) -> None:
    assets = swagger_dir()
    cache = {"Cache-Control": "public, max-age=3600"}

    @app.get("/docs", include_in_schema=False)
    def docs() -> Response:
        if assets is None:
            return HTMLResponse(
                "<p>Swagger UI is not installed (pip install swagger-ui-py); the schema is at "
                '<a href="/openapi.json">/openapi.json</a>.</p>',
                status_code=404,
            )
        return HTMLResponse(PAGE.format(title=app.title), headers={"Cache-Control": "no-cache"})

    @app.get("/docs/start.js", include_in_schema=False)
    def start() -> Response:
        return Response(START, media_type="text/javascript", headers=cache)

    @app.get("/docs/assets/{name}", include_in_schema=False)
    def asset(name: str) -> Response:
        if assets is None or name not in ASSETS:
            return Response(status_code=404)
        return FileResponse(assets / name, media_type=ASSETS[name], headers=cache)


def _set_maximum(schema: dict[str, Any], value: float) -> None:
    """Set `maximum` on a parameter schema (inside anyOf for an optional one)."""
    for sub in [schema, *schema.get("anyOf", [])]:
        if sub.get("type") in ("integer", "number"):
            sub["maximum"] = value


def state_limits(schema: dict[str, Any], settings: DashboardSettings) -> dict[str, Any]:
    """Write this server's configured limits into its OpenAPI schema (the route declarations
    hold only the absolute bounds, since the settings are chosen per app)."""
    paths = schema.get("paths", {})
    limits = {
        ("/api/episodes/{group}/{episode}/sheet/{camera}", "count"): settings.max_sheet_frames,
        ("/api/episodes/{group}/{episode}/video/{camera}", "fps"): settings.max_video_fps,
    }
    for (path, name), value in limits.items():
        for param in paths.get(path, {}).get("get", {}).get("parameters", []):
            if param.get("name") == name:
                _set_maximum(param["schema"], value)
    steps = paths.get("/api/episodes/{group}/{episode}/steps", {}).get("get")
    if steps is not None:
        steps["description"] = (
            f"At most {settings.max_steps_per_request} steps per request (stop - start); page with start and stop."
        )
    for path in ("/api/stream", "/api/episodes/{group}/{episode}/video/{camera}"):
        op = paths.get(path, {}).get("get")
        if op is not None:
            op["description"] = (
                f"At most {settings.max_stream_clients} streams open on the server and "
                f"{settings.max_streams_per_client} of each kind (live updates, video) from one client address; "
                "more are answered 429."
            )
    imagine = paths.get("/api/episodes/{group}/{episode}/imagine/{camera}", {}).get("get")
    if imagine is not None:
        imagine["description"] = (
            f"One rollout runs at a time and {settings.max_imagine_waiting} more may wait; more are answered 429."
        )
    play = paths.get("/api/play", {}).get("post")
    if play is not None:
        play["description"] = (
            f"At most {settings.max_play_sessions} sessions are open (starting one more ends the least recently "
            f"used) and one unused for {settings.play_idle_s:g} s is ended. Starts, steps and resets share the imagine "
            f"queue: one runs at a time and {settings.max_imagine_waiting} more may wait; more are answered 429."
        )
    return schema
