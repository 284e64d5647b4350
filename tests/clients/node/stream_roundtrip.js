// rabbitmq-stream-js-client as a Node user writes it: publish N messages with confirms to a new
// stream, then consume them back from the first offset (tests/clients/test_clients_node_stream.py
// runs it against hashbroker and against RabbitMQ 3.10.8 and compares the output).
//
//   node stream_roundtrip.js <host> <port> <stream> [count] [v1]
//
// Prints one JSON line: what the client observed (confirmed ids, publish errors, bodies and
// offsets read back, in order or not) and how long publishing with confirms and consuming took.
// The stream is deleted at the end.
//
// Every release of the client (0.4.2 to 1.0.0) sends exchange-command-versions right after open,
// a command RabbitMQ 3.11 added: RabbitMQ 3.10.8 answers it by closing the connection
// (UNKNOWN_FRAME), which the client cannot decode ("Unknown response 22") and the process dies.
// With `v1` the program keeps the client from sending it (the version-1 commands it uses are the
// ones 3.10.8 has), which is how a Node user reaches a 3.10.8 broker with this client.
'use strict';

const rabbit = require('rabbitmq-stream-js-client');
const { Connection } = require('rabbitmq-stream-js-client/dist/connection');

const [host, port, stream, countArg, mode] = process.argv.slice(2);
if (!host || !port || !stream) {
  process.stderr.write('usage: node stream_roundtrip.js <host> <port> <stream> [count] [v1]\n');
  process.exit(2);
}
const N = Number(countArg || 100000);
if (mode === 'v1') {
  Connection.prototype.exchangeCommandVersions = async function exchangeCommandVersions() {
    return true;
  };
}
const WAIT_MS = 120000;

function waitFor(check, what) {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const timer = setInterval(() => {
      if (check()) {
        clearInterval(timer);
        resolve();
      } else if (Date.now() - started > WAIT_MS) {
        clearInterval(timer);
        reject(new Error(`timeout: ${what}`));
      }
    }, 5);
  });
}

async function main() {
  const out = { count: N };
  const client = await rabbit.connect({
    hostname: host,
    port: Number(port),
    username: 'guest',
    password: 'guest',
    vhost: '/',
    heartbeat: 0,
  });
  try {
    await client.createStream({ stream, arguments: {} });
    const publisher = await client.declarePublisher({ stream });
    let confirmed = 0;
    let errors = 0;
    let confirmedMax = 0n;
    publisher.on('publish_confirm', (err, ids) => {
      if (err) {
        errors += ids.length;
        return;
      }
      confirmed += ids.length;
      for (const id of ids) if (id > confirmedMax) confirmedMax = id;
    });
    const t0 = Date.now();
    for (let i = 0; i < N; i++) {
      await publisher.send(Buffer.from(`m${i}`));
    }
    await publisher.flush();
    await waitFor(() => confirmed + errors >= N, `confirms (${confirmed}/${N})`);
    out.publish_ms = Date.now() - t0;
    out.confirmed = confirmed;
    out.publish_errors = errors;
    out.last_publishing_id = confirmedMax.toString();
    await publisher.close();

    let consumed = 0;
    let inOrder = true;
    let offsetsInOrder = true;
    let lastOffset = -1n;
    let first = null;
    let last = null;
    const t1 = Date.now();
    const consumer = await client.declareConsumer({ stream, offset: rabbit.Offset.first() }, (message) => {
      const body = message.content.toString();
      if (first === null) first = body;
      last = body;
      if (body !== `m${consumed}`) inOrder = false;
      const offset = BigInt(message.offset);
      if (offset !== BigInt(consumed)) offsetsInOrder = false;
      lastOffset = offset;
      consumed += 1;
    });
    await waitFor(() => consumed >= N, `deliveries (${consumed}/${N})`);
    out.consume_ms = Date.now() - t1;
    out.consumed = consumed;
    out.bodies_in_order = inOrder;
    out.offsets_in_order = offsetsInOrder;
    out.first = first;
    out.last = last;
    out.last_offset = lastOffset.toString();
    await consumer.close();
  } finally {
    try {
      await client.deleteStream({ stream });
    } finally {
      await client.close();
    }
  }
  process.stdout.write(`${JSON.stringify(out)}\n`);
}

main().catch((err) => {
  process.stdout.write(`${JSON.stringify({ error: String(err && err.message ? err.message : err) })}\n`);
  process.exit(1);
});
