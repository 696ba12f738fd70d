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

// decide.lua as a Redis function. A script run by EVALSHA runs its whole
// source on every call: it makes every helper function, and every table of
// steps, anew, and the garbage collector sweeps them after. A function
// library (Redis 7 and later) runs its source once, when it is loaded, and
// a call of its function runs that function alone. Over rueidis the store
// calls decide.lua as a function (FCALL) where the server has functions,
// and as a script where it does not (Redis 6 and earlier, or a user the
// server's ACL forbids FUNCTION LOAD or FCALL).
//
// The library's name and its function's carry the hash of its source, so
// that processes of different versions sharing a server each call their
// own; loading never replaces a library. A server that lost its functions
// (a restart without persistence, FUNCTION FLUSH) answers "Function not
// found": the function did not run, so the store loads the library on that
// node and calls it again, once, as it sends a script's source after
// NOSCRIPT. Functions are replicated and persisted
// like data, so a replica promoted by a failover has them.

// library is a function library that registers one function.
type library struct {
	name, fn, src string
}

// decideLibrary is decide.lua's library: the full build of its script
// (every algorithm; a function library makes its helpers once, so the
// log's build saves nothing here), with decide.lua's main part as the body
// of its function.
var decideLibrary = newLibrary("decide", strings.Join([]string{preludeLua, windowLua, gcraLua, counterLua, decisionLua}, "\n"), decideLua)

// newLibrary returns the library whose function, named after name and the
// hash of the library's source, runs main with KEYS and ARGV, after the
// helpers in head. A library's source runs where only the redis table
// exists (no string, math or struct), so head runs at the function's first
// call, which keeps the helpers it makes for the calls after it.
func newLibrary(name, head, main string) *library {
	sum := sha1.Sum([]byte(head + "\n" + main))
	id := hex.EncodeToString(sum[:8])
	l := &library{name: "sluice_" + id, fn: "sluice_" + name + "_" + id}
	l.src = "#!lua name=" + l.name + "\n" +
		"local main -- made at the first call, by build\n" +
		"local function build()\n" + head + "\n-- " + name + ".lua\n\nreturn function(KEYS, ARGV)\n" + main + "\nend\nend\n\n" +
		"redis.register_function{function_name = '" + l.fn + "', callback = function(KEYS, ARGV)\n  main = main or build()\n  return main(KEYS, ARGV)\nend, flags = {'allow-cross-slot-keys'}}\n"
	return l
}

// functions says whether a store calls its decisions as functions: not yet
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

// decideMessage runs decide.lua with keys and args, as a function where
// the server has functions, else as the script sc (EVALSHA, then EVAL on
// NOSCRIPT), and returns its reply. A call with no keys declared (a batch
// of several slots, its keys among args) goes to the node of route's slot.
// Each command goes through raw, so over a Cluster it follows the store's
// slot map and its first MOVED (shards.go).
func (e rueidisEvaler) decideMessage(ctx context.Context, sc *script, keys, args []string, route string) (rueidis.RedisMessage, error) {
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
				return e.client.B().Fcall().Function(decideLibrary.fn).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()
			})
		}
		msg, err := fcall()
		unsupported := errNoFunctions(err)
		if errFunctionNotFound(err) {
			if unsupported, err = e.loadLibrary(ctx, decideLibrary, route); err == nil {
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
