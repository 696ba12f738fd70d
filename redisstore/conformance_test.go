package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicerate/sluice/redisstore"
	"github.com/sluicerate/sluice/storetest"
)

// TestConformance runs the store conformance suite over each client, every
// case under its own key prefix on the package's server, with the suite's
// manual clock in place of Redis's TIME.
func TestConformance(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			storetest.Run(t, standalone(b, redisstore.Config{}))
		})
	}
}

// TestConformanceDenyCache runs the suite with the Limiter's deny cache on,
// over the package's server with each slot layout: one slot group per
// decision, and one per rule (cross-slot decisions that roll back).
func TestConformanceDenyCache(t *testing.T) {
	for _, layout := range []struct {
		name  string
		slots redisstore.Slots
	}{{"shared", redisstore.SlotsShared}, {"per-rule", redisstore.SlotsPerRule}} {
		t.Run(layout.name, func(t *testing.T) {
			storetest.RunDenyCache(t, standalone(backends[0], redisstore.Config{Slots: layout.slots}))
		})
	}
}

// standalone opens each case's store with cfg over backend b on the
// package's server, under a prefix of its own.
func standalone(b backend, cfg redisstore.Config) storetest.Opener {
	return func(t *testing.T, now func() time.Time) storetest.Target {
		prefix := newPrefix()
		cfg.Prefix, cfg.Clock = prefix, now
		s := b.open(t, cfg)
		c := admin(t)
		return storetest.Target{
			Store: s,
			TTLs: func(ctx context.Context) (map[string]time.Duration, error) {
				return ttls(ctx, c, prefix)
			},
		}
	}
}
