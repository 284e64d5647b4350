"""Record RabbitMQ 3.10.8's quorum-queue and stream behaviour into tests/data/quorum_stream_observations.json.

Run from the repository root (needs the reference broker on 127.0.0.1:5672, guest/guest, management on
15672, the quorum_queue and stream_queue feature flags, the consistent-hash and sharding plugins)::

    .venv/bin/python tools/probe_quorum_streams.py                 # every scenario, (re)write the file
    .venv/bin/python tools/probe_quorum_streams.py st_offsets ...  # only these, merged into the file
    .venv/bin/python tools/probe_quorum_streams.py --output /tmp/x.json --no-merge

Why: hashbroker has no quorum queues or streams yet; the scenarios in ``tests/qs_scenarios.py`` pin
what RabbitMQ does (reply codes and texts with class/method ids, headers, redelivery order, management
fields) so that the implementation is checked against observations, not against a reading of the
Erlang. Every scenario scrubs its generated names, node names and timestamps, so two runs against the
same broker give the same file (compare them with ``diff``). Objects are named ``qsobs-<run>-*``; they
are deleted after each scenario. ``--remove-leftovers`` deletes every ``qsobs-*`` queue, exchange and
policy first (after an interrupted run; never while another probe runs, it would delete that run's
objects).
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.qs_scenarios import MGMT_URL, PREFIX, QsRegistry, registry  # noqa: E402

DEFAULT_OUTPUT = REPO / "tests" / "data" / "quorum_stream_observations.json"
DEFAULT_URL = "amqp://guest:guest@127.0.0.1:5672/%2F"


def _mgmt(mgmt_url: str, method: str, path: str) -> Any:
    req = urllib.request.Request(mgmt_url + path, method=method)
    req.add_header("Authorization", "Basic " + base64.b64encode(b"guest:guest").decode())
    with urllib.request.urlopen(req, timeout=10) as resp:
        raw = resp.read()
        return json.loads(raw) if raw else None


def remove_leftovers(mgmt_url: str) -> list[str]:
    """Delete every queue, exchange and policy named ``qsobs-*`` (from an interrupted run)."""
    removed = []
    for kind in ("queues", "exchanges", "policies"):
        for item in _mgmt(mgmt_url, "GET", f"/api/{kind}/%2F"):
            if item["name"].startswith(PREFIX):
                _mgmt(mgmt_url, "DELETE", f"/api/{kind}/%2F/{urllib.parse.quote(item['name'], safe='')}")
                removed.append(f"{kind}:{item['name']}")
    return removed


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("scenarios", nargs="*", help="scenario names (default: all)")
    parser.add_argument("--url", default=DEFAULT_URL)
    parser.add_argument("--mgmt", default=MGMT_URL)
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    parser.add_argument("--no-merge", action="store_true", help="do not keep other scenarios of the file")
    parser.add_argument(
        "--remove-leftovers",
        action="store_true",
        help="first delete every qsobs-* object (no other probe running)",
    )
    args = parser.parse_args()

    reg: QsRegistry = registry
    reg.mgmt_url = args.mgmt
    names = args.scenarios or list(reg.scenarios)
    unknown = [n for n in names if n not in reg.scenarios]
    if unknown:
        parser.error(f"unknown scenarios: {unknown}")
    if args.remove_leftovers:
        print(f"removed leftovers: {remove_leftovers(args.mgmt)}", file=sys.stderr)

    data: dict[str, Any] = {}
    if args.output.exists() and not args.no_merge and args.scenarios:
        data = json.loads(args.output.read_text())
    overview = _mgmt(args.mgmt, "GET", "/api/overview")
    data["_meta"] = {
        "rabbitmq_version": overview["rabbitmq_version"],
        "produced_by": "tools/probe_quorum_streams.py",
        "scenarios_in": "tests/qs_scenarios.py",
    }
    failed = []
    for name in names:
        start = time.monotonic()
        try:
            data[name] = reg.run(name, args.url)
            status = "ok"
        except Exception as exc:  # keep going: one broken scenario must not lose the others
            data[name] = {"probe_error": f"{type(exc).__name__}: {exc}"}
            failed.append(name)
            status = f"FAILED {type(exc).__name__}: {exc}"
        print(f"{name}: {status} ({time.monotonic() - start:.1f}s)", file=sys.stderr)
    ordered = {"_meta": data.pop("_meta")}
    ordered.update({k: data[k] for k in sorted(data)})
    args.output.write_text(json.dumps(ordered, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    print(f"wrote {args.output} ({len(names)} scenarios, {len(failed)} failed: {failed})", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
