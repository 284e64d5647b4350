"""The RabbitMQ Java client against hashbroker over real sockets (and against RabbitMQ 3.10.8).

``tests/clients/java/HashbrokerJavaClient.java`` is compiled at test time (``javac``) against the
Debian package ``librabbitmq-client-java`` (``/usr/share/java/amqp-client.jar``, amqp-client 5.0.0,
which needs ``slf4j-api.jar`` from ``libslf4j-java``; ``slf4j-nop.jar`` silences its no-binding warning). It

* runs the seed README's three consistent-hash examples as the README's Java versions are written
  (durable q1..q4 purged, ``exchangeDeclare(..., "x-consistent-hash", ..., args)``, weights
  "1","1","2","2", ``confirmSelect``, ``basicPublish``, ``waitForConfirmsOrDie``) with
  ``messages_for(...)`` messages (the README has a Java version of all three: 100,000 each), then the
  per-queue counts are compared with RabbitMQ's;
* runs a small differential (``diff`` mode): one JSON line per step of what a Java user observes
  (consume+ack round trip with every property and header type, basic.get/nack, mandatory publishes
  returned 312 NO_ROUTE before their ack, channel errors as ShutdownSignalException reasons,
  server properties' keys and capabilities, negotiated tune values, basic.cancel on queue deletion),
  once against the live RabbitMQ and once against hashbroker; the lines must be equal once the
  per-run name suffix and server-generated consumer tags are replaced by placeholders.

Skipped with the reason when ``java``/``javac`` or the jars are missing. ``HASHBROKER_JAVA_CLASSPATH``
(``os.pathsep``-separated jars) overrides the jar lookup.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.differential_support import (
    RABBITMQ_SERVER_PROPERTY_KEYS,
    README_EXAMPLES,
    check_readme_counts,
    hashbroker_url,
    messages_for,
)

pytestmark = [pytest.mark.slow]

SOURCE = Path(__file__).parent / "java" / "HashbrokerJavaClient.java"
MAIN_CLASS = "HashbrokerJavaClient"
JAVA_DIR = Path("/usr/share/java")
#: jar -> Debian package that ships it (for the skip reason)
REQUIRED_JARS = {"amqp-client.jar": "librabbitmq-client-java", "slf4j-api.jar": "libslf4j-java"}
OPTIONAL_JARS = ("slf4j-nop.jar",)
INSTALL_HINT = "apt-get install -y librabbitmq-client-java"


def java_client_jars() -> tuple[list[str], str | None]:
    """(jars, None) when the Java client can be compiled and run, else ([], reason to skip)."""
    for tool in ("java", "javac"):
        if shutil.which(tool) is None:
            return [], f"{tool} is not installed (a JDK, e.g. apt-get install -y openjdk-17-jdk-headless)"
    override = os.environ.get("HASHBROKER_JAVA_CLASSPATH")
    if override:
        jars = [j for j in override.split(os.pathsep) if j]
        missing = [j for j in jars if not Path(j).is_file()]
        if missing:
            return [], f"HASHBROKER_JAVA_CLASSPATH names missing files: {missing}"
        return jars, None
    jars = []
    for jar, package in REQUIRED_JARS.items():
        path = JAVA_DIR / jar
        if not path.is_file():
            return [], f"{path} is missing (Debian package {package}: {INSTALL_HINT})"
        jars.append(str(path))
    jars += [str(JAVA_DIR / jar) for jar in OPTIONAL_JARS if (JAVA_DIR / jar).is_file()]
    return jars, None


def compile_java(out: Path, *sources: Path, timeout: float = 180) -> str:
    """Compile `sources` into `out` against the client jars (skips without them); the classpath."""
    jars, reason = java_client_jars()
    if reason:
        pytest.skip(reason)
    proc = subprocess.run(
        ["javac", "-cp", os.pathsep.join(jars), "-d", str(out), *map(str, sources)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, f"javac failed:\n{proc.stdout}\n{proc.stderr}"
    return os.pathsep.join([str(out), *jars])


@pytest.fixture(scope="module")
def java_classpath(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Compile the Java program once per module; the classpath to run it with."""
    return compile_java(tmp_path_factory.mktemp("java-classes"), SOURCE, timeout=120)


def run_java(classpath: str, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["java", "-cp", classpath, MAIN_CLASS, *args], capture_output=True, text=True, timeout=timeout
    )


# --------------------------------------------------------------------------------------------------
# The README examples
# --------------------------------------------------------------------------------------------------


@pytest.mark.timeout(240)
@pytest.mark.parametrize("example", list(README_EXAMPLES))
def test_java_readme_example(example: str, java_classpath: str, request: pytest.FixtureRequest) -> None:
    url = hashbroker_url(request)
    n = messages_for(example, readme_client=True)  # the README has a Java version of each example
    proc = run_java(java_classpath, "readme", url, example, str(n), timeout=180)
    assert proc.returncode == 0 and proc.stdout.strip() == "done", (proc.stdout[-500:], proc.stderr[-3000:])
    check_readme_counts(request, url, example, n)


# --------------------------------------------------------------------------------------------------
# The differential
# --------------------------------------------------------------------------------------------------

_CTAG = re.compile(r"amq\.ctag-[A-Za-z0-9_\-]+")


def java_observation(classpath: str, url: str) -> list[dict[str, Any]]:
    """The diff-mode lines against ``url``, the run's name suffix and generated tags scrubbed."""
    suffix = uuid.uuid4().hex[:12]
    proc = run_java(classpath, "diff", url, suffix, timeout=120)
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    text = _CTAG.sub("amq.ctag-*", proc.stdout.replace(suffix, "<suffix>"))
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _step(obs: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(o for o in obs if o["step"] == name)


@pytest.mark.live
@pytest.mark.timeout(240)
def test_java_differential(java_classpath: str, request: pytest.FixtureRequest) -> None:
    rabbit_url: str = request.getfixturevalue("rabbitmq_url")
    expected = java_observation(java_classpath, rabbit_url)
    actual = java_observation(java_classpath, hashbroker_url(request))
    if actual != expected:
        diff = difflib.unified_diff(
            [json.dumps(o, sort_keys=True) for o in expected],
            [json.dumps(o, sort_keys=True) for o in actual],
            "rabbitmq-3.10.8",
            "hashbroker",
            lineterm="",
        )
        pytest.fail("Java client sees hashbroker differ from RabbitMQ:\n" + "\n".join(diff), pytrace=False)


def test_java_client_on_hashbroker_alone(java_classpath: str, request: pytest.FixtureRequest) -> None:
    """The differential's key facts, pinned without a live RabbitMQ (values observed on 3.10.8)."""
    obs = java_observation(java_classpath, hashbroker_url(request))
    server = _step(obs, "server_properties")
    assert server["keys"] == RABBITMQ_SERVER_PROPERTY_KEYS
    assert [server["channel_max"], server["frame_max"], server["heartbeat"]] == [2047, 131072, 60]
    returns = [e for e in _step(obs, "mandatory")["events"] if isinstance(e, dict)]
    assert [(r["reply_code"], r["reply_text"], r["exchange"]) for r in returns] == [
        (312, "NO_ROUTE", "amq.direct"),
        (312, "NO_ROUTE", "hb.java.chx.<suffix>"),
    ]
    err = _step(obs, "queue_declare_passive_missing")["error"]
    assert (err["exception"], err["reply_code"], err["reply_text"], err["class_id"], err["method_id"]) == (
        "IOException caused by ShutdownSignalException",
        404,
        "NOT_FOUND - no queue 'hb.java.missing.<suffix>' in vhost '/'",
        50,
        10,
    )
    assert (err["hard_error"], err["channel_open"], err["connection_open"]) == (False, False, True)
    assert _step(obs, "exchange_declare_inequivalent_type")["error"]["reply_text"].endswith(
        "received 'direct' but current is ''x-consistent-hash''"
    )
    assert _step(obs, "delete_under_consumer")["event"] == ["cancel", "hb-java-ctag"]
    assert _step(obs, "closed") == {"step": "closed", "open": False}
