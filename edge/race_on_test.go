//go:build race

package edge

// raceEnabled reports a -race build, whose instrumentation allocates.
const raceEnabled = true
