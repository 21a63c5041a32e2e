import pytest

from gateway.core.channels import BadChannel, Channel, parse_channel


def test_known_channels_parse() -> None:
    assert parse_channel("team:7") == Channel("team", 7)
    assert parse_channel("team-jobs:7") == Channel("team-jobs", 7)
    assert parse_channel("trajectory:42").name == "trajectory:42"


@pytest.mark.parametrize(
    "name", ["team", "team:", "teams:1", "team:-1", "team:1.5", "trajectory:abc", ":1", "team:" + "9" * 30]
)
def test_anything_else_is_refused_with_a_reason(name: str) -> None:
    with pytest.raises(BadChannel):
        parse_channel(name)
