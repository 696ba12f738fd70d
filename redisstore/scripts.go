package redisstore

import (
	_ "embed"
	"strings"
)

// The package's Lua scripts. Each is prelude.lua (the clock and shared
// helpers), then, for those that read or write rule windows, the
// algorithms, then (for those that decide) decision.lua (a request decided
// over its rules' windows), then its own main part. Each algorithm's
// state is read, written and adjusted by its codec alone: window.lua the
// exact log's (log.lua holds its checks), gcra.lua, counter.lua,
// concurrency.lua, periodic.lua and credits.lua the others'.

//go:embed prelude.lua
var preludeLua string

//go:embed window.lua
var windowLua string

//go:embed log.lua
var logLua string

//go:embed gcra.lua
var gcraLua string

//go:embed counter.lua
var counterLua string

//go:embed concurrency.lua
var concurrencyLua string

//go:embed slices.lua
var slicesLua string

//go:embed periodic.lua
var periodicLua string

//go:embed credits.lua
var creditsLua string

//go:embed decision.lua
var decisionLua string

//go:embed budget.lua
var budgetLua string

//go:embed lease.lua
var leaseLua string

//go:embed finish.lua
var finishLua string

//go:embed decide.lua
var decideLua string

//go:embed rollback.lua
var rollbackLua string

//go:embed inspect.lua
var inspectLua string

//go:embed reserve.lua
var reserveLua string

//go:embed cancel.lua
var cancelLua string

//go:embed credit.lua
var creditLua string

//go:embed usage.lua
var usageLua string

var (
	// decideScripts decide, peek and record one request or a batch of
	// them (see batch.go).
	decideScripts = windowScripts("decide.lua", decideLua)
	// rollbackScript undoes a slot group's write (see crossslot.go).
	rollbackScript = readerScript("rollback.lua", rollbackLua)
	// inspectScript reads windows for Inspect.
	inspectScript = readerScript("inspect.lua", inspectLua)

	reserveScript = newScript("reserve.lua", preludeLua+"\n-- reserve.lua\n\n"+reserveLua)
	cancelScript  = newScript("cancel.lua", preludeLua+"\n-- cancel.lua\n\n"+cancelLua)

	// leaseScript decides a request and holds its lease; finishScript
	// releases, settles or extends one (lease.go): where the server has
	// no functions, or through an Evaler other than rueidis (function.go
	// runs them as functions).
	leaseScript  = windowScripts("lease.lua", leaseLua).all
	finishScript = windowScripts("finish.lua", finishLua).all

	// budgetScript returns, decides and leases slices of budgeted windows
	// (budget.go), as budgetFunction where the server has functions.
	budgetScript = windowScripts("budget.lua", budgetLua).all

	// creditScript reads or changes a credits balance (Store.Credit), and
	// usageScript reads a calendar quota's periods (Store.Usage), as
	// creditFunction and usageFunction where the server has functions.
	creditScript = windowScripts("credit.lua", creditLua).all
	usageScript  = windowScripts("usage.lua", usageLua).all

	// allScripts are every script a Store runs, which Warm loads: the
	// runtime overrides' two too (overrides.go), which every server polls
	// from its start.
	allScripts = []*script{decideScripts.log, decideScripts.all, rollbackScript, inspectScript, reserveScript, cancelScript, leaseScript, finishScript, budgetScript,
		creditScript, usageScript, newScript("overrides_read.lua", overridesReadLua), newScript("overrides_write.lua", overridesWriteLua)}
	// allSHAs are their SHA-1s, in the same order.
	allSHAs = func() []string {
		shas := make([]string, len(allScripts))
		for i, sc := range allScripts {
			shas[i] = sc.sha1
		}
		return shas
	}()
)

// scriptPair is a script that reads or writes rule windows, in two builds:
// log, for requests whose rules all keep the exact log, and all, with every
// algorithm. Lua makes a script's functions anew on every call, and each
// costs Redis time whether it runs or not: the log's build keeps the
// default algorithm's calls from paying for the others.
type scriptPair struct{ log, all *script }

// windowScripts returns the script named name in its two builds: the
// prelude, the algorithms (window.lua and log.lua, the log; then gcra.lua,
// counter.lua, concurrency.lua, slices.lua (a budgeted window's),
// periodic.lua and credits.lua, or in
// the log's build a declaration that they are absent: a budgeted window's
// shape is never the log's), decision.lua, then main.
func windowScripts(name, main string) scriptPair {
	build := func(algorithms ...string) *script {
		parts := append(append([]string{preludeLua, windowLua, logLua}, algorithms...), decisionLua, "-- "+name+"\n\n"+main)
		return newScript(name, strings.Join(parts, "\n"))
	}
	return scriptPair{
		log: build("local gcra, counter, concurrency, slices, periodic, credits -- absent: this build's rules all keep the log\n"),
		all: build(gcraLua, counterLua, concurrencyLua, slicesLua, periodicLua, creditsLua),
	}
}

// readerScript returns the script named name that reads or adjusts
// windows with the algorithms' codecs, deciding nothing: the prelude, the
// codecs (window.lua and log.lua, gcra.lua, counter.lua, concurrency.lua,
// slices.lua, which builds on the log's steps, periodic.lua, credits.lua),
// then main.
func readerScript(name, main string) *script {
	return newScript(name, strings.Join([]string{preludeLua, windowLua, logLua, gcraLua, counterLua, concurrencyLua, slicesLua, periodicLua, creditsLua, "-- " + name + "\n\n" + main}, "\n"))
}

// forShape returns the build for a request of shape sh (appendShape): the
// log's unless a rule has another algorithm.
func (p scriptPair) forShape(sh string) *script {
	if shapeIsLog(sh) {
		return p.log
	}
	return p.all
}
