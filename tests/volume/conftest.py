from __future__ import annotations

import pytest

from tests.volume.fake_cinder import FakeCinder


@pytest.fixture
def cinder():
    """The fake Cinder on a free port; ``cinder.url`` is its v3 endpoint (no project in the path)."""
    fake = FakeCinder()
    server, url = fake.serve()
    fake.url = url
    yield fake
    server.shutdown()
    server.server_close()
