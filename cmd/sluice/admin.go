package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/sluicerate/sluice/internal/admin"
	"github.com/sluicerate/sluice/internal/admin/redisinspect"
	"github.com/sluicerate/sluice/internal/adminauth"
	"github.com/sluicerate/sluice/internal/overrides"
)

// defaultAdminAddr is where sluice serve puts its admin view (the live
// page, its API, /metrics and pprof) unless --admin says otherwise:
// loopback only, since the page shows attribute values.
const defaultAdminAddr = "127.0.0.1:9464"

// The environment variables that may hold the admin tokens instead of
// flags (which other users of the machine can see in the process list):
// a token with write access named "admin", one that may only read named
// "read", and a token file.
const (
	adminTokenEnv     = "SLUICE_ADMIN_TOKEN"
	adminReadTokenEnv = "SLUICE_ADMIN_READ_TOKEN"
	adminTokenFileEnv = "SLUICE_ADMIN_TOKEN_FILE"
)

// adminAddr returns the address to listen on for --admin value addr: a bare
// port (":9464") listens on loopback only; naming a host (0.0.0.0:9464,
// [::]:9464) is how to serve other machines.
func adminAddr(addr string) string {
	if strings.HasPrefix(addr, ":") {
		return "127.0.0.1" + addr
	}
	return addr
}

// inspector is the admin view's reader of s's windows and queues: Redis's
// (package redisinspect); nil for the in-memory store, whose windows the
// view shows from a peek.
func (s *openedStore) inspector() admin.Inspector {
	if s.Redis == nil || s.Client == nil {
		return nil
	}
	return redisinspect.Inspector{Store: s.Redis, Client: s.Client}
}

// listenAdmin opens the admin listener at addr. When addr is the default
// and is taken (another sluice serve on this machine, say), the server runs
// without its admin view and says so rather than failing: only an address
// given with --admin must be served.
func listenAdmin(addr string, explicit bool) (net.Listener, error) {
	if addr == "" {
		return nil, nil
	}
	l, err := net.Listen("tcp", adminAddr(addr))
	if err != nil && !explicit {
		return nil, fmt.Errorf("the admin view is off: %w; choose a free address with --admin ADDR, or turn it off with --admin ''", err)
	}
	if err != nil {
		return nil, fmt.Errorf("--admin: %w", err)
	}
	return l, nil
}

// adminFlags are sluice serve's flags of the admin listener.
type adminFlags struct {
	addr, token, readToken, tokenFile *string
	trusted                           *bool
}

func addAdminFlags(fs *flag.FlagSet) *adminFlags {
	return &adminFlags{
		addr:      fs.String("admin", defaultAdminAddr, "serve the admin view, /metrics, pprof and the runtime overrides on this `address` (a bare :PORT is loopback only; '' turns it off)"),
		token:     fs.String("admin-token", "", "require this bearer `token` on the admin listener, with write access, named admin (default: $"+adminTokenEnv+")"),
		readToken: fs.String("admin-read-token", "", "a bearer `token` that may read the admin listener, not change anything, named read (default: $"+adminReadTokenEnv+")"),
		tokenFile: fs.String("admin-token-file", "", "read admin tokens from this `file`, one per line as NAME read|write SECRET (default: $"+adminTokenFileEnv+")"),
		trusted:   fs.Bool("admin-trusted-network", false, "serve the admin listener on an address other machines reach without a token: every machine on the network may read it and change limits"),
	}
}

// tokens returns the admin tokens the flags and, for those left out, the
// environment give.
func (af *adminFlags) tokens(getenv func(string) string) (adminauth.Tokens, error) {
	var ts adminauth.Tokens
	if file := cmp.Or(*af.tokenFile, getenv(adminTokenFileEnv)); file != "" {
		var err error
		if ts, err = adminauth.ReadFile(file); err != nil {
			return nil, err
		}
	}
	for _, t := range []adminauth.Token{
		{Name: "admin", Secret: cmp.Or(*af.token, getenv(adminTokenEnv)), Access: adminauth.Write},
		{Name: "read", Secret: cmp.Or(*af.readToken, getenv(adminReadTokenEnv)), Access: adminauth.Read},
	} {
		if t.Secret == "" {
			continue
		}
		if err := ts.Add(t); err != nil {
			return nil, fmt.Errorf("admin tokens: %w", err)
		}
	}
	return ts, nil
}

// check returns the admin tokens, or why the admin listener may not be
// served with them (checkAdminExposure).
func (af *adminFlags) check(getenv func(string) string) (adminauth.Tokens, error) {
	ts, err := af.tokens(getenv)
	if err == nil {
		err = checkAdminExposure(*af.addr, ts, *af.trusted)
	}
	return ts, err
}

// errOpenAdmin is what sluice serve says when asked to serve the admin
// listener to other machines without a token.
var errOpenAdmin = errors.New("serves other machines, and no admin token is set: anyone who reaches it could read attribute values and change limits. " +
	"Set a token in " + adminTokenEnv + " (or --admin-token-file FILE, or " + adminTokenFileEnv + "), " +
	"serve it on loopback (--admin 127.0.0.1:9464), " +
	"or, if every machine that can reach it may do all that, pass --admin-trusted-network")

// checkAdminExposure refuses an admin listener at addr that other machines
// may reach, without tokens, unless the network is trusted.
func checkAdminExposure(addr string, tokens adminauth.Tokens, trusted bool) error {
	if addr == "" || len(tokens) > 0 || trusted || isLoopback(adminAddr(addr)) {
		return nil
	}
	return fmt.Errorf("--admin %s %w", addr, errOpenAdmin)
}

// isLoopback reports whether the listener address addr serves this machine
// only: a loopback IP or localhost. Any other host, a name included, may
// be reached from elsewhere.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// overrideFlags are sluice serve's flags of the runtime overrides.
type overrideFlags struct {
	max  *int
	poll *time.Duration
}

func addOverrideFlags(fs *flag.FlagSet) *overrideFlags {
	return &overrideFlags{
		max:  fs.Int("max-overrides", overrides.DefaultMax, "hold at most `N` runtime overrides; the store refuses more"),
		poll: fs.Duration("override-poll", overrides.DefaultPoll, "ask the store this often whether the runtime overrides changed"),
	}
}

func (of *overrideFlags) check() error {
	switch {
	case *of.max < 1:
		return fmt.Errorf("--max-overrides %d: give at least 1", *of.max)
	case *of.poll <= 0 || *of.poll > time.Minute:
		return fmt.Errorf("--override-poll %v: give a duration from 1ms to 1m, such as 250ms", *of.poll)
	}
	return nil
}
