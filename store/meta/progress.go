package meta

import (
	bolt "go.etcd.io/bbolt"
)

// SetDelayProgress stores, for each delay level in progress, the offset in
// that level's schedule queue up to which messages have been delivered, all
// in one transaction. Levels not in progress keep their stored value.
func (s *Store) SetDelayProgress(progress map[int32]int64) error {
	const op = "set delay progress"
	for level := range progress {
		if level < 0 {
			return invalidKey(op, "delay level %d is negative", level)
		}
	}
	if len(progress) == 0 {
		return s.checkOpen()
	}
	return s.update(op, func(tx *bolt.Tx) error {
		b, err := bucket(tx, op, bucketDelay)
		if err != nil {
			return err
		}
		for level, off := range progress {
			if err := b.Put(levelKey(level), int64Value(off)); err != nil {
				return err
			}
		}
		return nil
	})
}

// DelayProgress returns the stored progress of every delay level.
func (s *Store) DelayProgress() (map[int32]int64, error) {
	const op = "delay progress"
	progress := make(map[int32]int64)
	err := s.view(op, func(tx *bolt.Tx) error {
		b, err := bucket(tx, op, bucketDelay)
		if err != nil {
			return err
		}
		return b.ForEach(func(k, v []byte) error {
			level, err := decodeLevelKey(k)
			if err != nil {
				return &CorruptError{Op: op, Bucket: bucketDelay, Key: clone(k), Err: err}
			}
			off, err := decodeInt64(v)
			if err != nil {
				return &CorruptError{Op: op, Bucket: bucketDelay, Key: clone(k), Err: err}
			}
			progress[level] = off
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return progress, nil
}

// PutUplinkCursors stores each cursor under (Name, Topic, QueueID),
// replacing any stored before, all in one transaction.
func (s *Store) PutUplinkCursors(cursors []UplinkCursor) error {
	const op = "put uplink cursors"
	for _, c := range cursors {
		if err := checkQueueKey(op, "uplink", c.Name, c.Topic, c.QueueID); err != nil {
			return err
		}
	}
	if len(cursors) == 0 {
		return s.checkOpen()
	}
	return s.update(op, func(tx *bolt.Tx) error {
		b, err := bucket(tx, op, bucketUplink)
		if err != nil {
			return err
		}
		for _, c := range cursors {
			if err := b.Put(queueKey(c.Name, c.Topic, c.QueueID), encode(c)); err != nil {
				return err
			}
		}
		return nil
	})
}

// UplinkCursors returns the cursors of the uplink called name, ordered by
// topic (shorter names first, then bytewise) and queue ID.
func (s *Store) UplinkCursors(name string) ([]UplinkCursor, error) {
	const op = "uplink cursors"
	if err := checkName(op, "uplink", name); err != nil {
		return nil, err
	}
	var cursors []UplinkCursor
	err := s.view(op, func(tx *bolt.Tx) error {
		b, err := bucket(tx, op, bucketUplink)
		if err != nil {
			return err
		}
		return scanPrefix(b, queuePrefix(name, ""), func(k, v []byte) error {
			c, err := decodeUplinkCursor(v)
			if err == nil {
				var (
					topic   string
					queueID int32
				)
				_, topic, queueID, err = decodeQueueKey(k)
				if err == nil && (c.Name != name || c.Topic != topic || c.QueueID != queueID) {
					err = errKeyName
				}
			}
			if err != nil {
				return &CorruptError{Op: op, Bucket: bucketUplink, Key: clone(k), Err: err}
			}
			cursors = append(cursors, c)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return cursors, nil
}
