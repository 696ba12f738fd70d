package main

import (
	"flag"
	"fmt"
	"time"

	"github.com/sluicerate/sluice/internal/adminauth"
	"github.com/sluicerate/sluice/internal/launch"
	"github.com/sluicerate/sluice/internal/overrides"
)

// The environment variables of the admin tokens (launch.Admin.Tokens).
const (
	adminTokenEnv     = launch.AdminTokenEnv
	adminReadTokenEnv = launch.AdminReadTokenEnv
	adminTokenFileEnv = launch.AdminTokenFileEnv
)

// adminFlags are sluice serve's flags of the admin listener.
type adminFlags struct {
	addr, token, readToken, tokenFile *string
	trusted                           *bool
}

func addAdminFlags(fs *flag.FlagSet) *adminFlags {
	return &adminFlags{
		addr:      fs.String("admin", launch.DefaultAdminAddr, "serve the admin view, /metrics, pprof and the runtime overrides on this `address` (a bare :PORT is loopback only; '' turns it off)"),
		token:     fs.String("admin-token", "", "require this bearer `token` on the admin listener, with write access, named admin (default: $"+adminTokenEnv+")"),
		readToken: fs.String("admin-read-token", "", "a bearer `token` that may read the admin listener, not change anything, named read (default: $"+adminReadTokenEnv+")"),
		tokenFile: fs.String("admin-token-file", "", "read admin tokens from this `file`, one per line as NAME read|write SECRET (default: $"+adminTokenFileEnv+")"),
		trusted:   fs.Bool("admin-trusted-network", false, "serve the admin listener on an address other machines reach without a token: every machine on the network may read it and change limits"),
	}
}

// admin is the admin listener the flags ask for; explicit when --admin was
// given.
func (af *adminFlags) admin(explicit bool) launch.Admin {
	return launch.Admin{Addr: *af.addr, Explicit: explicit, Token: *af.token, ReadToken: *af.readToken,
		TokenFile: *af.tokenFile, Trusted: *af.trusted}
}

// tokens returns the admin tokens the flags and, for those left out, the
// environment give.
func (af *adminFlags) tokens(getenv func(string) string) (adminauth.Tokens, error) {
	return af.admin(false).Tokens(getenv)
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
