//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package load

import "time"

// processCPU returns 0: the platform has no getrusage, and a run's CPU
// time is unknown.
func processCPU() time.Duration { return 0 }
