package remoting

import (
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/edgemq/edgemq/edge/mq"
	"github.com/klauspost/compress/zstd"
)

// SendBatchZstd is EdgeMQ's own request code for a batch send whose body is the items of a
// SEND_BATCH_MESSAGE body compressed whole as one zstd frame; its header is
// SEND_BATCH_MESSAGE's (the one-letter form). It is outside RocketMQ's codes, so a broker
// that does not know it (Apache RocketMQ, an EdgeMQ before it, or one with it turned off)
// answers REQUEST_CODE_NOT_SUPPORTED and stores nothing: a compressed body is never taken
// for messages.
const SendBatchZstd int16 = 32320

// zstdEncoder compresses batch bodies; EncodeAll may be called from any goroutine.
var zstdEncoder = sync.OnceValues(func() (*zstd.Encoder, error) {
	return zstd.NewWriter(nil, zstd.WithEncoderConcurrency(runtime.GOMAXPROCS(0)),
		zstd.WithEncoderLevel(zstd.SpeedFastest))
})

// zstdDecoders holds one decoder per size limit (a server has one): *zstd.Decoder by int.
var zstdDecoders sync.Map

// AppendZstdBatch appends to dst the body of a SEND_BATCH_ZSTD request of msgs: their batch
// items (AppendBatch) compressed as one zstd frame (which records its decompressed size,
// but for the smallest).
func AppendZstdBatch(dst []byte, msgs []*mq.Message) ([]byte, error) {
	enc, err := zstdEncoder()
	if err != nil {
		return dst, fmt.Errorf("remoting: zstd: %w", err)
	}
	bp := batchBufs.Get().(*[]byte)
	items, err := AppendBatch((*bp)[:0], msgs)
	if err == nil {
		dst = enc.EncodeAll(items, dst)
	}
	if cap(items) <= maxPooledBatch { // a rare huge batch is left to the GC
		*bp = items[:0]
		batchBufs.Put(bp)
	}
	return dst, err
}

// maxPooledBatch is the largest buffer batchBufs keeps.
const maxPooledBatch = 1 << 20

// batchBufs holds the buffers AppendZstdBatch lays out a batch's items in before
// compressing them: *[]byte.
var batchBufs = sync.Pool{New: func() any { b := make([]byte, 0, 256<<10); return &b }}

// DecodeZstdBatch decompresses the body of a SEND_BATCH_ZSTD request into the batch items
// DecodeBatch reads. A body that would decompress to more than maxSize bytes is refused
// with an error wrapping mq.ErrMessageTooLarge, before more than maxSize bytes (or 64 KiB,
// when more) are written; one that is not zstd, or whose frames do not decode, with
// ErrMalformed.
func DecodeZstdBatch(body []byte, maxSize int) ([]byte, error) {
	maxSize = max(maxSize, 0)
	var h zstd.Header
	if err := h.Decode(body); err != nil {
		return nil, fmt.Errorf("%w: zstd batch: %v", ErrMalformed, err)
	}
	if h.HasFCS && h.FrameContentSize > uint64(maxSize) {
		return nil, fmt.Errorf("%w: zstd batch of %d bytes decompressed, at most %d", mq.ErrMessageTooLarge, h.FrameContentSize, maxSize)
	}
	dec, err := zstdDecoder(max(maxSize, minZstdLimit))
	if err != nil {
		return nil, fmt.Errorf("remoting: zstd: %w", err)
	}
	var dst []byte
	if h.HasFCS {
		dst = make([]byte, 0, h.FrameContentSize)
	}
	out, err := dec.DecodeAll(body, dst)
	switch {
	case errors.Is(err, zstd.ErrDecoderSizeExceeded), errors.Is(err, zstd.ErrWindowSizeExceeded):
		return nil, fmt.Errorf("%w: zstd batch decompresses past %d bytes", mq.ErrMessageTooLarge, maxSize)
	case err != nil:
		return nil, fmt.Errorf("%w: zstd batch: %v", ErrMalformed, err)
	case len(out) > maxSize:
		return nil, fmt.Errorf("%w: zstd batch of %d bytes decompressed, at most %d", mq.ErrMessageTooLarge, len(out), maxSize)
	case len(out) == 0:
		return nil, fmt.Errorf("%w: zstd batch: empty", ErrMalformed)
	}
	return out, nil
}

// minZstdLimit is the smallest limit a decoder is made with: a frame's window (1 KiB and
// up, whatever its content) must fit in it.
const minZstdLimit = 64 << 10

// zstdDecoder returns the decoder that refuses to decompress past maxSize bytes.
func zstdDecoder(maxSize int) (*zstd.Decoder, error) {
	if d, ok := zstdDecoders.Load(maxSize); ok {
		return d.(*zstd.Decoder), nil
	}
	d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(runtime.GOMAXPROCS(0)),
		zstd.WithDecoderMaxMemory(uint64(maxSize)), zstd.WithDecoderMaxWindow(uint64(maxSize)))
	if err != nil {
		return nil, err
	}
	if prev, loaded := zstdDecoders.LoadOrStore(maxSize, d); loaded {
		d.Close()
		return prev.(*zstd.Decoder), nil
	}
	return d, nil
}
