"""The private DDS domain `worldsample run --robot bridge` draws: from 1-200, or the range
WORLDSAMPLE_DDS_DOMAINS names (jobs started side by side kept apart); a malformed range is refused."""

import pytest

from services.cli.dds_robot import DOMAINS_ENV, domain_range, private_domain
from worldsample.errors import ConfigError


def test_the_domain_comes_from_the_named_range(monkeypatch):
    monkeypatch.delenv(DOMAINS_ENV, raising=False)
    assert domain_range() == (1, 200)
    monkeypatch.setenv(DOMAINS_ENV, "101-103")
    assert {private_domain() for _ in range(200)} == {101, 102, 103}
    monkeypatch.setenv(DOMAINS_ENV, "7-7")
    assert private_domain() == 7


@pytest.mark.parametrize("spec", ["5", "a-b", "10-5", "0-233", "-1-4"])
def test_a_malformed_range_is_refused(monkeypatch, spec):
    monkeypatch.setenv(DOMAINS_ENV, spec)
    with pytest.raises(ConfigError, match=DOMAINS_ENV):
        domain_range()
