"""A real headless Chromium for the console tests, driven by selenium.

Debian's ``chromium`` and ``chromium-driver`` (``/usr/bin/chromium``,
``/usr/bin/chromedriver``); nothing is downloaded. :func:`missing` says in
one line what to install when they are not there (``make console-test``
installs them as root). Each browser gets a fresh profile directory.
"""
from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
DRIVER = "/usr/bin/chromedriver"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--window-size=1440,1000", "--force-device-scale-factor=1"]
SHOTS = Path(__file__).resolve().parents[3] / "console-screenshots"


def missing() -> str | None:
    if not (Path(CHROMIUM).exists() and Path(DRIVER).exists()):
        return ("the console tests need Debian's chromium and chromium-driver: "
                "apt-get install -y chromium chromium-driver (make console-test does it as root)")
    return None


class Browser:
    """One Chromium window on the console; ``shot(name)`` saves a PNG."""

    def __init__(self, base_url: str, flags: tuple[str, ...] = ()) -> None:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        self.base_url = base_url.rstrip("/")
        self.profile = tempfile.mkdtemp(prefix="console-chromium-")
        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for flag in FLAGS + list(flags) + [f"--user-data-dir={self.profile}"]:
            options.add_argument(flag)
        self.driver = webdriver.Chrome(service=Service(DRIVER), options=options)
        self.driver.set_page_load_timeout(30)

    def open(self, hash_path: str = "#/overview", poll_ms: int = 500) -> None:
        """The console at ``hash_path``, polling every ``poll_ms`` (the tests need not wait 2 s)."""
        self.driver.get(f"{self.base_url}/console/?poll={poll_ms}{hash_path}")

    def go(self, hash_path: str) -> None:
        self.driver.execute_script("location.hash = arguments[0]", hash_path)

    def wait(self, predicate, timeout: float = 20.0, what: str = "condition"):
        """The first truthy value of ``predicate(driver)`` within ``timeout`` s."""
        deadline = time.monotonic() + timeout
        last_error = None
        while time.monotonic() < deadline:
            try:
                value = predicate(self.driver)
                if value:
                    return value
            except Exception as exc:  # the element is being redrawn: look again
                last_error = exc
            time.sleep(0.1)
        raise AssertionError(f"timed out after {timeout} s waiting for {what} (last error: {last_error}); "
                             f"page text:\n{self.text()[:3000]}")

    def css(self, selector: str):
        from selenium.webdriver.common.by import By

        return self.driver.find_elements(By.CSS_SELECTOR, selector)

    def text(self, selector: str = "body") -> str:
        """The first match's visible text ("" when none). Read in one script
        call: the pages redraw every poll, so element handles go stale."""
        return self.driver.execute_script(
            "const e = document.querySelector(arguments[0]); return e ? e.innerText : ''", selector)

    def texts(self, selector: str) -> list[str]:
        """Every match's visible text, in one script call."""
        return self.driver.execute_script(
            "return [...document.querySelectorAll(arguments[0])].map(e => e.innerText.trim())", selector)

    def rows(self, table: str) -> list[str]:
        """The ``data-row`` keys of a table's rows, in order."""
        return self.driver.execute_script(
            "return [...document.querySelectorAll(arguments[0] + ' tr[data-row]')].map(r => r.dataset.row)", table)

    def row(self, table: str, key: str) -> str:
        """The text of the row whose ``data-row`` is ``key`` ("" when none)."""
        return self.driver.execute_script(
            "const r = [...document.querySelectorAll(arguments[0] + ' tr[data-row]')].find(r => r.dataset.row === arguments[1]);"
            "return r ? r.innerText : ''", table, key)

    def cells(self, table: str, key: str) -> list[str]:
        """The cell texts of the row whose ``data-row`` is ``key``."""
        return self.driver.execute_script(
            "const r = [...document.querySelectorAll(arguments[0] + ' tr[data-row]')].find(r => r.dataset.row === arguments[1]);"
            "return r ? [...r.cells].map(c => c.innerText.trim()) : []", table, key)

    def wait_text(self, selector: str, wanted: str, timeout: float = 20.0) -> str:
        return self.wait(lambda d: wanted in self.text(selector) and self.text(selector), timeout,
                         f"{wanted!r} in {selector}")

    def click(self, selector: str) -> None:
        """Click the first match; pages redraw every few seconds, so a stale
        element is looked up again."""
        def attempt(d):
            found = self.css(selector)
            if not found:
                return False
            found[0].click()
            return True

        self.wait(attempt, what=f"a clickable {selector}")

    def fill(self, selector: str, value: str) -> None:
        field = self.wait(lambda d: self.css(selector), what=selector)[0]
        field.clear()
        field.send_keys(value)

    def select(self, selector: str, value: str) -> None:
        from selenium.webdriver.support.ui import Select

        Select(self.wait(lambda d: self.css(selector), what=selector)[0]).select_by_value(value)

    def confirm(self, **fields: str) -> None:
        """Fill the open confirmation dialog's fields and confirm."""
        self.wait(lambda d: self.css("#confirm-dialog"), what="the confirmation dialog")
        for name, value in fields.items():
            element = self.css(f"#field-{name}")[0]
            if element.tag_name == "select":
                self.select(f"#field-{name}", value)
            else:
                self.fill(f"#field-{name}", value)
        # The answer's toast is the next one: clear any earlier.
        self.driver.execute_script("const t = document.getElementById('toast'); t.hidden = true; t.textContent = '';")
        self.click("#dialog-confirm")
        self.wait(lambda d: not self.css("#confirm-dialog"), what="the dialog to close")

    def toast(self, timeout: float = 20.0) -> str:
        return self.wait(lambda d: self.css("#toast:not([hidden])") and self.text("#toast"), timeout, "a toast")

    def shot(self, name: str, full: bool = True) -> Path:
        """A PNG of the window (``full``: as tall as the page, up to 2,400 px)."""
        SHOTS.mkdir(exist_ok=True)
        path = SHOTS / f"{name}.png"
        self.driver.execute_script("window.scrollTo(0, 0)")
        if full:
            height = self.driver.execute_script("return document.documentElement.scrollHeight")
            self.driver.set_window_size(1440, min(max(int(height) + 140, 900), 2400))
        try:
            self.driver.save_screenshot(str(path))
        finally:
            if full:
                self.driver.set_window_size(1440, 1000)
        return path

    def close(self) -> None:
        try:
            self.driver.quit()
        finally:
            shutil.rmtree(self.profile, ignore_errors=True)
