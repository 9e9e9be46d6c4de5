"""The public-address policy of remote media fetches (SSRF protection)."""

from __future__ import annotations

import ipaddress

import pytest

from gateway.media.addresses import address_problem, hostname_problem


@pytest.mark.parametrize(
    "address, problem",
    [
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("192.168.1.1", "private"),
        ("127.0.0.1", "loopback"),
        ("127.8.9.10", "loopback"),
        ("169.254.169.254", "link-local"),  # the cloud metadata service
        ("0.0.0.0", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("240.0.0.1", "reserved"),
        ("100.64.0.1", "CGNAT"),
        ("100.100.100.200", "CGNAT"),  # Alibaba's metadata service
        ("255.255.255.255", "reserved"),  # broadcast
        ("::1", "loopback"),
        ("::", "unspecified"),
        ("fe80::1", "link-local"),
        ("fc00::1", "private"),
        ("fd00:ec2::254", "private"),  # AWS's IPv6 metadata service
        ("ff02::1", "multicast"),
        ("::ffff:127.0.0.1", "loopback, embedded in IPv6"),
        ("::ffff:169.254.169.254", "link-local, embedded in IPv6"),
        ("::ffff:10.0.0.1", "private, embedded in IPv6"),
        ("2002:7f00:1::", "loopback, embedded in IPv6"),  # 6to4 of 127.0.0.1
        ("64:ff9b::a9fe:a9fe", "link-local, embedded in IPv6"),  # NAT64 of 169.254.169.254
        ("2001:db8::1", "private"),  # documentation range
    ],
)
def test_non_public_addresses_are_refused_with_their_kind(address, problem):
    found = address_problem(ipaddress.ip_address(address))
    assert found is not None and problem in found


@pytest.mark.parametrize(
    "address", ["8.8.8.8", "1.1.1.1", "93.184.216.34", "2606:4700:4700::1111", "::ffff:8.8.8.8"]
)
def test_public_addresses_are_allowed(address):
    assert address_problem(ipaddress.ip_address(address)) is None


@pytest.mark.parametrize(
    "host", ["metadata.google.internal", "METADATA.GOOGLE.INTERNAL.", "metadata", "instance-data"]
)
def test_metadata_host_names_are_refused_before_lookup(host):
    assert hostname_problem(host) == "a cloud metadata host name"


def test_ordinary_host_names_pass_the_name_check():
    assert hostname_problem("example.com") is None
