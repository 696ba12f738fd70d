package xds

import "time"

// Delay is the wait of b before attempt failures+1, with rand.
func Delay(b Backoff, failures int, rand float64) time.Duration {
	return b.withDefaults().delay(failures, func() float64 { return rand })
}
