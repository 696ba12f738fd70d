package redisstore

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/redis/rueidis"
)

// decide.lua, lease.lua and finish.lua as Redis functions. A script run by
// EVALSHA runs its whole source on every call: it makes every helper
// function, and every table of steps, anew, and the garbage collector
// sweeps them after. A function library (Redis 7 and later) runs its
// source once, when it is loaded, and a call of its function runs that
// function alone. Over rueidis the store calls these three as functions
// (FCALL) of one library where the server has functions, and as scripts
// where it does not (Redis 6 and earlier, or a user the server's ACL
// forbids FUNCTION LOAD or FCALL).
//
// The library's name and its functions' carry the hash of its source, so
// that processes of different versions sharing a server each call their
// own; loading never replaces a library. A server that lost its functions
// (a restart without persistence, FUNCTION FLUSH) answers "Function not
// found": the function did not run, so the store loads the library on that
// node and calls it again, once, as it sends a script's source after
// NOSCRIPT. Functions are replicated and persisted
// like data, so a replica promoted by a failover has them.

// library is a function library: its functions share the helpers its
// head makes.
type library struct {
	name, src string
}

// function is one function of a library.
type function struct {
	lib  *library
	name string
}

// part is a main part of a library: a script's own Lua, after the shared
// helpers.
type part struct{ name, main string }

// The library and its functions: the full build of the scripts (every
// algorithm; a function library makes its helpers once, so the log's build
// saves nothing here), with each script's main part as the body of its
// function. decide.lua and lease.lua start each call by dropping the
// windows' state a call caches (window.lua's cache), since the helpers'
// tables outlive a call; finish.lua reads none of it.
var (
	sluiceLibrary, sluiceFunctions = newLibrary(strings.Join([]string{preludeLua, windowLua, logLua, gcraLua, counterLua, concurrencyLua, slicesLua, periodicLua, creditsLua, decisionLua}, "\n"),
		part{"decide", decideLua}, part{"lease", leaseLua}, part{"finish", finishLua}, part{"budget", budgetLua},
		part{"credit", creditLua}, part{"usage", usageLua})
	decideFunction, leaseFunction, finishFunction, budgetFunction = sluiceFunctions[0], sluiceFunctions[1], sluiceFunctions[2], sluiceFunctions[3]
	creditFunction, usageFunction                                 = sluiceFunctions[4], sluiceFunctions[5]
)

// newLibrary returns the library whose functions, each named after its
// part and the hash of the library's source, run their part's main with
// KEYS and ARGV, after the helpers in head. A library's source runs where
// only the redis table exists (no string, math or struct), so head runs at
// the first call of any of its functions, which keeps the helpers it makes
// for every call after it.
func newLibrary(head string, parts ...part) (*library, []*function) {
	h := sha1.New()
	h.Write([]byte(head))
	for _, p := range parts {
		h.Write([]byte("\n-- " + p.name + ".lua\n" + p.main))
	}
	id := hex.EncodeToString(h.Sum(nil)[:8])
	l := &library{name: "sluice_" + id}
	fns := make([]*function, len(parts))
	var b strings.Builder
	b.WriteString("#!lua name=" + l.name + "\n" +
		"local mains -- made at the first call, by build\n" +
		"local function build()\n" + head + "\nlocal fns = {}\n")
	for _, p := range parts {
		b.WriteString("\n-- " + p.name + ".lua\n\nfns." + p.name + " = function(KEYS, ARGV)\n" + p.main + "\nend\n")
	}
	b.WriteString("return fns\nend\n")
	for i, p := range parts {
		fns[i] = &function{lib: l, name: "sluice_" + p.name + "_" + id}
		b.WriteString("\nredis.register_function{function_name = '" + fns[i].name + "', callback = function(KEYS, ARGV)\n" +
			"  mains = mains or build()\n  return mains." + p.name + "(KEYS, ARGV)\nend, flags = {'allow-cross-slot-keys'}}\n")
	}
	l.src = b.String()
	return l, fns
}

// functions says whether a store calls its library's functions: not yet
// known, yes, or no (the server has none, or refuses them). It is shared by
// the copies of a store's rueidisEvaler.
type functions struct {
	off atomic.Bool
}

// errFunctionNotFound reports whether err is Redis's answer to FCALL of a
// function it does not have.
func errFunctionNotFound(err error) bool {
	rerr, ok := rueidis.IsRedisErr(err)
	return ok && strings.Contains(rerr.Error(), "Function not found")
}

// errLibraryLoaded reports whether err is Redis's answer to FUNCTION LOAD of
// a library it has already.
func errLibraryLoaded(err error) bool {
	rerr, ok := rueidis.IsRedisErr(err)
	return ok && strings.Contains(rerr.Error(), "already exists")
}

// errReadOnly reports whether err is a replica's refusal of a write.
func errReadOnly(err error) bool {
	rerr, ok := rueidis.IsRedisErr(err)
	return ok && isReadOnly(rerr)
}

// errNoFunctions reports whether err says that the server cannot run
// functions for this client: an unknown command (Redis 6 and earlier) or
// one the ACL forbids. Either way the command did not run.
func errNoFunctions(err error) bool {
	rerr, ok := rueidis.IsRedisErr(err)
	if !ok {
		return false
	}
	msg := rerr.Error()
	return strings.HasPrefix(msg, "NOPERM") || strings.Contains(msg, "unknown command") || strings.Contains(msg, "unknown subcommand")
}

// decideMessage runs decide.lua with keys and args, as callMessage does.
func (e rueidisEvaler) decideMessage(ctx context.Context, sc *script, keys, args []string, route string) (rueidis.RedisMessage, error) {
	return e.callMessage(ctx, decideFunction, sc, keys, args, route)
}

// callMessage runs f with keys and args, as a function where the server
// has functions, else as the script sc (EVALSHA, then EVAL on NOSCRIPT),
// and returns its reply. A call with no keys declared (a batch
// of several slots, its keys among args) goes to the node of route's slot.
// Each command goes through raw, so over a Cluster it follows the store's
// slot map and its first MOVED (shards.go).
func (e rueidisEvaler) callMessage(ctx context.Context, f *function, sc *script, keys, args []string, route string) (rueidis.RedisMessage, error) {
	if route == "" {
		route = keys[0]
	}
	send := func(build func() rueidis.Completed) (rueidis.RedisMessage, error) {
		if len(keys) > 0 {
			return e.raw(ctx, build)
		}
		return e.raw(ctx, func() rueidis.Completed { return build().SetSlot(route) })
	}
	if e.fns != nil && !e.fns.off.Load() {
		fcall := func() (rueidis.RedisMessage, error) {
			return send(func() rueidis.Completed {
				return e.client.B().Fcall().Function(f.name).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()
			})
		}
		msg, err := fcall()
		unsupported := errNoFunctions(err)
		if errFunctionNotFound(err) {
			if unsupported, err = e.loadLibrary(ctx, f.lib, route); err == nil {
				msg, err = fcall()
				unsupported = errNoFunctions(err)
			}
		}
		switch {
		case unsupported:
			e.fns.off.Store(true) // the call did not run: as a script from now on
		case err == nil:
			return msg, nil
		default:
			return msg, err
		}
	}
	msg, err := send(func() rueidis.Completed {
		return e.client.B().Evalsha().Sha1(sc.sha1).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()
	})
	if errors.Is(err, ErrNoScript) {
		msg, err = send(func() rueidis.Completed {
			return e.client.B().Eval().Script(sc.src).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()
		})
	}
	return msg, err
}

// loadLibrary loads l on the node that serves key, where a call just found
// no function (the node the call went to: by the store's slot map over a
// Cluster, as the call). It reports whether the node cannot load functions
// for this client (unknown command, or forbidden).
func (e rueidisEvaler) loadLibrary(ctx context.Context, l *library, key string) (unsupported bool, err error) {
	_, err = e.raw(ctx, func() rueidis.Completed {
		return e.client.B().FunctionLoad().FunctionCode(l.src).Build().SetSlot(key)
	})
	switch {
	case err == nil, errLibraryLoaded(err):
		return false, nil
	case errNoFunctions(err):
		return true, err
	}
	return false, fmt.Errorf("FUNCTION LOAD: %w", err)
}

// runFunction runs f as run runs sc: over rueidis as a function where the
// server has functions (callMessage), over any other Evaler as the script
// sc.
func (s *Store) runFunction(ctx context.Context, f *function, sc *script, keys, args []string) ([]int64, error) {
	ev, ok := s.ev.(rueidisEvaler)
	if !ok {
		return run(ctx, s.ev, sc, keys, args)
	}
	reply, err := ints(ev.callMessage(ctx, f, sc, keys, args, ""))
	if err != nil {
		return nil, fmt.Errorf("redisstore: running %s: %w", sc.name, err)
	}
	return reply, nil
}
