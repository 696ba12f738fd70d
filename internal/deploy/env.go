package deploy

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
)

// Apply gives the flags of fs that its command line left out the values of
// the environment's variables, row by row of the table, so that the
// deployments that start envoyproxy/ratelimit start sluice serve unchanged.
// The flags the table names but serve declares itself (--http, --grpc,
// --redis, --log-level, --log-format) are set on fs by name. configFile is
// --config: Apply then checks that there is something to serve.
func (f *Flags) Apply(fs *flag.FlagSet, getenv func(string) string, configFile string) error {
	a := &applier{f: f, fs: fs, getenv: getenv, given: map[string]bool{}, rows: map[string]Var{}, groups: map[string]*group{}}
	fs.Visit(func(fl *flag.Flag) { a.given[fl.Name] = true })
	table := f.table()
	for _, v := range table {
		a.rows[v.Env] = v
	}
	for _, v := range table {
		if v.Env != "" && v.parse != nil && a.holds(v.When) {
			v.parse(a, v, getenv(v.Env))
		}
	}
	a.join()
	switch {
	case a.err != nil:
		return a.err
	case f.envoyDir != "" && f.xds != "":
		return fmt.Errorf("--envoy-config %s and --envoy-xds %s: the Envoy configuration comes from files or from a control plane; give one", f.envoyDir, f.xds)
	case configFile == "" && f.envoyDir == "" && f.xds == "":
		return errors.New("--config FILE, --envoy-config DIR or --envoy-xds HOST:PORT is required")
	}
	return nil
}

// applier applies the environment to the flags, keeping the first error.
type applier struct {
	f      *Flags
	fs     *flag.FlagSet
	getenv func(string) string
	given  map[string]bool   // the flags the command line gave
	rows   map[string]Var    // the table's rows by variable
	groups map[string]*group // the flags several variables make, by flag
	order  []string          // groups' flags, in the table's order
	err    error
}

// group is what the variables of a flag made of several say.
type group struct {
	on    bool    // its switch (USE_PROMETHEUS, say) is true
	parts []share // in the table's order
}

// share is one variable's share of a flag's value.
type share struct{ env, key, value string }

func (a *applier) fail(err error) {
	if a.err == nil && err != nil {
		a.err = err
	}
}

// set sets the flag name to value unless the command line gave it or value
// is empty.
func (a *applier) set(name, value string) {
	if a.given[name] || value == "" {
		return
	}
	if err := a.fs.Set(name, value); err != nil {
		a.fail(fmt.Errorf("--%s from the environment: %v", name, err))
	}
}

// on reports whether the variable name is true; a value that is not a
// boolean is an error.
func (a *applier) on(name string) bool {
	b, _ := a.boolean(name, a.getenv(name))
	return b
}

// boolean parses v, the value of the variable name, and reports whether it
// was set.
func (a *applier) boolean(name, v string) (b, ok bool) {
	if v == "" {
		return false, false
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		a.fail(fmt.Errorf("%s=%q: use true or false", name, v))
		return false, false
	}
	return b, true
}

// holds reports whether a row's condition holds: "" always, "VAR" when the
// variable is true, "VAR=VALUE" and "VAR!=VALUE" by its value (case aside);
// and the variable's own row's condition with it.
func (a *applier) holds(when string) bool {
	if when == "" {
		return true
	}
	name, want, eq := strings.Cut(when, "=")
	neq := strings.HasSuffix(name, "!")
	name = strings.TrimSuffix(name, "!")
	if !a.holds(a.rows[name].When) {
		return false
	}
	switch {
	case neq:
		return !strings.EqualFold(a.getenv(name), want)
	case eq:
		return strings.EqualFold(a.getenv(name), want)
	}
	return a.on(name)
}

// group returns the group of the flag name.
func (a *applier) group(name string) *group {
	g := a.groups[name]
	if g == nil {
		g = &group{}
		a.groups[name] = g
		a.order = append(a.order, name)
	}
	return g
}

// get returns the value of g's part key.
func (g *group) get(key string) string {
	for _, p := range g.parts {
		if p.key == key && p.value != "" {
			return p.value
		}
	}
	return ""
}

// keyValues joins g's parts as "k=v,k2=v2", a part of value "true" of a
// switch as "k" alone; two variables that give one key two values are an
// error.
func (g *group) keyValues(flagPart map[string]bool) (string, error) {
	var out []string
	seen := map[string]share{}
	for _, p := range g.parts {
		if p.value == "" || flagPart[p.key] && p.value != "true" {
			continue
		}
		if q, ok := seen[p.key]; ok {
			if q.value != p.value {
				return "", fmt.Errorf("%s=%q and %s=%q name two files for one thing; keep one", q.env, q.value, p.env, p.value)
			}
			continue
		}
		seen[p.key] = p
		if flagPart[p.key] {
			out = append(out, p.key)
		} else {
			out = append(out, p.key+"="+p.value)
		}
	}
	return strings.Join(out, ","), nil
}

// join sets each flag made of several variables from its group, unless the
// command line gave it.
func (a *applier) join() {
	for _, name := range a.order {
		g := a.groups[name]
		if a.given[name] || a.err != nil {
			continue
		}
		j := joins[name]
		if j == nil {
			j = func(_ *applier, g *group) (string, error) { return g.keyValues(nil) }
		}
		v, err := j(a, g)
		a.fail(err)
		a.set(name, v)
	}
}

// joins make the flags of several variables, by flag; the others are
// their parts' "k=v,k2=v2".
var joins = map[string]func(a *applier, g *group) (string, error){
	"envoy-config": func(_ *applier, g *group) (string, error) {
		if g.get("root") == "" {
			return "", nil
		}
		return filepath.Join(g.get("root"), g.get("sub"), g.get("app")), nil
	},
	"http": hostPort,
	"grpc": hostPort,
	"redis": func(_ *applier, g *group) (string, error) {
		if g.get("url") == "" {
			return "", nil
		}
		return redisURL(g.get)
	},
	"redis-tls": func(_ *applier, g *group) (string, error) { return g.keyValues(map[string]bool{"skip-hostname": true}) },
	"grpc-tls": func(_ *applier, g *group) (string, error) {
		if !g.on {
			return "", nil
		}
		if g.get("cert") == "" || g.get("key") == "" {
			return "", errors.New("GRPC_SERVER_USE_TLS=true needs GRPC_SERVER_TLS_CERT and GRPC_SERVER_TLS_KEY: the server's certificate and its key")
		}
		return g.keyValues(nil)
	},
	"envoy-xds-tls": func(_ *applier, g *group) (string, error) {
		if !g.on {
			return "", nil
		}
		s, err := g.keyValues(nil)
		return cmp.Or(s, "system"), err
	},
	"metrics": func(_ *applier, g *group) (string, error) {
		if !g.on {
			return "", nil
		}
		return g.get("addr"), nil
	},
	"envoy-headers": func(a *applier, g *group) (string, error) {
		if !g.on {
			return "", nil
		}
		e := &a.f.env
		e.limitName, e.remainingName, e.resetName = g.get("limit"), g.get("remaining"), g.get("reset")
		return "x-ratelimit", nil
	},
}

// hostPort joins HOST and PORT as the address HOST:PORT, when PORT is set.
func hostPort(_ *applier, g *group) (string, error) {
	if g.get("port") == "" {
		return "", nil
	}
	return net.JoinHostPort(g.get("host"), g.get("port")), nil
}
