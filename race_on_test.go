//go:build race

package sluice_test

// raceEnabled reports that the race detector is on: sync.Pool then drops
// some of what it is given, and allocation counts mean nothing.
const raceEnabled = true
