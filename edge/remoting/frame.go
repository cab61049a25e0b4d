package remoting

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
	"unsafe"
)

// Frame layout (see the package doc), big-endian:
// frameLen i32 (= 4 + headerLen + bodyLen) | type u8 | headerLen u24 | header | body
const (
	frameLenSize = 4 // the frame length word
	typeLenSize  = 4 // the serialize type and header length word
	// maxHeader is the largest header the 24-bit header length can carry.
	maxHeader = 1<<24 - 1
	// readChunk is how much a Reader allocates for a frame before its bytes arrive; it
	// grows the buffer as they do, so a length word alone never costs a large allocation.
	readChunk = 64 << 10
	// readGrowth bounds a Reader's buffer for a frame to this many times its bytes
	// received.
	readGrowth = 4
)

// AppendFrame appends c as a whole frame, its header in c.Serialize, and returns the
// extended slice. A command too large for the format is an error wrapping
// ErrFrameTooLarge, an unknown Serialize one wrapping ErrMalformed; dst is then returned
// unchanged.
func (c *Command) AppendFrame(dst []byte) ([]byte, error) {
	dst, err := c.AppendFrameHead(dst)
	if err != nil {
		return dst, err
	}
	return append(dst, c.Body...), nil
}

// AppendFrameHead appends c's frame but its body, the frame length counting the body, so
// that a writer can send the body from its own memory (writev). Errors as AppendFrame's.
func (c *Command) AppendFrameHead(dst []byte) ([]byte, error) {
	if c == nil {
		return dst, fmt.Errorf("%w: nil command", ErrMalformed)
	}
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0) // frame length, type and header length: set below
	dst, err := appendHeader(dst, c)
	if err != nil {
		return dst[:start], err
	}
	headerLen := len(dst) - start - frameLenSize - typeLenSize
	if headerLen > maxHeader {
		return dst[:start], fmt.Errorf("%w: header of %d bytes, at most %d", ErrFrameTooLarge, headerLen, maxHeader)
	}
	frameLen := int64(typeLenSize) + int64(headerLen) + int64(len(c.Body))
	if frameLen > math.MaxInt32-frameLenSize {
		return dst[:start], fmt.Errorf("%w: frame of %d bytes", ErrFrameTooLarge, frameLen)
	}
	binary.BigEndian.PutUint32(dst[start:], uint32(frameLen))
	binary.BigEndian.PutUint32(dst[start+frameLenSize:], uint32(c.Serialize)<<24|uint32(headerLen))
	return dst, nil
}

// WriteTo writes c as one frame with a single Write call, so that writers sharing a
// connection under a lock never interleave frames. It implements io.WriterTo.
func (c *Command) WriteTo(w io.Writer) (int64, error) {
	if w == nil {
		return 0, errNilIO
	}
	b, err := c.AppendFrame(nil)
	if err != nil {
		return 0, err
	}
	n, err := w.Write(b)
	return int64(n), err
}

// errNilIO is returned by WriteTo to a nil writer and by Read of a nil Reader or one of a
// nil reader.
var errNilIO = errors.New("remoting: nil reader or writer")

// Reader reads commands from a stream of frames. It is not safe for concurrent use.
type Reader struct {
	r        io.Reader
	maxFrame int
	err      error // sticky: the stream is no longer at a frame boundary
	// LazyExt leaves the extension fields of binary headers undecoded, checked but not made
	// into a map: read them with Command.Fields or the Command's Parse methods, which read
	// a hot request's or reply's few fields without one.
	LazyExt bool
	// reuse takes the commands of binary headers from reusedCommands: their reader gives
	// back (releaseCommand) those nothing keeps once handled.
	reuse bool
	// oneAlloc reads a binary-header frame's header and body into one allocation, which
	// the command's strings point into instead of copies: for a reader whose commands keep
	// their bodies as long as their headers (a client's replies). A server, which drops a
	// stored send's body while its reply waits, copies the strings out.
	oneAlloc bool
	// spare is a buffer for the header of a small frame without a body, and lent the one
	// the last such frame's header was read into: its command's strings point into it.
	// When that command's handler kept none of it (Command.keepNothing) and it is released
	// (Reader.release), lent becomes spare again: with reuse set, an async send's reply
	// costs no allocation.
	spare, lent []byte
}

// spareFrameCap is the capacity a spare header buffer is made with, and maxSpareFrame the
// largest header read into one: a send's reply is about 150 bytes.
const (
	spareFrameCap = 256
	maxSpareFrame = 1 << 10
)

// reusedCommands keeps commands a Reader with reuse set decoded and its owner released.
var reusedCommands sync.Pool

// releaseCommand clears c and keeps it for a Reader with reuse set. c must be reachable
// from nowhere else; its body and strings are not reused, only the struct.
func releaseCommand(c *Command) {
	*c = Command{}
	reusedCommands.Put(c)
}

// release gives c back (releaseCommand) and, when c's header was read into the buffer
// the Reader lent last and c's handler kept nothing of it, that buffer for the next frame.
func (r *Reader) release(c *Command) {
	if c.frameFree && c.frame != nil && cap(r.lent) > 0 && c.frame == unsafe.SliceData(r.lent) {
		r.spare, r.lent = r.lent[:0], nil
	}
	releaseCommand(c)
}

// NewReader returns a Reader of r that accepts frames of at most maxFrame bytes, the
// length word included; maxFrame <= 0 means DefaultMaxFrameSize.
func NewReader(r io.Reader, maxFrame int) *Reader {
	if maxFrame <= 0 {
		maxFrame = DefaultMaxFrameSize
	}
	return &Reader{r: r, maxFrame: maxFrame}
}

// Read reads the next frame and decodes it. The command's Body is its own memory.
//
// At the end of the stream between frames it returns io.EOF; in a frame,
// io.ErrUnexpectedEOF. A frame over the maximum is an error wrapping ErrFrameTooLarge, a
// frame length too short for its own header-length word one wrapping ErrMalformed: these
// and read errors leave the stream between frames unknown, so every later Read returns the
// same error. A frame read whole whose header does not decode is an error wrapping
// ErrMalformed, and the next Read reads the next frame.
func (r *Reader) Read() (*Command, error) {
	if r == nil || r.r == nil {
		return nil, errNilIO
	}
	if r.err != nil {
		return nil, r.err
	}
	var word [frameLenSize]byte
	if _, err := io.ReadFull(r.r, word[:]); err != nil {
		r.err = err
		return nil, err
	}
	frameLen := int64(int32(binary.BigEndian.Uint32(word[:])))
	if frameLen < typeLenSize {
		r.err = fmt.Errorf("%w: frame length %d", ErrMalformed, frameLen)
		return nil, r.err
	}
	if frameLen+frameLenSize > int64(r.maxFrame) {
		r.err = fmt.Errorf("%w: frame of %d bytes, at most %d", ErrFrameTooLarge, frameLen+frameLenSize, r.maxFrame)
		return nil, r.err
	}
	c, read, err := r.readRest(int(frameLen))
	if err != nil && !read {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		r.err = err
	}
	return c, err
}

// headBufs holds buffers for frame headers, which a command does not keep (its header is
// decoded into strings): a frame costs only its body's allocation, and a frame without a
// body none. Headers larger than a buffer are read into one of their own.
var headBufs = sync.Pool{New: func() any { b := make([]byte, headBufSize); return &b }}

const headBufSize = 1 << 10

// readRest reads the n bytes of a frame after its length word and decodes them. read
// says whether the frame was read whole: an error then is its header's (wrapping
// ErrMalformed), else the stream's.
func (r *Reader) readRest(n int) (c *Command, read bool, err error) {
	var word [typeLenSize]byte
	if _, err := io.ReadFull(r.r, word[:]); err != nil {
		return nil, false, err
	}
	w := binary.BigEndian.Uint32(word[:])
	t, headerLen := SerializeType(w>>24), int(w&maxHeader)
	rest := n - typeLenSize
	if headerLen > rest {
		if _, err := io.CopyN(io.Discard, r.r, int64(rest)); err != nil {
			return nil, false, err
		}
		return nil, true, fmt.Errorf("%w: header of %d bytes in a frame of %d", ErrMalformed, headerLen, n+frameLenSize)
	}
	var head, body []byte
	owned := false  // head is an allocation of its own that nothing writes
	var lent []byte // head's buffer, when it is the reader's spare one
	switch {
	case r.reuse && t == RocketMQ && rest == headerLen && headerLen > binaryHeaderFixed && headerLen <= maxSpareFrame:
		// A reply without a body, a send's most often: read into the spare buffer, which
		// the command's strings point into until it is released.
		lent, r.spare = r.spare, nil
		if cap(lent) < headerLen {
			lent = make([]byte, 0, max(headerLen, spareFrameCap))
		}
		head, owned = lent[:headerLen:headerLen], true
		if _, err := io.ReadFull(r.r, head); err != nil {
			return nil, false, err
		}
	case r.oneAlloc && t == RocketMQ && (rest > headerLen || headerLen > binaryHeaderFixed):
		// A body, or a remark or fields: one allocation, where a body (after the header)
		// cannot reach back into the header that the command's strings share.
		buf, err := r.readFrame(rest)
		if err != nil {
			return nil, false, err
		}
		head, body, owned = buf[:headerLen:headerLen], buf[headerLen:], true
		if len(body) == 0 {
			body = nil
		}
	case headerLen <= headBufSize:
		hb := headBufs.Get().(*[]byte)
		defer headBufs.Put(hb)
		head = (*hb)[:headerLen]
		if _, err := io.ReadFull(r.r, head); err != nil {
			return nil, false, err
		}
	default:
		if head, err = r.readFrame(headerLen); err != nil {
			return nil, false, err
		}
	}
	if rest > headerLen && !owned {
		if body, err = r.readFrame(rest - headerLen); err != nil {
			return nil, false, err
		}
	}
	if t == RocketMQ {
		if r.reuse {
			c, _ = reusedCommands.Get().(*Command)
		}
		if c == nil {
			c = new(Command)
		}
		if err = decodeBinaryHeaderInto(head, r.LazyExt, owned, c); err != nil {
			if r.reuse {
				releaseCommand(c) // cleared: the pool holds nothing of the bad frame
			}
			if lent != nil {
				r.spare = lent[:0] // nothing points into it
			}
			return nil, true, err
		}
		if lent != nil {
			r.lent, c.frame = lent, unsafe.SliceData(lent)
		}
	} else if c, err = decodeHeader(t, head, r.LazyExt); err != nil {
		return nil, true, err
	}
	c.Body = body
	return c, true, nil
}

// readFrame reads n bytes, growing its buffer as they arrive: it holds at most
// readGrowth times the bytes received (and readChunk before any), so that a length word
// alone never costs a large allocation, while a large frame is copied less on its way
// than with doubling (a 180 KB batch: one copy of 64 KB).
func (r *Reader) readFrame(n int) ([]byte, error) {
	b := make([]byte, min(n, readChunk))
	have := 0
	for {
		m, err := io.ReadFull(r.r, b[have:])
		have += m
		if err != nil {
			return nil, err
		}
		if have == n {
			return b, nil
		}
		nb := make([]byte, min(readGrowth*have, n))
		copy(nb, b)
		b = nb
	}
}
