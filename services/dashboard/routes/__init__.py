"""API routers, one per resource: run, metrics, episodes, frames, control, policies."""
