// Package zbatch encodes and decodes the body of SEND_BATCH_ZSTD (remoting.SendBatchZstd),
// EdgeMQ's batch send whose items are compressed whole as one zstd frame: Append for a
// client (pass it to remoting.Client.SendBatchWith), Decode for a broker, bounded against
// decompression bombs. It is apart from package remoting so that a program with the
// remoting client links zstd only when it sends zstd batches.
package zbatch

import (
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/remoting"
	"github.com/klauspost/compress/zstd"
)

// zstdEncoder compresses batch bodies; EncodeAll may be called from any goroutine.
var zstdEncoder = sync.OnceValues(func() (*zstd.Encoder, error) {
	return zstd.NewWriter(nil, zstd.WithEncoderConcurrency(runtime.GOMAXPROCS(0)),
		zstd.WithEncoderLevel(zstd.SpeedFastest))
})

// zstdDecoders holds one decoder per size limit (a server has one): *zstd.Decoder by int.
var zstdDecoders sync.Map

// Append appends to dst the body of a SEND_BATCH_ZSTD request of msgs: their batch items
// (remoting.AppendBatch) compressed as one zstd frame (which records its decompressed size,
// but for the smallest).
func Append(dst []byte, msgs []*mq.Message) ([]byte, error) {
	enc, err := zstdEncoder()
	if err != nil {
		return dst, fmt.Errorf("remoting: zstd: %w", err)
	}
	bp := batchBufs.Get().(*[]byte)
	items, err := remoting.AppendBatch((*bp)[:0], msgs)
	if err == nil {
		dst = enc.EncodeAll(items, dst)
	}
	if cap(items) <= maxPooledBatch { // a rare huge batch is left to the GC
		*bp = items[:0]
		batchBufs.Put(bp)
	}
	return dst, err
}

// AppendItems appends to dst the body of a SEND_BATCH_ZSTD request whose batch items are
// laid out already (remoting.AppendBatchItem, back to back): items compressed as one zstd
// frame. items is not changed or kept.
func AppendItems(dst, items []byte) ([]byte, error) {
	enc, err := zstdEncoder()
	if err != nil {
		return dst, fmt.Errorf("remoting: zstd: %w", err)
	}
	return enc.EncodeAll(items, dst), nil
}

// maxPooledBatch is the largest buffer batchBufs keeps.
const maxPooledBatch = 1 << 20

// batchBufs holds the buffers Append lays out a batch's items in before
// compressing them: *[]byte.
var batchBufs = sync.Pool{New: func() any { b := make([]byte, 0, 256<<10); return &b }}

// Decode decompresses the body of a SEND_BATCH_ZSTD request into the batch items
// remoting.DecodeBatch reads. A body that would decompress to more than maxSize bytes is refused
// with an error wrapping mq.ErrMessageTooLarge, before more than maxSize bytes (or 64 KiB,
// when more) are written; one that is not zstd, or whose frames do not decode, with
// remoting.ErrMalformed.
func Decode(body []byte, maxSize int) ([]byte, error) {
	maxSize = max(maxSize, 0)
	var h zstd.Header
	if err := h.Decode(body); err != nil {
		return nil, fmt.Errorf("%w: zstd batch: %v", remoting.ErrMalformed, err)
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
		return nil, fmt.Errorf("%w: zstd batch: %v", remoting.ErrMalformed, err)
	case len(out) > maxSize:
		return nil, fmt.Errorf("%w: zstd batch of %d bytes decompressed, at most %d", mq.ErrMessageTooLarge, len(out), maxSize)
	case len(out) == 0:
		return nil, fmt.Errorf("%w: zstd batch: empty", remoting.ErrMalformed)
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
