"""Fixtures for the scale-out tests: a database and a Redis prefix per module, and a cluster factory.

Every module boots its own cluster once (module scope) and its tests share it, each on event names
and groups of its own; booting Keel processes is the expensive part, and the suite has to stay
well under a minute on two cores.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.scale.cluster import Cluster
from tests.scale.scale_root import scale_root
from tests.scale.services import scale_database, scale_redis

CLAIM_IDLE_MS = 600
MAX_ATTEMPTS = 3
LEASE_SECONDS = 1.5


@dataclass(frozen=True)
class ScaleServices:
    database_url: str
    redis_url: str
    prefix: str


@pytest.fixture(scope="module")
def scale_services() -> Iterator[ScaleServices]:
    with scale_database() as database_url, scale_redis() as (redis_url, prefix):
        yield ScaleServices(database_url, redis_url, prefix)


def build_cluster(directory: Path, services: ScaleServices) -> Cluster:
    """A cluster (not started) on a fresh root, configured to share ``services``."""
    root = scale_root(directory)
    settings = {
        "DATABASE_URL": services.database_url,
        "STORE_URL": services.redis_url,
        "STORE_KEY_PREFIX": f"{services.prefix}store:",
        "EVENT_BUS_URL": services.redis_url,
        "EVENT_BUS_PREFIX": f"{services.prefix}events:",
        "EVENT_BUS_CLAIM_IDLE_MS": str(CLAIM_IDLE_MS),
        "EVENT_BUS_RETRY_BACKOFF_MS": "20",
        "EVENT_BUS_MAX_ATTEMPTS": str(MAX_ATTEMPTS),
        "AGENT_RUN_LEASE_SECONDS": str(LEASE_SECONDS),
        "AGENTS_EVENTS_POLL_SECONDS": "0.2",
        "SCALE_GATE": str(directory / "slow.gate"),
        "AGENT_GATE": str(directory / "agent.gate"),
    }
    return Cluster(root, Cluster.environment(settings))


@pytest.fixture(scope="module")
def cluster_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("scale")
