"""A real Neutron 29 for the tests, from ../shared's recipes (reference/tempest/keystone-up.sh and
neutron-up.sh), started once per test session.

``OPENKEEL_TEST_NEUTRON_DIR`` names one already running (neutron-up.sh's services dir, with
harness/keystone.env and networks.env): it is used as it is. Otherwise, when the recipes are there, a
throw-away Keystone (free port) and Neutron (free port, its own MariaDB database and RabbitMQ vhost
``okc_test_<pid>``) are started in a temporary directory, with the networks ``public`` (external) and
``private`` (shared), and stopped (database and vhost dropped) when the session ends. Their virtualenvs
are kept in ``$OPENKEEL_CACHE/shared-neutron`` (default ~/.cache/openkeel): the first session builds them
(a few minutes), later ones start in about half a minute.

When the recipes are absent the tests skip with the reason. When they are there but cannot start
(no MariaDB or RabbitMQ, a failed install…) the tests skip with the reason and the log's tail, and fail
under OPENKEEL_REQUIRE_SHARED=1.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from tests import shared_recipes
from tests.shared_recipes import RECIPES, free_port

# Keystone's catalog names a compute API none answers at: these tests call Neutron only (its events
# to compute are not awaited)
SCRIPT = "neutron-up.sh"


class SharedNeutron(shared_recipes.RecipeStack):
    """A Keystone and a Neutron started from the recipes; ``services`` is neutron-up.sh's services dir."""

    script = SCRIPT
    steps = (("start",), ("networks",))

    def __init__(self, recipes: Path) -> None:
        cache = shared_recipes.cache_dir() / "shared-neutron"
        super().__init__(recipes, "openkeel-neutron-", {
            "NEUTRON_VENV": str(cache / "neutron-venv"), "NEUTRON_PORT": str(free_port()),
            "NEUTRON_DB_NAME": f"okc_test_{os.getpid()}"})


def missing_prerequisite() -> str | None:
    """Why the recipes cannot start here (None when they can be tried)."""
    return shared_recipes.missing_services()


def session_neutron() -> Iterator[Path]:
    """The generator behind the session fixture: yields neutron-up.sh's services dir."""
    recipes = RECIPES
    yield from shared_recipes.session("Neutron", SCRIPT, "OPENKEEL_TEST_NEUTRON_DIR", recipes,
                                      missing_prerequisite, lambda: SharedNeutron(recipes))
