package memstore

import (
	"testing"

	"github.com/sluicerate/sluice/storetest"
)

func TestOverridesConformance(t *testing.T) {
	storetest.RunOverrides(t, openConformance)
}
