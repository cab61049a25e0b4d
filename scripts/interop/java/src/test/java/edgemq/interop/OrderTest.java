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
}
