// Package hooks lets sluice's server observe what a Limiter does beyond
// its decisions (the deny cache's answers, costs recorded over a limit),
// for its metrics and logs, without the root package offering it to every
// user.
package hooks

import "github.com/sluicerate/sluice/store"

// Hooks are the observers of a Limiter. The zero value observes nothing.
type Hooks struct {
	// OnCacheHit, when set, is told of each request the deny cache
	// answered, as the store is told of those it decides: req holds the
	// request's windows and, in Results, the statuses of the cached
	// decision. It runs on the request's goroutine and must not keep req.
	OnCacheHit func(req *store.Request)

	// OnOverLimit, when set, is told of each rate rule that a Record or a
	// lease's Settle counted a cost above: a cost no decision could ever
	// admit, most often a unit mistake (bytes against a limit in
	// kilobytes), which keeps the rule's key denied for most of a window.
	// c is the rule's window (Rule, Values, Limit) and must not be kept;
	// it runs on the caller's goroutine, after the store recorded the
	// cost.
	OnOverLimit func(policy string, c *store.Check, cost int64)
}

// install sets the hooks of a *sluice.Config; package sluice registers
// it (this package cannot name sluice's types: sluice imports it).
var install func(cfg any, h Hooks)

// Register is called by package sluice, once, to give Set its way in.
func Register(f func(cfg any, h Hooks)) { install = f }

// Set gives the Limiter made with cfg, a *sluice.Config, the hooks h.
func Set(cfg any, h Hooks) { install(cfg, h) }
