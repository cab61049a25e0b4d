package edgemq.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.HashSet;
import java.util.Set;

import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.remoting.RPCHook;
import org.apache.rocketmq.remoting.protocol.ResponseCode;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

/**
 * Brokers with the ACL on, beside the one under test (run.sh starts them for edgemq): TLS
 * permissive at INTEROP_SECURE_NAMESRV, TLS only at INTEROP_TLS_NAMESRV. The Java client signs
 * with AclClientRPCHook and speaks TLS with setUseTLS(true); a wrong secret is refused.
 */
class SecureTest {
    private static final SessionCredentials APP = new SessionCredentials("interop-app", "interop-app-secret");

    /**
     * The address in VAR: INTEROP_SECURE_NAMESRV (ACL, TLS permissive) or INTEROP_TLS_NAMESRV
     * (ACL, TLS only); the test is skipped when it is unset.
     */
    private static String secureNamesrv(String var) {
        String ns = System.getenv(var);
        Assumptions.assumeTrue(ns != null && !ns.isBlank(),
                var + " is unset: no broker with TLS and an ACL (see DIFFERENCES.md)");
        return ns.trim();
    }

    private static DefaultMQProducer producer(String ns, RPCHook hook, boolean tls) throws Exception {
        DefaultMQProducer p = new DefaultMQProducer(Interop.unique("pg_secure"), hook);
        p.setNamesrvAddr(ns);
        p.setInstanceName(Interop.unique("p"));
        p.setSendMsgTimeout(5000);
        p.setRetryTimesWhenSendFailed(1);
        p.setPollNameServerInterval(Interop.ROUTE_POLL_MS);
        p.setUseTLS(tls);
        p.start();
        return p;
    }

    private static void sendAndConsume(boolean tls) throws Exception {
        String ns = secureNamesrv(tls ? "INTEROP_TLS_NAMESRV" : "INTEROP_SECURE_NAMESRV");
        String topic = Interop.unique(tls ? "secure_tls" : "secure_acl");
        DefaultMQProducer p = producer(ns, new AclClientRPCHook(APP), tls);
        Set<String> want = new HashSet<>();
        try {
            for (int i = 0; i < 3; i++) {
                SendResult r = p.send(new Message(topic, "TagA", ("secure " + i).getBytes(StandardCharsets.UTF_8)));
                assertEquals(SendStatus.SEND_OK, r.getSendStatus(), "send status");
                want.add(r.getMsgId());
            }
        } finally {
            p.shutdown();
        }
        Collector got = new Collector();
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(Interop.unique("g_secure"), new AclClientRPCHook(APP));
        c.setNamesrvAddr(ns);
        c.setInstanceName(Interop.unique("c"));
        c.setPollNameServerInterval(Interop.ROUTE_POLL_MS);
        c.setUseTLS(tls);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.subscribe(topic, "*");
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            got.addAll(msgs, "c");
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        try {
            got.await(3, Duration.ofSeconds(60));
            Set<String> ids = new HashSet<>();
            for (Collector.Delivery d : got.snapshot()) {
                ids.add(d.msg().getMsgId());
            }
            assertTrue(ids.containsAll(want), "consumed " + ids + ", want " + want);
        } finally {
            c.shutdown();
        }
    }

    @Test
    void aclProduceConsume() throws Exception {
        sendAndConsume(false);
    }

    @Test
    void tlsProduceConsume() throws Exception {
        sendAndConsume(true);
    }

    @Test
    void wrongSecretRefused() throws Exception {
        String ns = secureNamesrv("INTEROP_SECURE_NAMESRV");
        DefaultMQProducer p = producer(ns,
                new AclClientRPCHook(new SessionCredentials("interop-app", "not-the-secret")), false);
        try {
            p.send(new Message(Interop.unique("secure_refused"), "x".getBytes(StandardCharsets.UTF_8)));
            fail("a send signed with a wrong secret succeeded");
        } catch (MQBrokerException e) {
            assertEquals(ResponseCode.NO_PERMISSION, e.getResponseCode(), "response code: " + e.getErrorMessage());
        } catch (MQClientException e) { // after the producer's retries
            assertEquals(ResponseCode.NO_PERMISSION, e.getResponseCode(), "response code: " + e.getErrorMessage());
        } finally {
            p.shutdown();
        }
    }
}
