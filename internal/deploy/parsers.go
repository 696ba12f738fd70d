package deploy

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// A parser reads a row's variable's value (empty when unset) and puts it
// where the row says.
type parser func(a *applier, v Var, value string)

// set sets the row's flag to the value, changed by change when not nil.
func set(change func(string) string) parser {
	return func(a *applier, v Var, value string) {
		if change != nil {
			value = change(value)
		}
		a.set(v.Flag, value)
	}
}

// setOr sets the row's flag to the value, or to its default when unset.
func setOr(a *applier, v Var, value string) { a.set(v.Flag, cmp.Or(value, v.Default)) }

// setBool sets the row's boolean flag to the value, a boolean.
func setBool(a *applier, v Var, value string) {
	if b, ok := a.boolean(v.Env, value); ok {
		a.set(v.Flag, strconv.FormatBool(b))
	}
}

// part is the value, or the row's default when unset, as the part key of
// the row's flag.
func part(key string) parser {
	return func(a *applier, v Var, value string) {
		g := a.group(v.Flag)
		g.parts = append(g.parts, share{v.Env, key, cmp.Or(value, v.Default)})
	}
}

// flagPart is the value, a boolean, as the part key of the row's flag
// that stands alone when true.
func flagPart(key string) parser {
	return func(a *applier, v Var, value string) {
		if b, ok := a.boolean(v.Env, value); ok {
			g := a.group(v.Flag)
			g.parts = append(g.parts, share{v.Env, key, strconv.FormatBool(b)})
		}
	}
}

// gate is the value, a boolean, as the switch of the row's flag.
func gate(a *applier, v Var, value string) {
	if b, _ := a.boolean(v.Env, value); b {
		a.group(v.Flag).on = true
	}
}

// logLevel maps envoyproxy/ratelimit's log levels to sluice's.
func logLevel(v string) string {
	switch v = strings.ToLower(v); v {
	case "trace":
		return "debug"
	case "warning":
		return "warn"
	case "fatal", "panic":
		return "error"
	}
	return v
}

// perDescriptorUnless: STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=false
// counts every matched limit, over or not.
func perDescriptorUnless(a *applier, v Var, value string) {
	if b, ok := a.boolean(v.Env, value); ok && !b {
		a.set(v.Flag, "per-descriptor")
	}
}

// configType checks CONFIG_TYPE: the other xDS rows hold under
// GRPC_XDS_SOTW.
func configType(a *applier, v Var, value string) {
	switch strings.ToUpper(value) {
	case "", "FILE", "GRPC_XDS_SOTW":
	default:
		a.fail(fmt.Errorf("CONFIG_TYPE=%q: use FILE (RUNTIME_ROOT's files) or GRPC_XDS_SOTW (an xDS control plane)", value))
	}
}

// to puts the value, or the row's default when unset, in p.
func to(p *string) parser {
	return func(_ *applier, v Var, value string) { *p = cmp.Or(value, v.Default) }
}

// toMap puts the value, a map "k1<sep>v1,k2<sep>v2", in p.
func toMap(p *map[string]string, sep string) parser {
	return func(a *applier, v Var, value string) {
		if value == "" {
			return
		}
		m := map[string]string{}
		for _, kv := range strings.Split(value, ",") {
			k, val, ok := strings.Cut(kv, sep)
			if !ok || k == "" {
				a.fail(fmt.Errorf("%s=%q: write it as key%svalue,key2%svalue2", v.Env, value, sep, sep))
				return
			}
			m[strings.TrimSpace(k)] = strings.TrimSpace(val)
		}
		*p = m
	}
}

// toDuration puts the value, a duration longer than zero, in p.
func toDuration(p *time.Duration) parser {
	return func(a *applier, v Var, value string) {
		if value == "" {
			return
		}
		d, err := time.ParseDuration(value)
		if err != nil || d <= 0 {
			a.fail(fmt.Errorf("%s=%q: give a duration longer than zero, such as 3s", v.Env, value))
		}
		*p = d
	}
}

// toShare puts the value, a number from 0 to 1, in p.
func toShare(p *float64) parser {
	return func(a *applier, v Var, value string) {
		if value == "" {
			return
		}
		x, err := strconv.ParseFloat(value, 64)
		if err != nil || x < 0 || x > 1 {
			a.fail(fmt.Errorf("%s=%q: give a number from 0 to 1, such as 0.5", v.Env, value))
		}
		*p = x
	}
}

// toSize puts the value, a size in bytes, in p.
func toSize(p *int) parser {
	return func(a *applier, v Var, value string) {
		if value == "" {
			return
		}
		n, err := strconv.Atoi(value)
		if err != nil || n < 0 {
			a.fail(fmt.Errorf("%s=%q: give a size in bytes, such as 4194304", v.Env, value))
		}
		*p = n
	}
}

// toNot puts the opposite of the value, a boolean, in p.
func toNot(p *bool) parser {
	return func(a *applier, v Var, value string) {
		if b, ok := a.boolean(v.Env, value); ok {
			*p = !b
		}
	}
}

// noteIfSet notes the variable's value, when set, followed by why.
func noteIfSet(why string) parser {
	return func(a *applier, v Var, value string) {
		if value != "" {
			a.f.env.notes = append(a.f.env.notes, v.Env+"="+value+why)
		}
	}
}

// noteIfTrue notes msg when the value is true.
func noteIfTrue(msg string) parser {
	return func(a *applier, v Var, value string) {
		if b, _ := a.boolean(v.Env, value); b {
			a.f.env.notes = append(a.f.env.notes, msg)
		}
	}
}

// noteUnless notes msg when the value is false.
func noteUnless(msg string) parser {
	return func(a *applier, v Var, value string) {
		if b, ok := a.boolean(v.Env, value); ok && !b {
			a.f.env.notes = append(a.f.env.notes, msg)
		}
	}
}
