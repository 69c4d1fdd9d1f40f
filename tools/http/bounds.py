"""The bounds on everything an HTTP client controls, read from ``HTTP_*`` settings with safe defaults.

Every value a client chooses — how long its request head is, how many headers it sends, how slowly
it sends them, how long it keeps a connection open doing nothing, how many connections and event
streams it opens — has a ceiling here. Past a ceiling the client gets a status and a closed
connection (``protocol.py``), and the service goes on answering everyone else.

=====================================  ========  ==================================================
setting                                default   past it
=====================================  ========  ==================================================
``HTTP_MAX_HEADER_BYTES``              16384     request line + headers larger: 431, closed
``HTTP_MAX_HEADERS``                   100       more header fields: 431, closed
``HTTP_MAX_URL_BYTES``                 8192      a longer request target: 414, closed
``HTTP_MAX_BODY_BYTES``                1048576   a larger body: 413 (``endpoint.py``)
``HTTP_HEADER_TIMEOUT``                10        seconds for a request head to arrive: 408, closed
``HTTP_BODY_TIMEOUT``                  30        seconds for a body to arrive once its head did:
                                                 408, closed
``HTTP_KEEPALIVE_TIMEOUT``             5         seconds an idle keep-alive connection stays open
``HTTP_MAX_CONNECTIONS``               1000      open connections: further ones get 503 with
                                                 ``Retry-After`` (the liveness probe still answers)
``HTTP_MAX_CONNECTIONS_PER_CLIENT``    100       open connections from one address: closed at once
``HTTP_MAX_STREAMS_PER_CLIENT``        10        open event streams from one address: 429
``HTTP_TRUSTED_PROXIES``               (none)    addresses/networks whose ``X-Forwarded-For`` /
                                                 ``X-Forwarded-Proto`` are believed
=====================================  ========  ==================================================

A trusted proxy carries many clients on its connections, so it is exempt from the per-client
connection ceiling (the total still applies); the per-client stream ceiling uses the forwarded
address it reports.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field

from core.settings import env_duration, env_int, env_str

LIVENESS_PATHS = frozenset({"/system/health/live"})
"""Answered even when the connection ceiling is reached, so an orchestrator sees the process alive."""

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class Bounds:
    max_header_bytes: int = 16384
    max_headers: int = 100
    max_url_bytes: int = 8192
    header_timeout: float = 10.0
    body_timeout: float = 30.0
    keepalive_timeout: float = 5.0
    max_connections: int = 1000
    max_connections_per_client: int = 100
    max_streams_per_client: int = 10
    trusted_proxies: tuple[Network, ...] = ()
    trusted_proxies_raw: str = ""
    priority_paths: frozenset[str] = field(default=LIVENESS_PATHS)

    def is_trusted_proxy(self, host: str) -> bool:
        if not self.trusted_proxies:
            return False
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return False
        return any(address in network for network in self.trusted_proxies)


def parse_networks(raw: str) -> tuple[Network, ...]:
    """``HTTP_TRUSTED_PROXIES``: comma-separated addresses or CIDR networks (``10.0.0.0/8``)."""
    networks: list[Network] = []
    for item in raw.split(","):
        item = item.strip()
        if not item:
            continue
        try:
            networks.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise ValueError(
                f"HTTP_TRUSTED_PROXIES must list IP addresses or networks (a.b.c.d or a.b.c.d/n), "
                f"got {item!r}"
            ) from None
    return tuple(networks)


def load_bounds(environ: Mapping[str, str] | None = None) -> Bounds:
    def count(name: str, default: int) -> int:
        return env_int(name, default, minimum=1, environ=environ)

    def seconds(name: str, default: float) -> float:
        return env_duration(name, default, positive=True, finite=True, environ=environ)

    proxies = parse_networks(env_str("HTTP_TRUSTED_PROXIES", environ=environ))
    return Bounds(
        max_header_bytes=count("HTTP_MAX_HEADER_BYTES", Bounds.max_header_bytes),
        max_headers=count("HTTP_MAX_HEADERS", Bounds.max_headers),
        max_url_bytes=count("HTTP_MAX_URL_BYTES", Bounds.max_url_bytes),
        header_timeout=seconds("HTTP_HEADER_TIMEOUT", Bounds.header_timeout),
        body_timeout=seconds("HTTP_BODY_TIMEOUT", Bounds.body_timeout),
        keepalive_timeout=seconds("HTTP_KEEPALIVE_TIMEOUT", Bounds.keepalive_timeout),
        max_connections=count("HTTP_MAX_CONNECTIONS", Bounds.max_connections),
        max_connections_per_client=count(
            "HTTP_MAX_CONNECTIONS_PER_CLIENT", Bounds.max_connections_per_client
        ),
        max_streams_per_client=count("HTTP_MAX_STREAMS_PER_CLIENT", Bounds.max_streams_per_client),
        trusted_proxies=proxies,
        trusted_proxies_raw=",".join(str(n) for n in proxies),
    )
