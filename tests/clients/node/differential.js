// What Node's amqplib observes from a broker, as one JSON document (tests/clients/test_clients_node.py runs it
// against RabbitMQ 3.10.8 and against hashbroker and compares the two).
//
//   node differential.js <amqp-url> <suffix>
//
// Every name it creates ends in <suffix> (the caller replaces it by a placeholder; the live RabbitMQ
// is shared, so names must be unique) and is deleted at the end. Each section records what a Node
// user can see: resolved values of promise calls, the Error amqplib rejects with or emits (message,
// code, classId, methodId), 'return' / 'close' / 'error' events in the order they fire, and the raw
// bytes of every content header and body frame the client received (tapped from the socket), so
// properties and headers are compared byte for byte, not only after amqplib decoded them.
'use strict';

const amqp = require('amqplib');

const [url, suffix] = process.argv.slice(2);
if (!url || !suffix) {
  process.stderr.write('usage: node differential.js <amqp-url> <suffix>\n');
  process.exit(2);
}
const STEP_MS = 5000;
const created = { queues: [], exchanges: [] };

const name = (label) => `hb.node.${label}.${suffix}`;
const queueName = (label) => {
  const q = name(label);
  created.queues.push(q);
  return q;
};
const exchangeName = (label) => {
  const x = name(label);
  created.exchanges.push(x);
  return x;
};

/** A promise that rejects after ms: a silent broker must fail a step, never hang the script. */
function within(promise, what, ms = STEP_MS) {
  let timer;
  const limit = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timeout: ${what}`)), ms);
  });
  return Promise.race([promise, limit]).finally(() => clearTimeout(timer));
}

/** JSON form of a value amqplib hands to the user (Buffers as hex, typed values kept apart). */
function plain(value) {
  if (Buffer.isBuffer(value)) return { hex: value.toString('hex') };
  if (Array.isArray(value)) return value.map(plain);
  if (value && typeof value === 'object') {
    const out = {};
    for (const key of Object.keys(value).sort()) {
      if (value[key] !== undefined) out[key] = plain(value[key]);
    }
    return out;
  }
  if (typeof value === 'number' && !Number.isFinite(value)) return { number: String(value) };
  return value === undefined ? null : value;
}

function errorObs(err) {
  if (!err) return null;
  return {
    message: err.message,
    code: err.code === undefined ? null : err.code,
    classId: err.classId === undefined ? null : err.classId,
    methodId: err.methodId === undefined ? null : err.methodId,
  };
}

/** Resolve to {ok: value} or {rejected: error} (a rejection is an observation, not a failure). */
async function attempt(what, fn) {
  try {
    return { ok: plain(await within(fn(), what)) };
  } catch (err) {
    if (err && /^timeout: /.test(err.message)) throw err;
    return { rejected: errorObs(err) };
  }
}

/** Record a channel's 'error', 'close' and 'return' events in firing order. */
function watch(ch) {
  const events = [];
  const closed = new Promise((resolve) => ch.once('close', resolve));
  ch.on('error', (err) => events.push({ event: 'error', ...errorObs(err) }));
  ch.on('close', () => events.push({ event: 'close' }));
  ch.on('return', (msg) =>
    events.push({ event: 'return', fields: plain(msg.fields), properties: plain(msg.properties), content: plain(msg.content) }),
  );
  return { events, closed: () => within(closed, 'channel close') };
}

/**
 * Tee the bytes amqplib reads from its socket and keep every content header (type 2) and body
 * (type 3) frame as hex: the broker's encoding of properties and headers, before amqplib decodes it.
 */
function tap(conn) {
  const stream = conn.connection.stream;
  const read = stream.read.bind(stream);
  let pending = Buffer.alloc(0);
  const frames = [];
  stream.read = (...args) => {
    const chunk = read(...args);
    if (chunk) {
      pending = Buffer.concat([pending, chunk]);
      while (pending.length >= 7) {
        const size = pending.readUInt32BE(3);
        if (pending.length < size + 8) break;
        const type = pending.readUInt8(0);
        if (type === 2 || type === 3) {
          frames.push({
            type: type === 2 ? 'header' : 'body',
            channel: pending.readUInt16BE(1),
            payload: pending.subarray(7, 7 + size).toString('hex'),
          });
        }
        pending = pending.subarray(size + 8);
      }
    }
    return chunk;
  };
  return {
    take() {
      return frames.splice(0, frames.length);
    },
  };
}

/** Every publish property amqplib supports, and a headers table with each field type it encodes. */
const PROPERTIES = {
  contentType: 'application/octet-stream',
  contentEncoding: 'identity',
  headers: {
    string: 'héllo',
    empty: '',
    byte: 7,
    negbyte: -100,
    short: 1000,
    int: 100000,
    long: 2 ** 40,
    neglong: -(2 ** 40),
    double: 1.5,
    float: { '!': 'float', value: 0.25 },
    ubyte: { '!': 'unsignedbyte', value: 200 },
    ushort: { '!': 'unsignedshort', value: 60000 },
    uint: { '!': 'unsignedint', value: 4000000000 },
    timestamp: { '!': 'timestamp', value: 1700000000 },
    decimal: { '!': 'decimal', value: { places: 2, digits: 12345 } },
    yes: true,
    no: false,
    nothing: null,
    bytes: Buffer.from([0, 1, 2, 254, 255]),
    list: ['a', 1, true, null, ['nested'], { k: 'v' }],
    table: { inner: { deeper: 'x' }, n: 42 },
  },
  deliveryMode: 2,
  priority: 5,
  correlationId: 'corr-1',
  replyTo: 'reply.queue',
  expiration: '60000',
  messageId: 'msg-1',
  timestamp: 1700000001,
  type: 'example.type',
  userId: 'guest',
  appId: 'hashbroker-node-tests',
};
const BODY = Buffer.concat([Buffer.from('body: ünïcode, then every byte: '), Buffer.from([...Array(256).keys()])]);

async function handshake(conn) {
  const c = conn.connection;
  const props = c.serverProperties || {};
  return {
    // what amqplib negotiated (it proposes channelMax 0, frameMax 131072, heartbeat from the URL)
    tuned: { channelMax: c.channelMax, frameMax: c.frameMax, heartbeat: c.heartbeat },
    capabilities: plain(props.capabilities || {}),
    server_property_keys: Object.keys(props).sort(),
  };
}

function identity(conn) {
  const props = conn.connection.serverProperties || {};
  const out = {};
  for (const key of ['product', 'version', 'platform', 'cluster_name']) out[key] = props[key] === undefined ? null : String(props[key]);
  return out;
}

async function roundtrip(conn, frames) {
  const ch = await conn.createConfirmChannel();
  const w = watch(ch);
  const q = queueName('rt');
  const out = {};
  out.assert = await attempt('assertQueue', () => ch.assertQueue(q, { durable: false }));
  frames.take();
  out.publish_returned = ch.publish('', q, BODY, PROPERTIES);
  out.publish_second = ch.sendToQueue(q, Buffer.from('second'), { headers: { n: 2 } });
  out.confirms = await attempt('waitForConfirms', () => ch.waitForConfirms().then(() => 'confirmed'));
  out.check_before = await attempt('checkQueue', () => ch.checkQueue(q));
  await within(ch.prefetch(1), 'prefetch');
  const deliveries = [];
  let first;
  const got = new Promise((resolve) => {
    first = resolve;
  });
  const consumeOk = await within(
    ch.consume(q, (msg) => {
      deliveries.push(msg);
      if (deliveries.length === 1) first();
    }),
    'consume',
  );
  out.consume_ok = plain(consumeOk);
  await within(got, 'first delivery');
  // prefetch 1: the second message waits until the first is acked
  await new Promise((resolve) => setTimeout(resolve, 200));
  out.delivered_before_ack = deliveries.length;
  ch.ack(deliveries[0]);
  const deadline = Date.now() + STEP_MS;
  while (deliveries.length < 2 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
  // nack with requeue: redelivered to the same consumer with redelivered=true
  ch.nack(deliveries[1], false, true);
  while (deliveries.length < 3 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
  ch.ack(deliveries[2]);
  out.deliveries = deliveries.map((msg) => ({
    fields: plain(msg.fields),
    properties: plain(msg.properties),
    content: plain(msg.content),
  }));
  out.cancel = await attempt('cancel', () => ch.cancel(consumeOk.consumerTag));
  out.check_after = await attempt('checkQueue', () => ch.checkQueue(q));
  out.get_empty = await attempt('get', () => ch.get(q));
  ch.sendToQueue(q, Buffer.from('third'), { messageId: 'm3' });
  await within(ch.waitForConfirms(), 'confirm third');
  const third = await within(ch.get(q, { noAck: false }), 'get third');
  out.get_third = third ? { fields: plain(third.fields), properties: plain(third.properties), content: plain(third.content) } : third;
  if (third) ch.ack(third);
  out.purge = await attempt('purgeQueue', () => ch.purgeQueue(q));
  out.delete = await attempt('deleteQueue', () => ch.deleteQueue(q));
  out.raw_frames = frames.take();
  await within(ch.close(), 'channel close');
  out.events = w.events;
  return out;
}

async function mandatoryReturn(conn, frames) {
  const ch = await conn.createConfirmChannel();
  const w = watch(ch);
  const chx = exchangeName('chx');
  const out = {};
  out.declare = await attempt('assertExchange', () =>
    ch.assertExchange(chx, 'x-consistent-hash', { durable: false, arguments: { 'hash-header': 'hash-on' } }),
  );
  frames.take();
  const acks = [];
  const push = (label) => (err) => {
    w.events.push({ event: 'confirm', label, error: errorObs(err) });
    acks.push(label);
  };
  // to a direct exchange with no binding for the key, and to a consistent-hash exchange with no
  // bindings at all: both come back as basic.return 312 NO_ROUTE before their basic.ack
  ch.publish('amq.direct', name('nowhere'), Buffer.from('returned 1'), { mandatory: true, messageId: 'r1', headers: { a: 1 } }, push('direct'));
  ch.publish(chx, 'k', Buffer.from('returned 2'), { mandatory: true, headers: { 'hash-on': 'abc' } }, push('chx'));
  // not mandatory: dropped silently, still acked
  ch.publish(chx, 'k', Buffer.from('dropped'), {}, push('not-mandatory'));
  out.confirms = await attempt('waitForConfirms', () => ch.waitForConfirms().then(() => 'confirmed'));
  out.raw_frames = frames.take();
  out.delete = await attempt('deleteExchange', () => ch.deleteExchange(chx));
  await within(ch.close(), 'channel close');
  out.events = w.events;
  return out;
}

/** An operation that the broker answers with channel.close: the rejection and the events. */
async function channelError(conn, what, fn, confirm = false) {
  const ch = confirm ? await conn.createConfirmChannel() : await conn.createChannel();
  const w = watch(ch);
  const result = await attempt(what, () => fn(ch));
  await w.closed();
  return { result, events: w.events };
}

async function errors(conn) {
  const out = {};
  out.check_missing_queue = await channelError(conn, 'checkQueue', (ch) => ch.checkQueue(name('missing')));
  out.check_missing_exchange = await channelError(conn, 'checkExchange', (ch) => ch.checkExchange(name('missingx')));
  // a plain publish has no reply: the 404 arrives as the channel's 'error' event
  out.publish_missing_exchange = await channelError(conn, 'publish', async (ch) => {
    ch.publish(name('nox'), 'rk', Buffer.from('x'));
    return 'sent';
  });
  // on a confirm channel the publish callback gets the close as its error
  out.confirm_publish_missing_exchange = await channelError(
    conn,
    'publish+confirm',
    (ch) =>
      new Promise((resolve) => {
        ch.publish(name('nox2'), 'rk', Buffer.from('x'), {}, (err) => resolve({ callback_error: errorObs(err) }));
      }),
    true,
  );
  const q = queueName('eq');
  out.redeclare_inequivalent = await channelError(conn, 'assertQueue', async (ch) => {
    await ch.assertQueue(q, { durable: false, autoDelete: false });
    return ch.assertQueue(q, { durable: true });
  });
  const chx = exchangeName('chx2');
  out.chx_both_hash_args = await channelError(conn, 'assertExchange', (ch) =>
    ch.assertExchange(name('bothargs'), 'x-consistent-hash', {
      arguments: { 'hash-header': 'h', 'hash-property': 'message_id' },
    }),
  );
  out.chx_bad_property = await channelError(conn, 'assertExchange', (ch) =>
    ch.assertExchange(name('badprop'), 'x-consistent-hash', { arguments: { 'hash-property': 'no_such_property' } }),
  );
  out.chx_non_numeric_weight = await channelError(conn, 'bindQueue', async (ch) => {
    await ch.assertExchange(chx, 'x-consistent-hash', { durable: false });
    await ch.assertQueue(q, { durable: false, autoDelete: false });
    return ch.bindQueue(q, chx, 'not-a-number');
  });
  out.ack_unknown_tag = await channelError(conn, 'ack', async (ch) => {
    ch.ack({ fields: { deliveryTag: 99 } });
    return 'sent';
  });
  out.unknown_exchange_type = await channelError(conn, 'assertExchange', (ch) =>
    ch.assertExchange(name('badtype'), 'x-no-such-type', {}),
  );
  return out;
}

async function cleanup() {
  let conn;
  try {
    conn = await within(amqp.connect(url, { timeout: 5000 }), 'cleanup connect');
    for (const [kind, names] of [
      ['queue', created.queues],
      ['exchange', created.exchanges],
    ]) {
      for (const n of names) {
        const ch = await within(conn.createChannel(), 'cleanup channel');
        ch.on('error', () => {});
        try {
          await within(kind === 'queue' ? ch.deleteQueue(n) : ch.deleteExchange(n), 'cleanup delete');
          await within(ch.close(), 'cleanup close');
        } catch (_err) {
          // already gone
        }
      }
    }
  } catch (_err) {
    // best effort
  } finally {
    if (conn) await conn.close().catch(() => {});
  }
}

async function main() {
  const obs = {};
  const conn = await within(amqp.connect(url, { timeout: 5000 }), 'connect');
  const connEvents = [];
  conn.on('error', (err) => connEvents.push({ event: 'error', ...errorObs(err) }));
  conn.on('close', (err) => connEvents.push({ event: 'close', error: errorObs(err) }));
  const frames = tap(conn);
  try {
    obs.handshake = await handshake(conn);
    obs.identity = identity(conn);
    obs.roundtrip = await roundtrip(conn, frames);
    obs.mandatory_return = await mandatoryReturn(conn, frames);
    obs.errors = await errors(conn);
  } finally {
    await within(conn.close(), 'connection close').catch((err) => connEvents.push({ event: 'close-failed', ...errorObs(err) }));
    await cleanup();
  }
  obs.connection_events = connEvents;
  process.stdout.write(`${JSON.stringify(obs)}\n`);
}

const watchdog = setTimeout(() => {
  process.stderr.write('differential.js: overall timeout\n');
  process.exit(3);
}, 60000);
watchdog.unref();

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(`${err && err.stack ? err.stack : err}\n`);
    cleanup().finally(() => process.exit(1));
  },
);
