"""scripts/serve and scripts/_bootstrap.sh as a user meets them: help, argument errors, the first install."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import pytest

from tests.scripts.checkout import ROOT, VENV, clean_env, make_checkout


def _serve(checkout, *args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run([str(checkout / "scripts/serve"), *args], check=False, cwd=checkout,
                          env=clean_env(checkout), capture_output=True, text=True, timeout=timeout)


def _options(help_text: str) -> set[str]:
    return set(re.findall(r"^\s+(--[a-z-]+)", help_text, re.MULTILINE))


def test_help_shows_every_option_without_touching_the_database(tmp_path):
    checkout = make_checkout(tmp_path / "co")
    got = _serve(checkout, "--help")
    assert got.returncode == 0, got.stderr
    assert got.stdout.startswith("usage: scripts/serve")
    shown = _options(got.stdout)
    # its own: a port option for every service it starts besides the API
    assert {"--image-port", "--placement-port", "--emulator-port", "--metrics-port"} <= shown, shown
    # every option of the API it passes on, and nothing it would not accept
    api = subprocess.run([str(VENV / "bin/openkeel-compute"), "serve", "--help"], check=True, capture_output=True,
                         text=True, timeout=60).stdout
    assert _options(api) - {"--help"} <= shown, _options(api) - shown
    assert "database:" not in got.stderr and "alembic" not in got.stderr  # no db sync ran
    assert not (checkout / "var").exists()


def test_an_unknown_option_or_a_bad_port_is_one_error_line(tmp_path):
    checkout = make_checkout(tmp_path / "co")
    for args, said in ((["--kubeconfig", "x"], "unrecognized arguments: --kubeconfig x"),
                       (["--image-port", "70000"], "argument --image-port: 70000 is not a TCP port number (0-65535)"),
                       (["--port", "0"], "argument --port: 0 is not a TCP port number (1-65535)")):
        got = _serve(checkout, *args)
        assert (got.returncode, got.stdout) == (2, "")
        assert got.stderr.splitlines() == [f"error: {said} (see scripts/serve --help)"]
    assert not (checkout / "var").exists()


@pytest.mark.parametrize("args", [["--config-file"], ["--port", "9000", "--config-file"], ["--config-file="],
                                  ["--config-file", "--port", "9000"]])
def test_config_file_without_a_value_is_one_error_line(tmp_path, args):
    checkout = make_checkout(tmp_path / "co")
    got = _serve(checkout, *args)
    assert (got.returncode, got.stdout) == (2, "")
    assert got.stderr.splitlines() == ["error: --config-file needs a value: the path of a configuration file"]
    assert not (checkout / "var").exists()


@pytest.mark.parametrize(("text", "said"), [
    (None, "error: configuration file not found: {conf} (check --config-file)"),
    ("[controller]\nemulator_port = 99999\n",
     "error: [controller] emulator_port in {conf}: Should be less than or equal to 65535"),
    ("[api]\nauth_strategy = bogus\n", "error: [api] auth_strategy in {conf}: Valid values are [keystone, noauth2]"),
])
def test_a_bad_configuration_file_is_one_error_line(tmp_path, text, said):
    checkout = make_checkout(tmp_path / "co")
    conf = tmp_path / "mine.conf"
    if text is not None:
        conf.write_text(text)
    got = _serve(checkout, "--config-file", str(conf), "--image-port", "0")
    assert got.returncode == 1 and "Traceback" not in got.stderr, got.stderr
    assert got.stderr.splitlines()[-1].startswith(said.format(conf=conf)), got.stderr
    assert not (checkout / "var/clouds.yaml").exists()


def test_the_first_install_shows_its_progress(tmp_path):
    """A fresh checkout of a tiny project installed through the real _bootstrap.sh: every step is said."""
    project = tmp_path / "fresh"
    (project / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts/_bootstrap.sh", project / "scripts/_bootstrap.sh")
    (project / "src/openkeel_compute").mkdir(parents=True)
    (project / "src/openkeel_compute/__init__.py").write_text("")
    (project / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=68"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "openkeel-compute"\nversion = "0.0.1"\n'
        '[project.optional-dependencies]\ncli = []\n'
        '[tool.setuptools.packages.find]\nwhere = ["src"]\n')
    env = dict(clean_env(tmp_path), PYTHON=shutil.which("python3") or sys.executable)
    script = 'source scripts/_bootstrap.sh && bootstrap cli'
    first = subprocess.run(["bash", "-c", script], check=False, cwd=project, env=env, capture_output=True,
                           text=True, timeout=600)
    assert first.returncode == 0, first.stderr
    said = [line for line in first.stderr.splitlines() if line.startswith("bootstrap: ")]
    assert said == [
        f"bootstrap: creating the virtual environment {project}/.venv (first run; about a minute in all)",
        "bootstrap: upgrading pip",
        f"bootstrap: installing openkeel-compute[cli] and its dependencies into {project}/.venv",
        "bootstrap: compiling bytecode",
        "bootstrap: installed",
    ]
    assert "Successfully installed openkeel-compute-0.0.1" in first.stderr  # pip's own progress is shown
    # the checkout's bytecode, plain and -OO (multi-worker API), whatever PYTHONDONTWRITEBYTECODE says
    cached = sorted(p.name for p in (project / "src/openkeel_compute/__pycache__").iterdir())
    assert [name.split(".", 1)[1] for name in cached] == [f"{sys.implementation.cache_tag}.opt-2.pyc",
                                                           f"{sys.implementation.cache_tag}.pyc"]
    again = subprocess.run(["bash", "-c", script], check=False, cwd=project, env=env, capture_output=True,
                           text=True, timeout=120)
    assert (again.returncode, again.stderr) == (0, "")  # installed: nothing to do, nothing said


def _clouds(tmp_path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "scripts/_clouds_yaml.py"), str(tmp_path / "var/clouds.yaml"),
                           "--config-file", str(ROOT / "etc/openkeel-compute-serve.conf"), *args], check=False,
                          cwd=tmp_path, env=clean_env(tmp_path), capture_output=True, text=True, timeout=60)


def test_clouds_yaml_points_at_the_port_and_host_serve_uses(tmp_path):
    import yaml

    got = _clouds(tmp_path, "--port", "9000", "--host", "0.0.0.0")
    assert got.returncode == 0, got.stderr
    clouds = yaml.safe_load((tmp_path / "var/clouds.yaml").read_text())["clouds"]
    assert set(clouds) == {"openkeel", "openkeel-demo"}
    admin = clouds["openkeel"]
    # the client authenticates at the noauth2 identity answer and takes every endpoint from its catalog
    assert admin["auth_type"] == "token"
    assert admin["auth"] == {"token": "admin:admin", "auth_url": "http://127.0.0.1:9000/identity/v3",
                             "project_id": "admin"}
    assert not [key for key in admin if key.endswith("_endpoint_override")]
    assert clouds["openkeel-demo"]["auth"] == {"token": "demo:demo", "auth_url": "http://127.0.0.1:9000/identity/v3",
                                               "project_id": "demo"}

    conf = tmp_path / "port.conf"
    conf.write_text("[wsgi]\nport = 9100\n")
    assert _clouds(tmp_path, "--config-file", str(conf)).returncode == 0
    admin = yaml.safe_load((tmp_path / "var/clouds.yaml").read_text())["clouds"]["openkeel"]
    assert admin["auth"]["auth_url"] == "http://127.0.0.1:9100/identity/v3"


def test_no_clouds_yaml_with_keystone_authentication(tmp_path):
    assert _clouds(tmp_path).returncode == 0 and (tmp_path / "var/clouds.yaml").exists()
    conf = tmp_path / "keystone.conf"
    conf.write_text("[api]\nauth_strategy = keystone\n")
    got = _clouds(tmp_path, "--config-file", str(conf))
    assert got.returncode == 0 and not (tmp_path / "var/clouds.yaml").exists()  # a stale one is removed
    assert "auth_strategy is keystone" in got.stderr
