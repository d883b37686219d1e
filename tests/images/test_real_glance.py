"""The Glance v2 client against a real Glance 33.0.0 behind a real Keystone.

Both are started by the reference scripts in ../shared/reference/tempest (keystone-up.sh,
glance-up.sh) on free ports, with their state in a temporary directory; their Python environments
are kept in ~/.cache/okc-services (built on first use, about two minutes). Without ../shared these
tests skip (and fail under OPENKEEL_REQUIRE_SHARED=1).
"""

from __future__ import annotations

import os
import pathlib
import shlex
import socket
import subprocess
import types
import urllib.error
import urllib.request
import uuid

import pytest
from keystoneauth1 import session as ks_session
from keystoneauth1.identity import v3

from openkeel_compute.compute.boot_checks import BootRefused, check_boot
from openkeel_compute.images import errors
from tests._shared import shared_path
from tests.images.conftest import make_client
from tests.shared_recipes import locked

CACHE = pathlib.Path(os.environ.get("OKC_SERVICES_CACHE", pathlib.Path.home() / ".cache" / "okc-services"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _read_env(path: pathlib.Path) -> dict[str, str]:
    env = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        line = line.removeprefix("export ")
        for word in shlex.split(line, comments=True):
            key, sep, value = word.partition("=")
            if sep and key.isidentifier():
                env[key] = value
    return env


@pytest.fixture(scope="module")
def real_glance(tmp_path_factory):
    scripts = shared_path("reference/tempest")
    state = tmp_path_factory.mktemp("okc-services")
    env = dict(os.environ, HARNESS_DIR=str(state / "harness"), OKC_SERVICES_DIR=str(state),
               VENV=str(CACHE / "harness" / "venv"), HVENV=str(CACHE / "harness" / "venv"),
               GLANCE_VENV=str(CACHE / "glance-venv"), GLANCE_STORE_DIR=str(state / "store"),
               KS_PORT=str(_free_port()), GLANCE_PORT=str(_free_port()), PYTHONWARNINGS="ignore")
    log = state / "setup.log"

    def run(*argv):
        with log.open("a") as out:
            proc = subprocess.run([str(scripts / argv[0]), *argv[1:]], env=env, stdout=out, stderr=out, timeout=900, check=False)
        if proc.returncode:
            pytest.fail(f"{' '.join(argv)} failed; see {log}:\n" + log.read_text()[-3000:], pytrace=False)

    try:
        with locked(CACHE / ".bring-up.lock"):  # the venvs below ~/.cache/okc-services, built once
            run("keystone-up.sh", "http://127.0.0.1:9/v2.1")
            run("glance-up.sh", "start")
        run("glance-up.sh", "images")
        keystone = _read_env(state / "harness" / "keystone.env")
        images = _read_env(state / "images.env")
        yield types.SimpleNamespace(keystone=keystone, images=images,
                                    glance_url=f"http://127.0.0.1:{env['GLANCE_PORT']}")
    finally:
        subprocess.run([str(scripts / "glance-up.sh"), "stop"], env=env, capture_output=True, timeout=120, check=False)
        subprocess.run([str(scripts / "keystone-up.sh"), "stop"], env=env, capture_output=True, timeout=120, check=False)


def _user(real_glance, who="DEMO"):
    ks = real_glance.keystone
    auth = v3.Password(auth_url=ks["KEYSTONE_URL"], username=ks[f"{who}_USERNAME"], password=ks[f"{who}_PASSWORD"],
                       project_name=ks[f"{who}_PROJECT_NAME"], user_domain_id="default", project_domain_id="default")
    # What keystonemiddleware's auth_token leaves for the request: a plugin with the user's token and catalog.
    return types.SimpleNamespace(auth_token=auth.get_token(ks_session.Session()), environ={"keystone.token_auth": auth})


def test_show_through_the_tokens_catalog(real_glance):
    ctx = _user(real_glance)
    image_id = real_glance.images["IMAGE_REF"]
    image = make_client().show(ctx, image_id)
    assert image["id"] == image_id and image["name"] == "okc-ubuntu-uefi" and image["status"] == "active"
    assert (image["min_ram"], image["min_disk"]) == (512, 1)
    assert image["disk_format"] == real_glance.images["IMAGE_DISK_FORMAT"]
    assert image["size"] == pathlib.Path(real_glance.images["IMAGE_FILE"]).stat().st_size
    props = image["properties"]
    assert props["hw_firmware_type"] == "uefi" and props["hw_disk_bus"] == "virtio"
    assert props["os_distro"] == "ubuntu"
    assert image["is_public"] is True
    # Glance's base properties are never custom properties
    assert not {"status", "owner", "os_hash_value", "virtual_size", "checksum"} & props.keys()


def test_missing_image(real_glance):
    image_id = str(uuid.uuid4())
    with pytest.raises(errors.ImageNotFound) as info:
        make_client().show(_user(real_glance), image_id)
    assert (info.value.code, info.value.explanation) == (400, "Can not find requested image")


def test_a_rejected_token_is_not_authorized(real_glance):
    image_id = real_glance.images["IMAGE_REF"]
    ctx = types.SimpleNamespace(auth_token="not-a-token", environ={})
    with pytest.raises(errors.ImageNotAuthorized) as info:
        make_client(api_servers=[real_glance.glance_url]).show(ctx, image_id)
    assert (info.value.code, str(info.value)) == (400, f"Not authorized for image {image_id}.")


def test_download_url_gives_the_uploaded_bytes(real_glance):
    ctx = _user(real_glance)
    image_id = real_glance.images["IMAGE_REF"]
    url = make_client().download_url(ctx, image_id)
    assert url == f"{real_glance.glance_url}/v2/images/{image_id}/file"
    req = urllib.request.Request(url, headers={"X-Auth-Token": ctx.auth_token})
    with urllib.request.urlopen(req) as resp:
        assert resp.read() == pathlib.Path(real_glance.images["IMAGE_FILE"]).read_bytes()
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(url)
    assert info.value.code == 401


def test_boot_checks_on_a_real_image(real_glance):
    image = make_client().show(_user(real_glance), real_glance.images["IMAGE_REF"])
    row = {"id": 1, "flavorid": "1", "name": "m1.tiny", "memory_mb": 512, "vcpus": 1, "root_gb": 1,
           "ephemeral_gb": 0, "swap": 0, "rxtx_factor": 1.0, "disabled": False, "is_public": True, "extra_specs": {}}
    check_boot(row, image, zero_disk_allowed=lambda: False)
    with pytest.raises(BootRefused) as info:
        check_boot(dict(row, memory_mb=256), image, zero_disk_allowed=lambda: False)
    assert info.value.message == "Flavor's memory is too small for requested image."
