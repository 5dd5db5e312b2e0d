"""Dashboard settings: a pydantic model, filled by the CLI (never read from the environment)."""

from __future__ import annotations

import ipaddress
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1", "[::1]")
MIN_TOKEN_LENGTH = 16


class DashboardSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    host: str = Field("127.0.0.1", description="address to bind; loopback by default")
    port: int = Field(8765, ge=0, le=65535)
    token: SecretStr | None = Field(
        None, description="bearer token for control; generated into RUN/dashboard_token if unset"
    )
    read_policy: Literal["open", "loopback", "token"] = Field(
        "loopback", description="who may read: anyone, loopback clients without a token, or token holders only"
    )
    allowed_hosts: list[str] = Field(
        default_factory=list, description="extra Host header names to accept (DNS-rebinding guard); loopback always"
    )
    refresh_interval_s: float = Field(1.0, gt=0.01, le=60, description="how often live updates poll the run's files")
    store_refresh_min_s: float = Field(0.5, ge=0, le=60, description="at most one store listing per this interval")
    frame_cache_mb: int = Field(128, ge=0, le=16384, description="decoded frames and encoded images kept in RAM")
    jpeg_quality: int = Field(85, ge=10, le=100)
    live_frame_stale_s: float = Field(
        3.0, gt=0, le=3600, description="a live camera frame (RUN/live/) whose stamp is older than this is stale"
    )
    max_steps_per_request: int = Field(4096, ge=1, le=100_000)
    max_sheet_frames: int = Field(256, ge=1, le=4096)
    max_video_fps: float = Field(60.0, gt=0, le=240)
    max_stream_clients: int = Field(256, ge=1, le=10_000, description="concurrent live-update and video streams")
    max_streams_per_client: int = Field(
        8, ge=1, le=10_000, description="concurrent streams of one kind (live updates, video) from one client address"
    )
    max_imagine_waiting: int = Field(
        4, ge=0, le=1000, description="imagine requests that may wait while one runs; more are answered 429"
    )
    max_play_sessions: int = Field(
        4, ge=1, le=64, description="open play sessions; starting one more ends the least recently used"
    )
    play_idle_s: float = Field(900.0, ge=1, le=86_400, description="a play session unused this long is ended")
    auth_free_failures: int = Field(
        10, ge=1, le=10_000, description="wrong tokens a client may send before it must back off"
    )
    auth_backoff_max_s: float = Field(60.0, gt=0, le=3600, description="longest back-off after wrong tokens")

    @field_validator("token")
    @classmethod
    def _long_enough(cls, v: SecretStr | None) -> SecretStr | None:
        if v is None or not v.get_secret_value():
            return None  # unset: RUN/dashboard_token is used (or generated)
        if len(v.get_secret_value()) < MIN_TOKEN_LENGTH:
            raise ValueError(
                f"the token must be at least {MIN_TOKEN_LENGTH} characters long (got "
                f"{len(v.get_secret_value())}); leave it out to use the generated one in RUN/dashboard_token"
            )
        return v

    def host_names(self) -> list[str]:
        """Host header values the app answers to."""
        names = [*LOOPBACK_NAMES, *self.allowed_hosts]
        if self.host not in ("0.0.0.0", "::") and self.host not in names:
            names.append(self.host)
        return names

    @property
    def binds_loopback(self) -> bool:
        try:
            return ipaddress.ip_address(self.host.strip("[]")).is_loopback
        except ValueError:
            return self.host == "localhost"
