"""The Host and Origin checks shared by `memstrata serve`, `memstrata mcp --http` and the Kura
daemon: only a loopback name with at most a port passes."""

from __future__ import annotations

import pytest

from memstrata.mcp_server.loopback import HOST, ORIGIN, refused


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.1:8080", "localhost:80", "LOCALHOST", "[::1]:8080",
                                  "[::1]", "localhost:"])
def test_loopback_hosts_are_served(host):
    assert refused(host, None) is None


@pytest.mark.parametrize("host", ["evil.example", "127.0.0.1.nip.io", "127.0.0.2", "0.0.0.0:8080",
                                  "127.0.0.1:8080@evil.example", "localhost:80/evil", "[::1]evil.example",
                                  "[::1]:80@evil.example", "localhost:8o", "", "[::1"])
def test_anything_else_in_host_is_refused(host):
    assert refused(host, None) == HOST


@pytest.mark.parametrize("origin", ["http://127.0.0.1:8080@evil.example", "https://evil.example",
                                    "http://localhost.evil.example", "null", "file://localhost"])
def test_foreign_origins_are_refused(origin):
    assert refused("localhost:8080", origin) == ORIGIN


def test_local_origin_is_served():
    assert refused("localhost:8080", "http://localhost:8080") is None
    assert refused("127.0.0.1:8080", "https://[::1]:8443") is None
