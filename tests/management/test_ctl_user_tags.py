"""`hashbroker ctl set_user_tags` replaces a user's tags, keeps its password, and prints and exits as
rabbitmqctl does (checked against the live rabbitmqctl where one is installed)."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from broker.cli import ctl
from broker.embedded import BrokerThread
from tests.conftest import rabbitmq_reachable


@pytest.fixture
def api() -> Iterator[str]:
    with BrokerThread(host="127.0.0.1", port=0, management_port=0) as b:
        yield f"http://127.0.0.1:{b.broker.management.port}"


def http(base: str, path: str, auth: str = "guest:guest") -> tuple[int, Any]:
    req = urllib.request.Request(base + "/api" + path)
    req.add_header("authorization", "Basic " + base64.b64encode(auth.encode()).decode())
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, None


def run_ctl(capsys: pytest.CaptureFixture[str], url: str, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = ctl.run(["--url", url, *args])
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


def test_set_user_tags_replaces_tags_and_keeps_the_password(
    capsys: pytest.CaptureFixture[str], api: str
) -> None:
    assert run_ctl(capsys, api, "add_user", "alice", "s3cret")[0] == 0
    status, before = http(api, "/users/alice")
    assert status == 200 and before["tags"] == []
    rc, out, _ = run_ctl(capsys, api, "set_user_tags", "alice", "administrator", "management")
    assert rc == 0
    assert out == 'Setting tags for user "alice" to [administrator, management] ...\n'
    status, after = http(api, "/users/alice")
    assert after["tags"] == ["administrator", "management"]
    assert after["password_hash"] == before["password_hash"]
    assert http(api, "/overview", auth="alice:s3cret")[0] == 200  # the password still logs in
    rc, out, _ = run_ctl(capsys, api, "-q", "set_user_tags", "alice")
    assert (rc, out) == (0, "")
    assert http(api, "/users/alice")[1]["tags"] == []
    _, users, _ = run_ctl(capsys, api, "list_users")
    assert "alice\t[]" in users.splitlines()


def test_set_user_tags_for_a_missing_user(capsys: pytest.CaptureFixture[str], api: str) -> None:
    rc, out, err = run_ctl(capsys, api, "set_user_tags", "nobody", "management")
    assert rc == ctl.EX_NOUSER == 67
    assert out == 'Setting tags for user "nobody" to [management] ...\n'
    assert err == 'Error:\nUser "nobody" does not exist\n'


@pytest.mark.live
def test_set_user_tags_prints_and_exits_as_rabbitmqctl(capsys: pytest.CaptureFixture[str], api: str) -> None:
    if shutil.which("rabbitmqctl") is None or not rabbitmq_reachable():
        pytest.skip("rabbitmqctl or the reference RabbitMQ is not available to compare with")
    user = f"hbtags-{uuid.uuid4().hex[:8]}"
    subprocess.run(["rabbitmqctl", "add_user", user, "pw"], check=True, capture_output=True, timeout=60)
    try:
        assert run_ctl(capsys, api, "add_user", user, "pw")[0] == 0
        for args in (
            ("set_user_tags", user, "monitoring", "policymaker"),
            ("set_user_tags", user),
            ("set_user_tags", f"{user}-missing", "management"),
        ):
            live = subprocess.run(["rabbitmqctl", *args], capture_output=True, text=True, timeout=60)
            rc, out, err = run_ctl(capsys, api, *args)
            assert (rc, out) == (live.returncode, live.stdout)
            if live.returncode:
                assert err.strip() == live.stderr.strip()
        live_list = subprocess.run(["rabbitmqctl", "-q", "list_users"], capture_output=True, text=True)
        ours = run_ctl(capsys, api, "-q", "list_users")[1]
        assert {ln for ln in live_list.stdout.splitlines() if ln.startswith(user)} == {
            ln for ln in ours.splitlines() if ln.startswith(user)
        }
    finally:
        subprocess.run(["rabbitmqctl", "delete_user", user], capture_output=True, timeout=60)
