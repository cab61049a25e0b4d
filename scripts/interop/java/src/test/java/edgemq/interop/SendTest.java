package edgemq.interop;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageClientExt;
import org.apache.rocketmq.common.message.MessageExt;
import org.junit.jupiter.api.Test;

/**
 * Sync, async, oneway and batch sends with tags, keys and user properties, read back by a push
 * consumer byte for byte; and tag filtering on the consumer's subscription.
 */
class SendTest {
    private static final String UNICODE = "h\u00e9llo \u2603 \u4e2d\u6587";

    /** The Ith message of TOPIC: a body of random bytes (every 4th one 10 KiB, compressed by the client). */
    static Message message(String topic, int i) {
        int size = i % 4 == 3 ? 10 * 1024 : 1 + i * 37 % 900;
        Message m = new Message(topic, "Tag" + (char) ('A' + i % 3), "key-" + i + " both-" + i,
                Interop.randomBody(size));
        m.putUserProperty("i", Integer.toString(i));
        m.putUserProperty("text", UNICODE);
        m.putUserProperty("spaced", " a  b ");
        return m;
    }

    /** Asserts that GOT is SENT as a consumer sees it. */
    static void assertSame(Message sent, MessageExt got) {
        assertEquals(sent.getTopic(), got.getTopic(), "topic");
        assertArrayEquals(sent.getBody(), got.getBody(), "body of message " + sent.getUserProperty("i"));
        assertEquals(sent.getTags(), got.getTags(), "tags");
        assertEquals(sent.getKeys(), got.getKeys(), "keys");
        assertEquals(sent.getUserProperty("i"), got.getUserProperty("i"), "property i");
        assertEquals(UNICODE, got.getUserProperty("text"), "unicode property");
        assertEquals(" a  b ", got.getUserProperty("spaced"), "property with spaces");
        assertEquals(0, got.getReconsumeTimes(), "reconsume times");
        assertTrue(got.getStoreTimestamp() >= got.getBornTimestamp() - 5000, "store time after born time");
        assertTrue(got.getQueueOffset() >= 0, "queue offset");
    }

    /** Consumes TOPIC (EXPR) from the first offset until N messages came, plus 1 s for strays. */
    static List<MessageExt> consume(String topic, String expr, int n) throws Exception {
        Collector c = new Collector();
        DefaultMQPushConsumer consumer = Interop.pushConsumer(Interop.unique("g_send"));
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, expr);
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            c.addAll(msgs, "c");
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        try {
            c.await(n, Duration.ofSeconds(30));
            List<MessageExt> out = new ArrayList<>();
            for (Collector.Delivery d : c.settle(Duration.ofSeconds(1))) {
                out.add(d.msg());
            }
            return out;
        } finally {
            consumer.shutdown();
        }
    }

    private static Map<String, MessageExt> byIndex(List<MessageExt> got, int n) {
        Map<String, MessageExt> m = new HashMap<>();
        for (MessageExt e : got) {
            MessageExt prev = m.put(e.getUserProperty("i"), e);
            assertEquals(null, prev, "message " + e.getUserProperty("i") + " delivered twice");
        }
        assertEquals(n, m.size(), "distinct messages");
        return m;
    }

    @Test
    void syncSend() throws Exception {
        String topic = Interop.unique("t_sync");
        Interop.createTopic(topic, 4);
        DefaultMQProducer p = Interop.producer(Interop.unique("pg_sync"));
        int n = 12;
        List<Message> sent = new ArrayList<>();
        List<SendResult> results = new ArrayList<>();
        try {
            for (int i = 0; i < n; i++) {
                Message m = message(topic, i);
                SendResult r = p.send(m);
                assertEquals(SendStatus.SEND_OK, r.getSendStatus());
                assertNotNull(r.getMsgId());
                assertNotNull(r.getOffsetMsgId());
                sent.add(m);
                results.add(r);
            }
        } finally {
            p.shutdown();
        }
        Map<String, MessageExt> got = byIndex(consume(topic, "*", n), n);
        for (int i = 0; i < n; i++) {
            MessageExt g = got.get(Integer.toString(i));
            assertSame(sent.get(i), g);
            SendResult r = results.get(i);
            assertEquals(r.getMsgId(), g.getMsgId(), "msgId (UNIQ_KEY) of message " + i);
            assertEquals(r.getMessageQueue().getQueueId(), g.getQueueId(), "queue of message " + i);
            assertEquals(r.getQueueOffset(), g.getQueueOffset(), "queue offset of message " + i);
            if (g instanceof MessageClientExt ce) {
                assertEquals(r.getOffsetMsgId(), ce.getOffsetMsgId(), "offsetMsgId of message " + i);
            }
        }
    }

    @Test
    void asyncSend() throws Exception {
        String topic = Interop.unique("t_async");
        Interop.createTopic(topic, 4);
        DefaultMQProducer p = Interop.producer(Interop.unique("pg_async"));
        int n = 12;
        List<Message> sent = new ArrayList<>();
        CountDownLatch done = new CountDownLatch(n);
        AtomicReference<Throwable> failed = new AtomicReference<>();
        try {
            for (int i = 0; i < n; i++) {
                Message m = message(topic, i);
                sent.add(m);
                p.send(m, new SendCallback() {
                    @Override
                    public void onSuccess(SendResult r) {
                        if (r.getSendStatus() != SendStatus.SEND_OK) {
                            failed.compareAndSet(null, new AssertionError("status " + r.getSendStatus()));
                        }
                        done.countDown();
                    }

                    @Override
                    public void onException(Throwable e) {
                        failed.compareAndSet(null, e);
                        done.countDown();
                    }
                });
            }
            assertTrue(done.await(20, TimeUnit.SECONDS), "async sends completed");
            if (failed.get() != null) {
                throw new AssertionError("async send failed", failed.get());
            }
        } finally {
            p.shutdown();
        }
        Map<String, MessageExt> got = byIndex(consume(topic, "*", n), n);
        for (int i = 0; i < n; i++) {
            assertSame(sent.get(i), got.get(Integer.toString(i)));
        }
    }

    @Test
    void onewaySend() throws Exception {
        String topic = Interop.unique("t_oneway");
        Interop.createTopic(topic, 4);
        DefaultMQProducer p = Interop.producer(Interop.unique("pg_oneway"));
        int n = 12;
        List<Message> sent = new ArrayList<>();
        try {
            for (int i = 0; i < n; i++) {
                Message m = message(topic, i);
                sent.add(m);
                p.sendOneway(m);
            }
        } finally {
            p.shutdown();
        }
        Map<String, MessageExt> got = byIndex(consume(topic, "*", n), n);
        for (int i = 0; i < n; i++) {
            assertSame(sent.get(i), got.get(Integer.toString(i)));
        }
    }

    @Test
    void batchSend() throws Exception {
        String topic = Interop.unique("t_batch");
        Interop.createTopic(topic, 4);
        DefaultMQProducer p = Interop.producer(Interop.unique("pg_batch"));
        int n = 10;
        List<Message> sent = new ArrayList<>();
        SendResult r;
        try {
            for (int i = 0; i < n; i++) {
                Message m = message(topic, i);
                // A batch is never compressed; keep it small and flat.
                m.setBody(Interop.randomBody(1 + i * 53 % 700));
                sent.add(m);
            }
            r = p.send(sent);
            assertEquals(SendStatus.SEND_OK, r.getSendStatus());
        } finally {
            p.shutdown();
        }
        assertEquals(n, r.getMsgId().split(",").length, "one msgId per batch item: " + r.getMsgId());
        List<MessageExt> all = consume(topic, "*", n);
        Map<String, MessageExt> got = byIndex(all, n);
        for (int i = 0; i < n; i++) {
            MessageExt g = got.get(Integer.toString(i));
            assertSame(sent.get(i), g);
            assertEquals(r.getMessageQueue().getQueueId(), g.getQueueId(), "a batch goes to one queue");
            assertEquals(r.getQueueOffset() + i, g.getQueueOffset(), "batch items are consecutive");
        }
    }

    @Test
    void tagFilter() throws Exception {
        String topic = Interop.unique("t_tags");
        Interop.createTopic(topic, 2);
        DefaultMQProducer p = Interop.producer(Interop.unique("pg_tags"));
        int n = 30;
        List<Message> wanted = new ArrayList<>();
        try {
            for (int i = 0; i < n; i++) {
                Message m = message(topic, i); // tags cycle TagA, TagB, TagC
                assertEquals(SendStatus.SEND_OK, p.send(m).getSendStatus());
                if (!"TagC".equals(m.getTags())) {
                    wanted.add(m);
                }
            }
        } finally {
            p.shutdown();
        }
        List<MessageExt> got = consume(topic, "TagA || TagB", wanted.size());
        Map<String, MessageExt> byI = byIndex(got, wanted.size());
        for (Message m : wanted) {
            assertSame(m, byI.get(m.getUserProperty("i")));
        }
    }

    /**
     * A producer sending to a topic nobody created: the client falls back on the TBW102 route and
     * the broker creates the topic (autoCreateTopicEnable) with the producer's 4 queues.
     */
    @Test
    void sendAutoCreatesTopic() throws Exception {
        String topic = Interop.unique("t_auto");
        DefaultMQProducer p = Interop.producer(Interop.unique("pg_auto"));
        int n = 8;
        List<Message> sent = new ArrayList<>();
        try {
            for (int i = 0; i < n; i++) {
                Message m = message(topic, i);
                assertEquals(SendStatus.SEND_OK, p.send(m).getSendStatus());
                sent.add(m);
            }
        } finally {
            p.shutdown();
        }
        Interop.awaitTrue("a route for the new topic", Duration.ofSeconds(20),
                () -> Interop.admin().examineTopicRouteInfo(topic).getQueueDatas().get(0).getWriteQueueNums() == 4);
        Map<String, MessageExt> got = byIndex(consume(topic, "*", n), n);
        for (int i = 0; i < n; i++) {
            assertSame(sent.get(i), got.get(Integer.toString(i)));
        }
    }
}
