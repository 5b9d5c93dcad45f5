"""The console in a real browser: headless Chromium (Debian's `chromium`) driven by Playwright,
against a live server with the scripted model. Skipped, saying why, where no Chromium is installed.
Screenshots of the main pages go to test-artifacts/console/ (not committed)."""

import os
import shutil
from pathlib import Path

import httpx
import pytest
from pydantic import SecretStr

playwright = pytest.importorskip("playwright.async_api", reason="playwright is not installed (pip install -e '.[test]')")

ADMIN_KEY = "browser-admin-key"
ARTIFACTS = Path(os.environ.get("MEMVM_TEST_ARTIFACTS", "test-artifacts")) / "console"
CHROMIUM = os.environ.get("MEMVM_TEST_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
# A closed network: without these, Chromium keeps trying to reach Google's services.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="no Chromium found (install Debian's `chromium`, or set MEMVM_TEST_CHROMIUM): browser tests skipped"
)


@pytest.fixture
def settings(settings):
    return settings.model_copy(update={"admin_api_key": SecretStr(ADMIN_KEY)})


@pytest.fixture
async def browser():
    async with playwright.async_playwright() as driver:
        chromium = await driver.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield chromium
        await chromium.close()


@pytest.fixture
async def api(live_url):
    """The REST API as the organization `acme`, and that organization's key."""
    async with httpx.AsyncClient(base_url=live_url, timeout=30) as admin:
        created = await admin.post(
            "/v1/admin/api-keys", json={"organization": "acme"}, headers={"Authorization": f"Bearer {ADMIN_KEY}"}
        )
        key = created.json()["key"]
    async with httpx.AsyncClient(base_url=live_url, headers={"Authorization": f"Bearer {key}"}, timeout=30) as client:
        client.key = key
        yield client


async def new_agent(api, **fields) -> dict:
    created = await api.post(
        "/v1/agents/",
        json={
            **fields,
            "name": "browser-agent",
            "memory_blocks": [
                {"label": "human", "value": "Name: Bob", "limit": 500, "description": "About the user."},
                {"label": "persona", "value": "I am Sam."},
            ],
        },
    )
    assert created.status_code == 200, created.text
    return created.json()


async def screenshot(page, name: str, *, full_page: bool = True) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=full_page)


async def signed_in_page(browser, live_url: str, key: str):
    context = await browser.new_context()
    page = await context.new_page()
    await page.goto(f"{live_url}/ui/")
    assert page.url.endswith("/ui/sign-in")
    await page.get_by_label("API key").fill(key)
    await page.get_by_role("button", name="Sign in").click()
    await page.wait_for_url("**/ui/agents")
    return context, page


async def test_sign_in_open_an_agent_edit_a_block_and_see_the_prompt_in_every_view(browser, live_url, api):
    agent = await new_agent(api)
    _, page = await signed_in_page(browser, live_url, api.key)
    await screenshot(page, "agents")

    await page.get_by_role("link", name="browser-agent").click()
    await page.wait_for_url(f"**/ui/agents/{agent['id']}")
    await page.get_by_label("Value of human").fill("Name: Bob\nLikes: green tea")
    await page.get_by_role("button", name="Save human").click()
    human = page.locator("article.block", has=page.get_by_role("heading", name="human"))
    await human.locator(".version", has_text="2").wait_for()

    prompt = page.locator("pre.prompt")
    await prompt.filter(has_text="Likes: green tea").wait_for()  # reloaded after the edit, no page load
    assert "<memory_metadata>" in await prompt.inner_text()
    await page.get_by_role("button", name="line_numbered").click()
    await page.locator("pre.prompt[data-mode=line_numbered]").filter(has_text="2→ Likes: green tea").wait_for()
    await page.get_by_role("button", name="git").click()
    await page.locator("pre.prompt[data-mode=git]").filter(has_text="<projection>").wait_for()
    await screenshot(page, "agent")

    stored = (await api.get(f"/v1/agents/{agent['id']}/core-memory/blocks/human")).json()
    assert stored["value"] == "Name: Bob\nLikes: green tea" and stored["version"] == 2


async def test_a_conflict_from_a_second_tab_is_shown_and_resolved(browser, live_url, api):
    agent = await new_agent(api)
    context, first = await signed_in_page(browser, live_url, api.key)
    second = await context.new_page()
    for tab in (first, second):
        await tab.goto(f"{live_url}/ui/agents/{agent['id']}")

    await second.get_by_label("Value of human").fill("Name: Robert")
    await second.get_by_role("button", name="Save human").click()
    await second.locator(".version", has_text="2").first.wait_for()
    await first.get_by_label("Value of human").fill("Name: Bobby")
    await first.get_by_role("button", name="Save human").click()

    conflict = first.locator("article.conflict")
    await conflict.wait_for()
    text = await conflict.inner_text()
    assert "Name: Robert" in text and "Name: Bobby" in text and "version 2" in text
    await screenshot(first, "conflict")
    await first.get_by_role("button", name="Save mine over version 2").click()
    await first.locator("article.block:not(.conflict) .version", has_text="3").wait_for()

    stored = (await api.get(f"/v1/agents/{agent['id']}/core-memory/blocks/human")).json()
    assert stored["value"] == "Name: Bobby" and stored["version"] == 3


async def test_undo_from_the_history_after_confirming(browser, live_url, api):
    agent = await new_agent(api)
    human = (await api.get(f"/v1/agents/{agent['id']}/core-memory/blocks/human")).json()
    edited = await api.patch(f"/v1/blocks/{human['id']}", json={"value": "Name: Robert"})
    assert edited.status_code == 200
    _, page = await signed_in_page(browser, live_url, api.key)
    await page.goto(f"{live_url}/ui/agents/{agent['id']}")

    await page.get_by_role("link", name="History of human").click()
    await page.get_by_role("heading", name="Version 2: update").wait_for()
    assert "API key" in await page.locator("#version-2").inner_text()
    await screenshot(page, "history")
    dialogs: list[str] = []

    async def accept(dialog) -> None:
        dialogs.append(dialog.message)
        await dialog.accept()

    page.on("dialog", accept)
    await page.get_by_role("button", name="Undo").click()
    await page.get_by_role("heading", name="Version 3: undo (brings back version 1)").wait_for()

    assert dialogs == ["Undo the last edit of human?"]
    stored = (await api.get(f"/v1/agents/{agent['id']}/core-memory/blocks/human")).json()
    assert stored["value"] == "Name: Bob" and stored["version"] == 3


async def test_send_a_message_and_watch_the_reply_and_its_tool_call_stream_in(browser, live_url, api, llm):
    agent = await new_agent(api, model="openai/scripted-model")
    llm.reply(tool_calls=[("memory_insert", {"label": "human", "new_string": "Loves green tea"})]).reply("Noted, Bob.")
    _, page = await signed_in_page(browser, live_url, api.key)
    await page.goto(f"{live_url}/ui/agents/{agent['id']}")

    await page.get_by_label("Value of persona").fill("I am Sam, drafting.")  # an unsaved draft
    await page.get_by_label("Send a message").fill("I love green tea")
    await page.get_by_role("button", name="Send", exact=True).click()
    live = page.locator("#live")
    await live.get_by_text("Tool call: memory_insert").wait_for()
    await live.get_by_text("Noted, Bob.").wait_for()
    await live.get_by_text("Stopped: end_turn").wait_for()
    await page.locator("#timeline").get_by_text("completed, stopped by end_turn").wait_for()  # reloaded at the end
    await page.locator("pre.prompt").filter(has_text="Loves green tea").wait_for()  # and the prompt with it
    human = page.locator("article.block", has=page.get_by_role("heading", name="human"))
    await human.locator(".version", has_text="2").wait_for()  # the card the agent edited, reloaded
    assert "Loves green tea" in await page.get_by_label("Value of human").input_value()
    assert await page.get_by_label("Value of persona").input_value() == "I am Sam, drafting."  # kept
    await screenshot(page, "conversation")
    await page.set_viewport_size({"width": 1100, "height": 1150})
    await page.reload()
    await page.locator("#timeline .run").wait_for()
    await page.evaluate("window.scrollTo(0, 0)")
    await screenshot(page, "agent-page-readme", full_page=False)  # the README's picture

    assert await page.get_by_label("Send a message").input_value() == ""


async def test_approve_a_pending_tool_call_from_the_page(browser, live_url, api, llm):
    agent = await new_agent(api, model="openai/scripted-model")
    toggled = await api.patch(f"/v1/agents/{agent['id']}/tools/approval/memory_insert", json={"requires_approval": True})
    assert toggled.status_code == 200
    llm.reply(tool_calls=[("memory_insert", {"label": "human", "new_string": "Owns a cat"})]).reply("Noted: a cat.")
    _, page = await signed_in_page(browser, live_url, api.key)
    await page.goto(f"{live_url}/ui/agents/{agent['id']}")

    await page.get_by_label("Send a message").fill("I have a cat")
    await page.get_by_role("button", name="Send", exact=True).click()
    await page.locator("#live").get_by_text("Stopped: requires_approval").wait_for()
    approve = page.get_by_role("button", name="Approve memory_insert")
    await approve.wait_for()
    await screenshot(page, "approval")
    await approve.click()
    await page.locator("#live").get_by_text("Noted: a cat.").wait_for()

    stored = (await api.get(f"/v1/agents/{agent['id']}/core-memory/blocks/human")).json()
    assert "Owns a cat" in stored["value"]


async def test_search_archival_memory_with_a_tag_filter(browser, live_url, api):
    agent = await new_agent(api)
    for text, tags in (("Bob's sister lives in Oslo.", ["family"]), ("Bob's brother lives in Rome.", ["work"])):
        stored = await api.post(f"/v1/agents/{agent['id']}/archival-memory", json={"text": text, "tags": tags})
        assert stored.status_code == 200, stored.text
    _, page = await signed_in_page(browser, live_url, api.key)
    await page.goto(f"{live_url}/ui/agents/{agent['id']}")

    await page.get_by_label("Search by meaning").fill("where do his siblings live")
    await page.get_by_label("Only passages tagged (comma-separated)").fill("family")
    await page.get_by_role("button", name="Search archival memory").click()
    results = page.locator("table.passages").first
    await results.get_by_text("1 result(s)").wait_for()
    await screenshot(page, "archival")

    text = await results.inner_text()
    assert "Oslo" in text and "Rome" not in text


async def test_the_agent_page_fits_a_phone_screen_and_works_from_the_keyboard(browser, live_url, api):
    agent = await new_agent(api)
    context = await browser.new_context(viewport={"width": 390, "height": 844})
    page = await context.new_page()
    await page.goto(f"{live_url}/ui/sign-in")
    await page.get_by_label("API key").fill(api.key)
    await page.keyboard.press("Enter")  # the form submits from the keyboard
    await page.wait_for_url("**/ui/agents")
    await page.goto(f"{live_url}/ui/agents/{agent['id']}")
    await page.locator("#archival form").first.wait_for()
    await page.locator("#tools-panel details").first.wait_for()
    await screenshot(page, "agent-phone")

    overflow = await page.evaluate("document.scrollingElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, f"the page is {overflow}px wider than a phone screen"
    await page.get_by_label("Value of human").focus()
    await page.keyboard.press("Tab")
    assert await page.evaluate("document.activeElement.textContent") == "Save human"
