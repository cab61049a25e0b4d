// Package remoting holds the wire formats of RocketMQ's remoting protocol, as EdgeMQ's
// broker and name server speak them to RocketMQ clients (Go and Java) and as a client of
// EdgeMQ or Apache RocketMQ speaks them to a broker. Every format is both encoded and
// decoded, and every decoder takes bytes from the network: it returns an error wrapping
// ErrMalformed for bytes that are not of its format (ErrFrameTooLarge or
// mq.ErrMessageTooLarge for what is over a limit), never panics, and never allocates much
// more than the bytes it was given, or the cap it was given.
//
// # Frames
//
// A connection carries frames, requests and replies in both directions, pipelined: a
// reply carries its request's Opaque and the FlagResponse bit. Integers are big-endian.
//
//	offset  size  field
//	0       4     frame length: 4 + header length + body length (not counting itself)
//	4       1     header encoding: 0 JSON, 1 ROCKETMQ (SerializeType)
//	5       3     header length
//	8       h     header
//	8+h     rest  body
//
// A Reader refuses a frame longer than its maximum (16 MiB by default, the length word
// included), as the Java broker does.
//
// The JSON header is an object with the fields of Command:
//
//	{"code":105,"language":"GO","version":479,"opaque":1,"flag":0,"remark":"","extFields":{"topic":"T"}}
//
// language is the enum name (JAVA, GO, ...), and every extFields value is a JSON string:
// the Go client reads them into a map of strings. Decoding is lenient: unknown fields
// (Java's serializeTypeCurrentRPC) are ignored, numbers may be strings, the language a
// number, extension values numbers or booleans.
//
// The ROCKETMQ header is binary:
//
//	offset  size  field
//	0       2     code
//	2       1     language
//	3       2     version
//	5       4     opaque
//	9       4     flag
//	13      4     remark length r, then r bytes of remark
//	17+r    4     extension length e, then e bytes of entries:
//	              key length i16, key, value length i32, value
//
// EdgeMQ writes extension fields in key order in both encodings.
//
// # Messages
//
// A pull body is stored-message records back to back, each as below (offsets with IPv4
// hosts; an IPv6 host takes 16 address bytes, flagged in SYSFLAG by 0x10 for the born
// host and 0x20 for the store host):
//
//	offset  size  field
//	0       4     TOTALSIZE: the record's length
//	4       4     MAGIC: 0xDAA320A7 (V1); 0xDAA320AB (V2) has a 2-byte topic length
//	8       4     BODYCRC: CRC-32 (IEEE) of the body, top bit cleared
//	12      4     QUEUEID
//	16      4     FLAG: the application's flag
//	20      8     QUEUEOFFSET
//	28      8     PHYSICALOFFSET: the commit-log offset
//	36      4     SYSFLAG: 1 compressed, 2 multi-tags, 4/8/12 transaction, 0x10/0x20 IPv6 hosts
//	40      8     BORNTIMESTAMP (unix ms)
//	48      8     BORNHOST: IPv4 address, i32 port
//	56      8     STORETIMESTAMP (unix ms)
//	64      8     STOREHOST
//	72      4     RECONSUMETIMES
//	76      8     PREPAREDTRANSACTIONOFFSET
//	84      4+b   body length, body
//	88+b    1+t   topic length (u8), topic
//	89+b+t  2+p   properties length (i16), properties: name\x01value\x02 repeated
//
// EdgeMQ writes V1 only: the Go client reads a 1-byte topic length whatever the magic.
// A batch send's body is items back to back:
//
//	offset  size  field
//	0       4     TOTALSIZE
//	4       4     MAGIC (0, ignored)
//	8       4     BODYCRC (0, ignored)
//	12      4     FLAG
//	16      4+b   body length, body
//	20+b    2+p   properties length (i16), properties
//
// # Zstd batches (EdgeMQ's extension)
//
// SEND_BATCH_ZSTD (request code 32320, SendBatchZstd) is a batch send of EdgeMQ's own,
// outside RocketMQ's codes: its header is SEND_BATCH_MESSAGE's (one-letter form) and its
// body the batch items above, compressed whole as one zstd frame. Each item keeps its own
// flag and properties (UNIQ_KEY, keys, tags), stored as a plain batch's are. Apache
// RocketMQ, and an EdgeMQ server without it or with it turned off, answer the code
// REQUEST_CODE_NOT_SUPPORTED (3) and store nothing, so a compressed body is never stored
// as messages; a sender then falls back to SEND_BATCH_MESSAGE. An EdgeMQ server inflates
// the body to at most its maximum frame size (the most a plain batch can carry), refusing
// a body that would inflate further, or that is not zstd, with MESSAGE_ILLEGAL (13) before
// storing any of it. The reply is SEND_BATCH_MESSAGE's, but its msgId holds the first
// message's offset message id only (the queue offsets of the others follow the first).
//
// # Streamed pulls (EdgeMQ's extension)
//
// A suspended PULL_MESSAGE may carry edgemqPushMsgs (and edgemqPushBytes), a budget of
// messages (and of body bytes): it asks the broker to stream. An EdgeMQ broker answers it
// as usual, then parks it again at the answer's nextBeginOffset and answers it again, with
// the same opaque, each time messages arrive there, until the answers have carried the
// budget (no answer goes past what is left of it in messages), or nothing arrived for the
// pull's suspend time (the last answer is then PULL_NOT_FOUND), or an error. Every answer
// but the last carries edgemqMore=1; the commit offset the request carried is stored with
// the first answer only. The client sends nothing meanwhile: it keeps the request's opaque
// for the answers, restarts the request's timeout with each, and drops the answers of a
// pull whose ctx ended. Apache RocketMQ ignores the fields and answers once, which is a
// stream's last answer; `server.stream_pulls = false` makes an EdgeMQ server do the same.
// A PushConsumer asks for it with the room its queue's flow control leaves; Client.Pull
// (one answer per call) never does.
//
// A streamed pull that ends on the client before its last answer (its ctx, as when the
// consumer drops the queue in a rebalance or shuts down; its timeout) is ended at the
// broker with END_PULL_STREAM (code 32321, oneway, EndPullStreamHeader: the pull's
// opaque), so that the broker neither holds it nor sends answers nobody reads; the broker
// answers the pull PULL_NOT_FOUND at once (Stats.StreamsEnded in package server counts
// them). An EdgeMQ broker that streams says so in its reply to HEARTBEAT (edgemqStreams=1,
// which RocketMQ's clients ignore); the client sends END_PULL_STREAM only on a connection
// whose broker said so or has answered a pull with edgemqMore, never to Apache RocketMQ,
// which does not know the code. (A consumer heartbeats before it pulls.)
//
// # Latency and the collector
//
// At a steady 10,000 msgs/s over loopback, a message's send-to-delivery time through
// `edgemq serve` is about 0.2 ms; its slowest percent waits for the Go collector of the
// client's process. After each collection the runtime's background sweeper yields to other
// goroutines in a tight loop, and while it does no thread polls the network: replies that
// arrived wait, for milliseconds at times. A client process whose live heap is small
// collects every 4 MiB it allocates, many times a second under load. GOGC=400 in the
// client's environment (or debug.SetGCPercent) makes them a fourth as frequent, for a heap
// that may grow to five times what stays live (16 MiB at least, against 4);
// BENCHMARKS.md gives the measured effect. On Linux the client reads and writes a plain TCP
// connection in raw system calls, which the runtime does not count as system calls, so that
// a process idle between messages does not wake the runtime's monitor thread with each one
// (it then polls every 20 µs for about a millisecond); a TLS connection goes through
// crypto/tls.
//
// # Contents
//
//   - Command, its Reader, AppendFrame and WriteTo, and the request and response codes.
//     A Reader with LazyExt keeps a binary header's extension fields undecoded, read with
//     Command.Fields or, for the hot requests and replies, Command.ParseSendHeader and its
//     kin, which make no map.
//   - Typed request and response headers, read from and written to a command's extension
//     fields (ParseSendHeader, PullHeader, ...).
//   - Message formats: the properties string (name\x01value\x02), the stored-message
//     record a pull body is made of (AppendMessageExt, DecodeMessages), the items of a
//     batch send (AppendBatch, DecodeBatch; a broker reads them as items with
//     DecodeBatchItems, their properties as sent), and zlib inflation with a size cap (Inflate);
//     a zstd batch's body is package zbatch's (Append, Decode; Client.SendBatchWith sends it).
//   - RocketMQ's plain-ACL signature (Credentials.Sign, Signature, VerifySignature), as
//     the Java and Go clients compute it; a Client signs every request with
//     Options.Credentials, and speaks TLS with Options.TLS.
//   - JSON bodies: topic routes (EncodeRoute, DecodeRoute), heartbeats (EncodeHeartbeat,
//     DecodeHeartbeat), queue locks (EncodeLockRequest, EncodeLockReply) and consumer
//     lists (EncodeConsumerList), each with its decoder.
package remoting
