"""A real Cinder 29 for the tests, from ../shared's recipes (reference/tempest/keystone-up.sh and
cinder-up.sh), started once per test session.

``OPENKEEL_TEST_CINDER_DIR`` names one already running (cinder-up.sh's services dir, with
harness/keystone.env): it is used as it is. Otherwise, when the recipes are there, a throw-away Keystone
(free port) and Cinder (free port, its own MariaDB database and RabbitMQ vhost ``okc_test_cinder_<pid>``,
the ``okc-nfs`` backend only: volumes are sparse files in a bind-mounted folder and their
``connection_info`` is Cinder's real NFS one) are started in a temporary directory, and stopped (database,
vhost and mount gone) when the session ends. Their virtualenvs are kept in ``$OPENKEEL_CACHE`` (default
~/.cache/openkeel): the Keystone harness venv is the one the shared Neutron uses, Cinder's is
``shared-cinder/cinder-venv``; the first session builds them (a few minutes).

When the recipes are absent the tests skip with the reason. When they are there but cannot start (no
MariaDB, RabbitMQ or qemu-img, not root, a failed install…) the tests skip with the reason and the log's
tail, and fail under OPENKEEL_REQUIRE_SHARED=1.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

from tests import shared_recipes
from tests.shared_recipes import RECIPES, free_port

# Keystone's catalog names a compute API none answers at: the controller deletes attachments with a
# service token, so Cinder does not ask the compute API about them
SCRIPT = "cinder-up.sh"


class SharedCinder(shared_recipes.RecipeStack):
    """A Keystone and a Cinder started from the recipes; ``services`` is cinder-up.sh's services dir."""

    script = SCRIPT

    def __init__(self, recipes: Path) -> None:
        super().__init__(recipes, "openkeel-cinder-", {})
        cinder_venv = self.cache / "shared-cinder" / "cinder-venv"
        self.env.update({
            "CINDER_VENV": str(cinder_venv), "CINDER_PORT": str(free_port()),
            "CINDER_DB_NAME": f"okc_test_cinder_{os.getpid()}", "CINDER_BACKENDS": "okc-nfs",
            "CINDER_NFS_DIR": str(self.services / "nfs-export")})
        cinder_venv.parent.mkdir(parents=True, exist_ok=True)


def missing_prerequisite() -> str | None:
    """Why the recipes cannot start here (None when they can be tried)."""
    why = shared_recipes.missing_services()
    if why:
        return why
    if shutil.which("qemu-img") is None:
        return "qemu-img (Debian's qemu-utils) is not installed: Cinder's NFS driver reads each volume with it"
    if os.geteuid() != 0:
        return "not root: the NFS backend bind-mounts its folder"
    return None


def session_cinder() -> Iterator[Path]:
    """The generator behind the session fixture: yields cinder-up.sh's services dir."""
    recipes = RECIPES
    yield from shared_recipes.session("Cinder", SCRIPT, "OPENKEEL_TEST_CINDER_DIR", recipes, missing_prerequisite,
                                      lambda: SharedCinder(recipes))
