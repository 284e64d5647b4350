"""Driving the management web UI in a real browser (Playwright with the system's Chromium).

`launch_browser` finds a Chromium (Playwright's own download if `playwright install chromium` ran,
else the distribution's `chromium`) and skips the calling test with the install command when there
is none. `UI` wraps one page: logging in, going to a hash route and waiting until the page has
rendered its data (the app marks `<body data-ready="1" data-page=…>`), filling and submitting the
UI's forms, screenshots to test-artifacts/ui/, and every console error and uncaught exception,
which a test fails on unless it expected it.
"""

from __future__ import annotations

import os
import re
import shutil
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "ui"
INSTALL = (
    "install a browser for the UI tests: `apt-get install -y chromium` (Debian/Ubuntu) and "
    "`.venv/bin/pip install playwright`, or `.venv/bin/playwright install --with-deps chromium`"
)
SYSTEM_CHROMIUM = ("/usr/lib/chromium/chromium", "/usr/bin/chromium", "/usr/bin/chromium-browser")
TIMEOUT_MS = 15_000
SOON_MS = 3_000
JUNK_TEXT = """() => {
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const found = [];
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    if (/^(null|undefined|NaN)+$|\\[object Object\\]/.test(n.data.trim())) found.push(n.data);
  }
  return found;
}"""


def system_chromium() -> str | None:
    """A Chromium the OS installed: $HASHBROKER_CHROMIUM, the Debian binary, or one on PATH."""
    override = os.environ.get("HASHBROKER_CHROMIUM")
    if override:
        return override
    for path in SYSTEM_CHROMIUM:
        if os.access(path, os.X_OK):
            return path
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def launch_browser(stack: ExitStack) -> Any:
    """A running headless Chromium (closed with `stack`), or a pytest skip naming the install."""
    try:
        from playwright.sync_api import Error, sync_playwright
    except ImportError:
        pytest.skip(f"Playwright is not installed: {INSTALL}")
    playwright = stack.enter_context(sync_playwright())
    own = Path(playwright.chromium.executable_path)
    executable = None if own.exists() else system_chromium()
    if not own.exists() and executable is None:
        pytest.skip(f"no Chromium found: {INSTALL}")
    try:
        browser = playwright.chromium.launch(executable_path=executable, headless=True)
    except Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
        pytest.skip(f"Chromium ({executable or own}) does not start: {first}; {INSTALL}")
    stack.callback(browser.close)
    return browser


@dataclass
class UI:
    """One browser page on the management UI, with what it logged."""

    page: Any
    base: str
    errors: list[str] = field(default_factory=list)
    dialogs: list[tuple[str, str]] = field(default_factory=list)
    expected: list[re.Pattern[str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.page.set_default_timeout(TIMEOUT_MS)
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda exc: self.errors.append(f"uncaught: {exc}"))
        self.page.on("dialog", self._dialog)

    def _console(self, message: Any) -> None:
        if message.type == "error":
            self.errors.append(f"console: {message.text} ({message.location.get('url', '')})")

    def _dialog(self, dialog: Any) -> None:
        self.dialogs.append((dialog.type, dialog.message))
        dialog.accept()  # the UI asks to confirm deletes and purges

    def expect_console(self, pattern: str) -> None:
        """A console error the test provokes on purpose (a refused login logs its 401)."""
        self.expected.append(re.compile(pattern))

    def unexpected_errors(self) -> list[str]:
        return [e for e in self.errors if not any(p.search(e) for p in self.expected)]

    # -- navigation ------------------------------------------------------------------------------

    def wait_ready(self, page: str | None = None) -> None:
        """Wait until the page has rendered; text a slip would show ("null", "undefined",
        "[object Object]", "NaN") counts as an error."""
        selector = "body[data-ready='1']" + (f"[data-page='{page}']" if page else "")
        self.page.wait_for_selector(selector, state="attached")
        self.check_text()

    def check_text(self) -> None:
        junk = self.page.evaluate(JUNK_TEXT)
        if junk:
            self.errors.append(f"junk text on {self.page.evaluate('location.hash') or '#/'}: {junk}")

    def open(self) -> None:
        """Load the UI afresh (auto-login as guest happens on a first visit from localhost)."""
        self.page.goto(self.base + "/")
        self.page.wait_for_selector("body[data-ready='1'][data-page]", state="attached")
        self.check_text()

    def login(self, user: str, password: str) -> None:
        self.open()
        current = self.page.evaluate("document.body.dataset.user || ''")
        if current == user:
            return
        if current:
            self.logout()
        self.page.fill("#login-user", user)
        self.page.fill("#login-password", password)
        self.page.click("#login-button")
        self.page.wait_for_selector(f"body[data-ready='1'][data-user='{user}']", state="attached")
        self.check_text()

    def logout(self) -> None:
        self.page.click("#logout")
        self.page.wait_for_selector("#login-form", state="visible")

    def go(self, route: str, page: str | None = None) -> None:
        """Go to `#/route` (segments already percent-encoded) and wait until it has rendered."""
        target = "#/" + route
        if self.page.evaluate("location.hash") == target:
            self.page.reload()
        else:
            self.page.evaluate("h => { document.body.dataset.ready = '0'; location.hash = h; }", target)
        self.wait_ready(page)

    def shows(self, selector: str) -> None:
        """Wait for `selector` to be rendered, within less than the UI's 5 s refresh interval:
        the pages refresh right after an action, not at the next tick."""
        self.page.wait_for_selector(selector, state="attached", timeout=SOON_MS)

    def shot(self, name: str) -> Path:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path

    # -- forms -----------------------------------------------------------------------------------

    def form(self, form_id: str) -> Any:
        return self.page.locator(f"form[data-form='{form_id}']")

    def fill(self, form_id: str, values: dict[str, str]) -> None:
        form = self.form(form_id)
        for name, value in values.items():
            control = form.locator(f"[name='{name}']")
            if control.evaluate("n => n.tagName") == "SELECT":
                control.select_option(value)
            else:
                control.fill(value)

    def args(self, form_id: str, name: str, rows: list[tuple[str, str, str]]) -> None:
        """Fill an arguments editor: (key, value, type) rows; type is string/number/boolean/list."""
        editor = self.form(form_id).locator(f"[data-args='{name}'] .args-rows")
        for i, (key, value, kind) in enumerate(rows):
            row = editor.locator(".arg-row").nth(i)
            row.locator(".arg-key").fill(key)
            row.locator(".arg-value").fill(value)
            row.locator(".arg-type").select_option(kind)

    def submit(self, form_id: str, values: dict[str, str] | None = None) -> tuple[str, str]:
        """Fill, submit and wait for the outcome: ("ok" or "error", the message shown)."""
        form = self.form(form_id)
        if values:
            self.fill(form_id, values)
        result = form.locator(".form-result").first
        result.evaluate("n => { delete n.dataset.result; n.textContent = ''; }")
        form.locator("button[type='submit']").click()
        self.page.wait_for_selector(
            f"form[data-form='{form_id}'] .form-result[data-result]", state="attached"
        )
        return result.get_attribute("data-result") or "", result.inner_text()

    def click_action(self, action: str, within: Any = None) -> tuple[str, str]:
        """Click an action button (data-action=…) and wait for its outcome."""
        scope = within if within is not None else self.page
        holder = scope.locator(f".action-button:has(button[data-action='{action}'])").first
        result = holder.locator(".form-result")
        self.clear_flash()
        holder.locator("button").click()
        # a delete that navigates away detaches the button; the flash line still reports it
        self.page.wait_for_function(
            "() => { const f = document.getElementById('flash'); return f && !f.hidden && f.dataset.kind; }"
        )
        # read in one step: a refresh after the action (an unbind re-lists the bindings) may remove
        # the button's result between two separate reads, and a second read would then wait for it
        outcome = result.evaluate_all(
            "ns => ns.length && ns[0].dataset.result ? [ns[0].dataset.result, ns[0].innerText] : null"
        )
        if outcome:
            return outcome[0], outcome[1]
        flash = self.page.locator("#flash")
        return flash.get_attribute("data-kind") or "", flash.inner_text()

    def clear_flash(self) -> None:
        self.page.evaluate(
            "() => { const f = document.getElementById('flash'); f.hidden = true; f.dataset.kind = ''; }"
        )

    def texts(self, selector: str) -> list[str]:
        return [t.strip() for t in self.page.locator(selector).all_inner_texts()]

    def attrs(self, selector: str, name: str) -> list[str]:
        return self.page.eval_on_selector_all(selector, f"ns => ns.map(n => n.getAttribute('{name}'))")
