package edgemq.interop;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Collectors;

import org.apache.rocketmq.client.consumer.AllocateMessageQueueStrategy;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.protocol.heartbeat.MessageModel;

/**
 * One member of a consumer group in its own JVM, driven by ClusteringTest:
 * {@code ConsumerMember NAMESRV GROUP TOPIC CLUSTERING|BROADCASTING NAME}. It prints to stdout
 * {@code READY}, {@code ALLOC q,q,...} after every rebalance, {@code MSG i queueId} per message,
 * and {@code STOPPED} after a clean shutdown, which "stop" (or end of file) on stdin asks for.
 */
public final class ConsumerMember {
    private ConsumerMember() {
    }

    private static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    /** A consumer of the group, ready to start; INSTANCE names its client. */
    private static DefaultMQPushConsumer build(String ns, String group, String topic, MessageModel model,
            String instance) throws Exception {
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(group);
        c.setNamesrvAddr(ns);
        c.setInstanceName(instance);
        c.setMessageModel(model);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.setConsumeThreadMin(2);
        c.setConsumeThreadMax(2);
        c.setPollNameServerInterval(Interop.ROUTE_POLL_MS);
        AllocateMessageQueueStrategy avg = new AllocateMessageQueueAveragely();
        c.setAllocateMessageQueueStrategy(new AllocateMessageQueueStrategy() {
            @Override
            public List<MessageQueue> allocate(String g, String cid, List<MessageQueue> all, List<String> cids) {
                List<MessageQueue> mine = avg.allocate(g, cid, all, cids);
                if (all.isEmpty() || !topic.equals(all.get(0).getTopic())) {
                    return mine; // the group's retry topic
                }
                say("ALLOC " + mine.stream().map(q -> Integer.toString(q.getQueueId())).sorted()
                        .collect(Collectors.joining(",")));
                return mine;
            }

            @Override
            public String getName() {
                return avg.getName();
            }
        });
        c.subscribe(topic, "*");
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            List<String> lines = new ArrayList<>();
            for (MessageExt m : msgs) {
                lines.add("MSG " + m.getUserProperty("i") + " " + m.getQueueId());
            }
            lines.forEach(ConsumerMember::say);
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        return c;
    }

    public static void main(String[] args) throws Exception {
        String ns = args[0];
        String group = args[1];
        String topic = args[2];
        MessageModel model = MessageModel.valueOf(args[3]);
        String name = args[4];

        // A start can fail on a transient connection error (a busy machine); a consumer that
        // failed to start cannot start again, so make a new one, at most three times.
        DefaultMQPushConsumer c = null;
        for (int attempt = 1; c == null; attempt++) {
            DefaultMQPushConsumer candidate = build(ns, group, topic, model, attempt == 1 ? name : name + "-" + attempt);
            try {
                candidate.start();
                c = candidate;
            } catch (Exception | Error e) {
                candidate.shutdown();
                if (attempt == 3) {
                    throw e;
                }
                System.err.println(name + ": start failed (" + e + "); trying again");
                Thread.sleep(2000);
            }
        }
        say("READY");
        try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
            String line;
            while ((line = in.readLine()) != null && !line.trim().equals("stop")) {
                // wait for the test to end this member
            }
        }
        c.shutdown();
        say("STOPPED");
        System.exit(0);
    }
}
