package remoting

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"

	"github.com/edgemq/edgemq/edge/mq"
)

// AppendBatchItem appends one batch item (the layout AppendBatch writes, items back to
// back making a batch send's body) of a message given by its parts, as a broker holds
// them: flag, body, tags, keys and props, its other properties in key order. TAGS and
// KEYS are merged into the properties in key order in place of props' own, as AppendBatch
// does with a message's Tags and Keys; props' bytes are written as they are. Properties
// over MaxPropertiesLen bytes or an item over 2 GiB are an error wrapping
// mq.ErrMessageTooLarge; dst is then returned unchanged. It allocates nothing beyond
// growing dst.
func AppendBatchItem(dst []byte, flag int32, body, tags, keys []byte, props []Property) ([]byte, error) {
	at := len(dst)
	dst = binary.BigEndian.AppendUint32(dst, 0) // TOTALSIZE, set below
	dst = binary.BigEndian.AppendUint32(dst, 0) // MAGIC
	dst = binary.BigEndian.AppendUint32(dst, 0) // BODYCRC
	dst = binary.BigEndian.AppendUint32(dst, uint32(flag))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(body)))
	dst = append(dst, body...)
	propAt := len(dst)
	dst = append(dst, 0, 0)
	dst = appendPropertyParts(dst, tags, keys, props)
	propLen := len(dst) - propAt - 2
	if propLen > MaxPropertiesLen {
		return dst[:at], fmt.Errorf("%w: batch item: properties of %d bytes, at most %d", mq.ErrMessageTooLarge, propLen, MaxPropertiesLen)
	}
	if len(dst)-at > math.MaxInt32 {
		return dst[:at], fmt.Errorf("%w: batch item of %d bytes", mq.ErrMessageTooLarge, len(dst)-at)
	}
	binary.BigEndian.PutUint16(dst[propAt:], uint16(propLen))
	binary.BigEndian.PutUint32(dst[at:], uint32(len(dst)-at))
	return dst, nil
}

// appendPropertyParts appends props, in key order, with tags and keys (when not empty)
// merged in as TAGS and KEYS in place of props' own: appendPropertyList for parts held as
// bytes.
func appendPropertyParts(dst []byte, tags, keys []byte, props []Property) []byte {
	var pending [2]Property // KEYS before TAGS: key order
	np := 0
	if len(keys) > 0 {
		pending[np] = Property{Key: []byte(PropertyKeys), Value: keys}
		np++
	}
	if len(tags) > 0 {
		pending[np] = Property{Key: []byte(PropertyTags), Value: tags}
		np++
	}
	i := 0
	for _, p := range props {
		for i < np && string(pending[i].Key) < string(p.Key) {
			dst = appendPropertyBytes(dst, pending[i].Key, pending[i].Value)
			i++
		}
		if string(p.Key) == PropertyTags && len(tags) > 0 || string(p.Key) == PropertyKeys && len(keys) > 0 {
			continue
		}
		dst = appendPropertyBytes(dst, p.Key, p.Value)
	}
	for ; i < np; i++ {
		dst = appendPropertyBytes(dst, pending[i].Key, pending[i].Value)
	}
	return dst
}

func appendPropertyBytes(dst, k, v []byte) []byte {
	dst = append(dst, k...)
	dst = append(dst, propNameSep)
	dst = append(dst, v...)
	return append(dst, propEntrySep)
}

// batchItem is one batch item's fields, aliasing the body it was read from.
type batchItem struct {
	flag        int32
	body, props []byte
}

// readBatchItem reads the batch item at the start of b (body[off:]) as DecodeBatch does,
// with DecodeBatch's checks and errors (n is the item's number, for them); size is its
// length.
func readBatchItem(b []byte, n, off int) (it batchItem, size int, err error) {
	d := &decoder{b: b}
	sz := d.i32("TOTALSIZE")
	if d.err == nil && (sz < batchItemFixed || int64(sz) > int64(len(b))) {
		d.err = fmt.Errorf("%w: TOTALSIZE %d, %d bytes left", ErrMalformed, sz, len(b))
	}
	if d.err != nil {
		return it, 0, fmt.Errorf("batch message %d at byte %d: %w", n, off, d.err)
	}
	d.b = b[4:sz]
	d.i32("MAGIC")
	d.i32("BODYCRC")
	it.flag = d.i32("FLAG")
	it.body = d.take(int(d.i32("BODYLEN")), "body")
	it.props = d.take(int(d.i16("PROPLEN")), "properties")
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%w: %d bytes after the properties of an item of %d", ErrMalformed, len(d.b), sz)
	}
	if d.err != nil {
		return it, 0, fmt.Errorf("batch message %d at byte %d: %w", n, off, d.err)
	}
	return it, int(sz), nil
}

// DecodeBatchTopic is DecodeBatch for a broker, with the messages' Topic set to topic:
// the same checks, errors and messages, in a few allocations for the whole batch rather
// than several per message (the messages share one array, and their tags, keys and
// properties one string). A batch is checked whole before any message is made.
func DecodeBatchTopic(body []byte, topic string) ([]*mq.Message, error) {
	n, propBytes := 0, 0
	for off := 0; off < len(body); n++ {
		it, size, err := readBatchItem(body[off:], n, off)
		if err != nil {
			return nil, err
		}
		propBytes += len(it.props)
		off += size
	}
	if n == 0 {
		return nil, nil
	}
	msgs := make([]mq.Message, n)
	ptrs := make([]*mq.Message, n)
	var sb strings.Builder // every item's properties, back to back: one string
	sb.Grow(propBytes)
	for i, off := 0, 0; off < len(body); i++ { // checked above: no errors
		it, size, _ := readBatchItem(body[off:], i, off)
		m := &msgs[i]
		m.Topic, m.Flag = topic, it.flag
		if len(it.body) > 0 {
			m.Body = it.body
		}
		sb.Write(it.props)
		ptrs[i] = m
		off += size
	}
	all, at := sb.String(), 0
	for i, off := 0, 0; off < len(body); i++ {
		it, size, _ := readBatchItem(body[off:], i, off)
		SetMessageProperties(&msgs[i], all[at:at+len(it.props)])
		at += len(it.props)
		off += size
	}
	return ptrs, nil
}

// BatchItem is one item of a batch send's body, its fields aliasing the body: the
// producer's flag, the body, and the properties as they travel (name\x01value\x02 repeated,
// TAGS and KEYS among them; SetMessageProperties reads them).
type BatchItem struct {
	Flag       int32
	Body       []byte
	Properties []byte
}

// DecodeBatchItems appends the items of a batch send's body to dst, with DecodeBatch's
// checks and errors; the properties are not read. A batch is checked whole: on error dst is
// returned with nothing appended. A broker that stores the items without making messages of
// them reads a batch so, in no allocation beyond growing dst.
func DecodeBatchItems(dst []BatchItem, body []byte) ([]BatchItem, error) {
	n := len(dst)
	for off := 0; off < len(body); {
		it, size, err := readBatchItem(body[off:], len(dst)-n, off)
		if err != nil {
			clear(dst[n:]) // they alias body
			return dst[:n], err
		}
		dst = append(dst, BatchItem{Flag: it.flag, Body: it.body, Properties: it.props})
		off += size
	}
	return dst, nil
}
