"""Settings of the simulated cameras that the robot side needs too (a robot profile's `sim:` section).

Pydantic only: the bridge imports this through its profile and must load no simulator.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

# Every Meta-World v3 task shares the Sawyer scene (xyz_base.xml) that defines these cameras.
CAMERA_NAMES = ("corner", "corner2", "corner3", "corner4", "topview", "behindGripper", "gripperPOV")


class RenderConfig(BaseModel):
    """OpenGL quality of the offscreen camera renders.

    Without a GPU, MuJoCo renders through software GL (Mesa llvmpipe) and the cost is in the
    vertices (the Sawyer meshes have ~67k triangles), not the pixels: every shadow-casting light
    and the reflective table each draw the scene once more, and multisampling adds a resolve. The
    defaults turn all three off (docs/cameras.md has the timings); `RenderConfig.metaworld()` is
    Meta-World's own quality (4096 shadow map, reflections, 4x multisampling).
    """

    # a typo in a key must fail loudly instead of silently using a default
    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    shadows: bool = Field(False, description="shadow maps of the lights that cast shadows (one extra pass each)")
    shadow_size: int = Field(
        4096, ge=256, le=8192, strict=True, description="shadow map texels per side, when shadows are on"
    )
    reflections: bool = Field(False, description="reflective table (one extra pass of the scene)")
    multisample: Literal[0, 2, 4, 8] = Field(0, description="offscreen multisampling samples per pixel; 0 = off")

    @classmethod
    def metaworld(cls) -> RenderConfig:
        """What Meta-World's scene asks for. Renders before these settings existed used the same with a
        smaller shadow map (8 texels per image pixel: 512 at 64 px)."""
        return cls(shadows=True, shadow_size=4096, reflections=True, multisample=4)
