package edgemq.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import edgemq.interop.ClusteringTest.Member;

/**
 * One clustering group of two kinds of member: EdgeMQ's Go PushConsumer over its remoting
 * client (the gomember program, path in -Dinterop.gomember) and Apache RocketMQ's Java
 * DefaultMQPushConsumer (ConsumerMember). Both allocate averagely over the same sorted
 * queues and client ids, so their allocations must agree: each queue consumed by exactly one
 * of them. Every message is consumed once, and when one member leaves the other takes its
 * queues, in both directions.
 */
@Timeout(300) // three processes, two of them JVMs, start in turn on a busy machine
class MixedGroupTest {
    private static final int QUEUES = 5; // an odd split (3 + 2): a sort that differed would show

    private static String goMember() {
        String bin = System.getProperty("interop.gomember", "");
        Assumptions.assumeTrue(!bin.isEmpty() && new File(bin).canExecute(),
                "no gomember binary (-Dinterop.gomember; run.sh builds it)");
        return bin;
    }

    /** Waits until A and B hold disjoint allocations that together cover every queue. */
    private static void awaitSplit(Member a, Member b) throws Exception {
        Interop.awaitTrue(a.name + " and " + b.name + " to split the " + QUEUES + " queues",
                Duration.ofSeconds(60), () -> {
                    Set<String> qa = ClusteringTest.ids(a.alloc());
                    Set<String> qb = ClusteringTest.ids(b.alloc());
                    Set<String> all = new HashSet<>(qa);
                    all.addAll(qb);
                    return !qa.isEmpty() && !qb.isEmpty() && all.size() == QUEUES
                            && qa.size() + qb.size() == QUEUES;
                });
    }

    /** Checks that messages [from, to) were each consumed once by A and B together, by both. */
    private static void consumedOnce(Member a, Member b, int from, int to) throws Exception {
        ClusteringTest.awaitGroup("messages " + from + ".." + (to - 1) + " consumed by the group",
                Duration.ofSeconds(60), ClusteringTest.range(from, to), a, b);
        Collector.sleep(Duration.ofSeconds(1));
        Map<Integer, Integer> ra = a.received();
        Map<Integer, Integer> rb = b.received();
        int byA = 0;
        int byB = 0;
        for (int i = from; i < to; i++) {
            assertEquals(1, ra.getOrDefault(i, 0) + rb.getOrDefault(i, 0), "message " + i + " consumed once by the group");
            byA += ra.getOrDefault(i, 0);
            byB += rb.getOrDefault(i, 0);
        }
        assertTrue(byA > 0 && byB > 0, a.name + " consumed " + byA + ", " + b.name + " " + byB + ": want both > 0");
        for (Member m : List.of(a, b)) {
            Set<String> queues = queuesOf(m, from, to);
            assertTrue(ClusteringTest.ids(m.alloc()).containsAll(queues),
                    m.name + " consumed messages " + from + ".." + (to - 1) + " from queues " + queues
                            + ", not only from its own " + m.alloc());
        }
    }

    /** The queues M consumed messages [from, to) from. */
    private static Set<String> queuesOf(Member m, int from, int to) {
        Set<String> s = new TreeSet<>();
        for (String l : m.lines()) {
            String[] f = l.split(" ");
            if (f.length == 3 && f[0].equals("MSG")) {
                int i = Integer.parseInt(f[1]);
                if (i >= from && i < to) {
                    s.add(f[2]);
                }
            }
        }
        return s;
    }

    /**
     * After the other member stopped, SURVIVOR takes every queue and consumes [from, to) of
     * TOPIC once each, and nothing else again: neither what it consumed BEFORE nor what the
     * other member consumed and committed.
     */
    private static void takesOver(String topic, Member survivor, Map<Integer, Integer> before, int from, int to)
            throws Exception {
        survivor.await("all " + QUEUES + " queues", Duration.ofSeconds(45),
                ls -> ClusteringTest.ids(survivor.alloc()).size() == QUEUES);
        ClusteringTest.send(topic, from, to);
        ClusteringTest.awaitGroup("messages " + from + ".." + (to - 1) + " consumed by " + survivor.name,
                Duration.ofSeconds(60), ClusteringTest.range(from, to), survivor);
        Collector.sleep(Duration.ofSeconds(1));
        Map<Integer, Integer> after = survivor.received();
        for (int i = from; i < to; i++) {
            assertEquals(1, after.get(i), "message " + i + " consumed once by " + survivor.name);
        }
        for (Map.Entry<Integer, Integer> e : after.entrySet()) {
            int i = e.getKey();
            if (i < from || i >= to) {
                assertEquals(before.getOrDefault(i, 0), e.getValue(),
                        "message " + i + " not consumed again by " + survivor.name + " after the other left");
            }
        }
    }

    @Test
    void goAndJavaMembersShareOneGroup() throws Exception {
        String bin = goMember();
        String topic = Interop.unique("t_mix");
        String group = Interop.unique("g_mix");
        Interop.createTopic(topic, QUEUES);
        try (Member go = new Member("mixGo", List.of(bin, Interop.namesrv(), group, topic, "CLUSTERING", "mixGo"));
                Member java = new Member(group, topic, "CLUSTERING", "mixJava")) {
            go.await("READY", Duration.ofSeconds(60), ls -> ls.contains("READY"));
            java.await("READY", Duration.ofSeconds(60), ls -> ls.contains("READY"));
            awaitSplit(go, java);
            ClusteringTest.send(topic, 0, 40);
            consumedOnce(go, java, 0, 40);

            // The Java member leaves: the Go member takes its queues from its offsets.
            java.stop();
            takesOver(topic, go, go.received(), 40, 60);

            // A Java member joins again, and then the Go member leaves.
            try (Member java2 = new Member(group, topic, "CLUSTERING", "mixJava2")) {
                java2.await("READY", Duration.ofSeconds(60), ls -> ls.contains("READY"));
                awaitSplit(go, java2);
                ClusteringTest.send(topic, 60, 100);
                consumedOnce(go, java2, 60, 100);
                Map<Integer, Integer> before = java2.received();
                go.stop();
                takesOver(topic, java2, before, 100, 120);
                java2.stop();
            }
        }
    }
}
