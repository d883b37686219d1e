"""Cloud-init through the controller, as the cluster receives it: the user data (decoded from Nova's base64)
and the key pair's public key in Secrets, the hostname, the server's metadata; NoCloud by default,
ConfigDrive when the request asks or [DEFAULT] force_config_drive is set."""

from __future__ import annotations

import base64
import json
import uuid as uuidlib

import pytest

from openkeel_compute.catalog import flavors as catalog
from openkeel_compute.compute.instances import store, updates
from openkeel_compute.controller.kube import make_client
from openkeel_compute.controller.service import server_loop_from
from openkeel_compute.db import api as db_api
from tests.conftest import make_conf
from tests.controller.helpers import IMAGE, OWNER, Both, active, until

SCRIPT = b"#!/bin/sh\necho hello from user data\n"
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGx9 me@laptop"


def boot(engine, **columns) -> str:
    flavorid = f"f-{uuidlib.uuid4().hex[:8]}"
    with db_api.transaction(engine) as conn:
        catalog.create(conn, name=flavorid, memory_mb=512, vcpus=1, root_gb=1, flavorid=flavorid)
        row = store.create(conn, actor=OWNER, flavor=catalog.get(conn, flavorid), extra_specs={},
                           display_name="Web Server.1", image_ref=IMAGE, metadata={"role": "web"},
                           system_metadata={"image_min_disk": "1", "image_disk_format": "qcow2"}, **columns)
        updates.outbox(conn, row["uuid"], "create", OWNER)
    return row["uuid"]


def _secret(apiserver, namespace: str, name: str) -> dict:
    secret = apiserver.get("Secret", name, namespace)
    assert secret is not None, name
    return {k: base64.b64decode(v) for k, v in secret["data"].items()}


@pytest.mark.parametrize(("requested", "forced", "source", "propagation"), [
    (None, False, "cloudInitNoCloud", "noCloud"),
    ("True", False, "cloudInitConfigDrive", "configDrive"),
    (None, True, "cloudInitConfigDrive", "configDrive"),
])
def test_cloud_init_reaches_the_cluster(tmp_path, apiserver, db, ctl, requested, forced, source, propagation):
    conf = make_conf(tmp_path, DEFAULT={"force_config_drive": str(forced)},
                     glance={"api_servers": "http://glance.test:9292"})
    client = make_client(apiserver.kubeconfig())
    try:
        loop = Both(ctl, server_loop_from(conf, db, client))
        uuid = boot(db, user_data=base64.b64encode(SCRIPT).decode(), key_name="mine", key_data=KEY,
                     config_drive=requested)
        row = until(loop, db, uuid, active)
    finally:
        client.close()
    # the server says whether it got a config drive, as Nova's compute records it at build
    assert row["config_drive"] == ("True" if requested or forced else requested)
    namespace = row["namespace"]
    vm = apiserver.get("VirtualMachine", uuid, namespace)
    tspec = vm["spec"]["template"]["spec"]
    (volume,) = [v for v in tspec["volumes"] if v["name"] == "cloudinitdisk"]
    assert volume == {"name": "cloudinitdisk", source: {"secretRef": {"name": f"{uuid}-user-data"}}}
    assert _secret(apiserver, namespace, f"{uuid}-user-data") == {"userdata": SCRIPT}
    assert _secret(apiserver, namespace, f"{uuid}-ssh-key") == {"key": KEY.encode()}
    assert tspec["accessCredentials"] == [{"sshPublicKey": {
        "source": {"secret": {"secretName": f"{uuid}-ssh-key"}}, "propagationMethod": {propagation: {}}}}]
    assert tspec["hostname"] == "web-server-1"
    assert json.loads(vm["metadata"]["annotations"]["openkeel.io/server-metadata"]) == {"role": "web"}
    assert tspec["domain"]["firmware"]["uuid"] == uuid
