// The consistent-hash plugin README's three examples, written as a Node user would with amqplib.
//
//   node readme_example.js <amqp-url> <routing_key|hash_header|hash_property> <messages>
//
// Confirm channel, durable q1..q4 (purged), exchange e / e2 / e3 of type x-consistent-hash with the
// README's arguments, bindings with weights "1", "1", "2", "2", <messages> publishes (message i
// carries its hash input as routing key, header "hash-on" or message_id), waitForConfirms. Prints
// "done"; tests/clients/test_clients_node.py then reads the per-queue counts and compares them with RabbitMQ.
'use strict';

const amqp = require('amqplib');

const EXAMPLES = {
  routing_key: { exchange: 'e', arguments: {} },
  hash_header: { exchange: 'e2', arguments: { 'hash-header': 'hash-on' } },
  hash_property: { exchange: 'e3', arguments: { 'hash-property': 'message_id' } },
};
const QUEUES = ['q1', 'q2', 'q3', 'q4'];
const WEIGHTS = ['1', '1', '2', '2'];

async function main() {
  const [url, example, count] = process.argv.slice(2);
  const spec = EXAMPLES[example];
  if (!spec) throw new Error(`unknown example ${example}`);
  const n = Number.parseInt(count, 10);

  const conn = await amqp.connect(url, { timeout: 5000 });
  try {
    const ch = await conn.createConfirmChannel();
    await ch.assertExchange(spec.exchange, 'x-consistent-hash', {
      durable: true,
      arguments: spec.arguments,
    });
    for (const [i, q] of QUEUES.entries()) {
      await ch.assertQueue(q, { durable: true });
      await ch.purgeQueue(q);
      await ch.bindQueue(q, spec.exchange, WEIGHTS[i]);
    }
    const body = Buffer.alloc(0);
    for (let i = 0; i < n; i++) {
      let ok;
      if (example === 'routing_key') {
        ok = ch.publish(spec.exchange, String(i), body);
      } else if (example === 'hash_header') {
        ok = ch.publish(spec.exchange, '', body, {
          headers: { 'hash-on': String(i) },
          contentType: 'text/plain',
          persistent: true,
        });
      } else {
        ok = ch.publish(spec.exchange, '', body, { messageId: String(i) });
      }
      // respect the socket's backpressure as amqplib's docs ask: wait for 'drain' on false
      if (!ok) await new Promise((resolve) => ch.once('drain', resolve));
    }
    await ch.waitForConfirms();
    await ch.close();
  } finally {
    await conn.close();
  }
  process.stdout.write('done\n');
}

main().catch((err) => {
  process.stderr.write(`${err && err.stack ? err.stack : err}\n`);
  process.exit(1);
});
