package edgemq.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;

import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.message.Message;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A concurrent push-consumer group of two members, each in its own JVM (ConsumerMember):
 * clustering shares the queues so each message is consumed once, and the survivor takes all
 * queues when a member leaves; broadcasting gives every member every message.
 */
@Timeout(240) // two or three JVMs start per test: on a busy 2-core machine that alone takes long
class ClusteringTest {
    /** A ConsumerMember process and the lines it printed. */
    static final class Member implements AutoCloseable {
        final String name;
        private final Process proc;
        private final Writer stdin;
        private final List<String> lines = new ArrayList<>();
        private final Thread reader;

        Member(String group, String topic, String model, String name) throws IOException {
            this(group, topic, model, name, List.of());
        }

        /** A member whose JVM also gets JVMOPTS. */
        Member(String group, String topic, String model, String name, List<String> jvmOpts) throws IOException {
            this(name, javaMember(group, topic, model, name, jvmOpts));
        }

        private static List<String> javaMember(String group, String topic, String model, String name,
                List<String> jvmOpts) {
            String java = System.getProperty("java.home") + File.separator + "bin" + File.separator + "java";
            List<String> cmd = new ArrayList<>(List.of(java, "-Xms64m", "-Xmx128m",
                    "-cp", System.getProperty("java.class.path")));
            cmd.addAll(jvmOpts);
            for (String p : List.of("user.home", "rmq.logback.configurationFile", "interop.logdir")) {
                if (System.getProperty(p) != null) {
                    cmd.add("-D" + p + "=" + System.getProperty(p));
                }
            }
            cmd.addAll(List.of(ConsumerMember.class.getName(), Interop.namesrv(), group, topic, model, name));
            return cmd;
        }

        /** A member run by CMD, any program that speaks ConsumerMember's protocol. */
        Member(String name, List<String> cmd) throws IOException {
            this.name = name;
            ProcessBuilder pb = new ProcessBuilder(cmd);
            pb.redirectError(ProcessBuilder.Redirect.INHERIT);
            proc = pb.start();
            stdin = new OutputStreamWriter(proc.getOutputStream(), StandardCharsets.UTF_8);
            reader = new Thread(() -> {
                try (BufferedReader r = new BufferedReader(
                        new InputStreamReader(proc.getInputStream(), StandardCharsets.UTF_8))) {
                    String line;
                    while ((line = r.readLine()) != null) {
                        System.out.println(name + ": " + line);
                        synchronized (lines) {
                            lines.add(line);
                            lines.notifyAll();
                        }
                    }
                } catch (IOException e) {
                    // the process ended
                }
            }, "member-" + name);
            reader.setDaemon(true);
            reader.start();
        }

        List<String> lines() {
            synchronized (lines) {
                return new ArrayList<>(lines);
            }
        }

        /** Waits until the printed lines satisfy OK; fails after TIMEOUT. */
        void await(String what, Duration timeout, Predicate<List<String>> ok) throws InterruptedException {
            long deadline = System.currentTimeMillis() + timeout.toMillis();
            synchronized (lines) {
                while (!ok.test(lines)) {
                    long left = deadline - System.currentTimeMillis();
                    if (left <= 0 || !proc.isAlive() && !ok.test(lines)) {
                        if (left > 0) {
                            lines.wait(200); // let the reader drain the last lines
                            if (ok.test(lines)) {
                                return;
                            }
                        }
                        throw new AssertionError(name + ": timed out waiting for " + what + "; printed " + lines);
                    }
                    lines.wait(Math.min(left, 200));
                }
            }
        }

        /** The queue ids of its latest allocation ("" before any). */
        String alloc() {
            String last = "";
            for (String l : lines()) {
                if (l.startsWith("ALLOC")) {
                    last = l.substring(5).trim();
                }
            }
            return last;
        }

        /** Every allocation it printed, oldest first. */
        List<String> allocations() {
            List<String> all = new ArrayList<>();
            for (String l : lines()) {
                if (l.startsWith("ALLOC")) {
                    all.add("[" + l.substring(5).trim() + "]");
                }
            }
            return all;
        }

        /** Index → times received, for the messages it consumed. */
        Map<Integer, Integer> received() {
            Map<Integer, Integer> m = new HashMap<>();
            for (String l : lines()) {
                if (l.startsWith("MSG ")) {
                    m.merge(Integer.parseInt(l.split(" ")[1]), 1, Integer::sum);
                }
            }
            return m;
        }

        Set<Integer> queuesConsumed() {
            Set<Integer> s = new TreeSet<>();
            for (String l : lines()) {
                if (l.startsWith("MSG ")) {
                    s.add(Integer.parseInt(l.split(" ")[2]));
                }
            }
            return s;
        }

        /** Asks for a clean shutdown and waits for the process to end. */
        void stop() throws Exception {
            stdin.write("stop\n");
            stdin.flush();
            await("STOPPED", Duration.ofSeconds(20), ls -> ls.contains("STOPPED"));
            assertTrue(proc.waitFor(10, TimeUnit.SECONDS), name + " exits");
        }

        /** Kills the process (SIGKILL): no unregistration, no offset commit; its sockets just close. */
        void kill() throws InterruptedException {
            proc.destroyForcibly();
            assertTrue(proc.waitFor(10, TimeUnit.SECONDS), name + " dies");
        }

        @Override
        public void close() {
            if (proc.isAlive()) {
                proc.destroyForcibly();
            }
        }
    }

    static Set<String> ids(String alloc) {
        return alloc.isEmpty() ? Set.of() : new TreeSet<>(List.of(alloc.split(",")));
    }

    static void send(String topic, int from, int to) throws Exception {
        DefaultMQProducer p = Interop.producer(Interop.unique("pg_clu"));
        try {
            for (int i = from; i < to; i++) {
                Message m = new Message(topic, "T", "k" + i, ("m" + i).getBytes());
                m.putUserProperty("i", Integer.toString(i));
                assertEquals(SendStatus.SEND_OK, p.send(m).getSendStatus());
            }
        } finally {
            p.shutdown();
        }
    }

    /**
     * Waits until the members together have consumed every index in WANT; the failure names
     * the missing indices and each member's allocations.
     */
    static void awaitGroup(String what, Duration timeout, Set<Integer> want, Member... members) throws Exception {
        try {
            Interop.awaitTrue(what, timeout, () -> {
                Set<Integer> got = new HashSet<>();
                for (Member m : members) {
                    got.addAll(m.received().keySet());
                }
                return got.containsAll(want);
            });
        } catch (AssertionError e) {
            Set<Integer> missing = new TreeSet<>(want);
            StringBuilder sb = new StringBuilder(e.getMessage());
            for (Member m : members) {
                missing.removeAll(m.received().keySet());
                sb.append("; ").append(m.name).append(" allocations ").append(m.allocations())
                        .append(", queues consumed ").append(m.queuesConsumed());
            }
            throw new AssertionError(sb.append("; missing ").append(missing).toString(), e);
        }
    }

    static Set<Integer> range(int from, int to) {
        Set<Integer> s = new TreeSet<>();
        for (int i = from; i < to; i++) {
            s.add(i);
        }
        return s;
    }

    @Test
    void clusteringSharesQueuesAndRebalancesWhenAMemberLeaves() throws Exception {
        String topic = Interop.unique("t_clu");
        String group = Interop.unique("g_clu");
        Interop.createTopic(topic, 4);
        try (Member a = new Member(group, topic, "CLUSTERING", "memberA");
                Member b = new Member(group, topic, "CLUSTERING", "memberB")) {
            a.await("READY", Duration.ofSeconds(60), ls -> ls.contains("READY"));
            b.await("READY", Duration.ofSeconds(60), ls -> ls.contains("READY"));
            // Both members see each other: their allocations split the 4 queues.
            Interop.awaitTrue("the two members to split the queues", Duration.ofSeconds(40), () -> {
                Set<String> qa = ids(a.alloc());
                Set<String> qb = ids(b.alloc());
                Set<String> all = new HashSet<>(qa);
                all.addAll(qb);
                return qa.size() == 2 && qb.size() == 2 && all.size() == 4;
            });

            send(topic, 0, 40);
            // 60 s: a member whose offset query for a newly allocated queue timed out (a busy
            // machine) leaves that queue until its next rebalance, 20 s later.
            awaitGroup("40 messages consumed by the group", Duration.ofSeconds(60), range(0, 40), a, b);
            Collector.sleep(Duration.ofSeconds(1));
            Map<Integer, Integer> ra = a.received();
            Map<Integer, Integer> rb = b.received();
            for (int i = 0; i < 40; i++) {
                int times = ra.getOrDefault(i, 0) + rb.getOrDefault(i, 0);
                assertEquals(1, times, "message " + i + " consumed once by the group");
            }
            assertFalse(ra.isEmpty(), "member A consumed some");
            assertFalse(rb.isEmpty(), "member B consumed some");
            assertTrue(ids(a.alloc()).containsAll(a.queuesConsumed().stream().map(String::valueOf).toList()),
                    "A consumed only its queues");
            assertTrue(ids(b.alloc()).containsAll(b.queuesConsumed().stream().map(String::valueOf).toList()),
                    "B consumed only its queues");

            b.stop();
            a.await("all 4 queues after B left", Duration.ofSeconds(40),
                    ls -> ids(a.alloc()).size() == 4);

            send(topic, 40, 60);
            awaitGroup("messages 40..59 consumed by the survivor", Duration.ofSeconds(60), range(40, 60), a);
            Collector.sleep(Duration.ofSeconds(1));
            Map<Integer, Integer> after = a.received();
            for (int i = 40; i < 60; i++) {
                assertEquals(1, after.get(i), "message " + i + " consumed once by the survivor");
            }
            for (int i = 0; i < 40; i++) {
                assertEquals(ra.getOrDefault(i, 0), after.getOrDefault(i, 0),
                        "message " + i + " not consumed again after B committed and left");
            }
            a.stop();
        }
    }

    @Test
    void clusteringSurvivesAMemberKilled() throws Exception {
        String topic = Interop.unique("t_clukill");
        String group = Interop.unique("g_clukill");
        Interop.createTopic(topic, 4);
        try (Member a = new Member(group, topic, "CLUSTERING", "killA");
                Member b = new Member(group, topic, "CLUSTERING", "killB")) {
            a.await("READY", Duration.ofSeconds(60), ls -> ls.contains("READY"));
            b.await("READY", Duration.ofSeconds(60), ls -> ls.contains("READY"));
            Interop.awaitTrue("the two members to split the queues", Duration.ofSeconds(40),
                    () -> ids(a.alloc()).size() == 2 && ids(b.alloc()).size() == 2);
            send(topic, 0, 20);
            awaitGroup("20 messages consumed by the group", Duration.ofSeconds(60), range(0, 20), a, b);

            // A killed member's connection closes: the broker drops it from the group and the
            // survivor takes its queues (at once if the broker notifies, else at the next 20 s
            // rebalance), resuming from the offsets the dead member last committed.
            b.kill();
            a.await("all 4 queues after B died", Duration.ofSeconds(45), ls -> ids(a.alloc()).size() == 4);
            send(topic, 20, 40);
            awaitGroup("messages 20..39 consumed by the survivor", Duration.ofSeconds(60), range(20, 40), a);
            Collector.sleep(Duration.ofSeconds(1));
            Map<Integer, Integer> after = a.received();
            for (int i = 20; i < 40; i++) {
                assertEquals(1, after.get(i), "message " + i + " consumed once by the survivor");
            }
            a.stop();
        }
    }

    /**
     * A Java client configured for RocketMQ's binary header encoding (rocketmq.serialize.type
     * = ROCKETMQ, instead of JSON) heartbeats, rebalances, pulls and commits with it.
     */
    @Test
    void binaryHeaderEncodingClient() throws Exception {
        String topic = Interop.unique("t_rmqser");
        String group = Interop.unique("g_rmqser");
        Interop.createTopic(topic, 2);
        try (Member a = new Member(group, topic, "CLUSTERING", "binaryHeaders",
                List.of("-Drocketmq.serialize.type=ROCKETMQ"))) {
            a.await("READY", Duration.ofSeconds(60), ls -> ls.contains("READY"));
            a.await("both queues", Duration.ofSeconds(30), ls -> ids(a.alloc()).size() == 2);
            send(topic, 0, 10);
            awaitGroup("10 messages", Duration.ofSeconds(60), range(0, 10), a);
            Collector.sleep(Duration.ofSeconds(1));
            Map<Integer, Integer> r = a.received();
            for (int i = 0; i < 10; i++) {
                assertEquals(1, r.get(i), "message " + i + " once");
            }
            a.stop();
        }
    }

    @Test
    void broadcastingGivesEveryMemberEveryMessage() throws Exception {
        String topic = Interop.unique("t_bc");
        String group = Interop.unique("g_bc");
        Interop.createTopic(topic, 4);
        try (Member a = new Member(group, topic, "BROADCASTING", "bcA");
                Member b = new Member(group, topic, "BROADCASTING", "bcB")) {
            a.await("READY", Duration.ofSeconds(60), ls -> ls.contains("READY"));
            b.await("READY", Duration.ofSeconds(60), ls -> ls.contains("READY"));
            send(topic, 0, 20);
            for (Member m : List.of(a, b)) {
                awaitGroup(m.name + " to get all 20 messages", Duration.ofSeconds(60), range(0, 20), m);
            }
            Collector.sleep(Duration.ofSeconds(1));
            for (Member m : List.of(a, b)) {
                Map<Integer, Integer> r = m.received();
                for (int i = 0; i < 20; i++) {
                    assertEquals(1, r.get(i), m.name + " got message " + i + " once");
                }
                assertEquals(20, r.size(), m.name + " got nothing else");
            }
            a.stop();
            b.stop();
        }
    }
}
