"""SSRF rules: what a target URL may be at add time, and which addresses may be connected."""

from __future__ import annotations

import pytest

from awty.config import Settings
from awty.errors import InvalidInput
from awty.netguard import address_refusal, check_url

OPEN = Settings()
PRIVATE = Settings(deny_private_networks=True)
ALLOW = Settings(allowed_callbacks=("https://hooks.example.com/awty/", "http://10.1.2.3:8080"))


@pytest.mark.parametrize("url,settings", [
    ("http://example.com/hook", OPEN),
    ("https://example.com", OPEN),
    ("https://example.com:8443/a/b?x=1&y=2", OPEN),
    ("HTTPS://Example.COM/x", OPEN),
    ("http://127.0.0.1:8080/cb", OPEN),  # loopback is fine unless deny_private_networks
    ("http://[::1]:8080/cb", OPEN),
    ("http://localhost/cb", OPEN),
    ("http://10.0.0.5/cb", OPEN),
    ("http://8.8.8.8/cb", PRIVATE),
    ("https://[2001:4860:4860::8888]/cb", PRIVATE),
    ("https://hooks.example.com/cb", PRIVATE),  # names are not resolved at add time
    ("https://hooks.example.com/awty/orders", ALLOW),
    ("HTTPS://HOOKS.EXAMPLE.COM:443/awty/x", ALLOW),
    ("http://10.1.2.3:8080/anything", ALLOW),
])
def test_accepted(url, settings):
    assert check_url(url, settings) == url


@pytest.mark.parametrize("url,settings,why", [
    ("ftp://example.com/x", OPEN, "only http"),
    ("file:///etc/passwd", OPEN, "only http"),
    ("gopher://example.com/", OPEN, "only http"),
    ("example.com/hook", OPEN, "only http"),
    ("", OPEN, "URL is required"),
    ("http://", OPEN, "no host"),
    ("http:///path", OPEN, "no host"),
    ("http://exa mple.com/", OPEN, "whitespace"),
    ("http://example.com:99999/", OPEN, "not a valid URL"),
    ("http://user:pw@example.com/", OPEN, "credentials"),
    # link-local: always
    ("http://169.254.169.254/latest/meta-data/", OPEN, "link-local"),
    ("http://169.254.0.1:8080/", OPEN, "link-local"),
    ("http://[fe80::1]/", OPEN, "link-local"),
    ("http://[fe80::1%25eth0]/", OPEN, "link-local"),
    ("http://[::ffff:169.254.169.254]/", OPEN, "link-local"),
    ("http://[64:ff9b::a9fe:a9fe]/", OPEN, "link-local"),  # NAT64 of the metadata address
    ("http://2852039166/", OPEN, "link-local"),  # 169.254.169.254 as one number
    ("http://0xa9.0xfe.0xa9.0xfe/", OPEN, "link-local"),
    ("http://metadata.google.internal/computeMetadata/v1/", OPEN, "metadata"),
    ("http://METADATA.google.internal./", OPEN, "metadata"),
    # deny_private_networks
    ("http://127.0.0.1/", PRIVATE, "loopback"),
    ("http://127.1.2.3:9/", PRIVATE, "loopback"),
    ("http://[::1]/", PRIVATE, "loopback"),
    ("http://[::ffff:127.0.0.1]/", PRIVATE, "loopback"),
    ("http://10.0.0.1/", PRIVATE, "private"),
    ("http://172.16.5.4/", PRIVATE, "private"),
    ("http://192.168.1.1/", PRIVATE, "private"),
    ("http://100.64.0.1/", PRIVATE, "private"),
    ("http://[fd00::1]/", PRIVATE, "private"),
    ("http://0.0.0.0/", PRIVATE, "unspecified"),
    ("http://[::]/", PRIVATE, "unspecified"),
    ("http://240.0.0.1/", PRIVATE, "reserved"),
    ("http://localhost:8000/", PRIVATE, "localhost"),
    ("http://LOCALHOST./", PRIVATE, "localhost"),
    ("http://app.localhost/", PRIVATE, "localhost"),
    ("http://2130706433/", PRIVATE, "loopback"),  # 127.0.0.1 as one number
    # allow-list
    ("https://hooks.example.com/other/", ALLOW, "outside the allowed"),
    ("http://hooks.example.com/awty/", ALLOW, "outside the allowed"),  # scheme differs
    ("https://hooks.example.com:8443/awty/", ALLOW, "outside the allowed"),  # port differs
    ("https://hooks.example.com.evil.net/awty/", ALLOW, "outside the allowed"),
    ("https://evil.net/awty/?https://hooks.example.com/awty/", ALLOW, "outside the allowed"),
    ("http://10.1.2.3:8081/x", ALLOW, "outside the allowed"),
    ("http://10.1.2.30:8080/x", ALLOW, "outside the allowed"),
])
def test_refused(url, settings, why):
    with pytest.raises(InvalidInput, match=why):
        check_url(url, settings)


def test_allow_list_host_with_userinfo_trick_is_refused():
    with pytest.raises(InvalidInput):
        check_url("https://hooks.example.com@evil.net/awty/", ALLOW)


def test_link_local_refused_even_when_allow_listed():
    s = Settings(allowed_callbacks=("http://169.254.169.254/",))
    with pytest.raises(InvalidInput, match="link-local"):
        check_url("http://169.254.169.254/latest", s)


@pytest.mark.parametrize("ip", [
    "169.254.169.254", "169.254.0.1", "fe80::1", "fe80::abcd%eth0", "febf::1",
    "::ffff:169.254.169.254", "64:ff9b::a9fe:a9fe",
])
def test_address_link_local_always_refused(ip):
    assert "link-local" in address_refusal(ip, OPEN)
    assert "link-local" in address_refusal(ip, PRIVATE)


@pytest.mark.parametrize("ip", [
    "127.0.0.1", "::1", "10.1.1.1", "172.31.255.255", "192.168.0.10", "fc00::1", "0.0.0.0",
    "::", "::ffff:10.0.0.1", "::ffff:127.0.0.1", "100.64.3.4", "224.0.0.1", "240.1.1.1",
])
def test_address_private_refused_only_when_denied(ip):
    assert address_refusal(ip, OPEN) is None
    assert address_refusal(ip, PRIVATE) is not None
    assert "deny_private_networks" in address_refusal(ip, PRIVATE)


@pytest.mark.parametrize("ip", ["8.8.8.8", "1.1.1.1", "2001:4860:4860::8888", "::ffff:8.8.8.8",
                                "93.184.216.34"])
def test_address_public_allowed(ip):
    assert address_refusal(ip, OPEN) is None
    assert address_refusal(ip, PRIVATE) is None


def test_address_not_an_ip():
    assert address_refusal("example.com", OPEN) is not None
