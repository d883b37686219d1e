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
