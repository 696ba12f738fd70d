package redisstore

import (
	_ "embed"
)

// The package's Lua scripts. Those that read or write rule windows are
// window.lua, which lays out a window and decides a request, followed by
// their own main part; the schedule's scripts stand alone (see reserve.go).

//go:embed window.lua
var windowLua string

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

	reserveScript = newScript("reserve.lua", reserveLua)
	cancelScript  = newScript("cancel.lua", cancelLua)
)

// windowScript returns the script named name: window.lua, then main.
func windowScript(name, main string) *script {
	return newScript(name, windowLua+"\n-- "+name+"\n\n"+main)
}
