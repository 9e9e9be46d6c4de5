"""Headless Chromium for the playground's tests (tests/browser/): finding (or installing) the
browser and its driver, starting it under Selenium, and a spy on the page's fetch calls.

Chromium and chromedriver come from the distribution (`apt-get install chromium
chromium-driver`, what scripts/system_packages.sh installs); `VOMLX_CHROMIUM` and
`VOMLX_CHROMEDRIVER` name others. When they are missing and this runs as root with apt, the
packages are installed once; when that cannot be done, `NotInstalled` says why and the tests
skip with it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
PACKAGES = ("chromium", "chromium-driver")
INSTALL_TIMEOUT = 600.0
WINDOW = (1280, 860)


class NotInstalled(Exception):
    """Chromium or its driver is not here and could not be installed; the message says why."""


@dataclass(frozen=True)
class Chromium:
    binary: str
    driver: str


def find_chromium() -> Chromium | None:
    found = [path for path in map(shutil.which, BROWSERS) if path]
    binary = os.environ.get("VOMLX_CHROMIUM") or (found[0] if found else None)
    driver = os.environ.get("VOMLX_CHROMEDRIVER") or shutil.which("chromedriver")
    return Chromium(binary, driver) if binary and driver else None


def ensure_chromium() -> Chromium:
    """The installed Chromium and chromedriver, installing Debian's packages when it may."""
    for name in ("VOMLX_CHROMIUM", "VOMLX_CHROMEDRIVER"):
        path = os.environ.get(name)
        if path and not os.access(path, os.X_OK):
            raise NotInstalled(f"{name}={path} is not an executable")
    found = find_chromium()
    if found is not None:
        return found
    if not (sys.platform.startswith("linux") and os.geteuid() == 0 and shutil.which("apt-get")):
        raise NotInstalled(
            "chromium and chromedriver are not installed (as root: apt-get install chromium "
            "chromium-driver; or set VOMLX_CHROMIUM and VOMLX_CHROMEDRIVER)"
        )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *PACKAGES]
    try:
        for command in (["apt-get", "update", "-qq"], install):
            subprocess.run(
                command, env=env, check=True, capture_output=True, timeout=INSTALL_TIMEOUT
            )
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        output = (getattr(exc, "stderr", None) or b"")[-500:].decode(errors="replace")
        raise NotInstalled(
            f"apt-get could not install {' '.join(PACKAGES)}: {exc} {output}"
        ) from None
    found = find_chromium()
    if found is None:
        raise NotInstalled(
            f"{' '.join(PACKAGES)} installed, yet no chromium + chromedriver on PATH"
        )
    return found


def start_chromium(chromium: Chromium, fake_microphone: Path | None = None) -> Any:
    """A headless Chromium under Selenium; `fake_microphone` (a WAV) is what getUserMedia hears."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium.binary
    for arg in (
        "--headless=new",
        "--no-sandbox",  # root in a container has no user namespace for the sandbox
        "--disable-dev-shm-usage",
        "--disable-gpu",
        f"--window-size={WINDOW[0]},{WINDOW[1]}",
        "--use-fake-ui-for-media-stream",  # grant the microphone without a prompt
        "--use-fake-device-for-media-stream",
        "--autoplay-policy=no-user-gesture-required",
    ):
        options.add_argument(arg)
    if fake_microphone is not None:
        options.add_argument(f"--use-file-for-fake-audio-capture={fake_microphone}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(chromium.driver), options=options)
    driver.set_script_timeout(30)
    # Runs before the page's own scripts on every navigation.
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": FETCH_SPY})
    return driver


# Records every fetch the page makes: method, path, JSON body or uploaded file (base64), and
# the response's status and content type (and an MP4 response's bytes, base64). `window.__modelsPatch`, when a test sets it (in
# sessionStorage, before the page loads), is merged into GET v1/models' entries by id.
FETCH_SPY = r"""
(() => {
  const original = window.fetch.bind(window);
  window.__requests = [];
  const base64 = async (blob) => {
    const bytes = new Uint8Array(await blob.arrayBuffer());
    let text = "";
    for (let i = 0; i < bytes.length; i += 0x8000) {
      text += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
    }
    return btoa(text);
  };
  window.fetch = async (input, init = {}) => {
    const url = new URL(typeof input === "string" ? input : input.url, location.href);
    const record = { method: init.method || "GET", path: url.pathname, done: false };
    window.__requests.push(record);
    if (typeof init.body === "string") record.json = JSON.parse(init.body);
    if (init.body instanceof FormData) {
      record.form = {};
      for (const [key, value] of init.body.entries()) {
        record.form[key] = value instanceof Blob ? { name: value.name, base64: await base64(value) } : value;
      }
    }
    let response = await original(input, init);
    record.status = response.status;
    record.contentType = response.headers.get("content-type");
    if (record.contentType === "video/mp4") record.base64 = await base64(await response.clone().blob());
    const patch = JSON.parse(sessionStorage.getItem("test-models-patch") || "null");
    if (patch && url.pathname.endsWith("/v1/models") && response.ok) {
      const body = await response.json();
      for (const model of body.data) Object.assign(model, patch[model.id] || {});
      response = new Response(JSON.stringify(body), { status: 200, headers: response.headers });
    }
    record.done = true;
    return response;
  };
})();
"""


class Playground:
    """The playground page in `driver`, served by `url`: open it, wait on it, read what it
    fetched."""

    def __init__(self, driver: Any, url: str, timeout: float = 30.0):
        self.driver, self.url, self.timeout = driver, url, timeout

    def open(self, key: str | None, models_patch: dict[str, Any] | None = None) -> None:
        """A fresh page with `key` in sessionStorage (None: none, so the page asks for it);
        `models_patch` is merged into GET /v1/models' entries by id (FETCH_SPY)."""
        self.driver.get(f"{self.url}/health")  # the origin, to set its sessionStorage
        self.driver.execute_script(
            "sessionStorage.clear();"
            "if (arguments[0]) sessionStorage.setItem('vomlx-api-key', arguments[0]);"
            "if (arguments[1]) sessionStorage.setItem('test-models-patch', JSON.stringify(arguments[1]));",
            key,
            models_patch,
        )
        self.driver.get(f"{self.url}/")
        self.driver.get_log("browser")  # start each page with an empty console
        if key is not None:
            self.wait("return document.body.dataset.ready === 'true'")

    def wait(self, script: str, *args: Any, timeout: float | None = None) -> Any:
        """Polls `script` (a function body) until it returns something truthy; returns it."""
        from selenium.webdriver.support.ui import WebDriverWait

        return WebDriverWait(self.driver, timeout or self.timeout, poll_frequency=0.05).until(
            lambda d: d.execute_script(script, *args),
            message=f"timed out waiting for: {script}",
        )

    def js(self, script: str, *args: Any) -> Any:
        return self.driver.execute_script(script, *args)

    def find(self, css: str) -> Any:
        from selenium.webdriver.common.by import By

        return self.driver.find_element(By.CSS_SELECTOR, css)

    def text(self, css: str) -> str:
        """textContent (what Selenium's .text leaves out when it is hidden, e.g. a closed
        <details>)."""
        return self.js("return document.querySelector(arguments[0]).textContent", css)

    def requests(self, path: str | None = None, method: str | None = None) -> list[dict]:
        """The page's fetch calls (FETCH_SPY), optionally those to `path` with `method`."""
        calls = self.js("return window.__requests") or []
        return [
            c
            for c in calls
            if (path is None or c["path"] == path) and (method is None or c["method"] == method)
        ]

    def script_errors(self) -> list[str]:
        """Uncaught exceptions and console errors the page's scripts logged (failed HTTP
        requests, which the page reports itself, are left out)."""
        return [
            entry["message"]
            for entry in self.driver.get_log("browser")
            if entry["level"] == "SEVERE" and entry.get("source") != "network"
        ]
