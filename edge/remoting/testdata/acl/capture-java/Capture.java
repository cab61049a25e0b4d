import java.nio.ByteBuffer;
import java.nio.file.*;
import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;
import org.apache.rocketmq.remoting.protocol.RequestCode;
import org.apache.rocketmq.remoting.protocol.header.SendMessageRequestHeader;
import org.apache.rocketmq.remoting.protocol.header.SendMessageRequestHeaderV2;

public class Capture {
    public static void main(String[] args) throws Exception {
        for (String token : new String[]{null, "token-0123"}) {
            SendMessageRequestHeader h = new SendMessageRequestHeader();
            h.setProducerGroup("acl-pg");
            h.setTopic("acl-topic");
            h.setDefaultTopic("TBW102");
            h.setDefaultTopicQueueNums(4);
            h.setQueueId(1);
            h.setSysFlag(0);
            h.setBornTimestamp(1764547200000L);
            h.setFlag(0);
            h.setProperties("KEYSk1\u0001WAITtrue\u0002");
            h.setReconsumeTimes(0);
            h.setUnitMode(false);
            h.setBatch(false);
            SendMessageRequestHeaderV2 v2 = SendMessageRequestHeaderV2.createSendMessageRequestHeaderV2(h);
            RemotingCommand req = RemotingCommand.createRequestCommand(RequestCode.SEND_MESSAGE_V2, v2);
            req.setBody("hello, acl".getBytes("UTF-8"));
            SessionCredentials cred = token == null ? new SessionCredentials("RocketMQ", "12345678")
                : new SessionCredentials("RocketMQ", "12345678", token);
            new AclClientRPCHook(cred).doBeforeRequest("127.0.0.1:9876", req);
            req.setOpaque(7);
            ByteBuffer hdr = req.encodeHeader();
            byte[] out = new byte[hdr.remaining() + req.getBody().length];
            hdr.get(out, 0, hdr.remaining());
            System.arraycopy(req.getBody(), 0, out, out.length - req.getBody().length, req.getBody().length);
            String name = token == null ? "acl-java.frame" : "acl-java-token.frame";
            Files.write(Paths.get(name), out);
            System.out.println(name + " " + req.getExtFields());
        }
    }
}
