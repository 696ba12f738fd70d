package redisstore

import (
	"strings"
	"testing"
	"time"

	"github.com/sluicerate/sluice/store"
)

// TestBudgetedShapes checks that a budgeted log or GCRA window is a rule
// kind of its own, decided by the full build, while a plain log's request
// keeps the log's build, which has no slice steps.
func TestBudgetedShapes(t *testing.T) {
	req := func(alg store.Algorithm, budget time.Duration) *store.Request {
		return &store.Request{Policy: "p", Checks: []store.Check{{Rule: "r", Algorithm: alg, Limit: 10, Burst: 10, Window: time.Minute, Cost: 1, Budget: budget}}}
	}
	for _, c := range []struct {
		alg    store.Algorithm
		budget time.Duration
		kind   uint32
		log    bool
	}{
		{store.Log, 0, 0, true},
		{store.Log, time.Second, 4, false},
		{store.GCRA, 0, 1, false},
		{store.GCRA, time.Second, 5, false},
		{store.SlidingCounter, time.Second, 2, false},
	} {
		sh := shapeOf(0, req(c.alg, c.budget), 0, firstChecks(1))
		if k := le32(sh, shapeHead); k != c.kind || shapeIsLog(sh) != c.log {
			t.Errorf("algorithm %v budget %v: kind %d, log's build %v; want %d, %v", c.alg, c.budget, k, shapeIsLog(sh), c.kind, c.log)
		}
	}
	if strings.Contains(decideScripts.log.src, "local function slices()") {
		t.Error("the log's build of decide.lua holds slices.lua")
	}
	if !strings.Contains(decideScripts.all.src, "local function slices()") || !strings.Contains(budgetScript.src, "local function slices()") {
		t.Error("the full build of decide.lua or budget.lua lacks slices.lua")
	}
}

// TestBudgetRefusesBadAsks checks that asks and returns the contract rules
// out are errors, before anything is sent.
func TestBudgetRefusesBadAsks(t *testing.T) {
	r := &store.Request{Policy: "p", Checks: []store.Check{{Rule: "r", Limit: 10, Window: time.Minute, Cost: 1, Budget: time.Second}, {Rule: "plain", Limit: 10, Window: time.Minute, Cost: 1}}}
	for _, b := range []store.BudgetRequest{
		{Asks: []store.SliceAsk{{Check: 2, Want: 1, ID: "a"}}},
		{Asks: []store.SliceAsk{{Check: 1, Want: 1, ID: "a"}}},
		{Asks: []store.SliceAsk{{Check: 0, Want: 0, ID: "a"}}},
		{Asks: []store.SliceAsk{{Check: 0, Want: 1}}},
		{Returns: []store.SliceReturn{{Check: r.Checks[0], ID: "a", Granted: 1, Used: 2}}},
	} {
		if err := store.CheckBudget(r, &b); err == nil {
			t.Errorf("store.CheckBudget(%+v) = nil, want an error", b)
		}
	}
	ok := store.BudgetRequest{Asks: []store.SliceAsk{{Check: 0, Want: 3, ID: "a"}}, Returns: []store.SliceReturn{{Check: r.Checks[0], ID: "b", Granted: 2, Used: 1}}}
	if err := store.CheckBudget(r, &ok); err != nil {
		t.Errorf("store.CheckBudget(%+v) = %v, want nil", ok, err)
	}
}
