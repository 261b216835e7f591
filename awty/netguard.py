"""SSRF guard rails for callback targets (SPEC 5).

Two checks, stdlib only:
- ``check_url`` at ``add`` time (and again at fire time): an http(s) URL with a host, inside the
  allow-list when one is configured; a literal IP host in a refused range, or a refused name, is
  refused. Host names are NOT resolved here: ``add`` must stay fast.
- ``address_refusal`` at connect time, on every address a host name resolved to: the address
  actually connected is what matters (no DNS-rebinding window).

Always refused: link-local addresses (169.254.0.0/16 and fe80::/10, where most clouds put their
metadata service), the cloud metadata and platform addresses that live elsewhere (``METADATA``)
and the metadata services' well-known names (``ALWAYS_REFUSED_NAMES``); also in every IPv6
spelling that carries an IPv4 address (``_carried``: mapped, translated, compatible, NAT64, 6to4,
Teredo). With ``deny_private_networks`` loopback, private,
unspecified, reserved and other non-global addresses (and the names ``localhost`` and
Kubernetes' ``kubernetes.default…``) are refused too.

A target must be a URL of at most 8 KiB whose host is an IP address or a valid DNS name (IDNA
for non-ASCII names; labels of 1–63 letters, digits, ``-`` or ``_``; at most 253 characters).
"""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import SplitResult, unquote, urlsplit

from .errors import InvalidInput

TYPE_CHECKING = False  # `typing` costs each start ~3 ms; mypy reads this name as True
if TYPE_CHECKING:
    from .config import Settings

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# Cloud instance-metadata and platform endpoints outside link-local space: each answers the
# instance it runs on with credentials or configuration, so no callback may reach one. Inside
# link-local (always refused as such): AWS, GCP, Azure, DigitalOcean, OpenStack, Oracle, Hetzner
# 169.254.169.254; AWS ECS 169.254.170.2 and EKS Pod Identity 169.254.170.23; Tencent
# 169.254.0.23; Scaleway 169.254.42.42; OpenStack's IPv6 fe80::a9fe:a9fe.
METADATA = tuple((ipaddress.ip_network(net), who) for net, who in (
    ("fd00:ec2::/32", "AWS instance metadata, DNS, NTP and EKS Pod Identity over IPv6"),
    ("fd20:ce::254/128", "Google Cloud metadata server over IPv6"),
    ("168.63.129.16/32", "Azure WireServer (platform host)"),
    ("100.100.100.200/32", "Alibaba Cloud metadata"),
    ("fd00:100::100:200/128", "Alibaba Cloud metadata over IPv6"),
    ("192.0.0.192/32", "Oracle Cloud metadata"),
    ("fd00:c1::a9fe:a9fe/128", "Oracle Cloud metadata over IPv6"),
    ("fd00:42::42/128", "Scaleway metadata over IPv6"),
    ("fd00:a9fe:a9fe::1/128", "Akamai/Linode metadata over IPv6"),
))
# Names of metadata services, refused at add without resolving; whatever other name resolves
# to a metadata address is refused at connect.
ALWAYS_REFUSED_NAMES = frozenset({
    "metadata.google.internal", "metadata.goog", "instance-data.ec2.internal",
    "metadata.tencentyun.com",
})
PRIVATE_NAMES = frozenset({
    "localhost", "kubernetes.default", "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
})
MAX_URL_BYTES = 8192
MAX_NAME = 253
_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")

_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.IPv6Network("64:ff9b:1::/48")
_TRANSLATED = ipaddress.IPv6Network("::ffff:0:0:0/96")
_V4_COMPAT = ipaddress.IPv6Network("::/96")
_CGNAT = ipaddress.IPv4Network("100.64.0.0/10")
# inet_aton() forms a resolver would read as an IPv4 address: 2852039166, 0xa9.0xfe.0xa9.0xfe,
# 0251.0376.0251.0376, 169.254.43518 ...
_NUMERIC_HOST = re.compile(r"^(0x[0-9a-f]*|[0-9]+)(\.(0x[0-9a-f]*|[0-9]+)){0,3}\.?$")


def _short(url: str) -> str:
    return url if len(url) <= 200 else url[:200] + "…"


def _carried(ip: IPAddress) -> tuple[IPAddress, ...]:
    """The IPv4 addresses an IPv6 address carries, each a way to reach that IPv4 host:
    IPv4-mapped ``::ffff:a.b.c.d``, IPv4-translated ``::ffff:0:a.b.c.d``, IPv4-compatible
    ``::a.b.c.d``, NAT64 ``64:ff9b::a.b.c.d`` (and the local-use ``64:ff9b:1::/48`` in each
    of RFC 6052's layouts), 6to4 ``2002:AABB:CCDD::``, Teredo ``2001:0:SERVER::~CLIENT``
    (both). Empty for an IPv4 address and an IPv6 one carrying none."""
    if not isinstance(ip, ipaddress.IPv6Address):
        return ()
    n = int(ip)
    if ip.ipv4_mapped is not None:
        return (ip.ipv4_mapped,)
    if ip in _TRANSLATED or ip in _NAT64 or (ip in _V4_COMPAT and n > 1):
        return (ipaddress.IPv4Address(n & 0xFFFFFFFF),)
    if ip.sixtofour is not None:
        return (ip.sixtofour,)
    if ip.teredo is not None:
        return ip.teredo
    if ip in _NAT64_LOCAL:
        # RFC 6052: the IPv4 address follows a /48, /56 or /64 prefix (skipping bits 64-71),
        # or fills the last 32 bits of a /96
        b = ip.packed
        return tuple(ipaddress.IPv4Address(bytes(x)) for x in (
            b[6:8] + b[9:11], b[7:8] + b[9:12], b[9:13], b[12:16]))
    return ()


def _refusal(ip: IPAddress, deny_private: bool) -> str | None:
    for a in _carried(ip) or (ip,):
        shown = str(ip) if a is ip else f"{ip} (= {a})"
        reason = _refusal_of(a, shown, deny_private)
        if reason:
            return reason
    return None


def _refusal_of(a: IPAddress, shown: str, deny_private: bool) -> str | None:
    if a.is_link_local:
        return f"{shown} is a link-local address (cloud metadata lives there): always refused"
    for net, who in METADATA:
        if a.version == net.version and a in net:
            return f"{shown} is a cloud metadata address ({who}): always refused"
    if not deny_private:
        return None
    if a.is_loopback:
        return f"{shown} is a loopback address (deny_private_networks)"
    if a.is_unspecified:
        return f"{shown} is an unspecified address (deny_private_networks)"
    if a.is_multicast:
        return f"{shown} is a multicast address (deny_private_networks)"
    if a.is_reserved:
        return f"{shown} is a reserved address (deny_private_networks)"
    if a.is_private or not a.is_global or (isinstance(a, ipaddress.IPv4Address) and a in _CGNAT):
        return f"{shown} is a private address (deny_private_networks)"
    return None


def _parse_ip(text: str) -> IPAddress | None:
    """A literal IP host: dotted/colon forms, and the numeric IPv4 forms inet_aton accepts."""
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        pass
    if _NUMERIC_HOST.match(text):
        import socket  # only for these rare forms: its import costs every `awty add`

        try:
            return ipaddress.IPv4Address(socket.inet_aton(text.rstrip(".")))
        except OSError:
            return None
    return None


def _default_port(scheme: str) -> int:
    return 443 if scheme == "https" else 80


def _matches_prefix(parts: SplitResult, url: str, prefix: str) -> bool:
    """Same scheme, host and port as the prefix (compared parsed, so ``user@`` tricks and case
    do not matter), and the rest of the URL (path, query) starts with the prefix's rest."""
    try:
        p = urlsplit(prefix)
        p_port = p.port or _default_port(p.scheme.lower())
    except ValueError:
        return False
    if p.scheme.lower() != parts.scheme.lower():
        return False
    if (p.hostname or "").rstrip(".") != (parts.hostname or "").rstrip("."):
        return False
    if p_port != (parts.port or _default_port(parts.scheme.lower())):
        return False
    if _climbs(parts.path):
        return False
    return _rest(url, parts.netloc).startswith(_rest(prefix, p.netloc).split("#", 1)[0])


def _climbs(path: str) -> bool:
    """A ".." segment (also %2e%2e, or behind a backslash or %2f) lets a path that starts with
    an allowed prefix land outside it once the receiver's server normalises it."""
    return ".." in unquote(path).replace("\\", "/").split("/")


def _rest(url: str, netloc: str) -> str:
    """What follows the authority: path, query, fragment; an empty path reads as "/"."""
    rest = url[url.index("//") + 2 + len(netloc):]
    return rest if rest.startswith("/") else "/" + rest


def check_url(url: str, settings: Settings) -> str:
    """Refuse a callback target that is not an http(s) URL with a host, lies outside the
    configured allow-list, or names a refused address (literal IPs and a few names only:
    nothing is resolved here). Returns the URL unchanged."""
    if not isinstance(url, str) or not url.strip():
        raise InvalidInput("target: an http(s) URL is required")
    size = len(url.encode("utf-8", "surrogatepass"))
    if size > MAX_URL_BYTES:
        raise InvalidInput(f"target {_short(url)!r}: the URL is {size} bytes, over the limit "
                           f"of {MAX_URL_BYTES} (8 KiB)")
    if url != url.strip() or any(c in url for c in "\r\n\t\x00 "):
        raise InvalidInput(f"target {_short(url)!r}: whitespace or control characters in URL")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as e:
        raise InvalidInput(f"target {_short(url)!r}: not a valid URL ({e})") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise InvalidInput(f"target {_short(url)!r}: only http:// and https:// URLs are allowed")
    host = parts.hostname
    if not host:
        raise InvalidInput(f"target {_short(url)!r}: the URL has no host")
    if parts.username is not None or parts.password is not None:
        raise InvalidInput(f"target {_short(url)!r}: credentials in the URL are not supported "
                           "(send them with --header 'Authorization: ...')")
    if port == 0:
        raise InvalidInput(f"target {_short(url)!r}: port 0 is not a valid port")
    allowed = getattr(settings, "allowed_callbacks", ())
    if allowed and not any(_matches_prefix(parts, url, p) for p in allowed):
        raise InvalidInput(f"target {_short(url)!r} is outside the allowed callbacks "
                           f"({', '.join(allowed)})")
    deny_private = bool(getattr(settings, "deny_private_networks", False))
    name = host.rstrip(".")
    if name in ALWAYS_REFUSED_NAMES:
        raise InvalidInput(f"target {_short(url)!r}: {name} is a cloud metadata service: "
                           "always refused")
    if deny_private and (name in PRIVATE_NAMES or name.endswith(".localhost")):
        raise InvalidInput(f"target {_short(url)!r}: {name} is refused (deny_private_networks)")
    ip = _parse_ip(host)
    if ip is None:
        reason = name_refusal(host[:-1] if host.endswith(".") else host)
    else:
        reason = _refusal(ip, deny_private)
    if reason:
        raise InvalidInput(f"target {_short(url)!r}: {reason}")
    return url


def name_refusal(name: str) -> str | None:
    """Why ``name`` (a URL's host, not an IP address, without its trailing dot) is not a host
    name a resolver could be asked for, or None. Non-ASCII names are checked in the IDNA form
    the resolver is given (Python's ``idna`` codec, as socket.getaddrinfo encodes them)."""
    if not name:
        return "the host name is empty"
    if len(name) > 4 * MAX_NAME:  # no valid name is this long, even before IDNA encoding
        return f"the host name is {len(name)} characters long (at most {MAX_NAME})"
    name = name.lower()
    if not name.isascii():
        try:
            name = name.encode("idna").decode("ascii")
        except UnicodeError as e:
            return f"the host name is not a valid international domain name ({e})"
    if len(name) > MAX_NAME:
        return f"the host name is {len(name)} characters long (at most {MAX_NAME})"
    labels = name.split(".")
    for label in labels:
        if len(label) > 63:
            return f"the host name has a label of {len(label)} characters (at most 63)"
        if not _LABEL.fullmatch(label):
            return (f"the host name has an invalid label {label!r} (letters, digits, '-' and "
                    "'_' only, not starting or ending with '-')" if label
                    else "the host name has an empty label")
    if labels[-1].isdigit():
        return f"{name!r} is neither an IP address nor a host name (its last label is a number)"
    return None


def address_refusal(ip: str, settings: Settings) -> str | None:
    """Why a resolved address must not be connected to, or None when it may be.
    Link-local (incl. IPv4-mapped IPv6) always; loopback/private/... with deny_private_networks.
    Text that is not an IP address is refused."""
    try:
        addr = ipaddress.ip_address(ip)
    except ValueError:
        return f"{ip!r} is not an IP address"
    if isinstance(addr, ipaddress.IPv6Address) and addr.scope_id:
        addr = ipaddress.IPv6Address(str(addr).split("%", 1)[0])
    return _refusal(addr, bool(getattr(settings, "deny_private_networks", False)))
