package meta

import (
	bolt "go.etcd.io/bbolt"
)

// PutTopic stores t under t.Name, replacing any stored before.
func (s *Store) PutTopic(t Topic) error {
	return s.putNamed("put topic", bucketTopics, "topic", t.Name, encode(t))
}

// Topic returns the topic stored under name, and false if there is none.
func (s *Store) Topic(name string) (Topic, bool, error) {
	return getNamed("topic", s, bucketTopics, "topic", name, decodeTopic, func(t Topic) string { return t.Name })
}

// Topics returns every stored topic, in name order (bytewise).
func (s *Store) Topics() ([]Topic, error) {
	return listNamed("topics", s, bucketTopics, decodeTopic, func(t Topic) string { return t.Name })
}

// DeleteTopic deletes the topic stored under name. It does not touch the
// topic's offsets.
func (s *Store) DeleteTopic(name string) error {
	return s.deleteNamed("delete topic", bucketTopics, "topic", name)
}

// PutGroup stores g under g.Name, replacing any stored before.
func (s *Store) PutGroup(g Group) error {
	return s.putNamed("put group", bucketGroups, "group", g.Name, encode(g))
}

// Group returns the subscription group stored under name, and false if
// there is none.
func (s *Store) Group(name string) (Group, bool, error) {
	return getNamed("group", s, bucketGroups, "group", name, decodeGroup, func(g Group) string { return g.Name })
}

// Groups returns every stored subscription group, in name order (bytewise).
func (s *Store) Groups() ([]Group, error) {
	return listNamed("groups", s, bucketGroups, decodeGroup, func(g Group) string { return g.Name })
}

// DeleteGroup deletes the subscription group stored under name. It does not
// touch the group's offsets; see DeleteOffsets.
func (s *Store) DeleteGroup(name string) error {
	return s.deleteNamed("delete group", bucketGroups, "group", name)
}

// putNamed stores value under name in bucket bkt.
func (s *Store) putNamed(op, bkt, what, name string, value []byte) error {
	if err := checkName(op, what, name); err != nil {
		return err
	}
	return s.update(op, func(tx *bolt.Tx) error {
		b, err := bucket(tx, op, bkt)
		if err != nil {
			return err
		}
		return b.Put([]byte(name), value)
	})
}

// deleteNamed deletes the entry under name in bucket bkt.
func (s *Store) deleteNamed(op, bkt, what, name string) error {
	if err := checkName(op, what, name); err != nil {
		return err
	}
	return s.update(op, func(tx *bolt.Tx) error {
		b, err := bucket(tx, op, bkt)
		if err != nil {
			return err
		}
		return b.Delete([]byte(name))
	})
}

// decodeNamed decodes the value v stored under key k of bucket bkt, whose
// name (as returned by nameOf) must equal the key.
func decodeNamed[T any](op, bkt string, k, v []byte, dec func([]byte) (T, error), nameOf func(T) string) (T, error) {
	r, err := dec(v)
	if err == nil && nameOf(r) != string(k) {
		err = errKeyName
	}
	if err != nil {
		var zero T
		return zero, &CorruptError{Op: op, Bucket: bkt, Key: clone(k), Err: err}
	}
	return r, nil
}

// getNamed returns the entry stored under name in bucket bkt.
func getNamed[T any](op string, s *Store, bkt, what, name string, dec func([]byte) (T, error), nameOf func(T) string) (T, bool, error) {
	var (
		r  T
		ok bool
	)
	if err := checkName(op, what, name); err != nil {
		return r, false, err
	}
	err := s.view(op, func(tx *bolt.Tx) error {
		b, err := bucket(tx, op, bkt)
		if err != nil {
			return err
		}
		v := b.Get([]byte(name))
		if v == nil {
			return nil
		}
		r, err = decodeNamed(op, bkt, []byte(name), v, dec, nameOf)
		ok = err == nil
		return err
	})
	if err != nil {
		var zero T
		return zero, false, err
	}
	return r, ok, nil
}

// listNamed returns every entry of bucket bkt in key order.
func listNamed[T any](op string, s *Store, bkt string, dec func([]byte) (T, error), nameOf func(T) string) ([]T, error) {
	var rs []T
	err := s.view(op, func(tx *bolt.Tx) error {
		b, err := bucket(tx, op, bkt)
		if err != nil {
			return err
		}
		return b.ForEach(func(k, v []byte) error {
			r, err := decodeNamed(op, bkt, k, v, dec, nameOf)
			if err != nil {
				return err
			}
			rs = append(rs, r)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return rs, nil
}
