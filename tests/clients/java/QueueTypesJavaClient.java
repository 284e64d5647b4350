// The RabbitMQ Java client (Debian librabbitmq-client-java, amqp-client 5.x) on one quorum queue and
// one stream, as a Java user writes it. Compiled at test time together with HashbrokerJavaClient.java
// (whose factory() and json() it shares) by tests/clients/test_quorum_stream_clients.py, and run as
//
//   java QueueTypesJavaClient <amqp-url> <suffix>
//
// It prints one JSON object per line (step, then what the client exposed); the test runs it against
// RabbitMQ 3.10.8 and against hashbroker and compares the lines once <suffix> is replaced.
//
// quorum: queueDeclare(durable, x-queue-type quorum), confirmSelect, five persistent publishes,
//   waitForConfirmsOrDie, passive declare counts, basicQos(2) and a manual-ack consumer that nacks
//   the first delivery once (requeue=true) and acks everything else: the redelivery carries
//   x-delivery-count 1 and comes after the others (no delivery limit: back of the queue).
// stream: queueDeclare(x-queue-type stream), five confirmed publishes, basicQos(2), a consumer from
//   x-stream-offset "first" acking each delivery (x-stream-offset 0..4, a Long), then one from the
//   numeric offset 3.

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.ConnectionFactory;
import com.rabbitmq.client.DefaultConsumer;
import com.rabbitmq.client.Envelope;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

public class QueueTypesJavaClient {
    static final long WAIT_MS = 10_000;
    static final int MESSAGES = 5;

    public static void main(String[] argv) throws Exception {
        if (argv.length != 2) {
            System.err.println("usage: <amqp-url> <suffix>");
            System.exit(2);
        }
        ConnectionFactory cf = HashbrokerJavaClient.factory(argv[0]);
        cf.setAutomaticRecoveryEnabled(false);
        Connection conn = cf.newConnection();
        String qq = "hb.java.qq." + argv[1];
        String st = "hb.java.st." + argv[1];
        try {
            quorum(conn, qq);
            stream(conn, st);
        } finally {
            Channel ch = conn.createChannel();
            ch.queueDelete(qq);
            ch.queueDelete(st);
            conn.close();
        }
    }

    static void emit(String step, Object... kv) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("step", step);
        for (int i = 0; i < kv.length; i += 2) {
            m.put((String) kv[i], kv[i + 1]);
        }
        System.out.println(HashbrokerJavaClient.json(m, false));
        System.out.flush();
    }

    /** A consumer that hands every delivery to the main thread, which acks or nacks it. */
    static final class Collector extends DefaultConsumer {
        final BlockingQueue<Object[]> deliveries = new LinkedBlockingQueue<>();

        Collector(Channel ch) {
            super(ch);
        }

        @Override
        public void handleDelivery(String tag, Envelope env, AMQP.BasicProperties props, byte[] body) {
            deliveries.add(new Object[] {env, props, new String(body, StandardCharsets.UTF_8)});
        }

        Object[] next(String what) throws InterruptedException {
            Object[] d = deliveries.poll(WAIT_MS, TimeUnit.MILLISECONDS);
            if (d == null) {
                throw new IllegalStateException("no delivery within " + WAIT_MS + " ms: " + what);
            }
            return d;
        }
    }

    /** What a Java user sees of one delivery; `header` is rendered with its Java class. */
    static Map<String, Object> delivery(Object[] d, String header) {
        Envelope env = (Envelope) d[0];
        AMQP.BasicProperties props = (AMQP.BasicProperties) d[1];
        Map<String, Object> headers = props.getHeaders() == null ? new HashMap<>() : props.getHeaders();
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("body", d[2]);
        out.put("delivery_tag", env.getDeliveryTag());
        out.put("redelivered", env.isRedeliver());
        out.put("n", headers.get("n"));
        Map<String, Object> typed = new HashMap<>();
        if (headers.containsKey(header)) {
            typed.put(header, headers.get(header));
        }
        out.put("headers", typed);  // json() tags each value in "headers" with its class
        out.put("has_" + header.replace('-', '_'), headers.containsKey(header));
        return out;
    }

    static void publishConfirmed(Channel ch, String queue, String prefix, String step) throws Exception {
        ch.confirmSelect();
        for (int i = 0; i < MESSAGES; i++) {
            Map<String, Object> headers = new HashMap<>();
            headers.put("n", i);
            AMQP.BasicProperties props = new AMQP.BasicProperties.Builder()
                .deliveryMode(2)
                .headers(headers)
                .build();
            ch.basicPublish("", queue, props, (prefix + i).getBytes(StandardCharsets.UTF_8));
        }
        ch.waitForConfirmsOrDie(WAIT_MS);
        emit(step, "confirmed", MESSAGES);
    }

    static void quorum(Connection conn, String q) throws Exception {
        Channel ch = conn.createChannel();
        Map<String, Object> args = new HashMap<>();
        args.put("x-queue-type", "quorum");
        AMQP.Queue.DeclareOk ok = ch.queueDeclare(q, true, false, false, args);
        emit("qq_declare", "message_count", ok.getMessageCount(), "consumer_count", ok.getConsumerCount());
        publishConfirmed(ch, q, "q", "qq_published");
        ok = ch.queueDeclarePassive(q);
        emit("qq_after_publish", "message_count", ok.getMessageCount());

        Channel consumerCh = conn.createChannel();
        consumerCh.basicQos(2);
        Collector c = new Collector(consumerCh);
        consumerCh.basicConsume(q, false, "hb-java-qq", c);
        List<Object> seen = new ArrayList<>();
        boolean nacked = false;
        for (int i = 0; i < MESSAGES + 1; i++) {
            Object[] d = c.next("quorum delivery " + i);
            seen.add(delivery(d, "x-delivery-count"));
            long tag = ((Envelope) d[0]).getDeliveryTag();
            if (!nacked) {
                consumerCh.basicNack(tag, false, true);
                nacked = true;
            } else {
                consumerCh.basicAck(tag, false);
            }
        }
        emit("qq_deliveries", "deliveries", seen);
        consumerCh.basicCancel("hb-java-qq");
        ok = ch.queueDeclarePassive(q);
        emit("qq_after_acks", "message_count", ok.getMessageCount(), "get_empty", ch.basicGet(q, false) == null);
        consumerCh.close();
        AMQP.Queue.DeleteOk deleted = ch.queueDelete(q);
        emit("qq_delete", "message_count", deleted.getMessageCount());
        ch.close();
    }

    static List<Object> readStream(Connection conn, String q, Object offset, int n, String tag) throws Exception {
        Channel ch = conn.createChannel();
        ch.basicQos(2);
        Collector c = new Collector(ch);
        Map<String, Object> args = new HashMap<>();
        args.put("x-stream-offset", offset);
        ch.basicConsume(q, false, tag, false, false, args, c);
        List<Object> seen = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            Object[] d = c.next("stream delivery " + i + " from " + offset);
            seen.add(delivery(d, "x-stream-offset"));
            ch.basicAck(((Envelope) d[0]).getDeliveryTag(), false);
        }
        ch.basicCancel(tag);
        ch.close();
        return seen;
    }

    static void stream(Connection conn, String q) throws Exception {
        Channel ch = conn.createChannel();
        Map<String, Object> args = new HashMap<>();
        args.put("x-queue-type", "stream");
        AMQP.Queue.DeclareOk ok = ch.queueDeclare(q, true, false, false, args);
        emit("st_declare", "message_count", ok.getMessageCount(), "consumer_count", ok.getConsumerCount());
        publishConfirmed(ch, q, "s", "st_published");
        emit("st_from_first", "deliveries", readStream(conn, q, "first", MESSAGES, "hb-java-st-first"));
        emit("st_from_3", "deliveries", readStream(conn, q, 3, MESSAGES - 3, "hb-java-st-3"));
        AMQP.Queue.DeleteOk deleted = ch.queueDelete(q);
        emit("st_delete", "message_count", deleted.getMessageCount());
        ch.close();
    }
}
