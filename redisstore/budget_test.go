package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/sluicerate/sluice/internal/redistest"
	"github.com/sluicerate/sluice/redisstore"
	"github.com/sluicerate/sluice/storetest"
)

// TestConformanceBudget runs the budget cases (slices of budgeted rules)
// over each client on the package's server, on the suite's manual clock.
func TestConformanceBudget(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			storetest.RunBudget(t, standalone(b, redisstore.Config{}))
		})
	}
}

// TestConformanceBudgetPerRule runs the budget cases with a hash tag per
// rule: a policy whose budgeted rule and per-key rules fall in different
// slot groups leases in parts (budget.go).
func TestConformanceBudgetPerRule(t *testing.T) {
	storetest.RunBudget(t, standalone(backends[0], redisstore.Config{Slots: redisstore.SlotsPerRule}))
}

// TestClusterConformanceBudget runs the budget cases over the Cluster
// store, with each slot layout.
func TestClusterConformanceBudget(t *testing.T) {
	c := sharedCluster(t)
	t.Run("shared", func(t *testing.T) {
		storetest.RunBudget(t, clusterOpener(c))
	})
	t.Run("per-rule", func(t *testing.T) {
		storetest.RunBudget(t, func(t *testing.T, now func() time.Time) storetest.Target {
			prefix := newPrefix()
			s := openCluster(t, redisstore.Config{Prefix: prefix, Clock: now, Slots: redisstore.SlotsPerRule})
			return storetest.Target{Store: s, TTLs: func(context.Context) (map[string]time.Duration, error) {
				return clusterTTLs(c, prefix)
			}}
		})
	})
}

// TestSentinelConformanceBudget runs the budget cases over a Sentinel
// deployment of the test's own: the store finds the master through the
// sentinels and leases from it as from a standalone server.
func TestSentinelConformanceBudget(t *testing.T) {
	st := redistest.StartSentinel(t)
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{st.Master().Addr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	storetest.RunBudget(t, func(t *testing.T, now func() time.Time) storetest.Target {
		prefix := newPrefix()
		s, err := redisstore.New(redisstore.Config{Mode: redisstore.Sentinel, Addrs: st.Addrs(),
			MasterName: redistest.SentinelMaster, Prefix: prefix, Clock: now})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return storetest.Target{Store: s, TTLs: func(ctx context.Context) (map[string]time.Duration, error) {
			return ttls(ctx, c, prefix)
		}}
	})
}
