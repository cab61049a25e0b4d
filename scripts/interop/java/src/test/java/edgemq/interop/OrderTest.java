package edgemq.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.MessageQueueSelector;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.junit.jupiter.api.Test;

/**
 * Ordered messages: a producer picks the queue by a sharding key (MessageQueueSelector) and an
 * orderly consumer (queue locks on the broker) must see each key's messages in send order.
 */
class OrderTest {
    @Test
    void orderedByShardingKey() throws Exception {
        String topic = Interop.unique("t_order");
        Interop.createTopic(topic, 4);
        String[] keys = {"order-7", "order-11", "order-23", "order-42", "order-5"};
        int perKey = 20;
        MessageQueueSelector byKey = (mqs, msg, arg) -> mqs.get(Math.floorMod(arg.hashCode(), mqs.size()));

        DefaultMQProducer p = Interop.producer(Interop.unique("pg_order"));
        Map<String, Integer> queueOfKey = new HashMap<>();
        try {
            for (int seq = 0; seq < perKey; seq++) {
                for (String key : keys) {
                    Message m = new Message(topic, "ord", key, (key + ":" + seq).getBytes());
                    m.putUserProperty("seq", Integer.toString(seq));
                    SendResult r = p.send(m, byKey, key);
                    assertEquals(SendStatus.SEND_OK, r.getSendStatus());
                    Integer q = queueOfKey.putIfAbsent(key, r.getMessageQueue().getQueueId());
                    if (q != null) {
                        assertEquals(q, r.getMessageQueue().getQueueId(), "the selector keeps a key on one queue");
                    }
                }
            }
        } finally {
            p.shutdown();
        }

        Collector c = new Collector();
        DefaultMQPushConsumer consumer = Interop.pushConsumer(Interop.unique("g_order"));
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerOrderly) (msgs, ctx) -> {
            c.addAll(msgs, "c");
            return ConsumeOrderlyStatus.SUCCESS;
        });
        consumer.start();
        List<Collector.Delivery> got;
        try {
            c.await(keys.length * perKey, Duration.ofSeconds(40));
            got = c.settle(Duration.ofSeconds(1));
        } finally {
            consumer.shutdown();
        }
        assertEquals(keys.length * perKey, got.size(), "every ordered message once");
        Map<String, List<Integer>> seqs = new HashMap<>();
        for (Collector.Delivery d : got) {
            MessageExt m = d.msg();
            assertEquals((int) queueOfKey.get(m.getKeys()), m.getQueueId(), "queue of " + m.getKeys());
            seqs.computeIfAbsent(m.getKeys(), k -> new ArrayList<>()).add(Integer.parseInt(m.getUserProperty("seq")));
            assertEquals(m.getKeys() + ":" + m.getUserProperty("seq"), new String(m.getBody()));
        }
        for (String key : keys) {
            List<Integer> s = seqs.get(key);
            assertTrue(s != null, "messages of " + key);
            for (int i = 0; i < perKey; i++) {
                assertEquals(i, s.get(i), key + " consumed out of order: " + s);
            }
        }
    }

    /**
     * An orderly consumer that keeps failing a message retries it in place (the queue is held),
     * then after max reconsume times sends it to %DLQ%group and goes on with the next one.
     */
    @Test
    void orderlyFailureRetriesInPlaceThenDlq() throws Exception {
        String topic = Interop.unique("t_order_dlq");
        String group = Interop.unique("g_order_dlq");
        Interop.createTopic(topic, 1);
        DefaultMQProducer p = Interop.producer(Interop.unique("pg_order_dlq"));
        try {
            for (String name : new String[] {"poison", "next"}) {
                Message m = new Message(topic, "ord", name, name.getBytes());
                m.putUserProperty("i", name);
                assertEquals(SendStatus.SEND_OK, p.send(m).getSendStatus());
            }
        } finally {
            p.shutdown();
        }
        Collector c = new Collector();
        DefaultMQPushConsumer consumer = Interop.pushConsumer(group);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.setMaxReconsumeTimes(1);
        consumer.setSuspendCurrentQueueTimeMillis(200);
        consumer.subscribe(topic, "*");
        List<String> seen = java.util.Collections.synchronizedList(new ArrayList<>());
        consumer.registerMessageListener((MessageListenerOrderly) (msgs, ctx) -> {
            // The client retries the same MessageExt object: note its state now.
            seen.add(msgs.get(0).getKeys() + "#" + msgs.get(0).getReconsumeTimes());
            c.addAll(msgs, "c");
            return "poison".equals(msgs.get(0).getKeys())
                    ? ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT : ConsumeOrderlyStatus.SUCCESS;
        });
        consumer.start();
        try {
            c.await(3, Duration.ofSeconds(30));
            c.settle(Duration.ofSeconds(2));
        } finally {
            consumer.shutdown();
        }
        assertEquals(List.of("poison#0", "poison#1", "next#0"), seen, "in-place retries, then the next message");
        List<MessageExt> dlq = RetryTest.readTopic("%DLQ%" + group, 1, Duration.ofSeconds(20));
        assertEquals(1, dlq.size(), "the poison message in %DLQ%" + group);
        assertEquals("poison", new String(dlq.get(0).getBody()));
        assertEquals("poison", dlq.get(0).getKeys());
    }
}
