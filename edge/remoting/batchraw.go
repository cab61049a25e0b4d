package remoting

import (
	"encoding/binary"
	"fmt"
	"math"

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
