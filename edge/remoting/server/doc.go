// Package server serves an *edge.Broker over RocketMQ's remoting protocol, so that
// RocketMQ's own clients (Go, Java; producers, push and pull consumers, mqadmin) use it as
// they would an Apache RocketMQ name server and broker.
//
//	srv, err := server.Start(b, server.Options{Listen: "127.0.0.1:9876"})
//	if err != nil {
//		return err
//	}
//	defer srv.Shutdown(ctx)
//
// One address answers the name-server requests and the broker requests, so a client needs
// only a name-server address (-n 127.0.0.1:9876); routes send it back to the same address.
// The same requests are answered on the VIP address (the port − 2) that older Java clients
// send to.
//
// The server translates, the broker decides: each request becomes one call of the broker's
// API (Send, Pull, Heartbeat, ...), and the broker's errors become RocketMQ's response
// codes (TOPIC_NOT_EXIST, NO_PERMISSION, INVALID_PARAMETER, ...). Replies are in the
// request's header encoding (JSON or ROCKETMQ); oneway requests get none; a request code
// the server does not serve gets REQUEST_CODE_NOT_SUPPORTED, and the connection goes on.
//
// Requests served:
//
//   - producers: SEND_MESSAGE (10), SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320);
//     zlib-compressed bodies are inflated, born host is the connection's peer; a
//     transaction's half message (sysFlag 4) is held until END_TRANSACTION (37) commits
//     or rolls it back;
//   - consumers: PULL_MESSAGE (11) and LITE_PULL_MESSAGE (361), long polling up to the
//     request's suspend time (a parked pull waits in the broker's hold, holding no
//     goroutine); EdgeMQ's END_PULL_STREAM (32321); HEART_BEAT (34), UNREGISTER_CLIENT (35),
//     GET_CONSUMER_LIST_BY_GROUP (38), QUERY_CONSUMER_OFFSET (14), UPDATE_CONSUMER_OFFSET
//     (15), LOCK_BATCH_MQ (41), UNLOCK_BATCH_MQ (42), CONSUMER_SEND_MSG_BACK (36),
//     GET_MAX_OFFSET (30), GET_MIN_OFFSET (31), SEARCH_OFFSET_BY_TIMESTAMP (29);
//   - name server: GET_ROUTEINFO_BY_TOPIC (105; a group's %RETRY% topic and TBW102 too),
//     GET_BROKER_CLUSTER_INFO (106), GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206);
//   - mqadmin: UPDATE_AND_CREATE_TOPIC (17), DELETE_TOPIC_IN_BROKER (215),
//     DELETE_TOPIC_IN_NAMESRV (216), GET_TOPIC_CONFIG (351), GET_TOPIC_STATS_INFO (202),
//     GET_BROKER_RUNTIME_INFO (28), GET_CONSUME_STATS (208), GET_CONSUMER_CONNECTION_LIST
//     (203), QUERY_TOPIC_CONSUME_BY_WHO (300), VIEW_MESSAGE_BY_ID (33), QUERY_MESSAGE (12),
//     INVOKE_BROKER_TO_RESET_OFFSET (222), UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200),
//     GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201).
//
// The server sends clients NOTIFY_CONSUMER_IDS_CHANGED (40) when the members of one of
// their groups change, and RESET_CONSUMER_CLIENT_OFFSET (220) when an admin resets their
// group's offsets, and CHECK_TRANSACTION_STATE (39) to a connection of a producer group
// whose transaction stays open past the broker's transaction timeout, all oneway. Offset message ids (send replies, pulled records) carry the
// address the client reached the broker at, where VIEW_MESSAGE_BY_ID finds the message.
//
// Security: Options.TLS makes both addresses TLS only, or, with Options.TLSPermissive,
// TLS for connections whose first byte starts a TLS handshake and plain TCP for the rest
// (LoadTLS reads the PEM files, with client certificates required when given a CA).
// Options.ACL (LoadACL) turns on RocketMQ's plain ACL: every request but a route lookup must
// carry the AccessKey and Signature of an account allowed to make it, as RocketMQ's clients
// add them (Java's AclClientRPCHook, rocketmq-client-go's WithCredentials), else it is
// answered NO_PERMISSION (16) and not carried out. ACL.Reload re-reads the accounts.
//
// A client leaves its groups when its last connection closes: RocketMQ's Go client never
// unregisters. Its queue locks stay until they expire (edge.Options.LockLifetime), as
// RocketMQ's broker keeps them: a connection may close under a client that lives on,
// reconnects and still consumes the queues it locked. Each connection handles up to
// Options.MaxInFlight requests at once and answers them in any order, but carries out its
// sends and offset commits in the order they came (pipelined async sends of one producer
// keep their order, a consumer's offset never moves back); a client that does not read its
// replies is disconnected after Options.WriteTimeout, and holds up no other. An idle
// connection holds no read or write buffer. On Linux a plain TCP connection is read and
// written in raw system calls, which the Go runtime does not count as system calls: a
// broker idle between messages otherwise woke the runtime's monitor thread with each
// message's first read, and it polled every 20 µs on the CPUs the messages needed.
package server
