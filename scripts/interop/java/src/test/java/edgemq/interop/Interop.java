package edgemq.interop;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.constant.PermName;
import org.apache.rocketmq.remoting.protocol.body.ClusterInfo;
import org.apache.rocketmq.remoting.protocol.route.BrokerData;
import org.apache.rocketmq.remoting.protocol.route.QueueData;
import org.apache.rocketmq.remoting.protocol.route.TopicRouteData;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;
import org.apache.rocketmq.tools.command.MQAdminStartup;

/**
 * What every scenario shares: where the name server is, which broker is under test, unique
 * names, clients built the same way, an mqadmin runner and bounded waiting.
 */
final class Interop {
    private Interop() {
    }

    /** The name server, from -Dnamesrv or INTEROP_NAMESRV; 127.0.0.1:9876 when neither is set. */
    static String namesrv() {
        String ns = System.getProperty("namesrv");
        if (ns == null || ns.isBlank() || ns.startsWith("${")) {
            ns = System.getenv("INTEROP_NAMESRV");
        }
        return ns == null || ns.isBlank() ? "127.0.0.1:9876" : ns.trim();
    }

    /** The broker under test: "edgemq", "rocketmq" or "" (from -Dinterop.target or INTEROP_TARGET). */
    static String target() {
        String t = System.getProperty("interop.target");
        if (t == null || t.isBlank() || t.startsWith("${")) {
            t = System.getenv("INTEROP_TARGET");
        }
        return t == null ? "" : t.trim().toLowerCase();
    }

    private static final String RUN = Long.toString(System.currentTimeMillis() % 100_000_000L, 36)
            + Integer.toString(new Random().nextInt(36 * 36), 36);
    private static final AtomicInteger SEQ = new AtomicInteger();

    /** A topic or group name no earlier run used: PREFIX_run_seq, within [a-zA-Z0-9_-]. */
    static String unique(String prefix) {
        return prefix + "_" + RUN + "_" + SEQ.incrementAndGet();
    }

    /**
     * How often clients re-read routes (30 s by default). A group's %RETRY% topic appears on the
     * broker only after the consumer's first heartbeat, so a consumer would otherwise learn its
     * route up to 30 s late and consume nothing retried until then.
     */
    static final int ROUTE_POLL_MS = 1000;

    static DefaultMQProducer producer(String group) throws Exception {
        DefaultMQProducer p = new DefaultMQProducer(group);
        p.setNamesrvAddr(namesrv());
        p.setInstanceName(unique("p"));
        p.setSendMsgTimeout(5000);
        p.setRetryTimesWhenSendFailed(1);
        p.setPollNameServerInterval(ROUTE_POLL_MS);
        p.start();
        return p;
    }

    /** A push consumer set up but not started. */
    static DefaultMQPushConsumer pushConsumer(String group) {
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(group);
        c.setNamesrvAddr(namesrv());
        c.setInstanceName(unique("c"));
        c.setConsumeThreadMin(4);
        c.setConsumeThreadMax(4);
        c.setPollNameServerInterval(ROUTE_POLL_MS);
        return c;
    }

    private static DefaultMQAdminExt admin;

    /** One mqadmin client for the whole run. */
    static synchronized DefaultMQAdminExt admin() throws Exception {
        if (admin == null) {
            DefaultMQAdminExt a = new DefaultMQAdminExt(5000);
            a.setNamesrvAddr(namesrv());
            a.setInstanceName(unique("admin"));
            a.start();
            admin = a;
        }
        return admin;
    }

    /** The master addresses of every broker the name server knows. */
    static List<String> brokerAddrs() throws Exception {
        ClusterInfo ci = admin().examineBrokerClusterInfo();
        List<String> out = new ArrayList<>();
        for (BrokerData bd : ci.getBrokerAddrTable().values()) {
            String addr = bd.getBrokerAddrs().get(0L);
            if (addr != null) {
                out.add(addr);
            }
        }
        if (out.isEmpty()) {
            throw new AssertionError("the name server knows no broker master: " + ci.getBrokerAddrTable());
        }
        return out;
    }

    static String brokerAddr() throws Exception {
        return brokerAddrs().get(0);
    }

    static String brokerName() throws Exception {
        return admin().examineBrokerClusterInfo().getBrokerAddrTable().keySet().iterator().next();
    }

    static String clusterName() throws Exception {
        return admin().examineBrokerClusterInfo().getClusterAddrTable().keySet().iterator().next();
    }

    /**
     * Creates TOPIC with QUEUES read and write queues on every broker (mqadmin updateTopic's
     * call), then waits until the name server routes it.
     */
    static void createTopic(String topic, int queues) throws Exception {
        for (String addr : brokerAddrs()) {
            admin().createAndUpdateTopicConfig(addr,
                    new TopicConfig(topic, queues, queues, PermName.PERM_READ | PermName.PERM_WRITE));
        }
        awaitTrue("route of " + topic, Duration.ofSeconds(20), () -> {
            try {
                TopicRouteData r = admin().examineTopicRouteInfo(topic);
                for (QueueData q : r.getQueueDatas()) {
                    if (q.getWriteQueueNums() == queues && q.getReadQueueNums() == queues) {
                        return true;
                    }
                }
                return false;
            } catch (Exception e) {
                return false;
            }
        });
    }

    interface Check {
        boolean ok() throws Exception;
    }

    /**
     * Polls CHECK every 100 ms until it holds, an exception counting as "not yet"; fails with
     * WHAT (and the last exception) after TIMEOUT.
     */
    static void awaitTrue(String what, Duration timeout, Check check) throws Exception {
        long deadline = System.nanoTime() + timeout.toNanos();
        Exception last = null;
        while (true) {
            try {
                if (check.ok()) {
                    return;
                }
            } catch (InterruptedException e) {
                throw e;
            } catch (Exception e) {
                last = e;
            }
            if (System.nanoTime() > deadline) {
                throw new AssertionError("timed out after " + timeout.toSeconds() + " s waiting for " + what
                        + (last == null ? "" : "; last error: " + last), last);
            }
            Thread.sleep(100);
        }
    }

    private static final Random RANDOM = new Random();

    /** N random bytes, every byte value possible. */
    static byte[] randomBody(int n) {
        byte[] b = new byte[n];
        synchronized (RANDOM) {
            RANDOM.nextBytes(b);
        }
        return b;
    }

    /** Thrown instead of exiting the JVM when mqadmin calls System.exit (bad arguments). */
    static final class ExitAttempt extends SecurityException {
        final int status;

        ExitAttempt(int status) {
            super("System.exit(" + status + ")");
            this.status = status;
        }
    }

    private static void e2e(ByteArrayOutputStream err, String line) {
        err.writeBytes((line + "\n").getBytes(StandardCharsets.UTF_8));
    }

    /**
     * Runs R with System.exit turned into ExitAttempt where the JDK still allows a security
     * manager (17 does; from 24 on it cannot be installed and R runs as it is).
     */
    @SuppressWarnings("removal")
    private static void noExit(Runnable r) {
        SecurityManager old = System.getSecurityManager();
        boolean installed = false;
        try {
            System.setSecurityManager(new SecurityManager() {
                @Override
                public void checkExit(int status) {
                    throw new ExitAttempt(status);
                }

                @Override
                public void checkPermission(java.security.Permission perm) {
                }

                @Override
                public void checkPermission(java.security.Permission perm, Object context) {
                }
            });
            installed = true;
        } catch (UnsupportedOperationException e) {
            // no security manager on this JDK
        }
        try {
            r.run();
        } finally {
            if (installed) {
                System.setSecurityManager(old);
            }
        }
    }

    /** The output of one mqadmin command, run in this JVM as bin/mqadmin runs it. */
    record AdminOutput(String out, String err) {
        String all() {
            return out + err;
        }
    }

    /** Runs mqadmin ARGS (with -n added) and returns what it printed. Calls are serialised. */
    static synchronized AdminOutput mqadmin(String... args) {
        String[] full = new String[args.length + 2];
        System.arraycopy(args, 0, full, 0, args.length);
        full[args.length] = "-n";
        full[args.length + 1] = namesrv();
        PrintStream oldOut = System.out;
        PrintStream oldErr = System.err;
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        try (PrintStream o = new PrintStream(out, true, StandardCharsets.UTF_8);
                PrintStream e = new PrintStream(err, true, StandardCharsets.UTF_8)) {
            System.setOut(o);
            System.setErr(e);
            noExit(() -> MQAdminStartup.main0(full, null));
        } catch (ExitAttempt x) {
            e2e(err, "mqadmin called System.exit(" + x.status + ")");
        } finally {
            System.setOut(oldOut);
            System.setErr(oldErr);
        }
        AdminOutput r = new AdminOutput(out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
        System.out.println("$ mqadmin " + String.join(" ", full) + "\n" + r.all());
        return r;
    }
}
