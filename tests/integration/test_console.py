"""The console (`/console`) in a real headless Chromium against a real worker: the page shows a
running and a failed connector (the failed task red at a glance), pause and resume act on the
worker, and resetting offsets asks for confirmation first.

Chromium and its driver come from Debian (`make chromium`); without them the tests are skipped.
`EOSCONNECT_CONSOLE_SCREENSHOTS=docs/images` writes the screenshots docs/console.md shows there
(otherwise into the test's temporary directory).
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from eosconnect.tools.worker_process import WorkerProcess
from support.workers import (
    connector_path,
    create_topics,
    delete_connector,
    sequence_config,
    wait_running,
    worker_settings,
)

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

webdriver = pytest.importorskip(
    "selenium.webdriver", reason="selenium is not installed (pip install -e .[test])"
)
from selenium.common.exceptions import (  # noqa: E402
    NoSuchElementException,
    StaleElementReferenceException,
    WebDriverException,
)
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webelement import WebElement  # noqa: E402

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
if CHROMIUM is None or DRIVER is None:
    pytest.skip(
        "Chromium and chromium-driver are not installed (`make chromium`: Debian's chromium "
        "chromium-driver); the console's browser tests need them",
        allow_module_level=True,
    )

RED = ("rgb(207, 34, 46)", "rgba(207, 34, 46, 1)")  # console.css --bad: a FAILED badge's background


@pytest.fixture(scope="module")
def worker(bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerProcess]:
    props = worker_settings(bootstrap, f"console-{uuid.uuid4().hex[:8]}", **{"spark.master": "local[3,2]"})
    process = WorkerProcess(props, tmp_path_factory.mktemp("console") / "w1").start(timeout=300)
    yield process
    process.stop()


@pytest.fixture(scope="module")
def connectors(worker: WorkerProcess, bootstrap: str) -> Iterator[tuple[str, str]]:
    """A running SequenceSource and one whose task fails after a few polls."""
    suffix = uuid.uuid4().hex[:6]
    ok, bad = f"orders-{suffix}", f"payments-{suffix}"
    create_topics(bootstrap, (ok, 1), (bad, 1))
    created = worker.create_connector(ok, {**sequence_config(ok), "connection.password": "s3cr3t-pw"})
    assert created.status_code == 201, created.text
    failing = {
        **sequence_config(bad),
        "connector.class": "support.connectors.FailingSequenceConnector",
        "fail.after.polls": "3",
    }
    assert worker.create_connector(bad, failing).status_code == 201
    wait_running(worker, ok)
    worker.wait_for(lambda: worker.task_states(bad) == ["FAILED"], 120, f"{bad}'s task FAILED")
    yield ok, bad
    for name in (ok, bad):
        delete_connector(worker, name)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1400"):
        options.add_argument(argument)
    try:
        driver = webdriver.Chrome(service=webdriver.ChromeService(executable_path=DRIVER), options=options)
    except WebDriverException as exc:
        pytest.skip(f"Chromium could not be started: {exc.msg}")
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    wanted = os.environ.get("EOSCONNECT_CONSOLE_SCREENSHOTS")
    directory = Path(wanted) if wanted else tmp_path_factory.mktemp("screenshots")
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def until(check: Callable[[], Any], timeout: float, what: str) -> Any:
    """`check()` once truthy; elements not there yet, or replaced by a refresh meanwhile, are looked
    up again."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
            if last:
                return last
        except (StaleElementReferenceException, NoSuchElementException, LookupError, ValueError) as exc:
            last = exc
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


def card(browser: Any, name: str) -> WebElement:
    for element in browser.find_elements(By.CSS_SELECTOR, "#connectors .connector"):
        if element.get_attribute("data-name") == name:
            return element
    raise LookupError(f"no card for {name}")


def shown(browser: Any, name: str, selector: str) -> str:
    """The text of `selector` in `name`'s card."""
    return str(card(browser, name).find_element(By.CSS_SELECTOR, selector).text)


def click(browser: Any, name: str, action: str) -> None:
    def clicked() -> bool:
        card(browser, name).find_element(By.CSS_SELECTOR, f"button[data-action='{action}']").click()
        return True

    until(clicked, 10, f"the {action} button of {name}")


def rest_state(worker: WorkerProcess, name: str) -> str:
    return str(worker.status(name).get("connector", {}).get("state"))


def test_page_shows_the_cluster_and_the_failed_task_in_red(
    worker: WorkerProcess, connectors: tuple[str, str], browser: Any, screenshots: Path
) -> None:
    ok, bad = connectors
    browser.get(worker.url + "/console")
    assert browser.title == "eosconnect console"
    until(lambda: card(browser, ok) and card(browser, bad), 20, "both connectors' cards")
    failed = card(browser, bad)
    assert "failed" in (failed.get_attribute("class") or "").split()
    badge = failed.find_element(By.CSS_SELECTOR, "tr.task-FAILED .badge")
    assert badge.text == "FAILED"
    assert badge.value_of_css_property("background-color") in RED
    assert bad in browser.find_element(By.ID, "failed-alert").text
    running = card(browser, ok)
    assert "failed" not in (running.get_attribute("class") or "").split()
    assert running.find_element(By.CSS_SELECTOR, "[data-role='connector-state']").text == "RUNNING"
    # the worker, as leader, in the cluster table
    workers = browser.find_element(By.ID, "workers").text
    assert worker.url.split("://", 1)[1] in workers and "leader" in workers
    # the secret masked in the config shown, never sent to the page
    assert "s3cr3t-pw" not in browser.page_source
    running.find_element(By.CSS_SELECTOR, "details[data-key^='config:'] summary").click()
    until(lambda: "[hidden]" in card(browser, ok).text, 10, "the masked password")
    # the trace of the failed task, and throughput charted once two samples are taken (10 s apart)
    card(browser, bad).find_element(By.CSS_SELECTOR, "tr.task-FAILED details summary").click()
    until(lambda: "the source went away" in card(browser, bad).text, 10, "the failed task's trace")
    until(
        lambda: card(browser, ok).find_elements(By.CSS_SELECTOR, ".chart polyline"), 45, "a throughput line"
    )
    commits = until(
        lambda: int(shown(browser, ok, "tr[data-task='0'] td:nth-child(7)")),
        30,
        "committed transactions in the task row",
    )
    assert commits > 0
    browser.save_screenshot(str(screenshots / "console-overview.png"))


def test_pause_and_resume_from_the_page(
    worker: WorkerProcess, connectors: tuple[str, str], browser: Any
) -> None:
    ok, _ = connectors
    browser.get(worker.url + "/console")
    click(browser, ok, "pause")
    worker.wait_for(lambda: rest_state(worker, ok) == "PAUSED", 60, f"{ok} PAUSED")
    until(
        lambda: shown(browser, ok, "[data-role='connector-state']") == "PAUSED",
        15,
        "the page showing PAUSED",
    )
    click(browser, ok, "resume")
    worker.wait_for(lambda: rest_state(worker, ok) == "RUNNING", 60, f"{ok} RUNNING again")
    wait_running(worker, ok)


def test_offsets_reset_asks_for_confirmation(
    worker: WorkerProcess, connectors: tuple[str, str], browser: Any, screenshots: Path
) -> None:
    ok, _ = connectors
    browser.get(worker.url + "/console")
    dialog = browser.find_element(By.ID, "confirm")
    click(browser, ok, "stop")
    until(dialog.is_displayed, 5, "the stop confirmation")
    browser.find_element(By.ID, "confirm-ok").click()
    worker.wait_for(lambda: rest_state(worker, ok) == "STOPPED", 90, f"{ok} STOPPED")

    def offsets() -> list[Any]:
        return list(worker.request("GET", connector_path(ok) + "/offsets").json()["offsets"])

    assert offsets(), "a connector that ran has offsets"
    click(browser, ok, "offsets")
    until(lambda: '"partition"' in shown(browser, ok, "[data-role='offsets']"), 15, "the offsets shown")
    click(browser, ok, "reset-offsets")
    until(dialog.is_displayed, 5, "the reset confirmation")
    assert f"Reset the offsets of {ok}" in browser.find_element(By.ID, "confirm-text").text
    browser.save_screenshot(str(screenshots / "console-reset-offsets.png"))
    browser.find_element(By.ID, "confirm-cancel").click()
    until(lambda: not dialog.is_displayed(), 5, "the dialog closed")
    assert offsets(), "cancelled: the offsets stay"
    until(lambda: "cancelled" in card(browser, ok).text, 5, "the cancellation said")

    click(browser, ok, "reset-offsets")
    until(dialog.is_displayed, 5, "the reset confirmation, again")
    browser.find_element(By.ID, "confirm-ok").click()
    worker.wait_for(lambda: offsets() == [], 60, "the offsets reset")
    until(lambda: "offsets reset" in card(browser, ok).text, 15, "the reset reported on the page")
