package admin

import (
	"context"
	"errors"
	"sync"
	"time"
)

// healthSeconds is how many seconds of store latency the admin view keeps.
const healthSeconds = 300

// storeHealth follows the store calls the server makes, for the admin
// view: their latency and failures per second, and the failures in a row.
// The circuit breaker's state is the Limiter's own (Limiter.Circuit). It
// is safe for concurrent use.
type storeHealth struct {
	mu       sync.Mutex
	sec      [healthSeconds]int64 // the Unix second of each bucket
	calls    [healthSeconds]int64
	errs     [healthSeconds]int64
	sumUS    [healthSeconds]int64 // total latency, µs
	maxUS    [healthSeconds]int64
	failures int // consecutive failed calls
	lastErr  string
}

// observe records a store call of op that took d and ended at now with
// err. Pings are timed but are not failures in a row (the breaker never
// sees them); a call whose caller gave up says nothing of the store.
func (h *storeHealth) observe(op string, d time.Duration, now time.Time, err error) {
	sec := now.Unix()
	i := int(((sec % healthSeconds) + healthSeconds) % healthSeconds)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.sec[i] != sec {
		h.sec[i], h.calls[i], h.errs[i], h.sumUS[i], h.maxUS[i] = sec, 0, 0, 0, 0
	}
	us := d.Microseconds()
	h.calls[i]++
	h.sumUS[i] += us
	h.maxUS[i] = max(h.maxUS[i], us)
	if err != nil {
		h.errs[i]++
		h.lastErr = err.Error()
	}
	if op == "ping" || errors.Is(err, context.Canceled) {
		return
	}
	if err == nil {
		h.failures = 0
		return
	}
	h.failures++
}

// healthJSON is the answer of GET /api/v1/health.
type healthJSON struct {
	Now time.Time `json:"now"`

	// Store describes the store: "redis" or "memory".
	Store string `json:"store"`

	// Ping is the round trip of a ping made for this answer, in ms, and
	// PingError its error ("" when the store answered).
	PingMS    float64 `json:"ping_ms"`
	PingError string  `json:"ping_error,omitempty"`

	// Breaker is the circuit breaker's state: closed (calls go to the
	// store), open (they do not, for the cool-down) or half_open (the
	// next call probes the store); ConsecutiveFailures the failed calls in
	// a row that brought it there.
	Breaker             string `json:"breaker"`
	ConsecutiveFailures int    `json:"consecutive_failures"`
	LastError           string `json:"last_error,omitempty"`

	// Degraded counts the decisions made by the failure policy since the
	// server started, and DegradedLastMinute those of the last 60 s.
	Degraded           int64 `json:"degraded"`
	DegradedLastMinute int64 `json:"degraded_last_minute"`

	// Latency holds, per second from Start, the store calls made, the
	// failed ones, and their mean and largest latency in ms.
	Start   int64         `json:"start"`
	Latency []latencyJSON `json:"latency"`
}

// latencyJSON is one second of store calls.
type latencyJSON struct {
	Calls  int64   `json:"calls"`
	Errors int64   `json:"errors"`
	MeanMS float64 `json:"mean_ms"`
	MaxMS  float64 `json:"max_ms"`
}

// snapshot fills h's part of a healthJSON at now, over the last seconds.
func (h *storeHealth) snapshot(out *healthJSON, now time.Time, seconds int) {
	seconds = min(max(seconds, 1), healthSeconds)
	end := now.Unix()
	out.Start = end - int64(seconds) + 1
	out.Latency = make([]latencyJSON, seconds)
	h.mu.Lock()
	defer h.mu.Unlock()
	for j := range seconds {
		sec := out.Start + int64(j)
		i := int(((sec % healthSeconds) + healthSeconds) % healthSeconds)
		if h.sec[i] != sec || h.calls[i] == 0 {
			continue
		}
		out.Latency[j] = latencyJSON{Calls: h.calls[i], Errors: h.errs[i],
			MeanMS: float64(h.sumUS[i]) / float64(h.calls[i]) / 1000, MaxMS: float64(h.maxUS[i]) / 1000}
	}
	out.ConsecutiveFailures, out.LastError = h.failures, h.lastErr
}
