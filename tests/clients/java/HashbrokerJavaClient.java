// The RabbitMQ Java client (Debian librabbitmq-client-java, amqp-client 5.x) against an AMQP URL.
//
// Compiled at test time by tests/clients/test_clients_java.py (javac -cp amqp-client.jar) and run as
//
//   java HashbrokerJavaClient readme <amqp-url> <routing_key|hash_header|hash_property> <n>
//       the seed README's consistent-hash examples, written as the README's Java versions are:
//       durable q1..q4 declared and purged, exchangeDeclare("x-consistent-hash", arguments),
//       queueBind weights "1","1","2","2", confirmSelect, basicPublish n times,
//       waitForConfirmsOrDie; prints "done".
//
//   java HashbrokerJavaClient diff <amqp-url> <suffix>
//       a small differential: prints one JSON object per line (what the client exposes to a Java
//       user); the test runs it against RabbitMQ 3.10.8 and hashbroker and compares the lines once
//       the per-run <suffix> in names is replaced by a placeholder.
//
// Only the JDK and the RabbitMQ Java client are used (no JSON library): json() below renders every
// value with its Java class, so a header that comes back as another AMQP field type (Long instead of
// Integer, LongString instead of byte[]) shows up as a difference.

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.ConfirmListener;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.ConnectionFactory;
import com.rabbitmq.client.DefaultConsumer;
import com.rabbitmq.client.Envelope;
import com.rabbitmq.client.GetResponse;
import com.rabbitmq.client.LongString;
import com.rabbitmq.client.Method;
import com.rabbitmq.client.ShutdownSignalException;
import java.io.IOException;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Date;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

public class HashbrokerJavaClient {
    static final String CONSISTENT_HASH_EXCHANGE_TYPE = "x-consistent-hash";
    static final long WAIT_MS = 5000;

    public static void main(String[] argv) throws Exception {
        if (argv.length == 4 && argv[0].equals("readme")) {
            readme(argv[1], argv[2], Integer.parseInt(argv[3]));
        } else if (argv.length == 3 && argv[0].equals("diff")) {
            diff(argv[1], argv[2]);
        } else {
            System.err.println("usage: readme <url> <example> <n> | diff <url> <suffix>");
            System.exit(2);
        }
    }

    static ConnectionFactory factory(String url) throws Exception {
        ConnectionFactory cf = new ConnectionFactory();
        cf.setUri(url);
        cf.setConnectionTimeout(5000);
        cf.setHandshakeTimeout(10000);
        cf.setChannelRpcTimeout(30000);
        return cf;
    }

    // ------------------------------------------------------------------------------------------
    // The README examples (ConsistentHashExchangeExample1..3)
    // ------------------------------------------------------------------------------------------

    static void readme(String url, String example, int n) throws Exception {
        String exchange;
        Map<String, Object> args = new HashMap<>();
        switch (example) {
            case "routing_key":
                exchange = "e";
                break;
            case "hash_header":
                exchange = "e2";
                args.put("hash-header", "hash-on");
                break;
            case "hash_property":
                exchange = "e3";
                args.put("hash-property", "message_id");
                break;
            default:
                throw new IllegalArgumentException(example);
        }
        Connection conn = factory(url).newConnection();
        Channel ch = conn.createChannel();
        for (String q : Arrays.asList("q1", "q2", "q3", "q4")) {
            ch.queueDeclare(q, true, false, false, null);
            ch.queuePurge(q);
        }
        ch.exchangeDeclare(exchange, CONSISTENT_HASH_EXCHANGE_TYPE, true, false, args);
        for (String q : Arrays.asList("q1", "q2")) {
            ch.queueBind(q, exchange, "1");
        }
        for (String q : Arrays.asList("q3", "q4")) {
            ch.queueBind(q, exchange, "2");
        }
        ch.confirmSelect();
        byte[] body = "".getBytes(StandardCharsets.UTF_8);
        for (int i = 0; i < n; i++) {
            AMQP.BasicProperties.Builder bldr = new AMQP.BasicProperties.Builder();
            switch (example) {
                case "routing_key":
                    ch.basicPublish(exchange, String.valueOf(i), bldr.build(), body);
                    break;
                case "hash_header":
                    Map<String, Object> hdrs = new HashMap<>();
                    hdrs.put("hash-on", String.valueOf(i));
                    ch.basicPublish(exchange, "", bldr.headers(hdrs).build(), body);
                    break;
                default:
                    ch.basicPublish(exchange, "", bldr.messageId(String.valueOf(i)).build(), body);
            }
        }
        // the README waits 10 s; a larger bound keeps a loaded CI machine from failing spuriously
        ch.waitForConfirmsOrDie(120_000);
        conn.close();
        System.out.println("done");
    }

    // ------------------------------------------------------------------------------------------
    // The differential
    // ------------------------------------------------------------------------------------------

    static void emit(String step, Object... kv) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("step", step);
        for (int i = 0; i < kv.length; i += 2) {
            m.put((String) kv[i], kv[i + 1]);
        }
        System.out.println(json(m, false));
        System.out.flush();
    }

    static void diff(String url, String suffix) throws Exception {
        ConnectionFactory cf = factory(url);
        cf.setAutomaticRecoveryEnabled(false);
        Connection conn = cf.newConnection();
        String q = "hb.java.q." + suffix;
        String q2 = "hb.java.q2." + suffix;
        String chx = "hb.java.chx." + suffix;
        String missing = "hb.java.missing." + suffix;
        try {
            serverProperties(conn);
            roundTrip(conn, q);
            mandatory(conn, q, chx);
            errors(conn, q, missing, chx);
            cancelNotification(conn, q2);
        } finally {
            Channel ch = conn.createChannel();
            for (String name : Arrays.asList(q, q2)) {
                ch.queueDelete(name);
            }
            ch.exchangeDelete(chx);
            conn.close();
        }
        emit("closed", "open", conn.isOpen());
    }

    /** What a Java user reads of connection.start and tune (product/version values differ by design). */
    static void serverProperties(Connection conn) {
        Map<String, Object> props = conn.getServerProperties();
        emit("server_properties",
            "keys", new ArrayList<>(new TreeMap<>(props).keySet()),
            "capabilities", props.get("capabilities"),
            "channel_max", conn.getChannelMax(),
            "frame_max", conn.getFrameMax(),
            "heartbeat", conn.getHeartbeat());
    }

    static AMQP.BasicProperties fullProperties() {
        Map<String, Object> nested = new HashMap<>();
        nested.put("inner", "v");
        nested.put("n", 7);
        Map<String, Object> headers = new HashMap<>();
        headers.put("string", "text é");
        headers.put("int", 42);
        headers.put("negative", -5);
        headers.put("long", 1L << 40);
        headers.put("short", (short) 300);
        headers.put("byte", (byte) -3);
        headers.put("bool", true);
        headers.put("double", 2.5d);
        headers.put("float", 1.5f);
        headers.put("decimal", new BigDecimal("12.345"));
        headers.put("date", new Date(1700000000000L));
        headers.put("bytes", new byte[] {0, 1, (byte) 0xfe});
        headers.put("table", nested);
        headers.put("array", Arrays.asList("a", 1, false));
        headers.put("void", null);
        return new AMQP.BasicProperties.Builder()
            .contentType("application/json")
            .contentEncoding("utf-8")
            .headers(headers)
            .deliveryMode(2)
            .priority(3)
            .correlationId("corr-1")
            .replyTo("reply.queue")
            .expiration("60000")
            .messageId("msg-1")
            .timestamp(new Date(1700000000000L))
            .type("java.type")
            .userId("guest")
            .appId("hashbroker-java-test")
            .build();
    }

    static Map<String, Object> propsObs(AMQP.BasicProperties p) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("content_type", p.getContentType());
        m.put("content_encoding", p.getContentEncoding());
        m.put("headers", p.getHeaders());
        m.put("delivery_mode", p.getDeliveryMode());
        m.put("priority", p.getPriority());
        m.put("correlation_id", p.getCorrelationId());
        m.put("reply_to", p.getReplyTo());
        m.put("expiration", p.getExpiration());
        m.put("message_id", p.getMessageId());
        m.put("timestamp", p.getTimestamp());
        m.put("type", p.getType());
        m.put("user_id", p.getUserId());
        m.put("app_id", p.getAppId());
        m.put("cluster_id", p.getClusterId());
        return m;
    }

    static Map<String, Object> envelopeObs(Envelope e) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("delivery_tag", e.getDeliveryTag());
        m.put("redeliver", e.isRedeliver());
        m.put("exchange", e.getExchange());
        m.put("routing_key", e.getRoutingKey());
        return m;
    }

    /** Publish with every property, consume with manual ack, basic.get, nack+requeue, counts. */
    static void roundTrip(Connection conn, String q) throws Exception {
        Channel ch = conn.createChannel();
        AMQP.Queue.DeclareOk ok = ch.queueDeclare(q, false, false, false, null);
        emit("queue_declare", "queue", ok.getQueue(), "messages", ok.getMessageCount(),
            "consumers", ok.getConsumerCount());
        ch.confirmSelect();
        ch.basicPublish("", q, fullProperties(), "héllo java".getBytes(StandardCharsets.UTF_8));
        ch.waitForConfirmsOrDie(WAIT_MS);
        ch.basicQos(10);
        BlockingQueue<Object> events = new LinkedBlockingQueue<>();
        String tag = ch.basicConsume(q, false, new DefaultConsumer(ch) {
            @Override
            public void handleConsumeOk(String consumerTag) {
                events.add(Arrays.asList("consume_ok", consumerTag));
            }

            @Override
            public void handleCancelOk(String consumerTag) {
                events.add(Arrays.asList("cancel_ok", consumerTag));
            }

            @Override
            public void handleDelivery(String consumerTag, Envelope envelope,
                                       AMQP.BasicProperties properties, byte[] body) throws IOException {
                Map<String, Object> m = new LinkedHashMap<>();
                m.put("event", "delivery");
                m.put("consumer_tag", consumerTag);
                m.put("envelope", envelopeObs(envelope));
                m.put("properties", propsObs(properties));
                m.put("body", body);
                events.add(m);
                getChannel().basicAck(envelope.getDeliveryTag(), false);
            }
        });
        emit("consume", "tag_is_generated", tag.startsWith("amq.ctag-"),
            "event", events.poll(WAIT_MS, TimeUnit.MILLISECONDS));
        emit("deliver", "event", events.poll(WAIT_MS, TimeUnit.MILLISECONDS));
        ch.basicCancel(tag);
        emit("cancel", "event", events.poll(WAIT_MS, TimeUnit.MILLISECONDS));
        AMQP.Queue.DeclareOk after = ch.queueDeclarePassive(q);
        emit("after_ack", "messages", after.getMessageCount(), "consumers", after.getConsumerCount());

        ch.basicPublish("", q, new AMQP.BasicProperties.Builder().messageId("get-1").build(),
            "second".getBytes(StandardCharsets.UTF_8));
        ch.basicPublish("", q, null, "third".getBytes(StandardCharsets.UTF_8));
        ch.waitForConfirmsOrDie(WAIT_MS);
        GetResponse g1 = ch.basicGet(q, false);
        emit("get", "envelope", envelopeObs(g1.getEnvelope()), "message_count", g1.getMessageCount(),
            "properties", propsObs(g1.getProps()), "body", g1.getBody());
        ch.basicNack(g1.getEnvelope().getDeliveryTag(), false, true);
        GetResponse g2 = ch.basicGet(q, true);
        emit("get_after_nack", "envelope", envelopeObs(g2.getEnvelope()),
            "message_count", g2.getMessageCount(), "body", g2.getBody());
        GetResponse g3 = ch.basicGet(q, true);
        emit("get_third", "envelope", envelopeObs(g3.getEnvelope()), "message_count", g3.getMessageCount(),
            "properties", propsObs(g3.getProps()), "body", g3.getBody());
        emit("get_empty", "response", ch.basicGet(q, true));
        ch.close();
    }

    /** Mandatory publishes: unroutable ones come back as basic.return 312 NO_ROUTE before their ack. */
    static void mandatory(Connection conn, String q, String chx) throws Exception {
        Channel ch = conn.createChannel();
        List<Object> events = new ArrayList<>();
        ch.addReturnListener((replyCode, replyText, exchange, routingKey, properties, body) -> {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("event", "return");
            m.put("reply_code", replyCode);
            m.put("reply_text", replyText);
            m.put("exchange", exchange);
            m.put("routing_key", routingKey);
            m.put("properties", propsObs(properties));
            m.put("body", body);
            synchronized (events) {
                events.add(m);
            }
        });
        ch.addConfirmListener(new ConfirmListener() {
            @Override
            public void handleAck(long deliveryTag, boolean multiple) {
                synchronized (events) {
                    events.add(Arrays.asList("ack", deliveryTag, multiple));
                }
            }

            @Override
            public void handleNack(long deliveryTag, boolean multiple) {
                synchronized (events) {
                    events.add(Arrays.asList("nack", deliveryTag, multiple));
                }
            }
        });
        ch.confirmSelect();
        AMQP.BasicProperties props = new AMQP.BasicProperties.Builder()
            .messageId("m-1").headers(Map.of("h", "v")).build();
        ch.basicPublish("amq.direct", "hb.java.nowhere", true, props, "lost".getBytes(StandardCharsets.UTF_8));
        ch.waitForConfirmsOrDie(WAIT_MS);
        ch.exchangeDeclare(chx, CONSISTENT_HASH_EXCHANGE_TYPE, false, false, null);
        ch.basicPublish(chx, "k1", true, null, "no bindings".getBytes(StandardCharsets.UTF_8));
        ch.waitForConfirmsOrDie(WAIT_MS);
        ch.queueBind(q, chx, "1");
        ch.basicPublish(chx, "k2", true, null, "routed".getBytes(StandardCharsets.UTF_8));
        ch.waitForConfirmsOrDie(WAIT_MS);
        synchronized (events) {
            emit("mandatory", "events", new ArrayList<>(events));
        }
        emit("routed", "message_count", ch.queueDeclarePassive(q).getMessageCount());
        ch.queuePurge(q);
        ch.close();
    }

    /** Run one call that the broker refuses; report the channel.close/connection.close reason. */
    interface Call {
        Object run(Channel ch) throws Exception;
    }

    static Channel attempt(Connection conn, Channel ch, String step, Call call) throws Exception {
        return attempt(conn, ch, step, call, true);
    }

    /**
     * After an asynchronous error (basic.ack/basic.publish, then an RPC) the RPC fails with an
     * IOException if it was sent before channel.close arrived, else with AlreadyClosedException: a
     * race, so the exception class is left out there (recordException false); the reason is not.
     */
    static Channel attempt(Connection conn, Channel ch, String step, Call call, boolean recordException)
            throws Exception {
        try {
            Object result = call.run(ch);
            emit(step, "ok", result instanceof Method ? ((Method) result).protocolMethodName() : result);
            return ch;
        } catch (IOException | ShutdownSignalException e) {
            ShutdownSignalException sse = e instanceof ShutdownSignalException
                ? (ShutdownSignalException) e
                : (ShutdownSignalException) e.getCause();
            Method reason = sse.getReason();
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("hard_error", sse.isHardError());
            m.put("initiated_by_application", sse.isInitiatedByApplication());
            if (recordException) {
                m.put("exception", e.getClass().getSimpleName() + " caused by "
                    + sse.getClass().getSimpleName());
            }
            m.put("reason", reason.protocolMethodName());
            if (reason instanceof AMQP.Channel.Close) {
                AMQP.Channel.Close c = (AMQP.Channel.Close) reason;
                m.put("reply_code", c.getReplyCode());
                m.put("reply_text", c.getReplyText());
                m.put("class_id", c.getClassId());
                m.put("method_id", c.getMethodId());
            } else if (reason instanceof AMQP.Connection.Close) {
                AMQP.Connection.Close c = (AMQP.Connection.Close) reason;
                m.put("reply_code", c.getReplyCode());
                m.put("reply_text", c.getReplyText());
                m.put("class_id", c.getClassId());
                m.put("method_id", c.getMethodId());
            }
            m.put("channel_open", ch.isOpen());
            m.put("connection_open", conn.isOpen());
            emit(step, "error", m);
            return conn.isOpen() ? conn.createChannel() : null;
        }
    }

    static void errors(Connection conn, String q, String missing, String chx) throws Exception {
        Channel ch = conn.createChannel();
        ch = attempt(conn, ch, "queue_declare_passive_missing", c -> c.queueDeclarePassive(missing));
        ch = attempt(conn, ch, "exchange_declare_passive_missing", c -> c.exchangeDeclarePassive(missing));
        ch = attempt(conn, ch, "queue_bind_missing_exchange", c -> c.queueBind(q, missing, "1"));
        ch = attempt(conn, ch, "queue_declare_inequivalent",
            c -> c.queueDeclare(q, true, false, false, null));
        ch = attempt(conn, ch, "exchange_declare_inequivalent_type",
            c -> c.exchangeDeclare(chx, "direct", false, false, null));
        Map<String, Object> both = new HashMap<>();
        both.put("hash-header", "h");
        both.put("hash-property", "message_id");
        ch = attempt(conn, ch, "exchange_declare_header_and_property",
            c -> c.exchangeDeclare(missing, CONSISTENT_HASH_EXCHANGE_TYPE, false, true, both));
        ch = attempt(conn, ch, "ack_unknown_tag", c -> {
            c.basicAck(999, false);
            return c.queueDeclarePassive(q);
        }, false);
        ch = attempt(conn, ch, "publish_missing_exchange", c -> {
            c.basicPublish(missing, "k", null, new byte[0]);
            return c.queueDeclarePassive(q);
        }, false);
        if (ch != null) {
            ch.close();
        }
        emit("connection_after_errors", "open", conn.isOpen());
    }

    /** Deleting a queue under a consumer: basic.cancel from the server reaches handleCancel. */
    static void cancelNotification(Connection conn, String q2) throws Exception {
        Channel ch = conn.createChannel();
        ch.queueDeclare(q2, false, false, false, null);
        BlockingQueue<Object> events = new LinkedBlockingQueue<>();
        ch.basicConsume(q2, true, "hb-java-ctag", new DefaultConsumer(ch) {
            @Override
            public void handleCancel(String consumerTag) {
                events.add(Arrays.asList("cancel", consumerTag));
            }
        });
        Channel other = conn.createChannel();
        AMQP.Queue.DeleteOk del = other.queueDelete(q2);
        emit("delete_under_consumer", "messages", del.getMessageCount(),
            "event", events.poll(WAIT_MS, TimeUnit.MILLISECONDS), "channel_open", ch.isOpen());
        other.close();
        ch.close();
    }

    // ------------------------------------------------------------------------------------------
    // JSON with the Java type of each value
    // ------------------------------------------------------------------------------------------

    static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                b.append('\\').append(c);
            } else if (c < 0x20 || c > 0x7e) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.append('"').toString();
    }

    static String tagged(String type, String value) {
        return "{" + quote(type) + ":" + value + "}";
    }

    /** JSON of a value; inside headers (typed=true) every scalar carries its Java class. */
    static String json(Object o, boolean typed) {
        if (o == null) {
            return "null";
        }
        if (o instanceof Map) {
            StringBuilder b = new StringBuilder("{");
            boolean first = true;
            for (Map.Entry<?, ?> e : new TreeMap<Object, Object>((Map<?, ?>) o).entrySet()) {
                if (!first) {
                    b.append(",");
                }
                first = false;
                String key = String.valueOf(e.getKey());
                boolean valueTyped = typed || key.equals("headers") || key.equals("capabilities");
                b.append(quote(key)).append(":").append(json(e.getValue(), valueTyped));
            }
            return b.append("}").toString();
        }
        if (o instanceof List) {
            StringBuilder b = new StringBuilder("[");
            boolean first = true;
            for (Object v : (List<?>) o) {
                if (!first) {
                    b.append(",");
                }
                first = false;
                b.append(json(v, typed));
            }
            return b.append("]").toString();
        }
        if (o instanceof byte[]) {
            byte[] bytes = (byte[]) o;
            StringBuilder hex = new StringBuilder();
            for (byte x : bytes) {
                hex.append(String.format("%02x", x & 0xff));
            }
            return tagged("byte[]", quote(hex.toString()));
        }
        if (o instanceof LongString) {
            return tagged("LongString", quote(o.toString()));
        }
        if (o instanceof Date) {
            return tagged("Date", String.valueOf(((Date) o).getTime()));
        }
        if (o instanceof GetResponse) {
            return tagged("GetResponse", "true");
        }
        String plain;
        if (o instanceof String) {
            plain = quote((String) o);
        } else if (o instanceof Number || o instanceof Boolean) {
            plain = o instanceof BigDecimal ? quote(o.toString()) : o.toString();
        } else {
            return tagged(o.getClass().getName(), quote(o.toString()));
        }
        return typed ? tagged(o.getClass().getSimpleName(), plain) : plain;
    }
}
