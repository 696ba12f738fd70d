package main

import (
	"fmt"
	"net"
	"strings"

	"github.com/sluicerate/sluice/internal/admin"
	"github.com/sluicerate/sluice/internal/admin/redisinspect"
)

// defaultAdminAddr is where sluice serve puts its admin view (the live
// page, its API, /metrics and pprof) unless --admin says otherwise:
// loopback only, since the page shows attribute values.
const defaultAdminAddr = "127.0.0.1:9464"

// adminTokenEnv names the environment variable that may hold the admin
// token instead of --admin-token (which other users of the machine can see
// in the process list).
const adminTokenEnv = "SLUICE_ADMIN_TOKEN"

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
