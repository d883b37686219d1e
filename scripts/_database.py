"""scripts/serve's database step: the schema brought to head, and devstack's flavors in a new database.

Arguments: the --config-file options scripts/serve gives the API and the controller (its embedded
defaults first). It says which database it uses, as ``openkeel-compute db sync`` does, and brings
the schema to head. The flavors a devstack user expects (``DEVSTACK_FLAVORS``) are written when both
hold:

- this start created the schema: the database had none (a new SQLite file, or an empty database);
- the database is the embedded defaults' own: the one ``etc/openkeel-compute-serve.conf`` alone
  names (``./var/openkeel.sqlite``). A --config-file that points ``[database] connection`` or
  ``[DEFAULT] state_path`` elsewhere gets no flavors; one that changes anything else does.

So they are written once per database: a flavor an operator deleted never comes back, and an
existing database is never touched. Between the schema's creation and the last flavor written,
``$state_path/serve-flavors.pending`` says the seeding is not done: a start interrupted there
writes the missing ones at the next start. Each is written as the API writes a flavor (one transaction with
its outbox row), so the controller makes its KubeVirt objects as for any other. Exit status 0, or 1
with one ``error:`` line.
"""

from __future__ import annotations

import os
import sys

from openkeel_compute.cmd.common import database_url, open_database, operator_message, validate_values
from openkeel_compute.conf import build_conf

# devstack's lib/nova create_flavors: id, name, RAM (MiB), vCPUs, root disk (GiB); public, with
# hw_rng:allowed (a random number generator for the guest: KubeVirt's preferredRng).
DEVSTACK_FLAVORS = (
    ("1", "m1.tiny", 512, 1, 1),
    ("2", "m1.small", 2048, 1, 20),
    ("3", "m1.medium", 4096, 2, 40),
    ("4", "m1.large", 8192, 4, 80),
    ("5", "m1.xlarge", 16384, 8, 160),
)
EXTRA_SPECS = {"hw_rng:allowed": "True"}
DEFAULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "etc", "openkeel-compute-serve.conf")


def _where(conf) -> str:
    """The database URL with a SQLite path made absolute (./var is relative to the working directory)."""
    from sqlalchemy.engine import make_url

    url = make_url(database_url(conf))
    if url.get_backend_name() == "sqlite" and url.database and url.database != ":memory:":
        url = url.set(database=os.path.realpath(url.database))
    return url.render_as_string(hide_password=False)


def seed(engine) -> list[str]:
    """Write the DEVSTACK_FLAVORS that are not there yet (an interrupted seeding wrote some); their names."""
    from openkeel_compute.catalog import errors
    from openkeel_compute.catalog import flavors as catalog
    from openkeel_compute.db import api as db_api

    for flavorid, name, ram, vcpus, disk in DEVSTACK_FLAVORS:
        try:
            with db_api.transaction(engine) as conn:
                flavor = catalog.create(conn, name=name, memory_mb=ram, vcpus=vcpus, root_gb=disk,
                                        flavorid=flavorid, is_public=True)
                catalog.set_extra_specs(conn, flavor, EXTRA_SPECS)
        except (errors.FlavorIdExists, errors.FlavorExists):
            continue
    return [name for _, name, *_ in DEVSTACK_FLAVORS]


def main(argv: list[str]) -> int:
    from openkeel_compute.db import migration

    conf = build_conf(argv)
    validate_values(conf)
    pending = os.path.join(conf.state_path, "serve-flavors.pending")
    default = _where(conf) == _where(build_conf(["--config-file", DEFAULTS]))
    engine = open_database(conf, create=True)
    if migration.current(engine) is None and default:
        with open(pending, "w", encoding="utf-8") as marker:
            marker.write("devstack's flavors are still to be written into the new database\n")
    elif migration.current(engine) is None:
        print("serve: a new database, not the embedded defaults' own: no flavors written", file=sys.stderr)
    migration.sync(engine)
    if not os.path.exists(pending):
        return 0
    names = seed(engine)
    os.remove(pending)
    print(f"serve: a new database: flavors {', '.join(names)} written (devstack's, public; ids 1 to 5)",
          file=sys.stderr)
    return 0


def run(argv: list[str]) -> int:
    try:
        return main(argv)
    except KeyboardInterrupt:  # Ctrl-C reaches the terminal's whole group: scripts/serve stops as well
        return 130
    except Exception as exc:  # one line for what the operator has to fix; a bug keeps its traceback
        message = operator_message(exc)
        if message is None:
            raise
        print(f"error: {message}", file=sys.stderr)
        return 1
    finally:
        from openkeel_compute.db import api as db_api

        db_api.dispose_all()


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
