from __future__ import annotations

import pytest

from tests.network.fake_neutron import FakeNeutron


@pytest.fixture
def neutron():
    """The fake Neutron on a free port; ``neutron.url`` is its endpoint."""
    fake = FakeNeutron()
    server, url = fake.serve()
    fake.url = url
    yield fake
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="session")
def real_neutron_dir():
    """neutron-up.sh's services dir of a real Neutron 29: OPENKEEL_TEST_NEUTRON_DIR's, or one started once
    for the session from ../shared's recipes (tests/network/shared_neutron.py); skips with the reason
    when there is none."""
    from tests.network.shared_neutron import session_neutron

    yield from session_neutron()
