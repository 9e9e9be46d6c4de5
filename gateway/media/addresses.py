"""Which IP addresses a remote media fetch may connect to: public unicast ones only.

Anything else (private, loopback, link-local incl. cloud metadata, CGNAT, multicast, reserved,
unspecified, and IPv6 forms that embed such an IPv4 address) is refused, so a client cannot
make the server reach its own network (SSRF). The check runs on the address actually
connected to (see fetch.py), never on the URL's text alone.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# (address) -> why it is refused, or None when it may be connected to. Tests inject their own.
AddressPolicy = Callable[[IPAddress], "str | None"]

# Names of cloud metadata services: refused before any lookup, whatever they resolve to.
METADATA_HOSTNAMES = frozenset(
    {
        "metadata",
        "metadata.google.internal",
        "metadata.goog",
        "instance-data",
        "instance-data.ec2.internal",
        "metadata.azure.internal",
        "metadata.tencentyun.com",
        "metadata.platformequinix.com",
    }
)

_CGNAT = ipaddress.ip_network("100.64.0.0/10")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one stands for (mapped, 6to4, NAT64), if any."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def address_problem(ip: IPAddress) -> str | None:
    """Why `ip` may not be fetched from ("loopback", "private", ...), or None if public."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.scope_id:
            return "scoped (link-local)"
        inner = _embedded_ipv4(ip)
        if inner is not None:
            problem = address_problem(inner)
            return f"{problem}, embedded in IPv6" if problem else None
    if ip.is_unspecified:
        return "unspecified"
    if ip.is_loopback:
        return "loopback"
    if ip.is_link_local:
        return "link-local"
    if ip.is_multicast:
        return "multicast"
    if isinstance(ip, ipaddress.IPv4Address) and ip in _CGNAT:
        return "shared address space (CGNAT)"
    if ip.is_reserved:
        return "reserved"
    if ip.is_private:
        return "private"
    if not ip.is_global:
        return "not globally routable"
    return None


def hostname_problem(host: str) -> str | None:
    """Why a host name is refused before it is even looked up, or None."""
    name = host.rstrip(".").lower()
    if name in METADATA_HOSTNAMES:
        return "a cloud metadata host name"
    return None
