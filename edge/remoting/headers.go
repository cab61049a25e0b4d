package remoting

import (
	"fmt"
	"strconv"
	"strings"
)

// Request and response headers travel as a command's extension fields, each value a
// decimal number, "true"/"false", or text. A ParseXxx function reads one header: a field
// that RocketMQ's broker requires (@CFNotNull) and that is missing, or a number that does
// not parse, is an error wrapping ErrMalformed that names the field. Booleans read as
// Java's Boolean.parseBoolean: "true" in any case is true, anything else false. Fields the
// header does not know are ignored. The Ext method of a header writes it back: required
// fields always, optional ones when they are set.

// Extension field names shared by several headers.
const (
	// extBrokerName names the broker a request is meant for (RocketMQ 5's "bname").
	extBrokerName = "bname"
)

// fields reads typed values from extension fields, keeping the first error.
type fields struct {
	ext map[string]string
	// view, with lazy, is read in place of ext: the fields a lazy Reader kept. It is held
	// by value: a pointer to it would make the parser's result (its err) hold it, and move
	// it to the heap.
	view extView
	lazy bool
	err  error
}

// get returns the value of key.
func (f *fields) get(key string) (string, bool) {
	if f.lazy {
		return f.view.get(key)
	}
	v, ok := f.ext[key]
	return v, ok
}

func (f *fields) fail(key, format string, args ...any) {
	if f.err == nil {
		f.err = fmt.Errorf("%w: header field %s: %s", ErrMalformed, key, fmt.Sprintf(format, args...))
	}
}

// str returns the value of key; a required key that is missing is an error.
func (f *fields) str(key string, required bool) (string, bool) {
	v, ok := f.get(key)
	if !ok && required {
		f.fail(key, "missing")
	}
	return v, ok
}

// num returns the number of key, def when it is absent.
func (f *fields) num(key string, required bool, bitSize int, def int64) int64 {
	v, ok := f.str(key, required)
	if !ok {
		return def
	}
	n, err := strconv.ParseInt(v, 10, bitSize)
	if err != nil {
		f.fail(key, "%q is not an int%d", v, bitSize)
		return def
	}
	return n
}

func (f *fields) i32(key string, required bool, def int32) int32 {
	return int32(f.num(key, required, 32, int64(def)))
}

func (f *fields) i64(key string, required bool, def int64) int64 {
	return f.num(key, required, 64, def)
}

// boolean reads key as Java's Boolean.parseBoolean does; def when it is absent.
func (f *fields) boolean(key string, def bool) bool {
	v, ok := f.get(key)
	if !ok {
		return def
	}
	return strings.EqualFold(v, "true")
}

// extWriter builds extension fields.
type extWriter map[string]string

func (w extWriter) str(key, v string)       { w[key] = v }
func (w extWriter) i32(key string, v int32) { w[key] = strconv.FormatInt(int64(v), 10) }
func (w extWriter) i64(key string, v int64) { w[key] = strconv.FormatInt(v, 10) }
func (w extWriter) boolean(key string, v bool) {
	w[key] = strconv.FormatBool(v)
}

// strIf writes a non-empty string.
func (w extWriter) strIf(key, v string) {
	if v != "" {
		w[key] = v
	}
}

// SendHeader is the request header of SEND_MESSAGE (long field names), and of
// SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE (one-letter names a to n).
type SendHeader struct {
	ProducerGroup         string // a
	Topic                 string // b
	DefaultTopic          string // c: the template of an auto-created topic (TBW102)
	DefaultTopicQueueNums int32  // d
	QueueID               int32  // e
	SysFlag               int32  // f: message system flag bits (compressed, transaction)
	BornTimestamp         int64  // g: unix ms
	Flag                  int32  // h: the application's flag
	Properties            string // i: the properties string (see ParseProperties)
	ReconsumeTimes        int32  // j
	UnitMode              bool   // k
	// MaxReconsumeTimes (l) is -1 when absent; Ext omits a negative value.
	MaxReconsumeTimes int32
	Batch             bool   // m
	BrokerName        string // n, or bname in the long form
}

// sendFieldNames maps the long names of SendHeader's fields to the one-letter names.
var sendFieldNames = [...][2]string{
	{"producerGroup", "a"}, {"topic", "b"}, {"defaultTopic", "c"}, {"defaultTopicQueueNums", "d"},
	{"queueId", "e"}, {"sysFlag", "f"}, {"bornTimestamp", "g"}, {"flag", "h"}, {"properties", "i"},
	{"reconsumeTimes", "j"}, {"unitMode", "k"}, {"maxReconsumeTimes", "l"}, {"batch", "m"},
	{extBrokerName, "n"},
}

// isSendV2 reports whether a send request of code carries the one-letter header.
func isSendV2(code int16) bool {
	return code == SendMessageV2 || code == SendBatchMessage || code == SendReplyMessageV2 || code == SendBatchZstd
}

// ParseSendHeader reads the header of a send request: the one-letter form for
// SEND_MESSAGE_V2, SEND_BATCH_MESSAGE, SEND_BATCH_ZSTD and SEND_REPLY_MESSAGE_V2, the long form for other
// codes. A header in the other form than its code says is read in that form.
func ParseSendHeader(code int16, ext map[string]string) (SendHeader, error) {
	return parseSendHeader(code, &fields{ext: ext})
}

func parseSendHeader(code int16, f *fields) (SendHeader, error) {
	v2 := isSendV2(code)
	_, short := f.get("a")
	_, long := f.get("producerGroup")
	if v2 && !short && long {
		v2 = false
	} else if !v2 && !long && short {
		v2 = true
	}
	name := func(i int) string {
		if v2 {
			return sendFieldNames[i][1]
		}
		return sendFieldNames[i][0]
	}
	var h SendHeader
	h.ProducerGroup, _ = f.str(name(0), true)
	h.Topic, _ = f.str(name(1), true)
	h.DefaultTopic, _ = f.str(name(2), true)
	h.DefaultTopicQueueNums = f.i32(name(3), true, 0)
	h.QueueID = f.i32(name(4), true, 0)
	h.SysFlag = f.i32(name(5), true, 0)
	h.BornTimestamp = f.i64(name(6), true, 0)
	h.Flag = f.i32(name(7), true, 0)
	h.Properties, _ = f.str(name(8), false)
	h.ReconsumeTimes = f.i32(name(9), false, 0)
	h.UnitMode = f.boolean(name(10), false)
	h.MaxReconsumeTimes = f.i32(name(11), false, -1)
	h.Batch = f.boolean(name(12), false)
	h.BrokerName, _ = f.str(name(13), false)
	if h.BrokerName == "" {
		h.BrokerName, _ = f.get(extBrokerName)
	}
	return h, f.err
}

// Ext returns the header with the long field names (SEND_MESSAGE).
func (h SendHeader) Ext() map[string]string { return h.ext(0) }

// ExtV2 returns the header with the one-letter field names (SEND_MESSAGE_V2,
// SEND_BATCH_MESSAGE).
func (h SendHeader) ExtV2() map[string]string { return h.ext(1) }

func (h SendHeader) ext(form int) map[string]string {
	name := func(i int) string { return sendFieldNames[i][form] }
	w := extWriter{}
	w.str(name(0), h.ProducerGroup)
	w.str(name(1), h.Topic)
	w.str(name(2), h.DefaultTopic)
	w.i32(name(3), h.DefaultTopicQueueNums)
	w.i32(name(4), h.QueueID)
	w.i32(name(5), h.SysFlag)
	w.i64(name(6), h.BornTimestamp)
	w.i32(name(7), h.Flag)
	w.str(name(8), h.Properties)
	w.i32(name(9), h.ReconsumeTimes)
	w.boolean(name(10), h.UnitMode)
	if h.MaxReconsumeTimes >= 0 {
		w.i32(name(11), h.MaxReconsumeTimes)
	}
	w.boolean(name(12), h.Batch)
	w.strIf(name(13), h.BrokerName)
	return w
}

// sendHeaderV2 is a SendHeader that writes its one-letter fields (SEND_MESSAGE_V2,
// SEND_BATCH_MESSAGE) straight into a frame: the fields and values of ExtV2, without the map.
type sendHeaderV2 SendHeader

// WriteExt writes the header as ExtV2 does, without a map.
func (h *sendHeaderV2) WriteExt(w *ExtWriter) {
	w.Str("a", h.ProducerGroup)
	w.Str("b", h.Topic)
	w.Str("c", h.DefaultTopic)
	w.Int("d", int64(h.DefaultTopicQueueNums))
	w.Int("e", int64(h.QueueID))
	w.Int("f", int64(h.SysFlag))
	w.Int("g", h.BornTimestamp)
	w.Int("h", int64(h.Flag))
	w.Str("i", h.Properties)
	w.Int("j", int64(h.ReconsumeTimes))
	w.Bool("k", h.UnitMode)
	if h.MaxReconsumeTimes >= 0 {
		w.Int("l", int64(h.MaxReconsumeTimes))
	}
	w.Bool("m", h.Batch)
	if h.BrokerName != "" {
		w.Str("n", h.BrokerName)
	}
}

// SendResponseHeader is the reply header of a send.
type SendResponseHeader struct {
	// MsgID is the offset message id of the stored message; of a batch, the ids of its
	// messages joined with commas.
	MsgID         string
	QueueID       int32
	QueueOffset   int64 // of a batch, its first message's
	TransactionID string
	Region        string // MSG_REGION; clients take DefaultRegion when it is empty
	TraceOn       bool   // TRACE_ON, always written: Java clients take its absence as true
}

// ParseSendResponseHeader reads a send reply's header; msgId, queueId and queueOffset are
// required.
func ParseSendResponseHeader(ext map[string]string) (SendResponseHeader, error) {
	return parseSendResponseHeader(&fields{ext: ext})
}

func parseSendResponseHeader(f *fields) (SendResponseHeader, error) {
	var h SendResponseHeader
	h.MsgID, _ = f.str("msgId", true)
	h.QueueID = f.i32("queueId", true, 0)
	h.QueueOffset = f.i64("queueOffset", true, 0)
	h.TransactionID, _ = f.str("transactionId", false)
	h.Region, _ = f.str("MSG_REGION", false)
	h.TraceOn = f.boolean("TRACE_ON", false)
	return h, f.err
}

// Ext returns the header.
func (h SendResponseHeader) Ext() map[string]string {
	w := extWriter{}
	w.str("msgId", h.MsgID)
	w.i32("queueId", h.QueueID)
	w.i64("queueOffset", h.QueueOffset)
	w.strIf("transactionId", h.TransactionID)
	w.strIf("MSG_REGION", h.Region)
	w.boolean("TRACE_ON", h.TraceOn)
	return w
}

// WriteExt writes the header as Ext does, without a map.
func (h *SendResponseHeader) WriteExt(w *ExtWriter) {
	if h.Region != "" {
		w.Str("MSG_REGION", h.Region)
	}
	w.Bool("TRACE_ON", h.TraceOn)
	w.Str("msgId", h.MsgID)
	w.Int("queueId", int64(h.QueueID))
	w.Int("queueOffset", h.QueueOffset)
	if h.TransactionID != "" {
		w.Str("transactionId", h.TransactionID)
	}
}

// Pull request system flag bits (PullSysFlag).
const (
	PullCommitOffset int32 = 1  // commit CommitOffset with the pull
	PullSuspend      int32 = 2  // park the pull until a message arrives or the timeout
	PullSubscription int32 = 4  // filter with the request's subscription, not the heartbeat's
	PullClassFilter  int32 = 8  // class filter mode (unsupported)
	PullLitePull     int32 = 16 // a lite pull consumer's pull
)

// PullHeader is the request header of PULL_MESSAGE and LITE_PULL_MESSAGE.
type PullHeader struct {
	ConsumerGroup        string
	Topic                string
	QueueID              int32
	QueueOffset          int64
	MaxMsgNums           int32
	SysFlag              int32 // Pull* bits
	CommitOffset         int64
	SuspendTimeoutMillis int64
	Subscription         string // the filter expression, read with PullSubscription
	SubVersion           int64
	ExpressionType       string // TAG, or SQL92
	MaxMsgBytes          int32  // 0 when absent
	BrokerName           string
	// PushMsgs and PushBytes, EdgeMQ's own fields (edgemqPushMsgs, edgemqPushBytes; 0 when
	// absent), ask an EdgeMQ broker to stream a suspended pull: to answer it again as
	// messages arrive, up to PushMsgs messages (and PushBytes bytes of bodies, when > 0) in
	// all, every answer but the last marked PullResponseHeader.More. Apache RocketMQ's
	// broker ignores them and answers once.
	PushMsgs  int32
	PushBytes int64
}

// Ext field names of EdgeMQ's streamed pulls (PullHeader.PushMsgs, PullResponseHeader.More).
const (
	extPushMsgs  = "edgemqPushMsgs"
	extPushBytes = "edgemqPushBytes"
	extMore      = "edgemqMore"
)

// EndPullStream is EdgeMQ's own request code by which a client ends a streamed pull
// (PullHeader.PushMsgs) that nobody reads any more: its consumer dropped the queue, or the
// pull's call ended on the client (its ctx, its timeout). Its one header field,
// edgemqStream (EndPullStreamHeader), is the opaque of the pull. An EdgeMQ broker then
// answers the pull at once, PULL_NOT_FOUND at the offset its next answer would have started
// at, instead of answering it on as messages arrive until its budget is spent or its
// suspend time passes with nothing; a pull already answered for the last time is left as it
// is. It is sent oneway, and it is outside RocketMQ's codes, like SendBatchZstd.
const EndPullStream int16 = 32321

// extStream is END_PULL_STREAM's header field: the opaque of the pull it ends.
const extStream = "edgemqStream"

// ExtStreams is the field of an EdgeMQ broker's reply to HEARTBEAT ("1") that says it
// streams pulls: the client may end a streamed pull there (EndPullStream) from the
// connection's first pull on, before any was answered with More.
const ExtStreams = "edgemqStreams"

// EndPullStreamHeader is the request header of EndPullStream.
type EndPullStreamHeader struct {
	Opaque int32 // the streamed pull's
}

// Ext returns the header.
func (h EndPullStreamHeader) Ext() map[string]string {
	w := extWriter{}
	w.i32(extStream, h.Opaque)
	return w
}

// ParseEndPullStreamHeader reads END_PULL_STREAM's header.
func ParseEndPullStreamHeader(ext map[string]string) (EndPullStreamHeader, error) {
	f := fields{ext: ext}
	var h EndPullStreamHeader
	h.Opaque = f.i32(extStream, true, 0)
	return h, f.err
}

// ParsePullHeader reads a pull request's header.
func ParsePullHeader(ext map[string]string) (PullHeader, error) {
	return parsePullHeader(&fields{ext: ext})
}

func parsePullHeader(f *fields) (PullHeader, error) {
	var h PullHeader
	h.ConsumerGroup, _ = f.str("consumerGroup", true)
	h.Topic, _ = f.str("topic", true)
	h.QueueID = f.i32("queueId", true, 0)
	h.QueueOffset = f.i64("queueOffset", true, 0)
	h.MaxMsgNums = f.i32("maxMsgNums", true, 0)
	h.SysFlag = f.i32("sysFlag", true, 0)
	h.CommitOffset = f.i64("commitOffset", true, 0)
	h.SuspendTimeoutMillis = f.i64("suspendTimeoutMillis", true, 0)
	h.Subscription, _ = f.str("subscription", false)
	h.SubVersion = f.i64("subVersion", true, 0)
	h.ExpressionType, _ = f.str("expressionType", false)
	h.MaxMsgBytes = f.i32("maxMsgBytes", false, 0)
	h.BrokerName, _ = f.str(extBrokerName, false)
	h.PushMsgs = f.i32(extPushMsgs, false, 0)
	h.PushBytes = f.i64(extPushBytes, false, 0)
	return h, f.err
}

// Ext returns the header.
func (h PullHeader) Ext() map[string]string {
	w := extWriter{}
	w.str("consumerGroup", h.ConsumerGroup)
	w.str("topic", h.Topic)
	w.i32("queueId", h.QueueID)
	w.i64("queueOffset", h.QueueOffset)
	w.i32("maxMsgNums", h.MaxMsgNums)
	w.i32("sysFlag", h.SysFlag)
	w.i64("commitOffset", h.CommitOffset)
	w.i64("suspendTimeoutMillis", h.SuspendTimeoutMillis)
	w.strIf("subscription", h.Subscription)
	w.i64("subVersion", h.SubVersion)
	w.strIf("expressionType", h.ExpressionType)
	if h.MaxMsgBytes > 0 {
		w.i32("maxMsgBytes", h.MaxMsgBytes)
	}
	w.strIf(extBrokerName, h.BrokerName)
	if h.PushMsgs > 0 {
		w.i32(extPushMsgs, h.PushMsgs)
		if h.PushBytes > 0 {
			w.i64(extPushBytes, h.PushBytes)
		}
	}
	return w
}

// WriteExt writes the header as Ext does, without a map: a consumer sends one with every
// pull.
func (h *PullHeader) WriteExt(w *ExtWriter) {
	if h.BrokerName != "" {
		w.Str(extBrokerName, h.BrokerName)
	}
	w.Int("commitOffset", h.CommitOffset)
	w.Str("consumerGroup", h.ConsumerGroup)
	if h.PushMsgs > 0 {
		if h.PushBytes > 0 {
			w.Int(extPushBytes, h.PushBytes)
		}
		w.Int(extPushMsgs, int64(h.PushMsgs))
	}
	if h.ExpressionType != "" {
		w.Str("expressionType", h.ExpressionType)
	}
	if h.MaxMsgBytes > 0 {
		w.Int("maxMsgBytes", int64(h.MaxMsgBytes))
	}
	w.Int("maxMsgNums", int64(h.MaxMsgNums))
	w.Int("queueId", int64(h.QueueID))
	w.Int("queueOffset", h.QueueOffset)
	w.Int("subVersion", h.SubVersion)
	if h.Subscription != "" {
		w.Str("subscription", h.Subscription)
	}
	w.Int("suspendTimeoutMillis", h.SuspendTimeoutMillis)
	w.Int("sysFlag", int64(h.SysFlag))
	w.Str("topic", h.Topic)
}

// PullResponseHeader is the reply header of a pull, sent with every pull status.
type PullResponseHeader struct {
	SuggestWhichBrokerID int64 // the broker id to pull from next (0, the master)
	NextBeginOffset      int64
	MinOffset            int64
	MaxOffset            int64
	// More (EdgeMQ's edgemqMore, absent when false): the pull streams (PullHeader.PushMsgs)
	// and this is not its last answer.
	More bool
}

// ParsePullResponseHeader reads a pull reply's header; all four fields are required.
func ParsePullResponseHeader(ext map[string]string) (PullResponseHeader, error) {
	return parsePullResponseHeader(&fields{ext: ext})
}

func parsePullResponseHeader(f *fields) (PullResponseHeader, error) {
	h := PullResponseHeader{
		SuggestWhichBrokerID: f.i64("suggestWhichBrokerId", true, 0),
		NextBeginOffset:      f.i64("nextBeginOffset", true, 0),
		MinOffset:            f.i64("minOffset", true, 0),
		MaxOffset:            f.i64("maxOffset", true, 0),
		More:                 f.i32(extMore, false, 0) != 0,
	}
	return h, f.err
}

// Ext returns the header.
func (h PullResponseHeader) Ext() map[string]string {
	w := extWriter{}
	w.i64("suggestWhichBrokerId", h.SuggestWhichBrokerID)
	w.i64("nextBeginOffset", h.NextBeginOffset)
	w.i64("minOffset", h.MinOffset)
	w.i64("maxOffset", h.MaxOffset)
	if h.More {
		w.i32(extMore, 1)
	}
	return w
}

// WriteExt writes the header as Ext does, without a map.
func (h *PullResponseHeader) WriteExt(w *ExtWriter) {
	if h.More {
		w.Int(extMore, 1)
	}
	w.Int("maxOffset", h.MaxOffset)
	w.Int("minOffset", h.MinOffset)
	w.Int("nextBeginOffset", h.NextBeginOffset)
	w.Int("suggestWhichBrokerId", h.SuggestWhichBrokerID)
}

// QueryOffsetHeader is the request header of QUERY_CONSUMER_OFFSET.
type QueryOffsetHeader struct {
	ConsumerGroup string
	Topic         string
	QueueID       int32
	// SetZeroIfNotFound (true when absent) lets the broker answer offset 0 for a group
	// without an offset when the queue still holds its first message; false makes it answer
	// QUERY_NOT_FOUND.
	SetZeroIfNotFound bool
	BrokerName        string
}

// ParseQueryOffsetHeader reads the header.
func ParseQueryOffsetHeader(ext map[string]string) (QueryOffsetHeader, error) {
	f := fields{ext: ext}
	var h QueryOffsetHeader
	h.ConsumerGroup, _ = f.str("consumerGroup", true)
	h.Topic, _ = f.str("topic", true)
	h.QueueID = f.i32("queueId", true, 0)
	h.SetZeroIfNotFound = f.boolean("setZeroIfNotFound", true)
	h.BrokerName, _ = f.str(extBrokerName, false)
	return h, f.err
}

// Ext returns the header.
func (h QueryOffsetHeader) Ext() map[string]string {
	w := extWriter{}
	w.str("consumerGroup", h.ConsumerGroup)
	w.str("topic", h.Topic)
	w.i32("queueId", h.QueueID)
	w.boolean("setZeroIfNotFound", h.SetZeroIfNotFound)
	w.strIf(extBrokerName, h.BrokerName)
	return w
}

// UpdateOffsetHeader is the request header of UPDATE_CONSUMER_OFFSET.
type UpdateOffsetHeader struct {
	ConsumerGroup string
	Topic         string
	QueueID       int32
	CommitOffset  int64
	BrokerName    string
}

// ParseUpdateOffsetHeader reads the header.
func ParseUpdateOffsetHeader(ext map[string]string) (UpdateOffsetHeader, error) {
	f := fields{ext: ext}
	var h UpdateOffsetHeader
	h.ConsumerGroup, _ = f.str("consumerGroup", true)
	h.Topic, _ = f.str("topic", true)
	h.QueueID = f.i32("queueId", true, 0)
	h.CommitOffset = f.i64("commitOffset", true, 0)
	h.BrokerName, _ = f.str(extBrokerName, false)
	return h, f.err
}

// Ext returns the header.
func (h UpdateOffsetHeader) Ext() map[string]string {
	w := extWriter{}
	w.str("consumerGroup", h.ConsumerGroup)
	w.str("topic", h.Topic)
	w.i32("queueId", h.QueueID)
	w.i64("commitOffset", h.CommitOffset)
	w.strIf(extBrokerName, h.BrokerName)
	return w
}

// OffsetResponseHeader is the reply header carrying one offset: of QUERY_CONSUMER_OFFSET,
// SEARCH_OFFSET_BY_TIMESTAMP, GET_MAX_OFFSET and GET_MIN_OFFSET.
type OffsetResponseHeader struct {
	Offset int64
}

// ParseOffsetResponseHeader reads the header; offset is required.
func ParseOffsetResponseHeader(ext map[string]string) (OffsetResponseHeader, error) {
	f := fields{ext: ext}
	h := OffsetResponseHeader{Offset: f.i64("offset", true, 0)}
	return h, f.err
}

// Ext returns the header.
func (h OffsetResponseHeader) Ext() map[string]string {
	w := extWriter{}
	w.i64("offset", h.Offset)
	return w
}

// SendBackHeader is the request header of CONSUMER_SEND_MSG_BACK.
type SendBackHeader struct {
	Offset      int64 // the message's commit-log offset
	Group       string
	DelayLevel  int32 // 0: by reconsume times; negative: straight to the dead-letter topic
	OriginMsgID string
	OriginTopic string
	UnitMode    bool
	// MaxReconsumeTimes is -1 when absent (the group's default); Ext omits a negative
	// value.
	MaxReconsumeTimes int32
	BrokerName        string
}

// ParseSendBackHeader reads the header.
func ParseSendBackHeader(ext map[string]string) (SendBackHeader, error) {
	f := fields{ext: ext}
	var h SendBackHeader
	h.Offset = f.i64("offset", true, 0)
	h.Group, _ = f.str("group", true)
	h.DelayLevel = f.i32("delayLevel", true, 0)
	h.OriginMsgID, _ = f.str("originMsgId", false)
	h.OriginTopic, _ = f.str("originTopic", false)
	h.UnitMode = f.boolean("unitMode", false)
	h.MaxReconsumeTimes = f.i32("maxReconsumeTimes", false, -1)
	h.BrokerName, _ = f.str(extBrokerName, false)
	return h, f.err
}

// Ext returns the header.
func (h SendBackHeader) Ext() map[string]string {
	w := extWriter{}
	w.i64("offset", h.Offset)
	w.str("group", h.Group)
	w.i32("delayLevel", h.DelayLevel)
	w.strIf("originMsgId", h.OriginMsgID)
	w.strIf("originTopic", h.OriginTopic)
	w.boolean("unitMode", h.UnitMode)
	if h.MaxReconsumeTimes >= 0 {
		w.i32("maxReconsumeTimes", h.MaxReconsumeTimes)
	}
	w.strIf(extBrokerName, h.BrokerName)
	return w
}

// SearchOffsetHeader is the request header of SEARCH_OFFSET_BY_TIMESTAMP.
type SearchOffsetHeader struct {
	Topic     string
	QueueID   int32
	Timestamp int64 // unix ms
	// BoundaryType is "lower" (the default when empty) or "upper": which of several
	// messages stored at the same millisecond to answer.
	BoundaryType string
	BrokerName   string
}

// ParseSearchOffsetHeader reads the header.
func ParseSearchOffsetHeader(ext map[string]string) (SearchOffsetHeader, error) {
	f := fields{ext: ext}
	var h SearchOffsetHeader
	h.Topic, _ = f.str("topic", true)
	h.QueueID = f.i32("queueId", true, 0)
	h.Timestamp = f.i64("timestamp", true, 0)
	h.BoundaryType, _ = f.str("boundaryType", false)
	h.BrokerName, _ = f.str(extBrokerName, false)
	return h, f.err
}

// Ext returns the header.
func (h SearchOffsetHeader) Ext() map[string]string {
	w := extWriter{}
	w.str("topic", h.Topic)
	w.i32("queueId", h.QueueID)
	w.i64("timestamp", h.Timestamp)
	w.strIf("boundaryType", h.BoundaryType)
	w.strIf(extBrokerName, h.BrokerName)
	return w
}

// GetOffsetHeader is the request header of GET_MAX_OFFSET and GET_MIN_OFFSET.
type GetOffsetHeader struct {
	Topic      string
	QueueID    int32
	BrokerName string
}

// ParseGetOffsetHeader reads the header.
func ParseGetOffsetHeader(ext map[string]string) (GetOffsetHeader, error) {
	f := fields{ext: ext}
	var h GetOffsetHeader
	h.Topic, _ = f.str("topic", true)
	h.QueueID = f.i32("queueId", true, 0)
	h.BrokerName, _ = f.str(extBrokerName, false)
	return h, f.err
}

// Ext returns the header.
func (h GetOffsetHeader) Ext() map[string]string {
	w := extWriter{}
	w.str("topic", h.Topic)
	w.i32("queueId", h.QueueID)
	w.strIf(extBrokerName, h.BrokerName)
	return w
}

// ConsumerListHeader is the request header of GET_CONSUMER_LIST_BY_GROUP and of
// NOTIFY_CONSUMER_IDS_CHANGED.
type ConsumerListHeader struct {
	ConsumerGroup string
}

// ParseConsumerListHeader reads the header.
func ParseConsumerListHeader(ext map[string]string) (ConsumerListHeader, error) {
	f := fields{ext: ext}
	var h ConsumerListHeader
	h.ConsumerGroup, _ = f.str("consumerGroup", true)
	return h, f.err
}

// Ext returns the header.
func (h ConsumerListHeader) Ext() map[string]string {
	return extWriter{"consumerGroup": h.ConsumerGroup}
}

// UnregisterHeader is the request header of UNREGISTER_CLIENT: the client leaves the
// groups named (either may be empty).
type UnregisterHeader struct {
	ClientID      string
	ProducerGroup string
	ConsumerGroup string
}

// ParseUnregisterHeader reads the header.
func ParseUnregisterHeader(ext map[string]string) (UnregisterHeader, error) {
	f := fields{ext: ext}
	var h UnregisterHeader
	h.ClientID, _ = f.str("clientID", true)
	h.ProducerGroup, _ = f.str("producerGroup", false)
	h.ConsumerGroup, _ = f.str("consumerGroup", false)
	return h, f.err
}

// Ext returns the header.
func (h UnregisterHeader) Ext() map[string]string {
	w := extWriter{}
	w.str("clientID", h.ClientID)
	w.strIf("producerGroup", h.ProducerGroup)
	w.strIf("consumerGroup", h.ConsumerGroup)
	return w
}

// CreateTopicHeader is the request header of UPDATE_AND_CREATE_TOPIC.
type CreateTopicHeader struct {
	Topic           string
	DefaultTopic    string
	ReadQueueNums   int32
	WriteQueueNums  int32
	Perm            int32  // mq.Perm* bits
	TopicFilterType string // SINGLE_TAG or MULTI_TAG
	TopicSysFlag    int32
	Order           bool
	Attributes      string // "+key=value,..." topic attributes, empty when none
}

// ParseCreateTopicHeader reads the header.
func ParseCreateTopicHeader(ext map[string]string) (CreateTopicHeader, error) {
	f := fields{ext: ext}
	var h CreateTopicHeader
	h.Topic, _ = f.str("topic", true)
	h.DefaultTopic, _ = f.str("defaultTopic", true)
	h.ReadQueueNums = f.i32("readQueueNums", true, 0)
	h.WriteQueueNums = f.i32("writeQueueNums", true, 0)
	h.Perm = f.i32("perm", true, 0)
	h.TopicFilterType, _ = f.str("topicFilterType", true)
	h.TopicSysFlag = f.i32("topicSysFlag", false, 0)
	h.Order = f.boolean("order", false)
	h.Attributes, _ = f.str("attributes", false)
	return h, f.err
}

// Ext returns the header.
func (h CreateTopicHeader) Ext() map[string]string {
	w := extWriter{}
	w.str("topic", h.Topic)
	w.str("defaultTopic", h.DefaultTopic)
	w.i32("readQueueNums", h.ReadQueueNums)
	w.i32("writeQueueNums", h.WriteQueueNums)
	w.i32("perm", h.Perm)
	w.str("topicFilterType", h.TopicFilterType)
	w.i32("topicSysFlag", h.TopicSysFlag)
	w.boolean("order", h.Order)
	w.strIf("attributes", h.Attributes)
	return w
}

// TopicHeader is the request header naming just a topic: of GET_ROUTEINFO_BY_TOPIC,
// DELETE_TOPIC_IN_BROKER, DELETE_TOPIC_IN_NAMESRV and GET_TOPIC_STATS_INFO.
type TopicHeader struct {
	Topic string
}

// ParseTopicHeader reads the header.
func ParseTopicHeader(ext map[string]string) (TopicHeader, error) {
	f := fields{ext: ext}
	var h TopicHeader
	h.Topic, _ = f.str("topic", true)
	return h, f.err
}

// Ext returns the header.
func (h TopicHeader) Ext() map[string]string { return extWriter{"topic": h.Topic} }

// ViewMessageHeader is the request header of VIEW_MESSAGE_BY_ID: the message at a
// commit-log offset (from its offset message id).
type ViewMessageHeader struct {
	Offset int64
	Topic  string // RocketMQ 5 clients name it too; empty when absent
}

// ParseViewMessageHeader reads the header.
func ParseViewMessageHeader(ext map[string]string) (ViewMessageHeader, error) {
	f := fields{ext: ext}
	var h ViewMessageHeader
	h.Offset = f.i64("offset", true, 0)
	h.Topic, _ = f.str("topic", false)
	return h, f.err
}

// Ext returns the header.
func (h ViewMessageHeader) Ext() map[string]string {
	w := extWriter{}
	w.i64("offset", h.Offset)
	w.strIf("topic", h.Topic)
	return w
}

// QueryMessageHeader is the request header of QUERY_MESSAGE: up to MaxNum messages of a
// topic with Key among their keys, stored in [BeginTimestamp, EndTimestamp] (unix ms).
type QueryMessageHeader struct {
	Topic          string
	Key            string
	MaxNum         int32
	BeginTimestamp int64
	EndTimestamp   int64
}

// ParseQueryMessageHeader reads the header.
func ParseQueryMessageHeader(ext map[string]string) (QueryMessageHeader, error) {
	f := fields{ext: ext}
	var h QueryMessageHeader
	h.Topic, _ = f.str("topic", true)
	h.Key, _ = f.str("key", true)
	h.MaxNum = f.i32("maxNum", true, 0)
	h.BeginTimestamp = f.i64("beginTimestamp", true, 0)
	h.EndTimestamp = f.i64("endTimestamp", true, 0)
	return h, f.err
}

// Ext returns the header.
func (h QueryMessageHeader) Ext() map[string]string {
	w := extWriter{}
	w.str("topic", h.Topic)
	w.str("key", h.Key)
	w.i32("maxNum", h.MaxNum)
	w.i64("beginTimestamp", h.BeginTimestamp)
	w.i64("endTimestamp", h.EndTimestamp)
	return w
}

// QueryMessageResponseHeader is the reply header of QUERY_MESSAGE; the body holds the
// messages found as stored records.
type QueryMessageResponseHeader struct {
	IndexLastUpdateTimestamp int64
	IndexLastUpdatePhyoffset int64
}

// ParseQueryMessageResponseHeader reads the header; both fields are required.
func ParseQueryMessageResponseHeader(ext map[string]string) (QueryMessageResponseHeader, error) {
	f := fields{ext: ext}
	h := QueryMessageResponseHeader{
		IndexLastUpdateTimestamp: f.i64("indexLastUpdateTimestamp", true, 0),
		IndexLastUpdatePhyoffset: f.i64("indexLastUpdatePhyoffset", true, 0),
	}
	return h, f.err
}

// Ext returns the header.
func (h QueryMessageResponseHeader) Ext() map[string]string {
	w := extWriter{}
	w.i64("indexLastUpdateTimestamp", h.IndexLastUpdateTimestamp)
	w.i64("indexLastUpdatePhyoffset", h.IndexLastUpdatePhyoffset)
	return w
}

// ResetOffsetHeader is the request header of RESET_CONSUMER_CLIENT_OFFSET (broker to
// client) and INVOKE_BROKER_TO_RESET_OFFSET (admin to broker): move the group's offsets of
// the topic to the first message stored at or after Timestamp, or, with a QueueID and an
// Offset, one queue to Offset.
type ResetOffsetHeader struct {
	Topic     string
	Group     string
	Timestamp int64 // unix ms
	IsForce   bool
	QueueID   int32 // -1 when absent: every queue
	Offset    int64 // -1 when absent
}

// ParseResetOffsetHeader reads the header.
func ParseResetOffsetHeader(ext map[string]string) (ResetOffsetHeader, error) {
	f := fields{ext: ext}
	var h ResetOffsetHeader
	h.Topic, _ = f.str("topic", true)
	h.Group, _ = f.str("group", true)
	h.Timestamp = f.i64("timestamp", true, 0)
	h.IsForce = f.boolean("isForce", false)
	h.QueueID = f.i32("queueId", false, -1)
	h.Offset = f.i64("offset", false, -1)
	return h, f.err
}

// Ext returns the header.
func (h ResetOffsetHeader) Ext() map[string]string {
	w := extWriter{}
	w.str("topic", h.Topic)
	w.str("group", h.Group)
	w.i64("timestamp", h.Timestamp)
	w.boolean("isForce", h.IsForce)
	if h.QueueID >= 0 {
		w.i32("queueId", h.QueueID)
	}
	if h.Offset >= 0 {
		w.i64("offset", h.Offset)
	}
	return w
}

// Transaction states of END_TRANSACTION's CommitOrRollback (MessageSysFlag).
const (
	TransactionNotType      int32 = 0
	TransactionPrepared     int32 = 4
	TransactionCommitType   int32 = 8
	TransactionRollbackType int32 = 12
)

// CheckTransactionStateHeader is the header of CHECK_TRANSACTION_STATE, which a broker sends
// to a producer (its body: the half message as a V1 record).
type CheckTransactionStateHeader struct {
	Topic                string // the half message's real topic
	TranStateTableOffset int64  // the half message's queue offset
	CommitLogOffset      int64  // the half message's commit-log offset
	MsgID                string // the message's unique id
	TransactionID        string
	OffsetMsgID          string
	BrokerName           string
}

// ParseCheckTransactionStateHeader reads the header.
func ParseCheckTransactionStateHeader(ext map[string]string) (CheckTransactionStateHeader, error) {
	f := fields{ext: ext}
	var h CheckTransactionStateHeader
	h.Topic, _ = f.str("topic", false)
	h.TranStateTableOffset = f.i64("tranStateTableOffset", true, 0)
	h.CommitLogOffset = f.i64("commitLogOffset", true, 0)
	h.MsgID, _ = f.str("msgId", false)
	h.TransactionID, _ = f.str("transactionId", false)
	h.OffsetMsgID, _ = f.str("offsetMsgId", false)
	h.BrokerName, _ = f.str(extBrokerName, false)
	return h, f.err
}

// Ext returns the header.
func (h CheckTransactionStateHeader) Ext() map[string]string {
	w := extWriter{}
	w.strIf("topic", h.Topic)
	w.i64("tranStateTableOffset", h.TranStateTableOffset)
	w.i64("commitLogOffset", h.CommitLogOffset)
	w.strIf("msgId", h.MsgID)
	w.strIf("transactionId", h.TransactionID)
	w.strIf("offsetMsgId", h.OffsetMsgID)
	w.strIf(extBrokerName, h.BrokerName)
	return w
}

// EndTransactionHeader is the request header of END_TRANSACTION.
type EndTransactionHeader struct {
	ProducerGroup        string
	TranStateTableOffset int64 // the half message's queue offset
	CommitLogOffset      int64 // the half message's commit-log offset
	CommitOrRollback     int32 // Transaction*Type
	FromTransactionCheck bool
	MsgID                string
	TransactionID        string
	BrokerName           string
}

// ParseEndTransactionHeader reads the header.
func ParseEndTransactionHeader(ext map[string]string) (EndTransactionHeader, error) {
	f := fields{ext: ext}
	var h EndTransactionHeader
	h.ProducerGroup, _ = f.str("producerGroup", true)
	h.TranStateTableOffset = f.i64("tranStateTableOffset", true, 0)
	h.CommitLogOffset = f.i64("commitLogOffset", true, 0)
	h.CommitOrRollback = f.i32("commitOrRollback", true, 0)
	h.FromTransactionCheck = f.boolean("fromTransactionCheck", false)
	h.MsgID, _ = f.str("msgId", true)
	h.TransactionID, _ = f.str("transactionId", false)
	h.BrokerName, _ = f.str(extBrokerName, false)
	return h, f.err
}

// Ext returns the header.
func (h EndTransactionHeader) Ext() map[string]string {
	w := extWriter{}
	w.str("producerGroup", h.ProducerGroup)
	w.i64("tranStateTableOffset", h.TranStateTableOffset)
	w.i64("commitLogOffset", h.CommitLogOffset)
	w.i32("commitOrRollback", h.CommitOrRollback)
	w.boolean("fromTransactionCheck", h.FromTransactionCheck)
	w.str("msgId", h.MsgID)
	w.strIf("transactionId", h.TransactionID)
	w.strIf(extBrokerName, h.BrokerName)
	return w
}
