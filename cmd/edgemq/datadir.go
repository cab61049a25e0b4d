package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/store"
	"github.com/edgemq/edgemq/store/meta"
)

// access says what a command may do to its data dir.
type access int

const (
	// readOnly: the dir must hold a store. Nothing is created, and retention is off, so
	// that looking at a store never deletes from it.
	readOnly access = iota
	// readWrite: the dir must hold a store, which the command changes (offsets, topics).
	readWrite
	// create: a missing dir is created, with a new store in it.
	create
)

// errNoDataDir is returned for a data dir that does not exist when a command needs one.
var errNoDataDir = errors.New("no data dir")

// prepare checks the config's data dir for a command with access a, and adjusts the options
// for it: read-only commands keep retention off, and a data dir with small segments gets a
// message size limit they can hold.
func (c *config) prepare(a access) error {
	if a != create {
		if err := checkDataDir(c.dataDir); err != nil {
			return err
		}
	}
	if a == readOnly {
		c.store.MaxAge, c.store.MaxUsedRatio, c.store.MaxBytes = -1, -1, 0
	}
	c.fitMessageSize()
	return nil
}

// checkDataDir returns an error unless dir holds a store. It creates nothing.
func checkDataDir(dir string) error {
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w at %s: give the right -data DIR or -config FILE (serve, demo, send -create and topic create make a new one)", errNoDataDir, dir)
	}
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("data dir %s is not a directory", dir)
	}
	if _, err := os.Stat(filepath.Join(dir, meta.FileName)); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s is not an EdgeMQ data dir: it has no %s", dir, meta.FileName)
	} else if err != nil {
		return err
	}
	return nil
}

// recordSlack is what the store lets a record carry beyond the largest body: properties,
// keys, tags and its header (store's propertySlack). A segment must hold two records of the
// largest body, or the store refuses to open.
const recordSlack = 64 << 10

// fitMessageSize lowers the default largest message (broker.max_message_size, 4 MiB) to what
// the segments hold, when the config leaves it unset and the segments (store.segment_size,
// else the data dir's) are too small for the default: a dir made with 1 MiB segments then
// opens without naming max_message_size again.
func (c *config) fitMessageSize() {
	if c.broker.MaxMessageSize != 0 || c.store.MaxMessageSize != 0 {
		return
	}
	seg := c.store.SegmentSize
	if seg == 0 {
		seg = dirSegmentSize(c.dataDir)
	}
	fit := seg/2 - recordSlack
	if seg == 0 || fit <= 0 || fit >= int64(edge.DefaultOptions.MaxMessageSize) {
		return
	}
	c.broker.MaxMessageSize, c.store.MaxMessageSize = int(fit), int(fit)
}

// dirSegmentSize returns the size of the data dir's commitlog segments (files named
// %020d.log, all SegmentSize bytes: store/FORMAT.md), or 0 if it has none.
func dirSegmentSize(dir string) int64 {
	segs, _ := filepath.Glob(filepath.Join(dir, "commitlog", "[0-9]*.log"))
	for _, s := range segs {
		if fi, err := os.Stat(s); err == nil && fi.Mode().IsRegular() && fi.Size() > 0 {
			return fi.Size()
		}
	}
	return 0
}

// openBroker opens the broker of the config's data dir for a command with access a.
func (c *config) openBroker(a access) (*edge.Broker, error) {
	if err := c.prepare(a); err != nil {
		return nil, err
	}
	return edge.Open(c.dataDir, c.options())
}

// openStore opens the store alone, for a command with access a.
func (c *config) openStore(a access) (*store.Store, error) {
	if err := c.prepare(a); err != nil {
		return nil, err
	}
	so := *c.options().Store
	return store.Open(c.dataDir, &so)
}
