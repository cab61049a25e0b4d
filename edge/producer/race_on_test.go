//go:build race

package producer_test

// raceEnabled reports a -race build, whose pools drop items at random.
const raceEnabled = true
