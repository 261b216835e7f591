"""The console in a real browser: headless Chromium (Debian's, installed by tests/serve/
chromium.py when missing) driven by Selenium against a real ``awty serve`` on SQLite and
PostgreSQL: log in through the form (and land where the login was asked from), see a job
added through the API, cancel it with its button, and the store agrees. A screenshot of each
page is saved under tests/artifacts/ (or $TEST_ARTIFACTS); the path is printed."""

from __future__ import annotations

import json

import chromium
import pytest
import servekit

WAIT = 15  # seconds: no browser step may hang the suite


@pytest.fixture(scope="module")
def browser():
    try:
        chrome, driver_path = chromium.ensure()
    except chromium.NoBrowser as e:
        pytest.skip(f"BROWSER TESTS NOT RUN: {e}")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = chrome
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,800", "--hide-scrollbars", "--no-first-run",
                "--disable-extensions", "--disable-background-networking"):
        opts.add_argument(arg)
    d = webdriver.Chrome(service=Service(driver_path), options=opts)
    d.set_page_load_timeout(WAIT)
    d.set_script_timeout(WAIT)
    try:
        yield d
    finally:
        d.quit()


def wait(d, check, what):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(d, WAIT, poll_frequency=0.1).until(lambda _: check(), message=what)


def shot(d, name, request):
    path = chromium.artifacts_dir() / f"console-{name}-{request.node.callspec.id}.png"
    d.save_screenshot(str(path))
    print(f"screenshot: {path}")
    return path


@pytest.mark.slow
def test_log_in_see_a_job_cancel_it_and_the_store_agrees(served, browser, rx, request):
    from selenium.webdriver.common.by import By

    d, base = browser, served.url
    d.delete_all_cookies()
    rx.script("/refuse", status=422, body="order 41 was already shipped")
    job = served.call("POST", "/v1/jobs", {"target": rx.url("/ship"), "in": "40m",
                                           "entity": "order", "key": "42",
                                           "payload": {"order": 42}}).body
    # more work across the day (the chart), one that fails (the failures), one schedule
    when = [(h, m) for h in range(1, 23) for m in (0, 15, 30, 45)
            for _ in range((h * 5 + m // 15 * 3) % 7 if h % 4 else 0)]
    served.call("POST", "/v1/jobs/batch", [
        {"target": rx.url("/hooks/invoice"), "in": f"{h}h{m}m", "entity": "invoice",
         "key": str(i)} for i, (h, m) in enumerate(when)])
    failing = served.call("POST", "/v1/jobs", {"target": rx.url("/refuse"), "in": "1h",
                                               "entity": "order", "key": "41"}).body
    assert served.call("POST", f"/v1/jobs/{failing['id']}/run").status == 200
    assert servekit.awty(served.home, "schedule", "add", "nightly-report", rx.url("/report"),
                         "--cron", "0 3 * * *", env=served.env).returncode == 0

    # asked for a job's page: the login form, then that page (the redirect with the cookie)
    d.get(f"{base}/jobs/{job['id']}")
    assert "/login?next=" in d.current_url
    shot(d, "login", request)
    d.find_element(By.ID, "token").send_keys("awty_not_a_token")
    d.find_element(By.ID, "login").click()
    wait(d, lambda: d.find_elements(By.ID, "login-error"), "the login error")
    d.find_element(By.ID, "token").send_keys(served.token)
    d.find_element(By.ID, "login").click()
    wait(d, lambda: d.current_url == f"{base}/jobs/{job['id']}",
         f"the job's page after the login, not {d.current_url}")
    cookie = d.get_cookie("awty_token")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and not cookie["secure"]
    assert d.execute_script("return document.cookie") == ""  # no page script can read it

    # the job added through the API, on the overview and in the list
    d.get(f"{base}/")
    assert d.find_elements(By.CSS_SELECTOR, f"#upcoming a[href='/jobs/{job['id']}']")
    assert d.find_elements(By.CSS_SELECTOR, f"#failures a[href='/jobs/{failing['id']}']")
    assert "already shipped" in d.find_element(By.ID, "failures").text
    assert len(d.find_elements(By.CSS_SELECTOR, "#next-24h rect.bar")) > 10
    assert "nightly-report" in d.find_element(By.ID, "schedules").text
    shot(d, "overview", request)
    d.get(f"{base}/jobs?entity=order")
    assert d.find_elements(By.CSS_SELECTOR, f"tr[data-id='{job['id']}']")
    shot(d, "jobs", request)
    d.get(f"{base}/history?entity=order&outcome=failed&since=1d")
    assert failing["id"] in d.find_element(By.ID, "history").get_attribute("innerHTML")
    shot(d, "history", request)
    d.get(f"{base}/schedules")
    assert "nightly-report" in d.page_source
    shot(d, "schedules", request)
    d.get(f"{base}/jobs/{failing['id']}")
    assert "already shipped" in d.find_element(By.ID, "last-output").text
    assert "422" in d.find_element(By.ID, "executions").text
    shot(d, "failed-job", request)

    # cancel with the button: the store agrees (the API and `awty show`)
    d.get(f"{base}/jobs/{job['id']}")
    shot(d, "job", request)
    d.find_element(By.ID, "cancel").click()
    wait(d, lambda: d.find_elements(By.ID, "done"), "the cancel's confirmation")
    assert "cancelled" in d.find_element(By.TAG_NAME, "h1").text
    shot(d, "cancelled", request)
    shown = served.call("GET", f"/v1/jobs/{job['id']}").body
    assert (shown["state"], shown["outcome"]) == ("ended", "cancelled")
    cli = json.loads(servekit.awty(served.home, "show", job["id"], "--json",
                                   env=served.env).stdout)
    assert (cli["state"], cli["outcome"]) == ("ended", "cancelled")
    assert rx.requests("/ship") == []

    # a phone's width: nothing wider than the screen; dark mode follows the system
    d.set_window_size(390, 844)
    try:
        d.get(f"{base}/")
        assert d.execute_script(
            "return document.documentElement.scrollWidth <= window.innerWidth + 1")
        shot(d, "overview-phone", request)
        d.execute_cdp_cmd("Emulation.setEmulatedMedia", {
            "features": [{"name": "prefers-color-scheme", "value": "dark"}]})
        d.get(f"{base}/jobs/{failing['id']}")
        background = d.execute_script(
            "return getComputedStyle(document.body).backgroundColor")
        assert background == "rgb(14, 17, 22)", background
        shot(d, "failed-job-phone-dark", request)
    finally:
        d.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})
        d.set_window_size(1280, 800)

    # log out: back to the form, the cookie gone
    d.get(f"{base}/")
    d.find_element(By.CSS_SELECTOR, "header form button").click()
    wait(d, lambda: "/login" in d.current_url, "the login form after logging out")
    assert d.get_cookie("awty_token") is None
