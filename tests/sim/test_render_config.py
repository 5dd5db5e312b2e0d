"""Render settings of the camera images: the fast defaults and Meta-World's quality reach the GL
scene and model, they change the picture, and a bad setting fails naming the field."""

import mujoco
import numpy as np
import pytest
from pydantic import ValidationError

from robot_bridge.errors import ProfileError
from robot_bridge.profile import load_profile
from tests.bridge.helpers import SIM_PROFILE
from worldsample.config import RunConfig
from worldsample.errors import ConfigError
from worldsample.sim import SimArmConfig, SimArmEnv
from worldsample.sim.config import RenderConfig
from worldsample.yamlconfig import load_model

SHADOW, REFLECTION = mujoco.mjtRndFlag.mjRND_SHADOW, mujoco.mjtRndFlag.mjRND_REFLECTION


@pytest.fixture(scope="module")
def envs():
    """Env and first frame (same seed) for the fast defaults, shadows only and Meta-World's quality."""
    made = {}
    for name, render in [("fast", RenderConfig()), ("shadows", RenderConfig(shadows=True, shadow_size=1024)),
                         ("metaworld", RenderConfig.metaworld())]:
        env = SimArmEnv(SimArmConfig(cameras=["corner"], image_size=32, render=render))
        made[name] = (env, env.reset(seed=0)[0]["image_corner"].astype(int))
    yield made
    for env, _ in made.values():
        env.close()


def applied(env: SimArmEnv) -> tuple[int, int, int, int]:
    """(shadow flag, reflection flag, shadow map size, multisamples) as the GL scene and model have them."""
    scene, quality = env._renderer.scene, env._arm.model.vis.quality
    return scene.flags[SHADOW], scene.flags[REFLECTION], quality.shadowsize, quality.offsamples


def test_the_default_is_fast_and_metaworld_quality_stays_available(envs):
    fast, img_fast = envs["fast"]
    assert fast.config.render == RenderConfig(shadows=False, reflections=False, multisample=0)
    assert applied(fast) == (0, 0, 0, 0)  # no shadow map and no multisampled buffer at all
    old, img_old = envs["metaworld"]
    assert applied(old) == (1, 1, 4096, 4)
    # the settings reach the picture: shadows, the table's reflection and smoothed edges
    assert np.abs(img_old - img_fast).mean() > 1.0


def test_shadows_alone_change_the_picture(envs):
    shaded, img_shaded = envs["shadows"]
    assert applied(shaded) == (1, 0, 1024, 0)
    diff = img_shaded - envs["fast"][1]
    assert diff.mean() < 0 and (diff < -10).any()  # the shadows darken the picture


@pytest.mark.parametrize(
    ("render", "field", "message"),
    [
        ({"multisample": 3}, "render.multisample", "0, 2, 4 or 8"),
        ({"multisample": True}, "render.multisample", "0, 2, 4 or 8"),
        ({"shadow_size": 100}, "render.shadow_size", "greater than or equal to 256"),
        ({"shadow_size": 1024.5}, "render.shadow_size", "valid integer"),
        ({"shadows": "sometimes"}, "render.shadows", "valid boolean"),
        ({"shadow": True}, "render.shadow", "Extra inputs"),
    ],
)
def test_an_invalid_render_setting_names_the_field(render, field, message):
    with pytest.raises(ValidationError) as exc:
        SimArmConfig.model_validate({"render": render})
    assert [".".join(map(str, e["loc"])) for e in exc.value.errors()] == [field]
    assert message in str(exc.value)


def test_render_settings_in_run_config_and_robot_profile():
    cfg = load_model(RunConfig, None, ["env.render.shadows=true", "env.render.multisample=4"])
    assert cfg.env.render == RenderConfig(shadows=True, multisample=4)
    with pytest.raises(ConfigError, match=r"env\.render\.multisample"):
        load_model(RunConfig, None, ["env.render.multisample=3"])

    profile = load_profile(SIM_PROFILE, ["sim.render.reflections=true"])
    assert profile.sim.render == RenderConfig(reflections=True)
    with pytest.raises(ProfileError, match=r"sim\.render\.shadow_size"):
        load_profile(SIM_PROFILE, ["sim.render.shadow_size=16"])
