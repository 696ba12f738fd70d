package launch

import (
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
)

// NewLogger returns a logger writing to w in format (text or json) at
// level (debug, info, warn or error).
func NewLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: use debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: use text or json", format)
}

// redisGCPercent is the garbage collector's target (GOGC) of sluice serve
// on a Redis store. Its heap is then the requests in flight, the deny
// cache and the configuration, a few MB, and the collector's default (100)
// runs a cycle every few MB allocated: under the service section of the
// bench (64 concurrent Envoy calls, domain two, gRPC) its background
// marking, its assists and the stacks it shrinks and the gRPC workers
// regrow took 13% of the CPU samples, 6% at 400, for about 20 MB more
// resident memory (39 → 60 MB under `wrk -c64` on /json). On the
// in-memory store, whose heap is its windows, the default stays.
const redisGCPercent = 400

// gcPercent returns the GOGC sluice serve sets and true, or false when it
// keeps the runtime's: when the environment sets GOGC, or the store is
// in memory.
func gcPercent(getenv func(string) string, redis bool) (int, bool) {
	if !redis || getenv("GOGC") != "" {
		return 0, false
	}
	return redisGCPercent, true
}

// setGCPercent applies gcPercent.
func setGCPercent(getenv func(string) string, redis bool) {
	if p, ok := gcPercent(getenv, redis); ok {
		debug.SetGCPercent(p)
	}
}
