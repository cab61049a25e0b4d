package edgemq.interop;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Transactional messages: the producer sends a half message, which the broker stores out of
 * consumers' sight, runs its local transaction and ends it. A commit makes the message appear
 * in its topic, a rollback drops it. A transaction left unknown is checked: the broker asks a
 * producer of the group (CHECK_TRANSACTION_STATE) once the transaction timeout has passed, and
 * again every check interval, and acts on the answer. run.sh gives edgemq serve, and
 * rocketmq.sh Apache RocketMQ, a 1 s timeout and a 1 s interval.
 */
class TransactionTest {
    /** What a consumer and a check must see of a message the test sent. */
    record Sent(String id, String tags, String keys, String prop, byte[] body, TransactionSendResult result,
            long at) {
    }

    /** One CHECK_TRANSACTION_STATE as the producer's listener saw it, and when. */
    record Check(MessageExt msg, long at) {
    }

    /**
     * The producer's side of every transaction: the test decides per message (its property "i")
     * what the local transaction returns and what a later check learns; checks are recorded.
     */
    static final class Listener implements TransactionListener {
        private final Map<String, LocalTransactionState> local = new ConcurrentHashMap<>();
        private final Map<String, LocalTransactionState> onCheck = new ConcurrentHashMap<>();
        private final List<Check> checks = new ArrayList<>();

        void decide(String id, LocalTransactionState now, LocalTransactionState whenChecked) {
            local.put(id, now);
            onCheck.put(id, whenChecked);
        }

        @Override
        public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
            return local.getOrDefault(msg.getUserProperty("i"), LocalTransactionState.UNKNOW);
        }

        @Override
        public LocalTransactionState checkLocalTransaction(MessageExt msg) {
            synchronized (checks) {
                checks.add(new Check(msg, System.currentTimeMillis()));
            }
            return onCheck.getOrDefault(msg.getUserProperty("i"), LocalTransactionState.UNKNOW);
        }

        /** The checks of message ID so far, in arrival order. */
        List<Check> checksOf(String id) {
            List<Check> out = new ArrayList<>();
            synchronized (checks) {
                for (Check c : checks) {
                    if (id.equals(c.msg().getUserProperty("i"))) {
                        out.add(c);
                    }
                }
            }
            return out;
        }

        int checkCount() {
            synchronized (checks) {
                return checks.size();
            }
        }
    }

    /** A started transactional producer of GROUP, built like Interop.producer. */
    static TransactionMQProducer producer(String group, TransactionListener listener) throws Exception {
        TransactionMQProducer p = new TransactionMQProducer(group);
        p.setNamesrvAddr(Interop.namesrv());
        p.setInstanceName(Interop.unique("p"));
        p.setSendMsgTimeout(5000);
        p.setRetryTimesWhenSendFailed(1);
        p.setPollNameServerInterval(Interop.ROUTE_POLL_MS);
        p.setTransactionListener(listener);
        p.start();
        return p;
    }

    /** A started push consumer of TOPIC from its first message, collecting into C. */
    static DefaultMQPushConsumer consumer(String group, String topic, Collector c) throws Exception {
        DefaultMQPushConsumer consumer = Interop.pushConsumer(group);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            c.addAll(msgs, "c");
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        return consumer;
    }

    /**
     * Sends message ID (a tag, a key, a user property and random bytes) in a transaction whose
     * local branch answers NOW and a check WHEN_CHECKED; the send must store the half message.
     */
    static Sent send(TransactionMQProducer p, Listener l, String topic, String id, LocalTransactionState now,
            LocalTransactionState whenChecked) throws Exception {
        String tags = "Tx" + id;
        String keys = "txkey-" + id;
        String prop = "Überweisung " + id + " ✓";
        byte[] body = Interop.randomBody(id.length() * 97 + 200);
        Message m = new Message(topic, tags, keys, body.clone());
        m.putUserProperty("i", id);
        m.putUserProperty("note", prop);
        l.decide(id, now, whenChecked);
        long at = System.currentTimeMillis();
        TransactionSendResult r = p.sendMessageInTransaction(m, null);
        assertEquals(SendStatus.SEND_OK, r.getSendStatus(), "half message " + id + " stored");
        assertEquals(now, r.getLocalTransactionState(), "local transaction state of " + id);
        return new Sent(id, tags, keys, prop, body, r, at);
    }

    /** What a consumer gets of a committed message: its real topic, body and properties, its ids. */
    static void assertDelivered(String topic, Sent s, MessageExt m) {
        assertEquals(topic, m.getTopic(), "delivered to its real topic, not the half topic");
        assertArrayEquals(s.body(), m.getBody(), "body of " + s.id());
        assertEquals(s.tags(), m.getTags());
        assertEquals(s.keys(), m.getKeys());
        assertEquals(s.prop(), m.getUserProperty("note"));
        String msgId = s.result().getMsgId();
        assertEquals(msgId, m.getMsgId(), "msgId of " + s.id() + " as the send result said");
        assertEquals(msgId, m.getProperty("UNIQ_KEY"));
        // The committed message keeps the half message's TRAN_MSG=true, which is what makes the
        // consumer client fill in the transaction id (from UNIQ_KEY).
        assertEquals(msgId, m.getTransactionId(),
                "transaction id (the client sets it from TRAN_MSG=true and UNIQ_KEY); properties " + m.getProperties());
    }

    /** What the producer's check gets: the half message as sent, under its real topic. */
    static void assertChecked(String topic, Sent s, MessageExt m) {
        assertEquals(topic, m.getTopic(), "a check names the real topic");
        assertArrayEquals(s.body(), m.getBody(), "a check carries the body");
        assertEquals(s.tags(), m.getTags());
        assertEquals(s.keys(), m.getKeys(), "a check carries the keys (how a producer finds its transaction)");
        assertEquals(s.prop(), m.getUserProperty("note"));
        String msgId = s.result().getMsgId();
        assertEquals(msgId, m.getTransactionId(), "a check's transaction id is the send's msgId");
        assertEquals(msgId, m.getProperty("UNIQ_KEY"));
    }

    @Test
    void commitDeliversEachOnce() throws Exception {
        String topic = Interop.unique("t_txcommit");
        Interop.createTopic(topic, 2);
        Collector c = new Collector();
        DefaultMQPushConsumer consumer = consumer(Interop.unique("g_txcommit"), topic, c);
        Listener l = new Listener();
        Map<String, Sent> sent = new HashMap<>();
        List<Collector.Delivery> got;
        try {
            TransactionMQProducer p = producer(Interop.unique("pg_txcommit"), l);
            try {
                for (int k = 0; k < 3; k++) {
                    Sent s = send(p, l, topic, "c" + k, LocalTransactionState.COMMIT_MESSAGE,
                            LocalTransactionState.COMMIT_MESSAGE);
                    sent.put(s.id(), s);
                }
                c.await(3, Duration.ofSeconds(30));
                got = c.settle(Duration.ofSeconds(2));
            } finally {
                p.shutdown();
            }
        } finally {
            consumer.shutdown();
        }
        TreeSet<String> ids = new TreeSet<>();
        for (Collector.Delivery d : got) {
            String id = d.msg().getUserProperty("i");
            assertTrue(ids.add(id), "twice: " + id);
            assertTrue(sent.containsKey(id), "a message nobody sent: " + id);
            assertDelivered(topic, sent.get(id), d.msg());
        }
        assertEquals(sent.keySet(), ids, "each committed message once");
        System.out.println("checks of committed transactions: " + l.checkCount());
    }

    @Test
    void rollbackNeverDelivers() throws Exception {
        String topic = Interop.unique("t_txrollback");
        Interop.createTopic(topic, 2);
        Collector c = new Collector();
        DefaultMQPushConsumer consumer = consumer(Interop.unique("g_txrollback"), topic, c);
        Listener l = new Listener();
        Sent sentinel;
        List<Collector.Delivery> got;
        try {
            TransactionMQProducer p = producer(Interop.unique("pg_txrollback"), l);
            try {
                for (int k = 0; k < 2; k++) {
                    send(p, l, topic, "r" + k, LocalTransactionState.ROLLBACK_MESSAGE,
                            LocalTransactionState.ROLLBACK_MESSAGE);
                }
                sentinel = send(p, l, topic, "sentinel", LocalTransactionState.COMMIT_MESSAGE,
                        LocalTransactionState.COMMIT_MESSAGE);
                c.await(1, Duration.ofSeconds(30));
                // The rolled-back messages were sent first; give them time to show up anyway.
                got = c.settle(Duration.ofSeconds(3));
            } finally {
                p.shutdown();
            }
        } finally {
            consumer.shutdown();
        }
        List<String> ids = new ArrayList<>();
        for (Collector.Delivery d : got) {
            ids.add(d.msg().getUserProperty("i"));
        }
        assertEquals(List.of("sentinel"), ids, "only the committed sentinel, never a rolled-back message");
        assertDelivered(topic, sentinel, got.get(0).msg());
    }

    /** The local transaction stays unknown; the broker's check learns it committed. */
    @Test
    @Timeout(120) // a check may take up to a minute on a busy machine
    void checkCommits() throws Exception {
        String topic = Interop.unique("t_txcheck");
        Interop.createTopic(topic, 2);
        Collector c = new Collector();
        DefaultMQPushConsumer consumer = consumer(Interop.unique("g_txcheck"), topic, c);
        Listener l = new Listener();
        Sent s;
        List<Collector.Delivery> got;
        try {
            TransactionMQProducer p = producer(Interop.unique("pg_txcheck"), l);
            try {
                s = send(p, l, topic, "u", LocalTransactionState.UNKNOW, LocalTransactionState.COMMIT_MESSAGE);
                c.await(1, Duration.ofSeconds(60));
                got = c.settle(Duration.ofSeconds(2));
            } finally {
                p.shutdown();
            }
        } finally {
            consumer.shutdown();
        }
        List<Check> checks = l.checksOf("u");
        assertFalse(checks.isEmpty(), "the broker checked the unknown transaction");
        Check first = checks.get(0);
        assertChecked(topic, s, first.msg());
        long after = first.at() - s.at();
        assertTrue(after >= 800, "first check " + after + " ms after the send, before the 1 s transaction timeout");
        assertEquals(1, got.size(), "the message once, after the check committed it");
        assertDelivered(topic, s, got.get(0).msg());
        assertTrue(got.get(0).at() >= first.at(), "the half message stayed hidden until the check committed it");
        System.out.println("checks: " + checks.size() + ", first " + after + " ms after the send, delivered "
                + (got.get(0).at() - s.at()) + " ms after the send");
    }

    /** The local transaction stays unknown; the broker's check learns it rolled back. */
    @Test
    @Timeout(120) // a check may take up to a minute on a busy machine
    void checkRollsBack() throws Exception {
        String topic = Interop.unique("t_txcheckrb");
        Interop.createTopic(topic, 2);
        Collector c = new Collector();
        DefaultMQPushConsumer consumer = consumer(Interop.unique("g_txcheckrb"), topic, c);
        Listener l = new Listener();
        Sent s;
        Sent sentinel;
        List<Collector.Delivery> got;
        try {
            TransactionMQProducer p = producer(Interop.unique("pg_txcheckrb"), l);
            try {
                s = send(p, l, topic, "u", LocalTransactionState.UNKNOW, LocalTransactionState.ROLLBACK_MESSAGE);
                Interop.awaitTrue("a check of the unknown transaction", Duration.ofSeconds(60),
                        () -> !l.checksOf("u").isEmpty());
                sentinel = send(p, l, topic, "sentinel", LocalTransactionState.COMMIT_MESSAGE,
                        LocalTransactionState.COMMIT_MESSAGE);
                c.await(1, Duration.ofSeconds(30));
                got = c.settle(Duration.ofSeconds(3));
            } finally {
                p.shutdown();
            }
        } finally {
            consumer.shutdown();
        }
        List<Check> checks = l.checksOf("u");
        assertChecked(topic, s, checks.get(0).msg());
        List<String> ids = new ArrayList<>();
        for (Collector.Delivery d : got) {
            ids.add(d.msg().getUserProperty("i"));
        }
        assertEquals(List.of("sentinel"), ids, "only the committed sentinel, never the message the check rolled back");
        assertDelivered(topic, sentinel, got.get(0).msg());
        System.out.println("checks: " + checks.size() + ", first " + (checks.get(0).at() - s.at())
                + " ms after the send");
    }
}
