// Node's amqplib on one quorum queue and one stream, as a Node user writes it
// (tests/clients/test_quorum_stream_clients.py runs it against RabbitMQ 3.10.8 and hashbroker and
// compares the output).
//
//   node queue_types.js <amqp-url> <suffix>
//
// Prints one JSON object per line: {step, ...what amqplib exposed}. Names end in <suffix> and are
// deleted at the end.
//
// quorum: assertQueue(durable, x-queue-type quorum) on a ConfirmChannel, five persistent publishes,
//   waitForConfirms, checkQueue, prefetch(2) and a manual-ack consumer that nacks the first delivery
//   once (requeue): the redelivery carries x-delivery-count 1, after the other four.
// stream: assertQueue(x-queue-type stream), five confirmed publishes, prefetch(2), consume from
//   x-stream-offset 'first' acking each delivery, then from the numeric offset 3. For the
//   x-stream-offset / x-delivery-count header the AMQP field type is read from the raw content
//   header frame (amqplib decodes every integer type to a number).
'use strict';

const amqp = require('amqplib');

const [url, suffix] = process.argv.slice(2);
if (!url || !suffix) {
  process.stderr.write('usage: node queue_types.js <amqp-url> <suffix>\n');
  process.exit(2);
}
const WAIT_MS = 10000;
const MESSAGES = 5;
const qq = `hb.node.qq.${suffix}`;
const st = `hb.node.st.${suffix}`;

function within(promise, what, ms = WAIT_MS) {
  let timer;
  const limit = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timeout: ${what}`)), ms);
  });
  return Promise.race([promise, limit]).finally(() => clearTimeout(timer));
}

function emit(step, fields) {
  process.stdout.write(`${JSON.stringify({ step, ...fields })}\n`);
}

/** Content header frames (type 2) as amqplib reads them off its socket, before decoding. */
function tap(conn) {
  const stream = conn.connection.stream;
  const read = stream.read.bind(stream);
  let pending = Buffer.alloc(0);
  const headers = [];
  stream.read = (...args) => {
    const chunk = read(...args);
    if (chunk) {
      pending = Buffer.concat([pending, chunk]);
      while (pending.length >= 7) {
        const size = pending.readUInt32BE(3);
        if (pending.length < size + 8) break;
        if (pending.readUInt8(0) === 2) headers.push(Buffer.from(pending.subarray(7, 7 + size)));
        pending = pending.subarray(size + 8);
      }
    }
    return chunk;
  };
  return headers;
}

/** The AMQP field-type letter of header `key` in a raw content header payload (null if absent). */
function fieldType(raw, key) {
  const needle = Buffer.concat([Buffer.from([key.length]), Buffer.from(key)]);
  const at = raw.indexOf(needle);
  return at < 0 ? null : String.fromCharCode(raw[at + needle.length]);
}

/** Consume `n` deliveries; `decide(msg, i)` acks or nacks each one. */
async function consumeN(ch, queue, n, options, decide, rawHeaders, header) {
  const seen = [];
  let done;
  const finished = new Promise((resolve) => {
    done = resolve;
  });
  rawHeaders.length = 0;
  const ok = await within(
    ch.consume(
      queue,
      (msg) => {
        const i = seen.length;
        const headers = msg.properties.headers || {};
        seen.push({
          body: msg.content.toString(),
          delivery_tag: msg.fields.deliveryTag,
          redelivered: msg.fields.redelivered,
          n: headers.n === undefined ? null : headers.n,
          [header]: headers[header] === undefined ? null : headers[header],
        });
        decide(msg, i);
        if (seen.length === n) done();
      },
      options,
    ),
    'consume',
  );
  await within(finished, `${n} deliveries from ${queue}`);
  await within(ch.cancel(ok.consumerTag), 'cancel');
  seen.forEach((d, i) => {
    d.field_type = rawHeaders[i] ? fieldType(rawHeaders[i], header) : 'missing frame';
    d.raw_header = rawHeaders[i] ? rawHeaders[i].toString('hex') : null;
  });
  return seen;
}

async function publishConfirmed(ch, queue, prefix, step) {
  for (let i = 0; i < MESSAGES; i++) {
    ch.sendToQueue(queue, Buffer.from(`${prefix}${i}`), { persistent: true, headers: { n: i } });
  }
  await within(ch.waitForConfirms(), 'waitForConfirms');
  emit(step, { confirmed: MESSAGES });
}

async function quorum(conn, rawHeaders) {
  const ch = await conn.createConfirmChannel();
  const ok = await within(ch.assertQueue(qq, { durable: true, arguments: { 'x-queue-type': 'quorum' } }), 'assertQueue');
  emit('qq_declare', { message_count: ok.messageCount, consumer_count: ok.consumerCount });
  await publishConfirmed(ch, qq, 'q', 'qq_published');
  emit('qq_after_publish', { message_count: (await within(ch.checkQueue(qq), 'checkQueue')).messageCount });

  const cch = await conn.createChannel();
  await cch.prefetch(2);
  let nacked = false;
  const deliveries = await consumeN(
    cch,
    qq,
    MESSAGES + 1,
    { noAck: false, consumerTag: 'hb-node-qq' },
    (msg) => {
      if (!nacked) {
        nacked = true;
        cch.nack(msg, false, true);
      } else {
        cch.ack(msg);
      }
    },
    rawHeaders,
    'x-delivery-count',
  );
  emit('qq_deliveries', { deliveries });
  const after = await within(ch.checkQueue(qq), 'checkQueue');
  const get = await within(ch.get(qq, { noAck: false }), 'get');
  emit('qq_after_acks', { message_count: after.messageCount, get_empty: get === false });
  await cch.close();
  emit('qq_delete', { message_count: (await within(ch.deleteQueue(qq), 'deleteQueue')).messageCount });
  await ch.close();
}

async function readStream(conn, offset, n, tag, rawHeaders) {
  const ch = await conn.createChannel();
  await ch.prefetch(2);
  const seen = await consumeN(
    ch,
    st,
    n,
    { noAck: false, consumerTag: tag, arguments: { 'x-stream-offset': offset } },
    (msg) => ch.ack(msg),
    rawHeaders,
    'x-stream-offset',
  );
  await ch.close();
  return seen;
}

async function stream(conn, rawHeaders) {
  const ch = await conn.createConfirmChannel();
  const ok = await within(ch.assertQueue(st, { durable: true, arguments: { 'x-queue-type': 'stream' } }), 'assertQueue');
  emit('st_declare', { message_count: ok.messageCount, consumer_count: ok.consumerCount });
  await publishConfirmed(ch, st, 's', 'st_published');
  emit('st_from_first', { deliveries: await readStream(conn, 'first', MESSAGES, 'hb-node-st-first', rawHeaders) });
  emit('st_from_3', { deliveries: await readStream(conn, 3, MESSAGES - 3, 'hb-node-st-3', rawHeaders) });
  emit('st_delete', { message_count: (await within(ch.deleteQueue(st), 'deleteQueue')).messageCount });
  await ch.close();
}

async function cleanup() {
  let conn;
  try {
    conn = await within(amqp.connect(url, { timeout: 5000 }), 'cleanup connect');
    for (const q of [qq, st]) {
      const ch = await within(conn.createChannel(), 'cleanup channel');
      ch.on('error', () => {});
      await within(ch.deleteQueue(q), 'cleanup delete').catch(() => {});
      await ch.close().catch(() => {});
    }
  } catch (_err) {
    // best effort: the queues may be gone already
  } finally {
    if (conn) await conn.close().catch(() => {});
  }
}

async function main() {
  const conn = await within(amqp.connect(url, { timeout: 5000 }), 'connect');
  const rawHeaders = tap(conn);
  try {
    await quorum(conn, rawHeaders);
    await stream(conn, rawHeaders);
  } finally {
    await conn.close().catch(() => {});
  }
}

const watchdog = setTimeout(() => {
  process.stderr.write('queue_types.js: overall timeout\n');
  process.exit(3);
}, 90000);
watchdog.unref();

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(`${err && err.stack ? err.stack : err}\n`);
    cleanup().finally(() => process.exit(1));
  },
);
