"""Bunny (Ruby) runs the seed README's Ruby consistent-hash examples against hashbroker.

The Ruby script mirrors the README: confirm_select, durable q1..q4 purged, weights 1,1,2,2, publish,
wait_for_confirms. Needs `ruby` and the Debian package `ruby-bunny` (apt-get install -y ruby-bunny);
skipped with that reason when missing.
"""

from __future__ import annotations

import shutil
import subprocess
import textwrap

import pytest

from tests.differential_support import (
    README_EXAMPLES,
    check_readme_counts,
    hashbroker_url,
    messages_for,
)

pytestmark = [pytest.mark.slow]

SCRIPT = textwrap.dedent(
    """
    require 'bunny'
    url, example, n = ARGV[0], ARGV[1], Integer(ARGV[2])
    conn = Bunny.new(url, connection_timeout: 5, read_timeout: 30, heartbeat: 0, logger: Logger.new(nil))
    conn.start
    ch = conn.create_channel
    qs = %w[q1 q2 q3 q4].map { |name| ch.queue(name, durable: true) }
    qs.each(&:purge)
    args = { 'routing_key' => {}, 'hash_header' => { 'hash-header' => 'hash-on' },
             'hash_property' => { 'hash-property' => 'message_id' } }.fetch(example)
    name = { 'routing_key' => 'e', 'hash_header' => 'e2', 'hash_property' => 'e3' }.fetch(example)
    x = ch.exchange(name, type: 'x-consistent-hash', durable: true, arguments: args)
    qs[0, 2].each { |q| q.bind(x, routing_key: '1') }
    qs[2, 2].each { |q| q.bind(x, routing_key: '2') }
    n.times do |i|
      case example
      when 'routing_key' then x.publish('', routing_key: i.to_s)
      when 'hash_header' then x.publish('', routing_key: '', headers: { 'hash-on' => i.to_s },
                                         content_type: 'text/plain', persistent: true)
      else x.publish('', routing_key: rand.to_s, message_id: i.to_s)
      end
    end
    # No publisher confirms: Bunny 2.19 mutates its unconfirmed-tag Set from the publishing thread
    # while its reader thread iterates it on acks ("can't add a new key into hash during
    # iteration"). A synchronous method after the publishes (queue.declare passive) is processed
    # after them on this channel, so every message has been routed when it returns.
    qs.each(&:message_count)
    conn.close
    puts 'done'
    """
)


def _bunny_available() -> str | None:
    if shutil.which("ruby") is None:
        return "ruby is not installed (apt-get install -y ruby-bunny)"
    probe = subprocess.run(["ruby", "-e", "require 'bunny'"], capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        return f"the bunny gem is not available (apt-get install -y ruby-bunny): {probe.stderr.strip()[:200]}"
    return None


@pytest.mark.timeout(150)
@pytest.mark.parametrize("example", list(README_EXAMPLES))
def test_bunny_readme_example(example: str, request: pytest.FixtureRequest) -> None:
    reason = _bunny_available()
    if reason:
        pytest.skip(reason)
    url = hashbroker_url(request)
    # the README's Ruby examples are routing key and hash-property; header uses the smaller count
    n = messages_for(example, readme_client=example != "hash_header")
    proc = subprocess.run(
        ["ruby", "-e", SCRIPT, url, example, str(n)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "done", (proc.stdout[-500:], proc.stderr[-2000:])
    check_readme_counts(request, url, example, n)
