package redisstore_test

import (
	"testing"

	"github.com/sluicerate/sluice/redisstore"
	"github.com/sluicerate/sluice/storetest"
)

// TestConformanceBudget runs the budget cases (slices of budgeted rules)
// over the package's server; they skip while the store does not implement
// store.Budgeter.
func TestConformanceBudget(t *testing.T) {
	storetest.RunBudget(t, standalone(backends[0], redisstore.Config{}))
}

// TestClusterConformanceBudget runs the budget cases over the Cluster
// store.
func TestClusterConformanceBudget(t *testing.T) {
	storetest.RunBudget(t, clusterOpener(sharedCluster(t)))
}
