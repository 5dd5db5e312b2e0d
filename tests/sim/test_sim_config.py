"""Config validation: bad values fail with an error that names the offending field."""

import pytest
from pydantic import ValidationError

from worldsample.sim import ExpertConfig, InterventionConfig, RandomizationConfig, SimArmConfig


def names_field(exc: ValidationError, field: str) -> bool:
    """Whether some error is located at `field` or inside it (e.g. one item of a tuple)."""
    locs = [".".join(str(p) for p in err["loc"]) for err in exc.errors()]
    return any(loc == field or loc.startswith(field + ".") for loc in locs)


def test_defaults_match_the_documented_values():
    cfg = SimArmConfig()
    assert (cfg.task, cfg.cameras, cfg.image_size, cfg.domain) == ("push-v3", ["corner"], 64, "real")
    assert cfg.randomization.mass_scale == (0.5, 2.0)
    # A JSON round trip (YAML configs, episode metadata) gives back the same config.
    assert SimArmConfig.model_validate(cfg.model_dump(mode="json")) == cfg


@pytest.mark.parametrize(
    ("data", "field", "message"),
    [
        ({"cameras": ["corner", "ceiling"]}, "cameras", "unknown camera"),
        ({"cameras": ["corner", "corner"]}, "cameras", "must not repeat"),
        ({"task": "push-v9"}, "task", "unknown Meta-World task"),
        ({"image_size": 8}, "image_size", "greater than or equal"),
        ({"image_size": 4096}, "image_size", "less than or equal"),
        ({"domain": "mars"}, "domain", "'real' or 'sim'"),
        ({"max_episode_steps": 0}, "max_episode_steps", "greater than or equal"),
        ({"proprio_noise_std": -0.1}, "proprio_noise_std", "greater than or equal"),
        ({"action_delay_steps": -1}, "action_delay_steps", "greater than or equal"),
        ({"camera": ["corner"]}, "camera", "Extra inputs"),
        ({"randomization": {"mass_scale": (2.0, 0.5)}}, "randomization.mass_scale", "0 < low <= high"),
        ({"randomization": {"light_scale": (0.0, 1.0)}}, "randomization.light_scale", "0 < low <= high"),
        ({"randomization": {"camera_jitter_deg": 120}}, "randomization.camera_jitter_deg", "less than"),
    ],
)
def test_invalid_sim_arm_config_names_the_field(data, field, message):
    with pytest.raises(ValidationError) as exc:
        SimArmConfig.model_validate(data)
    assert names_field(exc.value, field)
    assert message in str(exc.value)


@pytest.mark.parametrize(
    ("model", "data", "field"),
    [
        (ExpertConfig, {"action_noise_std": -1.0}, "action_noise_std"),
        (InterventionConfig, {"deviation_threshold": 0.0}, "deviation_threshold"),
        (InterventionConfig, {"patience_steps": -1}, "patience_steps"),
        (InterventionConfig, {"takeover_steps": 0}, "takeover_steps"),
        (InterventionConfig, {"trigger": "mood"}, "trigger"),
        (InterventionConfig, {"stall_steps": 0}, "stall_steps"),
        (InterventionConfig, {"stall_progress": 0.0}, "stall_progress"),
        (RandomizationConfig, {"friction_scale": (1.0,)}, "friction_scale"),
    ],
)
def test_invalid_expert_and_intervention_configs_name_the_field(model, data, field):
    with pytest.raises(ValidationError) as exc:
        model.model_validate(data)
    assert names_field(exc.value, field)


def test_assignment_is_validated_too():
    cfg = SimArmConfig(cameras=[])
    with pytest.raises(ValidationError, match="cameras"):
        cfg.cameras = ["nope"]
