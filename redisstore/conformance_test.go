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
			storetest.Run(t, func(t *testing.T, now func() time.Time) storetest.Target {
				prefix := newPrefix()
				s := b.open(t, redisstore.Config{Prefix: prefix, Clock: now})
				c := admin(t)
				return storetest.Target{
					Store: s,
					TTLs: func(ctx context.Context) (map[string]time.Duration, error) {
						return ttls(ctx, c, prefix)
					},
				}
			})
		})
	}
}
