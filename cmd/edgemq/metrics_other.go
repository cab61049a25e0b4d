//go:build !linux

package main

// residentBytes is unknown off Linux: /metrics then has no process_resident_memory_bytes.
func residentBytes() (int64, bool) { return 0, false }
