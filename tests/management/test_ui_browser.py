"""The management web UI in a real browser (Playwright driving headless Chromium).

Users with each tag log in and see what RabbitMQ's UI shows them (none: refused with "Not management
user"); publish, get, purge, delete, bind, a policy, user and permission changes, virtual hosts and
a definitions export and import are done through the UI's forms and checked through the HTTP API or
an AMQP client; names that are markup stay text; the hash pages show each queue's messages, the ring
and the live trace. Every page is screenshotted to test-artifacts/ui/, and a test fails on any
console error or uncaught exception it did not provoke on purpose.

Skips, naming the install command, when Playwright or a Chromium is missing.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pika
import pytest

import exchanges
from broker.embedded import BrokerThread
from tests.management.browser_support import UI, launch_browser
from tests.management_support import call, q

PASSWORDS = {
    "ui-management": "pw-management",
    "ui-policymaker": "pw-policymaker",
    "ui-monitoring": "pw-monitoring",
    "ui-admin": "pw-admin",
    "ui-none": "pw-none",
}
TAGS = {
    "ui-management": "management",
    "ui-policymaker": "policymaker",
    "ui-monitoring": "monitoring",
    "ui-admin": "administrator",
    "ui-none": "",
}
NASTY = "<img src=x onerror=alert(1)>\"'&/#?%20 ünï"


class Env:
    """The module's broker, its base URL and the guest AMQP connection the pages list."""

    def __init__(self, broker: BrokerThread) -> None:
        self.broker = broker
        self.base = f"http://127.0.0.1:{broker.broker.management.port}"
        self.url = broker.url

    def api(self, method: str, path: str, body: Any = None, user: str = "guest") -> tuple[int, Any]:
        auth = "guest:guest" if user == "guest" else f"{user}:{PASSWORDS[user]}"
        return call(self.base, method, path, body, auth=auth)

    def amqp(self, name: str | None = None) -> pika.BlockingConnection:
        params = pika.URLParameters(self.url + "?heartbeat=0")
        if name:
            params.client_properties = {"connection_name": name}
        return pika.BlockingConnection(params)


@pytest.fixture(scope="module")
def browser(env: Env) -> Iterator[Any]:
    """Closed before the broker stops, so no kept-alive HTTP connection is cut by the stop."""
    with ExitStack() as stack:
        yield launch_browser(stack)


@pytest.fixture(scope="module")
def env() -> Iterator[Env]:
    with BrokerThread(host="127.0.0.1", port=0, management_port=0) as b:
        e = Env(b)
        for user, tags in TAGS.items():
            assert e.api("PUT", f"/api/users/{user}", {"password": PASSWORDS[user], "tags": tags})[0] == 201
            perms = {"configure": ".*", "write": ".*", "read": ".*"}
            assert e.api("PUT", f"/api/permissions/%2F/{user}", perms)[0] == 201
        assert e.api("PUT", "/api/vhosts/ui-other")[0] == 201  # guest only: the others may not see it
        assert e.api("PUT", "/api/queues/ui-other/secret.q", {"durable": True})[0] == 201
        conn = e.amqp("ui-guest-conn")  # a connection and a consumer for the pages to list
        ch = conn.channel()
        ch.queue_declare("ui-consumed")
        ch.basic_consume("ui-consumed", lambda *a: None, consumer_tag="ui-ctag")
        try:
            yield e
        finally:
            conn.close()


@pytest.fixture
def ui(browser: Any, env: Env) -> Iterator[UI]:
    context = browser.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True)
    try:
        page = UI(context.new_page(), env.base)
        yield page
        unexpected = page.unexpected_errors()
        assert not unexpected, "console errors:\n" + "\n".join(unexpected)
        assert not [d for d in page.dialogs if d[0] != "confirm"], page.dialogs  # no alert ever ran
    finally:
        context.close()


def wait_api(env: Env, path: str, check: Any, user: str = "guest", timeout: float = 10.0) -> Any:
    """The API's answer once `check(status, body)` holds (the UI acts asynchronously)."""
    deadline = time.monotonic() + timeout
    while True:
        status, body = env.api("GET", path, user=user)
        if check(status, body):
            return body
        if time.monotonic() > deadline:
            raise AssertionError(f"{path}: still {status} {body!r}")
        time.sleep(0.1)


# -- login and what each tag may see ---------------------------------------------------------------


def test_login_is_refused_without_a_management_tag_or_with_a_wrong_password(ui: UI) -> None:
    ui.expect_console(r"status of 401")
    ui.open()
    ui.logout()  # the first visit from localhost logged in as guest
    ui.page.fill("#login-user", "ui-none")
    ui.page.fill("#login-password", PASSWORDS["ui-none"])
    ui.page.click("#login-button")
    ui.page.wait_for_selector("#login-status:text('Not management user')")
    assert ui.page.is_visible("#login-form") and not ui.page.is_visible("#app")
    ui.shot("login-refused")
    ui.page.fill("#login-user", "ui-admin")
    ui.page.fill("#login-password", "wrong")
    ui.page.click("#login-button")
    ui.page.wait_for_selector("#login-status:text('Login failed')")
    assert ui.page.evaluate("document.body.dataset.user || ''") == ""


def test_guest_is_prefilled_on_localhost_and_logout_sticks(ui: UI) -> None:
    ui.open()
    assert ui.page.evaluate("document.body.dataset.user") == "guest"  # first visit: in as guest
    ui.logout()
    assert ui.page.input_value("#login-user") == "guest"
    assert ui.page.input_value("#login-password") == "guest"
    ui.shot("login")
    ui.page.reload()
    ui.page.wait_for_selector("#login-form", state="visible")  # logged out stays logged out
    assert ui.page.evaluate("document.body.dataset.user || ''") == ""
    ui.page.click("#login-button")
    ui.wait_ready("overview")
    assert ui.page.evaluate("document.body.dataset.user") == "guest"


ALL_TABS = ["overview", "connections", "channels", "exchanges", "queues", "hash", "admin"]


@pytest.mark.parametrize(
    ("user", "admin_tabs", "monitor", "policymaker"),
    [
        ("ui-management", ["policies", "limits"], False, False),
        ("ui-policymaker", ["policies", "limits"], False, True),
        ("ui-monitoring", ["policies", "limits"], True, False),
        ("ui-admin", ["users", "vhosts", "policies", "limits", "definitions"], True, True),
    ],
)
def test_each_tag_sees_and_may_do_what_rabbitmq_shows_it(
    ui: UI, env: Env, user: str, admin_tabs: list[str], monitor: bool, policymaker: bool
) -> None:
    ui.login(user, PASSWORDS[user])
    tag = TAGS[user]
    assert ui.attrs("#tabs a", "data-tab") == ALL_TABS
    assert (ui.page.locator("#nodes").count() == 1) is monitor  # node details: monitors only
    assert (ui.page.locator("#listeners").count() == 1) is monitor
    ui.shot(f"overview-{tag}")
    keys, values = ui.attrs("[data-total]", "data-total"), ui.attrs("[data-total]", "data-value")
    totals = {k: int(v) for k, v in zip(keys, values, strict=True)}
    assert totals == env.api("GET", "/api/overview", user=user)[1]["object_totals"]

    ui.go("policies", "policies")
    assert ui.attrs("#subtabs a", "data-tab") == admin_tabs
    assert (ui.form("add-policy").count() == 1) is policymaker
    ui.go("users", "users")
    if tag == "administrator":
        assert "ui-none" in ui.attrs("#user-list tr[data-user]", "data-user")
    else:  # hidden as in RabbitMQ's UI, and the API was not asked
        assert ui.page.locator("[data-denied='administrator']").count() == 1
        assert ui.page.locator("#user-list").count() == 0

    ui.go("connections", "connections")
    names = ui.attrs("#connection-list tr[data-connection]", "data-user")
    assert ("guest" in names) is monitor  # others' connections: monitors only
    ui.go("queues", "queues")
    shown = set(zip(ui.attrs("#queue-list tr[data-queue]", "data-vhost"),
                    ui.attrs("#queue-list tr[data-queue]", "data-queue"), strict=True))  # fmt: skip
    visible = {(x["vhost"], x["name"]) for x in env.api("GET", "/api/queues", user=user)[1]}
    assert shown == visible
    assert (("ui-other", "secret.q") in shown) is (tag == "administrator")
    ui.shot(f"queues-{tag}")


def test_a_management_user_is_refused_where_it_has_no_permissions(ui: UI, env: Env) -> None:
    """The forms are shown (as RabbitMQ shows them); the API refuses, and the UI says why."""
    assert env.api("PUT", "/api/queues/ui-other/ui-refused.q", {})[0] == 201
    ui.expect_console(r"status of 401")
    ui.login("ui-management", PASSWORDS["ui-management"])
    ui.go("queues", "queues")
    kind, text = ui.submit("add-queue", {"name": "ui-mine.q"})
    assert kind == "ok", text
    assert env.api("GET", "/api/queues/%2F/ui-mine.q")[0] == 200
    ui.go("queues/ui-other/ui-refused.q", "queue")  # not listed for this user: typed in
    assert ui.page.evaluate("document.body.dataset.error || ''")
    kind, text = ui.click_action("purge-queue")
    assert kind == "error" and "Not allowed" in text
    env.api("DELETE", "/api/queues/%2F/ui-mine.q")
    env.api("DELETE", "/api/queues/ui-other/ui-refused.q")


# -- queues, exchanges, messages -------------------------------------------------------------------


def test_queue_add_publish_get_purge_delete_through_the_ui(ui: UI, env: Env) -> None:
    ui.login("ui-management", PASSWORDS["ui-management"])
    ui.go("queues", "queues")
    ui.args("add-queue", "arguments", [("x-max-length", "100", "number")])
    kind, text = ui.submit("add-queue", {"name": "ui-work", "durable": "true"})
    assert kind == "ok", text
    status, body = env.api("GET", "/api/queues/%2F/ui-work")
    assert status == 200 and body["durable"] is True and body["arguments"] == {"x-max-length": 100}

    ui.go("queues/%2F/ui-work", "queue")
    for i in range(2):
        ui.args("publish", "headers", [("origin", f"ui-{i}", "string")])
        ui.fill("publish", {"payload": f"hello {i}", "delivery_mode": "2"})
        kind, text = ui.submit("publish")
        assert (kind, text) == ("ok", "Message published.")
    wait_api(env, "/api/queues/%2F/ui-work", lambda s, b: b["messages"] == 2)

    kind, text = ui.submit("get", {"ackmode": "ack_requeue_true", "count": "1"})  # nack, requeue
    assert kind == "ok", text
    assert ui.attrs(".message", "data-payload") == ["hello 0"]
    assert "origin" in ui.page.locator(".message").inner_text()
    assert wait_api(env, "/api/queues/%2F/ui-work", lambda s, b: b["messages_ready"] == 2)["messages"] == 2
    kind, text = ui.submit("get", {"ackmode": "ack_requeue_false", "count": "1"})  # automatic ack
    assert kind == "ok"
    wait_api(env, "/api/queues/%2F/ui-work", lambda s, b: b["messages"] == 1)

    conn = env.amqp()  # the message left is the second one, persistent, with its header
    ch = conn.channel()
    method, props, payload = ch.basic_get("ui-work", auto_ack=False)
    assert payload == b"hello 1" and props.headers == {"origin": "ui-1"} and props.delivery_mode == 2
    ch.basic_nack(method.delivery_tag, requeue=True)
    conn.close()

    ui.shows("#queue-messages[data-messages='1']")
    ui.shot("queue")
    kind, text = ui.click_action("purge-queue")
    assert kind == "ok", text
    wait_api(env, "/api/queues/%2F/ui-work", lambda s, b: b["messages"] == 0)
    kind, _text = ui.click_action("delete-queue")
    assert kind == "ok"
    ui.wait_ready("queues")
    wait_api(env, "/api/queues/%2F/ui-work", lambda s, b: s == 404)
    assert ("confirm", "Delete queue ui-work?") in ui.dialogs


def test_exchange_add_bind_publish_unbind_delete_through_the_ui(ui: UI, env: Env) -> None:
    conn = env.amqp()
    ch = conn.channel()
    ch.queue_declare("ui-bound")
    ui.login("ui-admin", PASSWORDS["ui-admin"])
    ui.go("exchanges", "exchanges")
    kind, text = ui.submit("add-exchange", {"name": "ui-topic", "type": "topic", "durable": "false"})
    assert kind == "ok", text
    assert env.api("GET", "/api/exchanges/%2F/ui-topic")[1]["type"] == "topic"
    ui.shot("exchanges")

    ui.go("exchanges/%2F/ui-topic", "exchange")
    kind, text = ui.submit("bind", {"dtype": "q", "destination": "ui-bound", "routing_key": "a.*"})
    assert kind == "ok", text
    bindings = env.api("GET", "/api/exchanges/%2F/ui-topic/bindings/source")[1]
    assert [(b["destination"], b["routing_key"]) for b in bindings] == [("ui-bound", "a.*")]
    ui.shows("#bindings-out tr[data-destination='ui-bound']")
    assert ui.attrs("#bindings-out tr[data-destination]", "data-routing-key") == ["a.*"]

    ui.fill("publish", {"routing_key": "a.b", "payload": "routed"})
    assert ui.submit("publish") == ("ok", "Message published.")
    ui.fill("publish", {"routing_key": "z", "payload": "lost"})
    assert ui.submit("publish") == ("ok", "Message published, but not routed.")
    _m, _p, payload = ch.basic_get("ui-bound", auto_ack=True)
    assert payload == b"routed"
    conn.close()
    ui.shot("exchange")

    kind, text = ui.click_action("unbind", ui.page.locator("#bindings-out"))
    assert kind == "ok", text
    assert env.api("GET", "/api/exchanges/%2F/ui-topic/bindings/source")[1] == []
    kind, _text = ui.click_action("delete-exchange")
    assert kind == "ok"
    ui.wait_ready("exchanges")
    assert env.api("GET", "/api/exchanges/%2F/ui-topic")[0] == 404


def test_names_are_shown_as_text_and_work_in_links(ui: UI, env: Env) -> None:
    conn = env.amqp()
    ch = conn.channel()
    ch.queue_declare(NASTY)
    conn.close()
    ui.login("ui-admin", PASSWORDS["ui-admin"])
    ui.go("queues", "queues")
    row = ui.page.locator("#queue-list tr[data-queue]").filter(has_text="onerror")
    assert row.get_attribute("data-queue") == NASTY
    assert row.locator("a").inner_text() == NASTY
    row.locator("a").click()
    ui.wait_ready("queue")
    assert ui.page.inner_text("#queue-name") == NASTY
    assert ui.page.locator("img[src='x']").count() == 0
    ui.fill("publish", {"payload": NASTY})
    assert ui.submit("publish") == ("ok", "Message published.")
    wait_api(env, f"/api/queues/%2F/{q(NASTY)}", lambda s, b: b["messages"] == 1)
    ui.submit("get", {"ackmode": "ack_requeue_false"})
    assert ui.attrs(".message", "data-payload") == [NASTY]
    assert ui.page.locator("img[src='x']").count() == 0
    ui.shot("queue-with-markup-in-its-name")
    env.api("DELETE", f"/api/queues/%2F/{q(NASTY)}")


# -- admin: policies, users, permissions, vhosts, definitions --------------------------------------


def test_policy_added_and_deleted_by_a_policymaker(ui: UI, env: Env) -> None:
    conn = env.amqp()
    conn.channel().queue_declare("ui-pol.q")
    conn.close()
    ui.login("ui-policymaker", PASSWORDS["ui-policymaker"])
    ui.go("policies", "policies")
    ui.args("add-policy", "definition", [("max-length", "1", "number")])
    kind, text = ui.submit("add-policy", {"name": "ui-limit", "pattern": r"^ui-pol\.", "apply-to": "queues",
                                          "priority": "3"})  # fmt: skip
    assert kind == "ok", text
    status, policy = env.api("GET", "/api/policies/%2F/ui-limit")
    assert status == 200 and policy["definition"] == {"max-length": 1} and policy["priority"] == 3
    assert policy["apply-to"] == "queues" and policy["pattern"] == r"^ui-pol\."
    wait_api(env, "/api/queues/%2F/ui-pol.q", lambda s, b: b.get("policy") == "ui-limit")
    ui.shows("#policy-list tr[data-policy='ui-limit']")
    ui.shot("policies")
    ui.go("queues/%2F/ui-pol.q", "queue")
    assert "ui-limit" in ui.page.inner_text("#queue-details")

    ui.go("policies", "policies")
    kind, text = ui.click_action("delete-policy", ui.page.locator("#policy-list tr[data-policy='ui-limit']"))
    assert kind == "ok", text
    assert env.api("GET", "/api/policies/%2F/ui-limit")[0] == 404
    choices = ui.attrs("form[data-form='add-policy'] select[name='vhost'] option", "value")
    assert choices == ["/"]  # the vhosts it has permissions on


def test_user_tags_password_and_permissions_changed_through_the_ui(ui: UI, env: Env) -> None:
    ui.login("ui-admin", PASSWORDS["ui-admin"])
    ui.go("users", "users")
    kind, text = ui.submit("add-user", {"username": "ui-made", "password": "pw1", "confirm": "pw1",
                                        "tags": "monitoring"})  # fmt: skip
    assert kind == "ok", text
    assert env.api("GET", "/api/users/ui-made")[1]["tags"] == ["monitoring"]
    assert call(env.base, "GET", "/api/whoami", auth="ui-made:pw1")[0] == 200

    ui.go("users/ui-made", "user")
    kind, text = ui.submit("set-permission", {"vhost": "/", "configure": "^ui-", "write": ".*", "read": ".*"})
    assert kind == "ok", text
    perm = env.api("GET", "/api/permissions/%2F/ui-made")[1]
    assert (perm["configure"], perm["write"], perm["read"]) == ("^ui-", ".*", ".*")

    kind, text = ui.submit("update-user", {"tags": "management, policymaker"})  # password left empty
    assert kind == "ok", text
    assert sorted(env.api("GET", "/api/users/ui-made")[1]["tags"]) == ["management", "policymaker"]
    assert call(env.base, "GET", "/api/whoami", auth="ui-made:pw1")[0] == 200  # the password kept
    kind, text = ui.submit("update-user", {"password": "pw2", "confirm": "pw2"})
    assert kind == "ok", text
    assert call(env.base, "GET", "/api/whoami", auth="ui-made:pw2")[0] == 200
    assert call(env.base, "GET", "/api/whoami", auth="ui-made:pw1")[0] == 401
    ui.shows("#user-details[data-tags*='policymaker']")
    ui.shot("user")

    kind, text = ui.click_action("clear-permission", ui.page.locator("#permissions"))
    assert kind == "ok", text
    assert env.api("GET", "/api/permissions/%2F/ui-made")[0] == 404
    kind, _text = ui.click_action("delete-user")
    assert kind == "ok"
    ui.wait_ready("users")
    assert env.api("GET", "/api/users/ui-made")[0] == 404
    ui.shot("users")


def test_vhost_added_given_permissions_and_deleted_through_the_ui(ui: UI, env: Env) -> None:
    ui.login("ui-admin", PASSWORDS["ui-admin"])
    ui.go("vhosts", "vhosts")
    kind, text = ui.submit("add-vhost", {"name": "ui-vh", "description": "made in the UI"})
    assert kind == "ok", text
    assert env.api("GET", "/api/vhosts/ui-vh")[0] == 200
    ui.shows("#vhost-list tr[data-vhost='ui-vh']")
    ui.shows("#vhost-select option[value='ui-vh']")  # the header's filter knows it
    ui.shot("vhosts")
    ui.go("vhosts/ui-vh", "vhost")
    kind, text = ui.submit("set-permission", {"user": "ui-management", "read": "^r"})
    assert kind == "ok", text
    assert env.api("GET", "/api/permissions/ui-vh/ui-management")[1]["read"] == "^r"
    ui.shows("#permissions tr[data-user='ui-management']")
    assert ui.page.locator("[data-unavailable='/api/vhost-limits']").count() == 1
    ui.shot("vhost")
    kind, _text = ui.click_action("delete-vhost")
    assert kind == "ok"
    ui.wait_ready("vhosts")
    assert env.api("GET", "/api/vhosts/ui-vh")[0] == 404


def test_definitions_download_and_upload(ui: UI, env: Env, tmp_path: Path) -> None:
    assert env.api("PUT", "/api/queues/%2F/ui-defs.q", {"durable": True})[0] == 201
    ui.login("ui-admin", PASSWORDS["ui-admin"])
    ui.go("definitions", "definitions")
    ui.shot("definitions")
    with ui.page.expect_download() as info:
        ui.page.click("form[data-form='export'] button[type='submit']")
    download = info.value
    saved = tmp_path / download.suggested_filename
    download.save_as(saved)
    doc = json.loads(saved.read_text())
    assert {"name": "ui-defs.q", "vhost": "/"}.items() <= next(
        x for x in doc["queues"] if x["name"] == "ui-defs.q").items()  # fmt: skip
    assert {u["name"] for u in doc["users"]} >= set(PASSWORDS)

    assert env.api("DELETE", "/api/queues/%2F/ui-defs.q")[0] == 204
    ui.form("import").locator("input[type='file']").set_input_files(str(saved))
    kind, text = ui.submit("import")
    assert (kind, text) == ("ok", "Your definitions were imported successfully."), text
    assert env.api("GET", "/api/queues/%2F/ui-defs.q")[1]["durable"] is True
    env.api("DELETE", "/api/queues/%2F/ui-defs.q")


# -- connections, channels, overview rates ---------------------------------------------------------


def test_connections_and_channels_pages(ui: UI, env: Env) -> None:
    ui.login("ui-admin", PASSWORDS["ui-admin"])
    ui.go("connections", "connections")
    row = ui.page.locator("#connection-list tr[data-connection]").filter(has_text="ui-guest-conn")
    name = row.get_attribute("data-connection")
    ui.shot("connections")
    row.locator("a").first.click()
    ui.wait_ready("connection")
    assert ui.page.inner_text("#connection-name") == name
    assert "ui-guest-conn" in ui.page.inner_text("#client-properties")
    assert ui.page.locator("#connection-channels tr[data-channel]").count() == 1
    assert (
        ui.page.locator("form[data-form='close-connection']").count() == 1
    )  # DELETE /api/connections/{name}
    ui.shot("connection")
    ui.page.locator("#connection-channels tr[data-channel] a").first.click()
    ui.wait_ready("channel")
    assert ui.attrs("#channel-consumers tr[data-consumer-tag]", "data-consumer-tag") == ["ui-ctag"]
    ui.shot("channel")
    ui.go("channels", "channels")
    assert name + " (1)" in ui.attrs("#channel-list tr[data-channel]", "data-channel")
    ui.shot("channels")


@pytest.mark.slow
def test_overview_message_rates_come_from_the_5s_samples(ui: UI, env: Env) -> None:
    stop = threading.Event()

    def publish() -> None:
        conn = env.amqp()
        ch = conn.channel()
        ch.queue_declare("ui-rates")
        while not stop.is_set():
            ch.basic_publish("", "ui-rates", b"r")
            time.sleep(0.02)
        conn.close()

    ui.login("ui-admin", PASSWORDS["ui-admin"])
    publisher = threading.Thread(target=publish, daemon=True)
    publisher.start()
    try:
        ui.page.wait_for_selector("tr[data-series='publish']:not([data-value='0']):not([data-value=''])",
                                  state="attached", timeout=20_000)  # fmt: skip
        shown = float(ui.attrs("tr[data-series='publish']", "data-value")[0])
        api_rate = env.api("GET", "/api/overview")[1]["message_stats"]["publish_details"]["rate"]
        assert shown > 0 and api_rate > 0
        # the chart draws the 5 s samples the page has polled: a line needs a second one
        ui.page.wait_for_function(
            "() => Number(document.querySelector(\"svg[data-chart='rates']\")?.dataset.points) >= 2",
            timeout=20_000,
        )
        assert int(ui.attrs("svg[data-chart='rates']", "data-points")[0]) >= 2
        ui.shot("overview")
    finally:
        stop.set()
        publisher.join(10)
    env.api("DELETE", "/api/queues/%2F/ui-rates")


# -- hashbroker's own pages --------------------------------------------------------------------------

RING = [("ui-ring.a", "1"), ("ui-ring.b", "3")]
MOD = [("ui-mod.a", "1"), ("ui-mod.b", "1"), ("ui-mod.c", "1")]


def _declare_hash(env: Env, name: str, kind: str, bindings: list[tuple[str, str]]) -> None:
    conn = env.amqp()
    ch = conn.channel()
    ch.exchange_declare(name, kind)
    for queue, key in bindings:
        ch.queue_declare(queue)
        ch.queue_bind(queue, name, key)
    conn.close()


def _publish(env: Env, exchange: str, keys: list[str]) -> None:
    conn = env.amqp()
    ch = conn.channel()
    ch.confirm_delivery()
    for k in keys:
        ch.basic_publish(exchange, k, b"m")
    conn.close()


def test_hash_exchange_page_shows_distribution_ring_and_live_trace(ui: UI, env: Env) -> None:
    _declare_hash(env, "ui-ring", "x-consistent-hash", RING)
    keys = [f"k-{i}" for i in range(400)]
    _publish(env, "ui-ring", keys)
    predicted = Counter(qn for qs in exchanges.predict("x-consistent-hash", RING, keys) for qn in qs)
    ui.login("ui-management", PASSWORDS["ui-management"])
    ui.go("hash/%2F/ui-ring", "hash-exchange")
    bars = ui.page.locator("g.bar")
    got = {bars.nth(i).get_attribute("data-queue"): int(bars.nth(i).get_attribute("data-messages") or -1)
           for i in range(bars.count())}  # fmt: skip
    assert got == dict(predicted)
    shares = dict(zip(ui.attrs("g.bar", "data-queue"), ui.attrs("g.bar", "data-share"), strict=True))
    assert float(shares["ui-ring.b"]) == pytest.approx(0.75)
    firsts = ui.attrs("tr[data-bucket-first]", "data-bucket-first")
    lasts = ui.attrs("tr[data-bucket-first]", "data-bucket-last")
    assert list(zip(ui.attrs("tr[data-bucket-first]", "data-queue"), firsts, lasts, strict=True)) == [
        ("ui-ring.a", "0", "0"), ("ui-ring.b", "1", "3")]  # fmt: skip

    ui.page.wait_for_selector(".hash-live-list[data-polls]", state="attached")  # the watch is on
    late = [f"late-{i}" for i in range(20)]
    _publish(env, "ui-ring", late)
    live_rows = "div.hash-live[data-exchange='ui-ring'] tr[data-seq]"
    ui.page.wait_for_function(f'() => document.querySelectorAll("{live_rows}").length >= 20')
    rows = ui.page.eval_on_selector_all(
        live_rows,
        "ns => ns.map(n => [n.dataset.routingKey, n.dataset.destination, n.dataset.bucket])",
    )
    seqs = ui.attrs(live_rows, "data-seq")
    assert len(seqs) == len(set(seqs)) == 20  # each message once
    where = dict(zip(late, exchanges.predict("x-consistent-hash", RING, late), strict=True))
    for key, destination, bucket in rows:
        assert [destination] == where[key] and 0 <= int(bucket) < 4
    ui.shot("hash-exchange")
    ui.go("hash", "hash")
    assert "ui-ring" in ui.attrs("div.hash-exchange", "data-exchange")
    ui.shot("hash-exchanges")
    ui.go("exchanges/%2F/ui-ring", "exchange")
    assert ui.page.locator("div.hash-exchange[data-exchange='ui-ring'] g.bar").count() == 2


def test_modulus_hash_page_learns_its_residues_from_the_live_trace(ui: UI, env: Env) -> None:
    _declare_hash(env, "ui-mod", "x-modulus-hash", MOD)
    ui.login("ui-admin", PASSWORDS["ui-admin"])
    ui.go("hash/%2F/ui-mod", "hash-exchange")
    assert ui.attrs("g.bar", "data-share") == ["0.333333"] * 3
    ui.page.wait_for_selector(".hash-live-list[data-polls]", state="attached")
    keys = [f"m-{i}" for i in range(60)]
    _publish(env, "ui-mod", keys)
    ui.page.wait_for_function(
        "() => [...document.querySelectorAll('tr[data-residue]')].every(n => n.dataset.destination)"
    )
    residues = ui.attrs("tr[data-residue]", "data-residue")
    learned = dict(zip(residues, ui.attrs("tr[data-residue]", "data-destination"), strict=True))
    assert sorted(learned.values()) == sorted(qn for qn, _ in MOD)
    rows = ui.page.eval_on_selector_all(
        "div.hash-live[data-exchange='ui-mod'] tr[data-seq]",
        "ns => ns.map(n => [n.dataset.routingKey, n.dataset.destination, n.dataset.bucket])",
    )
    where = dict(zip(keys, exchanges.predict("x-modulus-hash", MOD, keys), strict=True))
    assert len(rows) == 50  # the exchange's page keeps its last 50
    for key, destination, residue in rows:
        assert [destination] == where[key] and learned[residue] == destination
    ui.shot("hash-exchange-modulus")


# -- every page, as an administrator -------------------------------------------------------------------

PAGES = [
    ("", "overview"),
    ("connections", "connections"),
    ("channels", "channels"),
    ("exchanges", "exchanges"),
    ("exchanges/%2F/amq.default", "exchange"),
    ("exchanges/%2F/amq.topic", "exchange"),
    ("queues", "queues"),
    ("queues/%2F/ui-consumed", "queue"),
    ("hash", "hash"),
    ("users", "users"),
    ("users/guest", "user"),
    ("vhosts", "vhosts"),
    ("vhosts/%2F", "vhost"),
    ("policies", "policies"),
    ("limits", "limits"),
    ("definitions", "definitions"),
]


def test_every_page_renders_without_errors(ui: UI, env: Env) -> None:
    _declare_hash(env, "ui-ring", "x-consistent-hash", RING)
    policy = {"pattern": "^ui-page$", "definition": {"max-length": 5}}
    assert env.api("PUT", "/api/policies/%2F/ui-page", policy)[0] == 201
    ui.login("ui-admin", PASSWORDS["ui-admin"])
    for route, page in [*PAGES, ("policies/%2F/ui-page", "policy"), ("hash/%2F/ui-ring", "hash-exchange")]:
        ui.go(route, page)
        error = ui.page.evaluate("document.body.dataset.error || ''")
        assert error == "", f"#/{route}: {error}"
        ui.shot("page-" + (route.replace("/", "_").replace("%2F", "root") or "overview"))
    ui.go("no/such/page", "not-found")
    env.api("DELETE", "/api/policies/%2F/ui-page")
