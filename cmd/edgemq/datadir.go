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
// for it: read-only commands keep retention off.
func (c *config) prepare(a access) error {
	if a != create {
		if err := checkDataDir(c.dataDir); err != nil {
			return err
		}
	}
	if a == readOnly {
		c.store.MaxAge, c.store.MaxUsedRatio, c.store.MaxBytes = -1, -1, 0
	}
	return nil
}

// checkDataDir returns an error unless dir holds a store. It creates nothing.
func checkDataDir(dir string) error {
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w at %s: give the right -data DIR or -config FILE (demo, send and topic create make a new one)", errNoDataDir, dir)
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
