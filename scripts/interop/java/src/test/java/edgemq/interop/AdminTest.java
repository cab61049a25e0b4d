package edgemq.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.remoting.protocol.admin.OffsetWrapper;
import org.apache.rocketmq.remoting.protocol.route.TopicRouteData;
import org.apache.rocketmq.remoting.protocol.subscription.SubscriptionGroupConfig;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.TestMethodOrder;

/**
 * mqadmin commands, run as bin/mqadmin runs them, with their output checked. The class sets up
 * one topic of 4 queues holding 8 messages and a running push-consumer group that consumed them.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class AdminTest {
    private static final int N = 8;
    private String topic;
    private String group;
    private String cluster;
    private String brokerAddr;
    private String brokerName;
    private long startedAt;
    private final List<SendResult> sent = new ArrayList<>();
    private final Collector consumed = new Collector();
    private DefaultMQPushConsumer consumer;

    @BeforeAll
    void setUp() throws Exception {
        startedAt = System.currentTimeMillis();
        topic = Interop.unique("t_admin");
        group = Interop.unique("g_admin");
        cluster = Interop.clusterName();
        brokerAddr = Interop.brokerAddr();
        brokerName = Interop.brokerName();
        Interop.createTopic(topic, 4);
        DefaultMQProducer p = Interop.producer(Interop.unique("pg_admin"));
        try {
            for (int i = 0; i < N; i++) {
                Message m = new Message(topic, "A", "admin-key-" + i, ("admin body " + i).getBytes());
                SendResult r = p.send(m);
                assertEquals(SendStatus.SEND_OK, r.getSendStatus());
                sent.add(r);
            }
        } finally {
            p.shutdown();
        }
        consumer = Interop.pushConsumer(group);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            consumed.addAll(msgs, "c");
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        consumed.await(N, Duration.ofSeconds(30));
    }

    @AfterAll
    void tearDown() {
        if (consumer != null) {
            consumer.shutdown();
        }
    }

    private static void assertContains(String out, String want) {
        assertTrue(out.contains(want), "output lacks \"" + want + "\":\n" + out);
    }

    @Test
    @Order(1)
    void updateTopicThenDeleteTopic() throws Exception {
        String t = Interop.unique("t_admin_new");
        Interop.AdminOutput out = Interop.mqadmin("updateTopic", "-c", cluster, "-t", t, "-r", "3", "-w", "3");
        assertContains(out.out(), "create topic to " + brokerAddr + " success.");
        assertContains(out.out(), "topicName=" + t);
        TopicRouteData route = Interop.admin().examineTopicRouteInfo(t);
        assertEquals(3, route.getQueueDatas().get(0).getWriteQueueNums());
        assertEquals(3, route.getQueueDatas().get(0).getReadQueueNums());
        assertTrue(Interop.admin().fetchAllTopicList().getTopicList().contains(t), "topicList has the new topic");

        out = Interop.mqadmin("deleteTopic", "-c", cluster, "-t", t);
        assertContains(out.out(), "delete topic [" + t + "] from cluster [" + cluster + "] success.");
        assertContains(out.out(), "delete topic [" + t + "] from NameServer success.");
        Interop.awaitTrue("the deleted topic to leave topicList", Duration.ofSeconds(10),
                () -> !Interop.admin().fetchAllTopicList().getTopicList().contains(t));
    }

    @Test
    @Order(2)
    void topicList() {
        Interop.AdminOutput out = Interop.mqadmin("topicList");
        List<String> lines = out.out().lines().map(String::trim).toList();
        assertTrue(lines.contains(topic), "topicList lists " + topic + ":\n" + out.all());
    }

    @Test
    @Order(3)
    void topicRoute() {
        String out = Interop.mqadmin("topicRoute", "-t", topic).out();
        assertContains(out, "\"brokerName\":\"" + brokerName + "\"");
        assertContains(out, "\"" + brokerAddr + "\"");
        assertContains(out, "\"readQueueNums\":4");
        assertContains(out, "\"writeQueueNums\":4");
        assertContains(out, "\"perm\":6");
    }

    @Test
    @Order(4)
    void topicStatus() {
        String out = Interop.mqadmin("topicStatus", "-t", topic).out();
        Pattern row = Pattern.compile("^" + Pattern.quote(brokerName) + "\\s+(\\d+)\\s+(\\d+)\\s+(\\d+)", Pattern.MULTILINE);
        Matcher m = row.matcher(out);
        long max = 0;
        int queues = 0;
        while (m.find()) {
            queues++;
            assertEquals(0, Long.parseLong(m.group(2)), "min offset of queue " + m.group(1));
            max += Long.parseLong(m.group(3));
        }
        assertEquals(4, queues, "a row per queue:\n" + out);
        assertEquals(N, max, "max offsets add up to the messages sent:\n" + out);
    }

    @Test
    @Order(5)
    void brokerStatus() {
        String out = Interop.mqadmin("brokerStatus", "-b", brokerAddr).out();
        for (String key : List.of("brokerVersionDesc", "bootTimestamp", "commitLogMaxOffset", "msgPutTotalTodayNow",
                "msgGetTotalTodayNow", "runtime")) {
            assertTrue(Pattern.compile("^" + key + "\\s*:", Pattern.MULTILINE).matcher(out).find(),
                    "brokerStatus shows " + key + ":\n" + out);
        }
        Matcher put = Pattern.compile("^msgPutTotalTodayNow\\s*:\\s*(\\d+)", Pattern.MULTILINE).matcher(out);
        assertTrue(put.find() && Long.parseLong(put.group(1)) >= N, "msgPutTotalTodayNow counts our sends:\n" + out);
    }

    @Test
    @Order(6)
    void clusterList() {
        String out = Interop.mqadmin("clusterList").out();
        Pattern row = Pattern.compile("^" + Pattern.quote(cluster) + "\\s+" + Pattern.quote(brokerName) + "\\s+0\\s+"
                + Pattern.quote(brokerAddr) + "\\s", Pattern.MULTILINE);
        Matcher m = row.matcher(out);
        assertTrue(m.find(), "clusterList shows cluster, broker, id 0 and address:\n" + out);
        String line = out.substring(m.start()).lines().findFirst().orElse("");
        assertFalse(line.contains("null"), "clusterList fills every column (it reads brokerStatus):\n" + out);
    }

    @Test
    @Order(7)
    void consumerProgress() throws Exception {
        Pattern row = Pattern.compile("^" + Pattern.quote(topic) + "\\s+" + Pattern.quote(brokerName)
                + "\\s+(\\d+)\\s+(\\d+)\\s+(\\d+)\\s+(\\d+)\\s+", Pattern.MULTILINE);
        // The consumer reports its offsets every 5 s (and with each pull): wait until the broker
        // shows them all.
        String[] out = new String[1];
        Interop.awaitTrue("consumerProgress to show every queue consumed", Duration.ofSeconds(20), () -> {
            out[0] = Interop.mqadmin("consumerProgress", "-g", group).out();
            Matcher m = row.matcher(out[0]);
            long consumerTotal = 0;
            while (m.find()) {
                consumerTotal += Long.parseLong(m.group(3));
            }
            return consumerTotal == N;
        });
        Matcher m = row.matcher(out[0]);
        int queues = 0;
        long broker = 0;
        while (m.find()) {
            queues++;
            assertEquals(m.group(2), m.group(3), "consumer offset == broker offset on queue " + m.group(1) + ":\n" + out[0]);
            assertEquals("0", m.group(4), "diff on queue " + m.group(1) + ":\n" + out[0]);
            broker += Long.parseLong(m.group(2));
        }
        assertEquals(4, queues, "a row per queue:\n" + out[0]);
        assertEquals(N, broker, "broker offsets add up to the messages sent:\n" + out[0]);
        assertTrue(Pattern.compile("Diff Total:\\s*0\\s*$", Pattern.MULTILINE).matcher(out[0]).find(),
                "nothing left to consume:\n" + out[0]);
    }

    @Test
    @Order(8)
    void consumerConnection() {
        String out = Interop.mqadmin("consumerConnection", "-g", group).out();
        assertContains(out, consumer.buildMQClientId());
        assertContains(out, "CONSUME_PASSIVELY");
        assertContains(out, "CLUSTERING");
        assertContains(out, "CONSUME_FROM_FIRST_OFFSET");
        assertTrue(Pattern.compile("^" + Pattern.quote(topic) + "\\s+\\*\\s*$", Pattern.MULTILINE).matcher(out).find(),
                "the subscription of " + topic + ":\n" + out);
    }

    private void assertShowsMessage(String out, int i) {
        assertTrue(Pattern.compile("^Topic:\\s+" + Pattern.quote(topic) + "\\s*$", Pattern.MULTILINE).matcher(out).find(),
                "topic of message " + i + ":\n" + out);
        assertTrue(Pattern.compile("^Keys:\\s+\\[?admin-key-" + i + "\\]?\\s*$", Pattern.MULTILINE).matcher(out).find(),
                "keys of message " + i + ":\n" + out);
        assertTrue(Pattern.compile("^Tags:\\s+\\[?A\\]?\\s*$", Pattern.MULTILINE).matcher(out).find(), "tags:\n" + out);
        assertTrue(Pattern.compile("^Queue ID:\\s+" + sent.get(i).getMessageQueue().getQueueId() + "\\s*$",
                Pattern.MULTILINE).matcher(out).find(), "queue id:\n" + out);
        assertTrue(Pattern.compile("^Queue Offset:\\s+" + sent.get(i).getQueueOffset() + "\\s*$",
                Pattern.MULTILINE).matcher(out).find(), "queue offset:\n" + out);
    }

    @Test
    @Order(9)
    void queryMsgById() {
        String out = Interop.mqadmin("queryMsgById", "-t", topic, "-i", sent.get(2).getOffsetMsgId()).out();
        assertShowsMessage(out, 2);
    }

    @Test
    @Order(10)
    void queryMsgByKey() throws Exception {
        // The broker indexes keys in the background: give it a moment.
        String[] out = new String[1];
        Interop.awaitTrue("queryMsgByKey to find admin-key-5", Duration.ofSeconds(15), () -> {
            out[0] = Interop.mqadmin("queryMsgByKey", "-t", topic, "-k", "admin-key-5").out();
            return out[0].contains(sent.get(5).getMsgId());
        });
        Pattern row = Pattern.compile("^" + Pattern.quote(sent.get(5).getMsgId()) + "\\s+"
                + sent.get(5).getMessageQueue().getQueueId() + "\\s+" + sent.get(5).getQueueOffset() + "(\\s|$)",
                Pattern.MULTILINE);
        assertTrue(row.matcher(out[0]).find(), "a row with message id, queue and offset:\n" + out[0]);
    }

    @Test
    @Order(11)
    void queryMsgByOffset() {
        SendResult r = sent.get(6);
        String out = Interop.mqadmin("queryMsgByOffset", "-t", topic, "-b", brokerName,
                "-i", Integer.toString(r.getMessageQueue().getQueueId()), "-o", Long.toString(r.getQueueOffset())).out();
        assertShowsMessage(out, 6);
    }

    @Test
    @Order(12)
    void resetOffsetByTimeMakesTheLiveGroupConsumeAgain() throws Exception {
        int before = consumed.size();
        String out = Interop.mqadmin("resetOffsetByTime", "-g", group, "-t", topic, "-s",
                Long.toString(startedAt - 1000)).all();
        Pattern row = Pattern.compile("^" + Pattern.quote(brokerName) + "\\s+(\\d+)\\s+0\\s*$", Pattern.MULTILINE);
        Matcher m = row.matcher(out);
        int queues = 0;
        while (m.find()) {
            queues++;
        }
        assertEquals(4, queues, "each queue reset to offset 0:\n" + out);
        // The broker tells the running consumer, which starts again from offset 0.
        consumed.await(before + N, Duration.ofSeconds(30));
        Interop.awaitTrue("the group's offsets back at the end", Duration.ofSeconds(20), () -> {
            long total = 0;
            for (OffsetWrapper w : Interop.admin().examineConsumeStats(group).getOffsetTable().values()) {
                total += w.getConsumerOffset();
            }
            return total == N;
        });
    }

    @Test
    @Order(13)
    void updateSubGroup() throws Exception {
        String g = Interop.unique("g_admin_new");
        String out = Interop.mqadmin("updateSubGroup", "-c", cluster, "-g", g, "-r", "1").out();
        assertContains(out, "create subscription group to " + brokerAddr + " success.");
        SubscriptionGroupConfig cfg = Interop.admin().examineSubscriptionGroupConfig(brokerAddr, g);
        assertEquals(g, cfg.getGroupName());
        assertEquals(1, cfg.getRetryMaxTimes());
        assertFalse(cfg.isConsumeBroadcastEnable());
    }
}
