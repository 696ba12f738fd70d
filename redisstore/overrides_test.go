package redisstore_test

import (
	"testing"

	"github.com/sluicerate/sluice/redisstore"
	"github.com/sluicerate/sluice/storetest"
)

// TestOverridesConformance runs the overrides' suite over the package's
// server, each case under a prefix of its own, with the suite's clock.
func TestOverridesConformance(t *testing.T) {
	storetest.RunOverrides(t, standalone(backends[0], redisstore.Config{}))
}

// TestOverridesClusterConformance runs it over the package's Redis
// Cluster: the three keys share one hash tag, so each script runs on one
// master.
func TestOverridesClusterConformance(t *testing.T) {
	storetest.RunOverrides(t, clusterOpener(sharedCluster(t)))
}
