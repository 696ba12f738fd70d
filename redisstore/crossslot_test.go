package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicerate/sluice/redisstore"
	"github.com/sluicerate/sluice/storetest"
)

// TestConformancePerRule runs the conformance suite over the package's
// standalone server with SlotsPerRule: every policy whose rules go by
// different attributes is decided group by group, as on a cluster.
func TestConformancePerRule(t *testing.T) {
	storetest.Run(t, func(t *testing.T, now func() time.Time) storetest.Target {
		prefix := newPrefix()
		s := openRueidis(t, redisstore.Config{Prefix: prefix, Clock: now, Slots: redisstore.SlotsPerRule})
		c := admin(t)
		return storetest.Target{
			Store: s,
			TTLs: func(ctx context.Context) (map[string]time.Duration, error) {
				return ttls(ctx, c, prefix)
			},
		}
	})
}
