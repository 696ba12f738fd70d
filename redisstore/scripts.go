package redisstore

import (
	_ "embed"
)

// The package's Lua scripts. Each is prelude.lua (the clock and shared
// helpers), then, for those that read or write rule windows, window.lua (a
// window's layout, reads and writes) and decision.lua (a request decided
// over its rules' windows), then its own main part.

//go:embed prelude.lua
var preludeLua string

//go:embed window.lua
var windowLua string

//go:embed decision.lua
var decisionLua string

//go:embed decide.lua
var decideLua string

//go:embed batch.lua
var batchLua string

//go:embed rollback.lua
var rollbackLua string

//go:embed inspect.lua
var inspectLua string

//go:embed reserve.lua
var reserveLua string

//go:embed cancel.lua
var cancelLua string

var (
	// decideScript decides, peeks and records one request.
	decideScript = windowScript("decide.lua", decideLua)
	// batchScript decides several requests in one call (see batch.go).
	batchScript = windowScript("batch.lua", batchLua)
	// rollbackScript undoes a slot group's write (see crossslot.go).
	rollbackScript = windowScript("rollback.lua", rollbackLua)
	// inspectScript reads windows for Inspect.
	inspectScript = windowScript("inspect.lua", inspectLua)

	reserveScript = newScript("reserve.lua", preludeLua+"\n-- reserve.lua\n\n"+reserveLua)
	cancelScript  = newScript("cancel.lua", preludeLua+"\n-- cancel.lua\n\n"+cancelLua)
)

// windowScript returns the script named name: the prelude, window.lua,
// decision.lua, then main.
func windowScript(name, main string) *script {
	return newScript(name, preludeLua+"\n"+windowLua+"\n"+decisionLua+"\n-- "+name+"\n\n"+main)
}
