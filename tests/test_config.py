"""Unit tables for ``config.load``: defaults < awty.toml < AWTY_* environment < flags, every
value validated with a message naming where it came from."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from awty import config
from awty.config import CONFIG_NAME, Settings, load
from awty.errors import InvalidInput
from awty.model import MisfirePolicy


@pytest.fixture
def home(tmp_path):
    return tmp_path


def write(home, text: str) -> None:
    (home / CONFIG_NAME).write_text(text)


@pytest.mark.parametrize("toml, env, flags, key, want", [
    ("", {}, {}, "resolution", 15),
    ("resolution = 5\n", {}, {}, "resolution", 5),
    ("resolution = 5\n", {"AWTY_RESOLUTION": "10"}, {}, "resolution", 10),
    ("resolution = 5\n", {"AWTY_RESOLUTION": "10"}, {"resolution": 30}, "resolution", 30),
    ("resolution = 5\n", {"AWTY_RESOLUTION": ""}, {}, "resolution", 5),  # empty: not set
    ("", {}, {"resolution": None}, "resolution", 15),  # a flag not given
    ('timeout = "2m"\n', {}, {}, "timeout", 120.0),
    ("", {"AWTY_TIMEOUT": "PT1H"}, {}, "timeout", 3600.0),
    ("", {"AWTY_MISFIRE": "SKIP"}, {}, "misfire", MisfirePolicy.SKIP),
    ("", {}, {}, "misfire", MisfirePolicy.FIRE),
    ("", {"AWTY_DENY_PRIVATE_NETWORKS": "yes"}, {}, "deny_private_networks", True),
    ("# only comments\n# resolution = 5\n", {}, {}, "resolution", 15),
])
def test_merge_order(home, toml, env, flags, key, want):
    write(home, toml)
    assert getattr(load(home, env, flags), key) == want


@pytest.mark.parametrize("toml, env, flags, message", [
    ("resolution = 7\n", {}, {}, "awty.toml: resolution"),
    ("", {"AWTY_RESOLUTION": "7"}, {}, "AWTY_RESOLUTION"),
    ("", {}, {"resolution": 7}, "--resolution"),
    ("colour = 1\n", {}, {}, "unknown setting 'colour'"),
    ("", {}, {"colour": 1}, "--colour: unknown setting"),
    ("resolution = \n", {}, {}, "not valid TOML"),
    ("", {"AWTY_MISFIRE": "later"}, {}, "AWTY_MISFIRE"),
    ("", {"AWTY_CONCURRENCY": "0"}, {}, "AWTY_CONCURRENCY"),
    ("", {"AWTY_TIMEOUT": "3 fortnights"}, {}, "AWTY_TIMEOUT"),
])
def test_bad_values_name_their_source(home, toml, env, flags, message):
    write(home, toml)
    with pytest.raises(InvalidInput, match=message):
        load(home, env, flags)


def test_environment_outside_awty_is_ignored_and_defaults_are_settings(home):
    assert load(home, {"RESOLUTION": "5", "HOME": "/x"}) == Settings()


def test_the_template_is_every_setting_and_each_line_parses():
    """awty.toml's template is generated from Settings: every key is there, and uncommenting
    a line gives a valid value (the default itself where the line shows the default)."""
    import tomllib

    from awty import config

    text = "\n".join(line[2:] for line in config.TEMPLATE.splitlines()[1:])
    values = tomllib.loads(text)
    assert list(values) == list(config.KEYS) == list(config.Settings.__annotations__)
    for name, default, _doc, example in config.FIELDS:
        got = config._coerce(name, values[name], "template")
        if example is None:
            assert got == default, name


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from([
    b"resolution = 15", b'database_url = "postgresql://a:b@h/db"', b"x = true", b"x = -0",
    b"y = 007", b'y = "q\\"q"', b"# c", b"# \xff", b"\t", b"", b"a=1 # \x01", b"a = 1\r",
    b"\x0cb = 2", b'z = "\x7f"', b"z = [1]", b"z = 1_0", b'a = "#"   # x', b"a = +1",
]), max_size=6))
@pytest.mark.slow
def test_simple_settings_read_as_tomllib_reads_them(lines):
    """The reader that spares `add` tomllib's import gives what tomllib gives, or leaves the
    text to it."""
    import tomllib

    raw = b"\n".join(lines)
    got = config._simple_toml(raw)
    if got is None:
        return
    assert got == tomllib.loads(raw.decode("utf-8"))
