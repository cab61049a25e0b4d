package meta

import (
	"encoding/binary"

	bolt "go.etcd.io/bbolt"
)

// Offset is a consumer group's committed offset in one queue of a topic.
type Offset struct {
	// Group is the consumer group; 1..MaxNameLen bytes.
	Group string
	// Topic is the topic; 1..MaxNameLen bytes.
	Topic string
	// QueueID is the queue within the topic; it must not be negative.
	QueueID int32
	// Offset is the next queue offset the group will consume.
	Offset int64
}

// SetOffsets stores each update, replacing the offset stored for the same
// (Group, Topic, QueueID), all in one transaction: on error none is stored.
// For repeated keys the last update wins.
func (s *Store) SetOffsets(updates []Offset) error {
	const op = "set offsets"
	for _, u := range updates {
		if err := checkQueueKey(op, "group", u.Group, u.Topic, u.QueueID); err != nil {
			return err
		}
	}
	if len(updates) == 0 {
		return s.checkOpen()
	}
	return s.update(op, func(tx *bolt.Tx) error {
		b, err := bucket(tx, op, bucketOffsets)
		if err != nil {
			return err
		}
		// One buffer holds every key and value; bbolt needs them until commit.
		size := 0
		for _, u := range updates {
			size += 2*nameLenSize + len(u.Group) + len(u.Topic) + queueIDSize + int64Size
		}
		buf := make([]byte, 0, size)
		for _, u := range updates {
			start := len(buf)
			buf = appendQueueKey(buf, u.Group, u.Topic, u.QueueID)
			mid := len(buf)
			buf = binary.BigEndian.AppendUint64(buf, uint64(u.Offset))
			if err := b.Put(buf[start:mid:mid], buf[mid:]); err != nil {
				return err
			}
		}
		return nil
	})
}

// Offset returns the offset stored for (group, topic, queueID), and false if
// there is none.
func (s *Store) Offset(group, topic string, queueID int32) (int64, bool, error) {
	const op = "offset"
	if err := checkQueueKey(op, "group", group, topic, queueID); err != nil {
		return 0, false, err
	}
	var (
		off int64
		ok  bool
	)
	err := s.view(op, func(tx *bolt.Tx) error {
		b, err := bucket(tx, op, bucketOffsets)
		if err != nil {
			return err
		}
		k := queueKey(group, topic, queueID)
		v := b.Get(k)
		if v == nil {
			return nil
		}
		if off, err = decodeInt64(v); err != nil {
			return &CorruptError{Op: op, Bucket: bucketOffsets, Key: k, Err: err}
		}
		ok = true
		return nil
	})
	if err != nil {
		return 0, false, err
	}
	return off, ok, nil
}

// Offsets returns every stored offset, in key order (see doc.go), to load
// the broker's offset table.
func (s *Store) Offsets() ([]Offset, error) {
	const op = "offsets"
	var offs []Offset
	err := s.view(op, func(tx *bolt.Tx) error {
		b, err := bucket(tx, op, bucketOffsets)
		if err != nil {
			return err
		}
		return b.ForEach(func(k, v []byte) error {
			group, topic, queueID, err := decodeQueueKey(k)
			if err != nil {
				return &CorruptError{Op: op, Bucket: bucketOffsets, Key: clone(k), Err: err}
			}
			off, err := decodeInt64(v)
			if err != nil {
				return &CorruptError{Op: op, Bucket: bucketOffsets, Key: clone(k), Err: err}
			}
			offs = append(offs, Offset{Group: group, Topic: topic, QueueID: queueID, Offset: off})
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return offs, nil
}

// DeleteOffsets deletes the offsets of group in topic, or in every topic when
// topic is "".
func (s *Store) DeleteOffsets(group, topic string) error {
	const op = "delete offsets"
	if err := checkName(op, "group", group); err != nil {
		return err
	}
	if topic != "" {
		if err := checkName(op, "topic", topic); err != nil {
			return err
		}
	}
	return s.update(op, func(tx *bolt.Tx) error {
		b, err := bucket(tx, op, bucketOffsets)
		if err != nil {
			return err
		}
		var keys [][]byte
		scanPrefix(b, queuePrefix(group, topic), func(k, _ []byte) error {
			keys = append(keys, clone(k))
			return nil
		})
		for _, k := range keys {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
}

// clone copies a key or value out of a transaction's memory.
func clone(b []byte) []byte { return append([]byte(nil), b...) }
