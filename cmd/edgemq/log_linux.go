package main

import (
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// isJournal reports whether f is the stream systemd connected to journald: JOURNAL_STREAM
// holds its device and inode numbers, "dev:inode" (systemd.exec(5)).
func isJournal(f *os.File) bool {
	dev, ino, ok := strings.Cut(os.Getenv("JOURNAL_STREAM"), ":")
	if !ok {
		return false
	}
	d, err1 := strconv.ParseUint(dev, 10, 64)
	i, err2 := strconv.ParseUint(ino, 10, 64)
	var st syscall.Stat_t
	if err1 != nil || err2 != nil || syscall.Fstat(int(f.Fd()), &st) != nil {
		return false
	}
	return uint64(st.Dev) == d && uint64(st.Ino) == i
}
