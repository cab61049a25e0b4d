package edgemq.interop;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;

import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.junit.jupiter.api.Test;

/**
 * Consumption failures: RECONSUME_LATER sends the message back; it returns through the group's
 * retry topic after the broker's schedule (level 3 + reconsume times: 10 s for the first retry),
 * and once max reconsume times is used up it lands in %DLQ%group, readable there.
 */
class RetryTest {
    /** Reads everything in TOPIC (assign mode, from the start) until N messages or TIMEOUT. */
    static List<MessageExt> readTopic(String topic, int n, Duration timeout) throws Exception {
        DefaultLitePullConsumer c = new DefaultLitePullConsumer(Interop.unique("g_read"));
        c.setNamesrvAddr(Interop.namesrv());
        c.setInstanceName(Interop.unique("r"));
        c.setAutoCommit(false);
        // From the queue's first message, not from a seek after assign: with the default (the
        // last offset) a pull task may issue its first pull before the seek, at the end of the
        // queue, where the broker holds it for up to 20 s before the seek takes effect.
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.start();
        try {
            long deadline = System.currentTimeMillis() + timeout.toMillis();
            Collection<MessageQueue> mqs = null;
            while (mqs == null || mqs.isEmpty()) {
                try {
                    mqs = c.fetchMessageQueues(topic);
                } catch (Exception e) {
                    if (System.currentTimeMillis() > deadline) {
                        throw new AssertionError("no route for " + topic, e);
                    }
                    Thread.sleep(300);
                }
            }
            c.assign(mqs);
            List<MessageExt> out = new ArrayList<>();
            while (out.size() < n && System.currentTimeMillis() < deadline) {
                out.addAll(c.poll(500));
            }
            return out;
        } finally {
            c.shutdown();
        }
    }

    @Test
    void reconsumeLaterThenRetryTopicThenDlq() throws Exception {
        String topic = Interop.unique("t_retry");
        String group = Interop.unique("g_retry");
        Interop.createTopic(topic, 1);

        Collector c = new Collector();
        DefaultMQPushConsumer consumer = Interop.pushConsumer(group);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.setMaxReconsumeTimes(1);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            c.addAll(msgs, "c");
            return ConsumeConcurrentlyStatus.RECONSUME_LATER;
        });
        consumer.start();

        byte[] body = Interop.randomBody(300);
        SendResult sent;
        List<Collector.Delivery> got;
        try {
            DefaultMQProducer p = Interop.producer(Interop.unique("pg_retry"));
            try {
                Message m = new Message(topic, "R", "retry-key", body);
                m.putUserProperty("i", "0");
                sent = p.send(m);
                assertEquals(SendStatus.SEND_OK, sent.getSendStatus());
            } finally {
                p.shutdown();
            }
            got = c.await(2, Duration.ofSeconds(40));
            // After the second failure the message goes to the DLQ, not back to the consumer.
            got = c.settle(Duration.ofSeconds(3));
        } finally {
            consumer.shutdown();
        }
        assertEquals(2, got.size(), "delivered once, retried once (maxReconsumeTimes 1)");
        MessageExt first = got.get(0).msg();
        MessageExt retry = got.get(1).msg();
        assertEquals(topic, first.getTopic());
        assertEquals(0, first.getReconsumeTimes());
        assertEquals(topic, retry.getTopic(), "the consumer sees the original topic on a retry");
        assertEquals(1, retry.getReconsumeTimes());
        assertEquals(sent.getMsgId(), retry.getMsgId(), "a retry keeps the message id");
        assertArrayEquals(body, retry.getBody());
        assertEquals("retry-key", retry.getKeys());
        assertEquals("0", retry.getUserProperty("i"));
        long gap = got.get(1).at() - got.get(0).at();
        assertTrue(gap >= 8000, "first retry comes after the 10 s of level 3, came after " + gap + " ms");

        List<MessageExt> dlq = readTopic("%DLQ%" + group, 1, Duration.ofSeconds(20));
        assertEquals(1, dlq.size(), "one message in %DLQ%" + group);
        MessageExt d = dlq.get(0);
        assertEquals("%DLQ%" + group, d.getTopic());
        assertArrayEquals(body, d.getBody());
        assertEquals("retry-key", d.getKeys());
        assertEquals("0", d.getUserProperty("i"));
        assertEquals(sent.getMsgId(), d.getMsgId(), "the DLQ copy keeps the message id");
        assertNotNull(d.getProperty("ORIGIN_MESSAGE_ID"), "ORIGIN_MESSAGE_ID");
        assertEquals(topic, d.getProperty("RETRY_TOPIC"), "RETRY_TOPIC names the original topic");
    }

    @Test
    void retryDelayChosenByTheConsumer() throws Exception {
        String topic = Interop.unique("t_retry1s");
        String group = Interop.unique("g_retry1s");
        Interop.createTopic(topic, 1);

        Collector c = new Collector();
        DefaultMQPushConsumer consumer = Interop.pushConsumer(group);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            c.addAll(msgs, "c");
            if (msgs.get(0).getReconsumeTimes() < 2) {
                ctx.setDelayLevelWhenNextConsume(1); // 1 s instead of the broker's 10 s, 30 s
                return ConsumeConcurrentlyStatus.RECONSUME_LATER;
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        List<Collector.Delivery> got;
        try {
            DefaultMQProducer p = Interop.producer(Interop.unique("pg_retry1s"));
            try {
                assertEquals(SendStatus.SEND_OK,
                        p.send(new Message(topic, "R", "k", "retry me".getBytes())).getSendStatus());
            } finally {
                p.shutdown();
            }
            c.await(3, Duration.ofSeconds(30));
            got = c.settle(Duration.ofSeconds(2));
        } finally {
            consumer.shutdown();
        }
        for (Collector.Delivery d : got) {
            System.out.println("delivery reconsumeTimes=" + d.msg().getReconsumeTimes() + " at +"
                    + (d.at() - got.get(0).at()) + " ms, stored at +" + (d.msg().getStoreTimestamp() - got.get(0).at()) + " ms");
        }
        assertEquals(3, got.size(), "two retries at level 1, then success and no more");
        for (int i = 0; i < 3; i++) {
            assertEquals(i, got.get(i).msg().getReconsumeTimes());
            assertEquals(topic, got.get(i).msg().getTopic());
            assertEquals("retry me", new String(got.get(i).msg().getBody()));
        }
        long gap = got.get(2).at() - got.get(0).at();
        assertTrue(gap < 9000, "level-1 retries come sooner than the broker's 10 s default: " + gap + " ms");
    }
}
