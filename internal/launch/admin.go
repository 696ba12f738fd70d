package launch

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/sluicerate/sluice/internal/adminauth"
)

// DefaultAdminAddr is where sluice serve puts its admin view (the live
// page, its API, /metrics and pprof) unless --admin says otherwise:
// loopback only, since the page shows attribute values.
const DefaultAdminAddr = "127.0.0.1:9464"

// The environment variables that may hold the admin tokens instead of
// flags (which other users of the machine can see in the process list):
// a token with write access named "admin", one that may only read named
// "read", and a token file.
const (
	AdminTokenEnv     = "SLUICE_ADMIN_TOKEN"
	AdminReadTokenEnv = "SLUICE_ADMIN_READ_TOKEN"
	AdminTokenFileEnv = "SLUICE_ADMIN_TOKEN_FILE"
)

// Admin is the admin listener as sluice serve's flags ask for it. Its zero
// value serves no admin view.
type Admin struct {
	Addr      string // "": no admin listener; a bare :PORT is loopback
	Explicit  bool   // Addr was given (--admin): failing to listen on it is an error
	Token     string // with write access; "": the environment's
	ReadToken string // that may only read; "": the environment's
	TokenFile string // of named tokens; "": the environment's
	Trusted   bool   // every machine that reaches Addr may use it without a token
}

// Tokens returns the admin tokens a's flags and, for those left out, the
// environment give.
func (a Admin) Tokens(getenv func(string) string) (adminauth.Tokens, error) {
	var ts adminauth.Tokens
	if file := cmp.Or(a.TokenFile, getenv(AdminTokenFileEnv)); file != "" {
		var err error
		if ts, err = adminauth.ReadFile(file); err != nil {
			return nil, err
		}
	}
	for _, t := range []adminauth.Token{
		{Name: "admin", Secret: cmp.Or(a.Token, getenv(AdminTokenEnv)), Access: adminauth.Write},
		{Name: "read", Secret: cmp.Or(a.ReadToken, getenv(AdminReadTokenEnv)), Access: adminauth.Read},
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

// Check returns the admin tokens, or why the admin listener may not be
// served with them (CheckAdminExposure).
func (a Admin) Check(getenv func(string) string) (adminauth.Tokens, error) {
	ts, err := a.Tokens(getenv)
	if err == nil {
		err = CheckAdminExposure(a.Addr, ts, a.Trusted)
	}
	return ts, err
}

// errOpenAdmin is what sluice serve says when asked to serve the admin
// listener to other machines without a token.
var errOpenAdmin = errors.New("serves other machines, and no admin token is set: anyone who reaches it could read attribute values and change limits. " +
	"Set a token in " + AdminTokenEnv + " (or --admin-token-file FILE, or " + AdminTokenFileEnv + "), " +
	"serve it on loopback (--admin 127.0.0.1:9464), " +
	"or, if every machine that can reach it may do all that, pass --admin-trusted-network")

// CheckAdminExposure refuses an admin listener at addr that other machines
// may reach, without tokens, unless the network is trusted.
func CheckAdminExposure(addr string, tokens adminauth.Tokens, trusted bool) error {
	if addr == "" || len(tokens) > 0 || trusted || isLoopback(adminAddr(addr)) {
		return nil
	}
	return fmt.Errorf("--admin %s %w", addr, errOpenAdmin)
}

// adminAddr returns the address to listen on for --admin value addr: a bare
// port (":9464") listens on loopback only; naming a host (0.0.0.0:9464,
// [::]:9464) is how to serve other machines.
func adminAddr(addr string) string {
	if strings.HasPrefix(addr, ":") {
		return "127.0.0.1" + addr
	}
	return addr
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
