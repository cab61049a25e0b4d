package edgemq.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;

import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.junit.jupiter.api.Test;

/** DefaultLitePullConsumer: subscribe with manual commit, and assign with seek. */
class LitePullTest {
    static void send(String topic, int from, int to) throws Exception {
        DefaultMQProducer p = Interop.producer(Interop.unique("pg_lite"));
        try {
            for (int i = from; i < to; i++) {
                Message m = new Message(topic, "L", "lite-" + i, ("lite" + i).getBytes());
                m.putUserProperty("i", Integer.toString(i));
                assertEquals(SendStatus.SEND_OK, p.send(m).getSendStatus());
            }
        } finally {
            p.shutdown();
        }
    }

    static DefaultLitePullConsumer consumer(String group) {
        DefaultLitePullConsumer c = new DefaultLitePullConsumer(group);
        c.setNamesrvAddr(Interop.namesrv());
        c.setInstanceName(Interop.unique("lite"));
        c.setAutoCommit(false);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.setPollTimeoutMillis(500);
        c.setPollNameServerInterval(Interop.ROUTE_POLL_MS);
        return c;
    }

    /** Polls C until N messages came (then 1 s more for strays) or TIMEOUT. */
    static List<MessageExt> pollUntil(DefaultLitePullConsumer c, int n, Duration timeout) {
        long deadline = System.currentTimeMillis() + timeout.toMillis();
        List<MessageExt> got = new ArrayList<>();
        while (got.size() < n && System.currentTimeMillis() < deadline) {
            got.addAll(c.poll(500));
        }
        long quiet = System.currentTimeMillis() + 1000;
        while (System.currentTimeMillis() < quiet) {
            got.addAll(c.poll(300));
        }
        return got;
    }

    static Set<Integer> indexes(List<MessageExt> ms) {
        Set<Integer> s = new TreeSet<>();
        for (MessageExt m : ms) {
            assertTrue(s.add(Integer.parseInt(m.getUserProperty("i"))), "message " + m.getUserProperty("i") + " twice");
        }
        return s;
    }

    @Test
    void subscribeCommitAndResume() throws Exception {
        String topic = Interop.unique("t_lite");
        String group = Interop.unique("g_lite");
        Interop.createTopic(topic, 2);
        send(topic, 0, 10);

        DefaultLitePullConsumer c1 = consumer(group);
        c1.subscribe(topic, "*");
        c1.start();
        try {
            List<MessageExt> got = pollUntil(c1, 10, Duration.ofSeconds(30));
            assertEquals(10, got.size(), "first consumer polls the 10 messages");
            assertEquals(10, indexes(got).size());
            c1.commitSync();
            long committed = 0;
            for (MessageQueue mq : c1.fetchMessageQueues(topic)) {
                Long off = c1.committed(mq);
                committed += off == null ? 0 : off;
            }
            assertEquals(10, committed, "committed offsets on the broker add up to 10");
        } finally {
            c1.shutdown();
        }

        send(topic, 10, 15);
        DefaultLitePullConsumer c2 = consumer(group);
        c2.subscribe(topic, "*");
        c2.start();
        try {
            List<MessageExt> got = pollUntil(c2, 5, Duration.ofSeconds(30));
            assertEquals(Set.of(10, 11, 12, 13, 14), indexes(got), "the group resumes after its commit");
        } finally {
            c2.shutdown();
        }
    }

    private static Map<Long, Integer> offsets(int from, int to) {
        Map<Long, Integer> m = new TreeMap<>();
        for (int i = from; i < to; i++) {
            m.put((long) i, i);
        }
        return m;
    }

    /** Queue offset → message index; fails on a repeated offset. */
    private static Map<Long, Integer> byOffset(List<MessageExt> got) {
        Map<Long, Integer> m = new TreeMap<>();
        for (MessageExt e : got) {
            Integer prev = m.put(e.getQueueOffset(), Integer.parseInt(e.getUserProperty("i")));
            assertEquals(null, prev, "offset " + e.getQueueOffset() + " polled twice");
        }
        return m;
    }

    @Test
    void assignAndSeek() throws Exception {
        String topic = Interop.unique("t_lite_assign");
        Interop.createTopic(topic, 1);
        send(topic, 0, 8);
        DefaultLitePullConsumer c = consumer(Interop.unique("g_lite_assign"));
        c.start();
        try {
            List<MessageQueue> mqs = new ArrayList<>(c.fetchMessageQueues(topic));
            assertEquals(1, mqs.size());
            c.assign(mqs); // a new group, CONSUME_FROM_FIRST_OFFSET: from offset 0
            assertEquals(offsets(0, 8), byOffset(pollUntil(c, 8, Duration.ofSeconds(20))), "offsets 0..7 from the start");
            // Everything is read and the pull at offset 8 waits on the broker: seek back.
            c.seek(mqs.get(0), 3);
            assertEquals(offsets(3, 8), byOffset(pollUntil(c, 5, Duration.ofSeconds(20))), "offsets 3..7 after seek(3)");
        } finally {
            c.shutdown();
        }
    }
}
