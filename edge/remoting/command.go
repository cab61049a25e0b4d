package remoting

import "strconv"

// SerializeType is the encoding of a command's header: the top byte of the frame's
// header-length word.
type SerializeType byte

// The header encodings.
const (
	// JSON is the JSON header every client can read; EdgeMQ writes it by default.
	JSON SerializeType = 0
	// RocketMQ is RocketMQ's binary header (ROCKETMQ), which Java clients write when
	// configured to.
	RocketMQ SerializeType = 1
)

func (t SerializeType) String() string {
	switch t {
	case JSON:
		return "JSON"
	case RocketMQ:
		return "ROCKETMQ"
	}
	return "SerializeType(" + strconv.Itoa(int(t)) + ")"
}

// LanguageCode names the implementation language of the peer that wrote a command.
type LanguageCode byte

// The language codes (RocketMQ's LanguageCode).
const (
	LanguageJava   LanguageCode = 0
	LanguageCPP    LanguageCode = 1
	LanguageDotNet LanguageCode = 2
	LanguagePython LanguageCode = 3
	LanguageDelphi LanguageCode = 4
	LanguageErlang LanguageCode = 5
	LanguageRuby   LanguageCode = 6
	LanguageOther  LanguageCode = 7
	LanguageHTTP   LanguageCode = 8
	LanguageGo     LanguageCode = 9
	LanguagePHP    LanguageCode = 10
	LanguageOMS    LanguageCode = 11
	LanguageRust   LanguageCode = 12
	LanguageNodeJS LanguageCode = 13
)

var languageNames = [...]string{"JAVA", "CPP", "DOTNET", "PYTHON", "DELPHI", "ERLANG", "RUBY", "OTHER", "HTTP", "GO", "PHP", "OMS", "RUST", "NODE_JS"}

// String returns the enum name the JSON header carries ("JAVA", "GO", ...), or
// "LanguageCode(n)" for a code without a name.
func (l LanguageCode) String() string {
	if int(l) < len(languageNames) {
		return languageNames[l]
	}
	return "LanguageCode(" + strconv.Itoa(int(l)) + ")"
}

// parseLanguage returns the code of an enum name.
func parseLanguage(name string) (LanguageCode, bool) {
	for i, n := range languageNames {
		if n == name {
			return LanguageCode(i), true
		}
	}
	return 0, false
}

// Flag bits of a command.
const (
	// FlagResponse marks a reply.
	FlagResponse int32 = 1
	// FlagOneway marks a request the sender wants no reply to.
	FlagOneway int32 = 2
)

// DefaultMaxFrameSize is the largest frame a Reader accepts by default, the 4-byte length
// word included: 16 MiB, as the Java broker.
const DefaultMaxFrameSize = 16 << 20

// Version is the protocol version EdgeMQ puts in its commands: RocketMQ 5.3's. Clients
// store a broker's version from its heartbeat reply; Java name servers answer standard
// JSON only to versions of at least 401.
const Version int16 = 479

// Command is one remoting command, a request or a reply: RocketMQ's RemotingCommand.
type Command struct {
	Code     int16 // request code, or response code in a reply
	Language LanguageCode
	Version  int16
	// Opaque pairs a reply with its request: a reply carries the request's value.
	Opaque int32
	Flag   int32 // FlagResponse, FlagOneway bits
	Remark string
	// Ext holds the header's extension fields (extFields), each value a string: the
	// request or response header. A Reader with LazyExt leaves it nil on the commands it
	// reads in the binary encoding: read their fields with Fields, or the Parse methods.
	Ext map[string]string
	// raw holds the extension fields as the binary header carried them (well formed: the
	// Reader checked them), while Ext is nil: see Fields.
	raw string
	// Header, when set, writes the extension fields in place of Ext: a header encoded
	// straight into the frame, without a map. Commands read from the wire never have one.
	Header HeaderWriter
	Body   []byte
	// Serialize is the header encoding the command was read in, or is written in.
	Serialize SerializeType
	// frameFree says that its handler keeps nothing of the command (keepNothing); frame is
	// the first byte of the Reader's buffer its header was read into, when the Reader lent
	// one (Reader.release).
	frameFree bool
	frame     *byte
}

// keepNothing says that whoever handled c keeps none of its strings or its body: once c
// is released, the Reader that read it may reuse the buffer they point into.
func (c *Command) keepNothing() { c.frameFree = true }

// Fields returns c's extension fields: Ext, made first of the fields a Reader with LazyExt
// left undecoded. Reading a command's fields through it is always right; Ext alone is nil
// on such a command.
func (c *Command) Fields() map[string]string {
	if c == nil {
		return nil
	}
	if c.Ext == nil && c.raw != "" {
		var v extView
		v.load(c.raw)
		c.Ext = v.toMap()
		c.raw = ""
	}
	return c.Ext
}

// IsResponse reports whether c is a reply.
func (c *Command) IsResponse() bool { return c != nil && c.Flag&FlagResponse != 0 }

// IsOneway reports whether c is a request that wants no reply.
func (c *Command) IsOneway() bool { return c != nil && c.Flag&FlagOneway != 0 }

// NewRequest returns a request command with code, extension fields and body, in the JSON
// encoding, language Go and version Version. Its Opaque is 0: the connection that sends it
// sets it.
func NewRequest(code int16, ext map[string]string, body []byte) *Command {
	return &Command{Code: code, Language: LanguageGo, Version: Version, Ext: ext, Body: body, Serialize: JSON}
}

// Reply returns the reply to c with code and remark: the same Opaque and header encoding,
// Flag FlagResponse, language Go and version Version. The caller adds Ext and Body. The
// reply to a nil command has Opaque 0 and the JSON encoding.
func (c *Command) Reply(code int16, remark string) *Command {
	if c == nil {
		return &Command{Code: code, Language: LanguageGo, Version: Version, Flag: FlagResponse, Remark: remark}
	}
	return &Command{
		Code:      code,
		Language:  LanguageGo,
		Version:   Version,
		Opaque:    c.Opaque,
		Flag:      FlagResponse,
		Remark:    remark,
		Serialize: c.Serialize,
	}
}
