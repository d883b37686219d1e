"""A real browser opens a server's console: Debian's chromium, headless, driven by Debian's chromedriver over
the W3C WebDriver protocol (plain HTTP; no client library), loads the URL ``openstack console url show``
prints on a scripts/serve stack, presses noVNC's Connect button (Debian's noVNC 1.3 makes vnc_auto.html its
full client) and sees noVNC connected, the RFB handshake done through the console proxy, and the guest's
screen drawn on its canvas (the built-in cluster's background colour).

Skips with the reason when chromium, chromedriver or noVNC are missing (.ci/run installs them:
``apt-get install -y chromium chromium-driver novnc``).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request

import pytest

from openkeel_compute.consoles import novnc
from tests.consoles.conftest import boot
from tests.scripts.checkout import free_port

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
INSTALL = "apt-get install -y chromium chromium-driver novnc"
# the emulated guest's screen background (emulator/consoles.py)
BACKGROUND = [16, 24, 48, 255]


class WebDriver:
    """The few W3C WebDriver commands the test needs."""

    def __init__(self, url: str) -> None:
        self.url = url
        answer = self._call("POST", "/session", {"capabilities": {"alwaysMatch": {
            "browserName": "chrome", "goog:chromeOptions": {"binary": CHROMIUM, "args": [
                "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1024,768"]}}}})
        self.session = answer["sessionId"]

    def _call(self, method: str, path: str, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as resp:
            return json.loads(resp.read())["value"]

    def go(self, url: str) -> None:
        self._call("POST", f"/session/{self.session}/url", {"url": url})

    def run(self, script: str):
        return self._call("POST", f"/session/{self.session}/execute/sync", {"script": script, "args": []})

    def quit(self) -> None:
        with contextlib.suppress(Exception):
            self._call("DELETE", f"/session/{self.session}")


@pytest.fixture
def browser(tmp_path):
    missing = [name for name, path in (("chromium", CHROMIUM), ("chromedriver", CHROMEDRIVER)) if not path]
    if missing:
        pytest.skip(f"{' and '.join(missing)} not installed ({INSTALL})")
    if novnc.find(None) is None:
        pytest.skip(novnc.missing_message(None))
    port = free_port()
    driver = subprocess.Popen([CHROMEDRIVER, f"--port={port}"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=2):
                    break
            except OSError:
                assert time.monotonic() < deadline, "chromedriver did not answer in 20 s"
                time.sleep(0.2)
        web = WebDriver(f"http://127.0.0.1:{port}")
        try:
            yield web
        finally:
            web.quit()
    finally:
        driver.terminate()
        driver.wait(10)


def console_url_show(stack, server_id: str) -> str:
    """What `openstack console url show` prints for the server (as the demo project's member)."""
    openstack = os.path.join(os.path.dirname(sys.executable), "openstack")
    if not os.path.exists(openstack):
        pytest.skip(f"the openstack client is not installed beside {sys.executable} (the cli extra)")
    env = {**stack.env, "OS_CLIENT_CONFIG_FILE": str(stack.checkout / "var" / "clouds.yaml")}
    done = subprocess.run([openstack, "--os-cloud", "openkeel-demo", "console", "url", "show", "-f", "value",
                           "-c", "url", server_id], capture_output=True, text=True, env=env, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_chromium_shows_the_guests_screen_through_the_console_proxy(stack, browser):
    server_id = boot(stack, "browser")
    url = console_url_show(stack, server_id)
    assert url.startswith(f"http://127.0.0.1:{stack.console_port}/vnc_auto.html?path=")
    browser.go(url)
    deadline = time.monotonic() + 20
    while not browser.run("return !!document.getElementById('noVNC_connect_button')"):
        assert time.monotonic() < deadline, "noVNC's page did not load"
        time.sleep(0.2)
    browser.run("document.getElementById('noVNC_connect_button').click()")
    state = {}
    while True:
        state = browser.run("""
            const canvas = document.querySelector('#noVNC_container canvas');
            let pixel = null;
            if (canvas && canvas.width > 0) {
                pixel = Array.from(canvas.getContext('2d').getImageData(2, 2, 1, 1).data);
            }
            return {connected: document.documentElement.classList.contains('noVNC_connected'),
                    status: document.getElementById('noVNC_status').textContent,
                    width: canvas ? canvas.width : 0, height: canvas ? canvas.height : 0, pixel: pixel};""")
        if state["connected"] and state["pixel"] == BACKGROUND:
            break
        assert time.monotonic() < deadline, f"noVNC did not connect and draw in 20 s: {state}\n{stack.log()[-3000:]}"
        time.sleep(0.3)
    assert state["status"] == "Connected (unencrypted) to openkeel emulated guest"
    assert (state["width"], state["height"]) == (640, 400)
