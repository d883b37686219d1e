"""Loaded by ``tempest run`` in the conformance tier (this directory is put on its PYTHONPATH).

Tempest 47.0.0 sets ``create_default_network = True`` on many compute test classes, and
``BaseV2ComputeTest.skip_checks`` then skips the whole class when Neutron is not available. The
flag only asks dynamic credentials for a network to boot on; OpenKeel boots servers on the
cluster's pod network without Neutron. Here the check runs as if the flag were unset, so those
classes run, or skip for their own reasons. Nothing else in Tempest changes: with Neutron absent
no network is created and Tempest sends no ``networks`` (``none`` from 2.37).

Set OPENKEEL_TEMPEST_NETWORK_SHIM=0 to run Tempest unchanged.
"""

import os


def _install():
    try:
        from tempest.api.compute import base
    except ImportError:  # not Tempest's interpreter: nothing to do
        return
    original = base.BaseV2ComputeTest.skip_checks.__func__

    def skip_checks(cls):
        own = "create_default_network" in cls.__dict__
        saved = cls.__dict__.get("create_default_network")
        cls.create_default_network = False
        try:
            original(cls)
        finally:
            if own:
                cls.create_default_network = saved
            else:
                del cls.create_default_network

    base.BaseV2ComputeTest.skip_checks = classmethod(skip_checks)


if os.environ.get("OPENKEEL_TEMPEST_NETWORK_SHIM", "1") == "1":
    _install()
