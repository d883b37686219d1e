"""The image: what the Containerfile's final stage holds, and (opt-in, minutes) a real build and smoke test."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from openkeel_compute import __version__
from tests.deploy.conftest import ROOT

OPT_IN = "OPENKEEL_TEST_IMAGE"


def _stages() -> list[list[str]]:
    """The Containerfile's stages, each a list of instructions (continuation lines joined)."""
    text = re.sub(r"\\\n\s*", " ", (ROOT / "Containerfile").read_text())
    stages: list[list[str]] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.upper().startswith("FROM "):
            stages.append([])
        if stages:
            stages[-1].append(line)
    return stages


def test_final_stage_runs_openkeel_as_a_user_without_build_tools():
    *_, final = _stages()
    instructions = {i.split()[0].upper(): i for i in final}
    assert instructions["USER"] == "USER 10001:10001"
    assert instructions["ENTRYPOINT"] == 'ENTRYPOINT ["openkeel-compute"]'
    runs = " ".join(i for i in final if i.upper().startswith("RUN "))
    installed = set(re.findall(r"--no-install-recommends ([\w .+-]+?)(?:&&|$)", runs)[0].split())
    assert installed == {"python3", "ca-certificates"}
    for tool in ("gcc", "build-essential", "-dev", "python3-venv", "python3-pip", "pip install"):
        assert tool not in runs, tool
    copies = [i for i in final if i.upper().startswith("COPY ")]
    assert copies == ["COPY --from=build /opt/openkeel-compute /opt/openkeel-compute",
                      "COPY --from=build /novnc/usr/share/novnc /usr/share/novnc",
                      "COPY --from=build /novnc/usr/share/doc/novnc /usr/share/doc/novnc"]


def test_novnc_is_where_the_console_proxy_looks_and_comes_without_its_dependencies():
    from openkeel_compute.consoles import novnc

    build, final = _stages()
    runs = " ".join(i for i in build if i.upper().startswith("RUN "))
    # Debian's package unpacked, not installed: its Depends (nodejs, websockify, numpy) stay out.
    assert "apt-get download novnc" in runs and "dpkg-deb -x novnc_" in runs
    assert re.search(r"install -y --no-install-recommends python3 python3-venv +&&", runs)
    target = next(i for i in final if "/novnc/usr/share/novnc" in i).split()[-1]
    assert target == novnc.SEARCHED[0]
    assert any(i.startswith("EXPOSE") and "6080" in i.split() for i in final)


def test_build_stage_installs_from_wheels_only():
    build, _final = _stages()
    runs = " ".join(i for i in build if i.upper().startswith("RUN "))
    assert "--no-index --find-links /wheels openkeel-compute" in runs


@pytest.mark.skipif(os.environ.get(OPT_IN) != "1",
                    reason=f"builds the image with buildah and mmdebstrap (minutes, as root): set {OPT_IN}=1")
def test_image_builds_and_passes_its_smoke_test():
    for tool in ("buildah", "mmdebstrap"):
        if shutil.which(tool) is None:
            pytest.fail(f"{OPT_IN}=1 but {tool} is not installed (apt-get install buildah mmdebstrap crun)")
    env = dict(os.environ)
    env.setdefault("BUILDAH_ISOLATION", "chroot")
    env.setdefault("STORAGE_DRIVER", "vfs")
    done = subprocess.run([str(ROOT / "scripts" / "build-image"), "--debootstrap", "--smoke"], cwd=ROOT, env=env,
                          check=False, capture_output=True, text=True, timeout=3600)
    assert done.returncode == 0, done.stderr[-4000:]
    assert f"openkeel-compute {__version__}" in done.stdout
    assert "smoke test passed" in done.stderr
