"""The dashboard at ``GET /`` of a real ``memstrata serve``, loaded in a real headless Chromium.

Chromium and its driver come from the OS packages (Debian ``chromium`` and
``chromium-driver``; ``.ci/run`` installs them when missing) and are driven with
selenium, which is told exactly which binaries to use so nothing is downloaded.
The screenshot is kept as a test artifact: ``test-artifacts/dashboard.png`` in
the repository (or ``$MEMSTRATA_TEST_ARTIFACTS``).
"""

import os
import re
import shutil
import time
from pathlib import Path

import anthropic
import httpx
import openai
import pytest

from memstrata.storage import Store, ledger
from memstrata.storage.ledger import LedgerEntry
from tests.stub_provider import ServerThread, StubUpstream

from .serve_helpers import REPO, Serve, cli_env, copy_project

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
ARTIFACTS = Path(os.environ.get("MEMSTRATA_TEST_ARTIFACTS", REPO / "test-artifacts"))


def browser():
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install -e '.[dev]')")
    from selenium.webdriver.chrome.service import Service

    if not CHROMIUM or not CHROMEDRIVER:
        pytest.skip("headless Chromium is not installed (Debian: apt-get install chromium chromium-driver; "
                    ".ci/run does it)")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1400,1300", "--no-first-run", "--disable-extensions"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


@pytest.fixture(scope="module")
def upstream():
    stub = StubUpstream(record=False, answer="Use AuthService.login: it calls hash_password.", prompt_cache=True)
    with ServerThread(stub.app) as server:
        yield server.url


@pytest.fixture
def serve(tmp_path, memstrata_home, upstream):
    project = copy_project(tmp_path / "shop")
    with Serve(project, cli_env(memstrata_home), "--openai-upstream", upstream + "/v1", "--anthropic-upstream",
               upstream, "--compress", "aggressive", "--min-tokens", "50", "--no-watch") as s:
        s.project = project
        yield s


def traffic(serve, n_openai: int = 3, n_anthropic: int = 2) -> None:
    project = serve.project
    code = (project / "app/auth/service.py").read_text() + "\n" + (project / "app/reports.py").read_text()
    client = openai.OpenAI(base_url=serve.url + "/v1", api_key="k", max_retries=0)
    for _ in range(n_openai):
        client.chat.completions.create(model="gpt-4o", messages=[
            {"role": "user", "content": f"```python\n{code}\n```\nWhat does AuthService.logout do?"}])
    aclient = anthropic.Anthropic(base_url=serve.url + "/anthropic", api_key="k", max_retries=0)
    notes = " ".join(f"note{i}" for i in range(6000))
    for i in range(n_anthropic):
        aclient.messages.create(model="claude-sonnet-4-6", max_tokens=50, messages=[{"role": "user", "content": [
            {"type": "text", "text": notes, "cache_control": {"type": "ephemeral"}},
            {"type": "text", "text": f"```python\n{code}\n```\nquestion {i}: where does AuthService.login "
                                     f"check the password?"}]}])


def wait_for(driver, condition, timeout=30, message="the page"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = driver.execute_script(condition)
        if value:
            return value
        time.sleep(0.1)
    pytest.fail(f"timed out waiting for {message}")


SNAPSHOT = """
const out = {fields: {}, tables: {}};
for (const el of document.querySelectorAll("[id]")) {
  if (el.dataset.value !== undefined) out.fields[el.id] = {value: el.dataset.value, text: el.textContent};
}
out.fields["idx-languages"] = {text: document.getElementById("idx-languages").textContent};
for (const id of ["recent", "top-files"]) {
  out.tables[id] = [...document.querySelectorAll("#" + id + " tbody tr")].map(
      (tr) => [...tr.querySelectorAll("td")].map((td) => td.textContent));
}
out.bars = document.querySelectorAll("#chart rect").length;
out.legend = document.getElementById("legend").textContent;
out.loaded = document.body.dataset.loaded;
return out;
"""


def snapshot(driver) -> dict:
    """Everything the page shows, read in one script run (the page redraws every 2 s)."""
    return driver.execute_script(SNAPSHOT)


def number(text: str) -> int:
    return int(re.sub(r"[^\d]", "", text.split()[0]))


def test_dashboard_shows_what_status_says(serve):
    traffic(serve)
    driver = browser()
    try:
        driver.get(serve.url + "/")
        wait_for(driver, "return Number(document.body.dataset.loaded || 0) >= 1", message="the first refresh")
        # /status now, with no traffic in between: the page must show the same figures
        driver.execute_script("window.__before = document.body.dataset.loaded")
        wait_for(driver, "return document.body.dataset.loaded !== window.__before", message="a second refresh")
        page = snapshot(driver)
        st = serve.status()
        s, c = st["session"], st["cycle"]
        f = page["fields"]

        def shows(element_id: str, expected) -> None:
            assert int(f[element_id]["value"]) == number(f[element_id]["text"]) == expected, element_id

        assert f["idx-status"]["value"] == st["status"] == "ready"
        shows("idx-files", st["files_indexed"])
        shows("idx-symbols", st["symbols"])
        assert "python 10" in f["idx-languages"]["text"]
        assert f["idx-last"]["value"] == st["last_indexed"]
        shows("s-tokens-saved", s["tokens_saved"])
        assert s["tokens_saved"] > 0
        shows("s-requests", s["requests"])
        assert s["requests"] == 5
        shows("s-compressed", s["compressed_requests"])
        shows("s-cache-read", s["cache_read_tokens"])
        assert s["cache_read_tokens"] > 0
        assert float(f["s-dollar-saved"]["value"]) == pytest.approx(s["dollar_saved"])
        assert float(f["s-cache-miss"]["value"]) == pytest.approx(s["cache_miss_dollars"])
        # both bills: what the prompts would have cost sent unmodified, and what they cost
        assert float(f["s-bill-direct"]["value"]) == pytest.approx(s["bill_direct"])
        assert float(f["s-bill-proxied"]["value"]) == pytest.approx(s["bill_proxied"])
        assert s["bill_direct"] > s["bill_proxied"] > 0
        assert s["dollar_saved"] == pytest.approx(s["bill_direct"] - s["bill_proxied"], abs=1e-5)
        assert float(f["c-bill-direct"]["value"]) == pytest.approx(c["bill_direct"])
        shows("c-tokens-saved", c["tokens_saved"])
        shows("c-requests", c["requests"])
        assert float(f["c-dollar-saved"]["value"]) == pytest.approx(c["dollar_saved"])
        assert st["savings"]["session_tokens_saved"] == s["tokens_saved"]
        # the last requests, newest first, and the files sent most often
        rows = page["tables"]["recent"]
        assert [r[1] for r in rows] == ["claude-sonnet-4-6"] * 2 + ["gpt-4o"] * 3
        assert all(r[5] == "200" for r in rows)
        assert all(number(r[2]) > number(r[3]) for r in rows), rows  # tokens before > after: compressed
        assert number(rows[0][4]) > 0  # the provider's cache hit on the repeated prefix
        assert "app/auth/service.py" in [r[0] for r in page["tables"]["top-files"]]
        # the chart: today's bar per model, one colour per model in the legend
        assert page["bars"] == 2
        assert "gpt-4o" in page["legend"] and "claude-sonnet-4-6" in page["legend"]
        driver.find_element("id", "show-dollars").click()
        assert snapshot(driver)["bars"] == 2
        driver.find_element("id", "show-tokens").click()

        # live: a new request shows up without a reload
        traffic(serve, n_openai=1, n_anthropic=0)
        wait_for(driver, "return document.getElementById('s-requests').dataset.value === '6'", timeout=30,
                 message="the page to show the new request")
        assert len(snapshot(driver)["tables"]["recent"]) == 6

        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        shot = ARTIFACTS / "dashboard.png"
        assert driver.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
        severe = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert severe == [], severe  # no script error, nothing blocked by the page's policy
    finally:
        driver.quit()


CHART = """
const zero = document.querySelector("#chart line.zero");
const bars = [...document.querySelectorAll("#chart rect")].map((r) => ({
  title: r.querySelector("title").textContent, value: Number(r.dataset.value),
  y: Number(r.getAttribute("y")), height: Number(r.getAttribute("height"))}));
return {zero: zero && Number(zero.getAttribute("y1")), bars, legend: document.getElementById("legend").textContent};
"""


def test_a_day_lost_is_drawn_below_the_zero_line(serve):
    # Yesterday gpt-4o cost more through the proxy than it would have directly (its tokens grew
    # too), while claude-sonnet-4-6 saved: the chart shows the loss under the line, not nothing.
    yesterday = time.time() - 86400
    common = dict(time=yesterday, status=200, output_tokens=10, cache_read_tokens=0, cache_write_tokens=0,
                  cf_cache_read_tokens=0, cf_cache_write_tokens=0)
    with Store(serve.project / ".memstrata" / "index.db") as store:
        ledger.record(store, [
            LedgerEntry(endpoint="openai.chat", provider="openai", model="gpt-4o", tokens_original=1000,
                        tokens_forwarded=1200, input_tokens=1300, cf_input_tokens=1100, **common),
            LedgerEntry(endpoint="anthropic.messages", provider="anthropic", model="claude-sonnet-4-6",
                        compressed=True, tokens_original=3000, tokens_forwarded=1000, input_tokens=1000,
                        cf_input_tokens=3000, **common)])
    daily = {r["model"]: r for r in httpx.get(serve.url + "/api/dashboard").json()["daily"]}
    day = daily["gpt-4o"]["day"]
    assert daily["gpt-4o"]["dollar_saved"] < 0 < daily["claude-sonnet-4-6"]["dollar_saved"]
    assert daily["gpt-4o"]["tokens_saved"] == -200
    driver = browser()
    try:
        driver.get(serve.url + "/")
        wait_for(driver, "return Number(document.body.dataset.loaded || 0) >= 1", message="the first refresh")
        for button, key in (("show-dollars", "dollar_saved"), ("show-tokens", "tokens_saved")):
            driver.find_element("id", button).click()
            chart = driver.execute_script(CHART)
            # a bar's title: "<day> · <model>: <figure>"
            bars = {b["title"].split(" · ", 1)[1].split(": ")[0]: b for b in chart["bars"]
                    if b["title"].startswith(day + " · ")}
            assert set(bars) == {"gpt-4o", "claude-sonnet-4-6"}, chart
            loss, gain = bars["gpt-4o"], bars["claude-sonnet-4-6"]
            assert loss["value"] == pytest.approx(daily["gpt-4o"][key]) and loss["value"] < 0
            assert gain["value"] == pytest.approx(daily["claude-sonnet-4-6"][key]) and gain["value"] > 0
            assert loss["height"] > 0 and loss["y"] == pytest.approx(chart["zero"])      # hangs from the line
            assert gain["height"] > 0 and gain["y"] + gain["height"] == pytest.approx(chart["zero"])  # stands on it
            assert loss["height"] / gain["height"] == pytest.approx(-loss["value"] / gain["value"], rel=1e-3)
            assert ("-$" if key == "dollar_saved" else "-200 tokens") in loss["title"]
            assert "below the zero line" in chart["legend"]
        severe = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert severe == [], severe  # no script error, nothing blocked by the page's policy
    finally:
        driver.quit()


def test_large_figures_fit_the_axis_and_the_legend_names_only_models_that_moved(serve):
    common = dict(time=time.time() - 2 * 86400, output_tokens=10, cache_read_tokens=0, cache_write_tokens=0,
                  cf_cache_read_tokens=0, cf_cache_write_tokens=0)
    with Store(serve.project / ".memstrata" / "index.db") as store:
        ledger.record(store, [
            LedgerEntry(endpoint="anthropic.messages", provider="anthropic", model="claude-sonnet-4-6", compressed=True,
                        tokens_original=30_000_000, tokens_forwarded=9_000_000, input_tokens=9_000_000,
                        cf_input_tokens=30_000_000, status=200, **common),
            LedgerEntry(endpoint="openai.chat", provider="openai", model="gpt-4o", status=429,
                        tokens_original=500, tokens_forwarded=500, **common)])
    driver = browser()
    try:
        driver.get(serve.url + "/")
        wait_for(driver, "return Number(document.body.dataset.loaded || 0) >= 1", message="the first refresh")
        for button in ("show-tokens", "show-dollars"):
            driver.find_element("id", button).click()
            left = driver.execute_script(
                "return Math.min(...[...document.querySelectorAll('#chart text')].map((t) => t.getBBox().x));")
            assert left >= 0, f"an axis label starts {-left:.0f} px left of the chart ({button})"
            legend = driver.execute_script("return document.getElementById('legend').textContent;")
            assert "claude-sonnet-4-6" in legend and "gpt-4o" not in legend
    finally:
        driver.quit()


def test_the_axis_labels_read_as_the_figures_they_mark(serve):
    """A day that saved 266,000 tokens stands under an axis whose top label is at least that:
    thousands are written with k, millions with M (the k labels once divided by ten thousand).
    A stream the upstream cut off after its 200 says so in the last requests."""
    common = dict(endpoint="openai.chat", provider="openai", model="gpt-4o", compressed=True, output_tokens=10,
                  cache_read_tokens=0, cache_write_tokens=0, cf_cache_read_tokens=0, cf_cache_write_tokens=0,
                  status=200)
    with Store(serve.project / ".memstrata" / "index.db") as store:
        ledger.record(store, [
            LedgerEntry(time=time.time() - 86400, tokens_original=300_000, tokens_forwarded=34_000,
                        input_tokens=34_000, cf_input_tokens=300_000, **common),
            LedgerEntry(time=time.time(), tokens_original=900, tokens_forwarded=900, input_tokens=900,
                        cf_input_tokens=900, error="dropped", **common)])
    driver = browser()
    try:
        driver.get(serve.url + "/")
        wait_for(driver, "return Number(document.body.dataset.loaded || 0) >= 1", message="the first refresh")
        driver.find_element("id", "show-tokens").click()
        labels = driver.execute_script(
            "return [...document.querySelectorAll('#chart text')].map((t) => t.textContent);")
        scale = {"k": 1e3, "M": 1e6, "G": 1e9}
        values = [float(t.rstrip("kMG").replace(",", "")) * scale.get(t[-1], 1) for t in labels
                  if re.fullmatch(r"-?[\d,.]+[kMG]?", t)]
        assert values and max(values) >= 266_000, labels
        assert max(values) <= 1_000_000, labels   # the axis fits the figure, not ten times it
        assert snapshot(driver)["tables"]["recent"][0][5] == "200 dropped"
    finally:
        driver.quit()


def test_small_dollar_figures_get_labels_that_tell_them_apart(serve):
    """A cheap model saves fractions of a cent a day: the dollar axis shows the decimals its step
    needs ($0.0002, $0.0004), never the same rounded label twice."""
    common = dict(endpoint="openai.chat", provider="openai", model="gpt-4o-mini", compressed=True, output_tokens=10,
                  cache_read_tokens=0, cache_write_tokens=0, cf_cache_read_tokens=0, cf_cache_write_tokens=0,
                  status=200, time=time.time() - 86400)
    with Store(serve.project / ".memstrata" / "index.db") as store:
        ledger.record(store, [LedgerEntry(tokens_original=4_000, tokens_forwarded=1_500, input_tokens=1_500,
                                          cf_input_tokens=4_000, **common)])
    driver = browser()
    try:
        driver.get(serve.url + "/")
        wait_for(driver, "return Number(document.body.dataset.loaded || 0) >= 1", message="the first refresh")
        driver.find_element("id", "show-dollars").click()
        labels = [t for t in driver.execute_script(
            "return [...document.querySelectorAll('#chart text')].map((t) => t.textContent);") if t.startswith("$")]
        assert len(labels) >= 3 and len(set(labels)) == len(labels), labels
        assert float(max(labels, key=lambda t: float(t[1:].replace(",", "")))[1:]) > 0, labels
    finally:
        driver.quit()


def test_dashboard_is_one_local_page_behind_the_guard(serve):
    r = httpx.get(serve.url + "/")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    html = r.text
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)  # no CDN, nothing fetched from elsewhere
    assert "<script src" not in html and "<link rel=\"stylesheet\"" not in html
    csp = r.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "connect-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert httpx.get(serve.url + "/", headers={"host": "evil.example"}).status_code == 421
    assert httpx.get(serve.url + "/api/dashboard", headers={"host": "rebind.example:80"}).status_code == 421
    assert httpx.get(serve.url + "/api/dashboard", headers={"origin": "https://evil.example"}).status_code == 403
    assert httpx.get(serve.url + "/", headers={"host": "localhost:1"}).status_code == 200
    data = httpx.get(serve.url + "/api/dashboard").json()
    assert set(data) >= {"days", "daily", "recent", "top_files"} and len(data["days"]) == 30
