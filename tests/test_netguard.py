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


# --- cloud metadata outside link-local (issue 10 item 5) -----------------------------------------
METADATA_ADDRESSES = [
    "fd00:ec2::254", "fd00:ec2::23", "fd00:ec2::123", "fd00:ec2::253",  # AWS IPv6
    "fd20:ce::254",                                                     # Google Cloud IPv6
    "168.63.129.16",                                                    # Azure WireServer
    "100.100.100.200", "fd00:100::100:200",                             # Alibaba Cloud
    "192.0.0.192", "fd00:c1::a9fe:a9fe",                                # Oracle Cloud
    "fd00:42::42",                                                      # Scaleway
    "fd00:a9fe:a9fe::1",                                                # Akamai / Linode
]
LINK_LOCAL_METADATA = [
    "169.254.169.254", "169.254.170.2", "169.254.170.23", "169.254.0.23", "169.254.42.42",
    "fe80::a9fe:a9fe",
]


def _bracket(ip: str) -> str:
    return f"[{ip}]" if ":" in ip else ip


@pytest.mark.parametrize("ip", METADATA_ADDRESSES)
@pytest.mark.parametrize("settings", [OPEN, PRIVATE], ids=["open", "deny_private"])
def test_metadata_addresses_refused_at_add_and_at_connect(ip, settings):
    with pytest.raises(InvalidInput, match="cloud metadata address .*: always refused"):
        check_url(f"http://{_bracket(ip)}/latest/meta-data/", settings)
    assert "cloud metadata" in address_refusal(ip, settings)


@pytest.mark.parametrize("ip", LINK_LOCAL_METADATA)
def test_link_local_metadata_addresses_refused(ip):
    with pytest.raises(InvalidInput, match="link-local"):
        check_url(f"http://{_bracket(ip)}/", OPEN)
    assert "link-local" in address_refusal(ip, OPEN)


@pytest.mark.parametrize("spelling", [
    "[::ffff:100.100.100.200]", "[::ffff:6464:64c8]", "[64:ff9b::6464:64c8]",
    "[::100.100.100.200]", "1684301000", "0x64.0x64.0x64.0xc8", "100.100.25800",
    "[::ffff:192.0.0.192]", "[::ffff:168.63.129.16]", "[FD00:EC2:0::254]",
])
def test_metadata_addresses_in_other_spellings(spelling):
    with pytest.raises(InvalidInput, match="cloud metadata"):
        check_url(f"http://{spelling}/", OPEN)


@pytest.mark.parametrize("ip", ["fd00:ec3::254", "fd20:ce::253", "100.100.100.201",
                                "192.0.0.193", "168.63.129.17", "fd00:42::43"])
def test_neighbours_of_metadata_addresses_are_not_metadata(ip):
    assert check_url(f"http://{_bracket(ip)}/", OPEN)
    assert address_refusal(ip, OPEN) is None


@pytest.mark.parametrize("name", ["metadata.google.internal", "metadata.goog",
                                  "instance-data.ec2.internal", "metadata.tencentyun.com",
                                  "Metadata.Goog."])
def test_metadata_names_refused(name):
    with pytest.raises(InvalidInput, match="cloud metadata service: always refused"):
        check_url(f"http://{name}/", OPEN)


def test_kubernetes_api_names_refused_only_with_deny_private_networks():
    for name in ("kubernetes.default", "kubernetes.default.svc",
                 "kubernetes.default.svc.cluster.local"):
        assert check_url(f"https://{name}/api", OPEN)
        with pytest.raises(InvalidInput, match="deny_private_networks"):
            check_url(f"https://{name}/api", PRIVATE)


# --- host names and URL size -------------------------------------------------------------------
LABEL63 = "a" * 63
NAME253 = ".".join([LABEL63] * 3 + ["b" * 61])  # 63*3 + 61 + 3 dots = 253


@pytest.mark.parametrize("host", [
    LABEL63 + ".example.com", NAME253, NAME253 + ".", "my_service", "xn--bcher-kva.de",
    "bücher.de", "例え.テスト", "a-b.c-d.example", "1st.example.com", "EXAMPLE.com",
])
def test_valid_host_names(host):
    assert check_url(f"https://{host}/hook", OPEN)


@pytest.mark.parametrize("host, why", [
    ("a" * 5000 + ".com", "5004 characters long (at most 253)"),
    (NAME253 + "c", "254 characters long (at most 253)"),
    ("a" * 64 + ".example.com", "a label of 64 characters (at most 63)"),
    ("a..example.com", "an empty label"),
    ("example.com..", "an empty label"),
    ("-lead.example.com", "invalid label '-lead'"),
    ("trail-.example.com", "invalid label 'trail-'"),
    ("exa%41mple.com", "invalid label"),
    ("exa!mple.com", "invalid label"),
    ("exa$mple.com", "invalid label"),
    ("1.2.3.999", "its last label is a number"),
    ("host.123", "its last label is a number"),
    ("ü" * 70 + ".de", "not a valid international domain name"),
])
def test_invalid_host_names(host, why):
    with pytest.raises(InvalidInput) as e:
        check_url(f"https://{host}/hook", OPEN)
    assert why in str(e.value)
    assert len(str(e.value)) < 400  # the message quotes a shortened URL


def test_url_of_8_kib_is_the_limit():
    base = "https://example.com/"
    assert check_url(base + "a" * (8192 - len(base)), OPEN)
    with pytest.raises(InvalidInput, match="8193 bytes, over the limit of 8192"):
        check_url(base + "a" * (8193 - len(base)), OPEN)
    with pytest.raises(InvalidInput, match="over the limit of 8192"):  # bytes, not characters
        check_url(base + "é" * 4100, OPEN)
