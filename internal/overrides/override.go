// Package overrides is sluice serve's runtime overrides: an operator gives
// one window of a rule (one customer, one key, or every key that starts
// with a prefix) another limit, window, burst or minimum gap, or blocks it,
// for good or until a time, without editing the configuration file. They
// apply to sluice's policies and to Envoy domains alike.
//
// Overrides live in the store (store.OverrideStore), so every instance
// that shares it applies the same ones. A Manager polls the store's
// version of the set (one short script call per interval, 250 ms by
// default) and reads the set again only when it moved; between reads, and
// while the store is down, it decides with the last set it read. It
// compiles the set against the rules in use (Catalog): an override for a
// rule that does not exist, or with figures the rule cannot take, is kept
// in the store, listed with its problem, and applied to nothing.
//
// Precedence for a window: a runtime override, then the rule's file
// overrides (the first that matches), then the rule (see sluice.Overrides).
// Among runtime overrides, one whose values are all exact wins; then the
// most specific pattern: the most exact values, then the longest prefixes,
// then the smaller ID.
package overrides

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/yamlfile"
)

// Override is one runtime override: what the admin API takes and lists,
// and what the store keeps (as JSON).
type Override struct {
	// ID names the override: its target and values (see ID). Set by the
	// server.
	ID string `json:"id"`

	// Policy names a sluice policy of the configuration file, or Domain
	// an Envoy domain: one of the two.
	Policy string `json:"policy,omitempty"`
	Domain string `json:"domain,omitempty"`

	// Rule names the rule: a rule of the policy, or for a domain the
	// limit's name as sluice reports it (its descriptor path, such as
	// "user" or "client.user", with "#2" for a second limit).
	Rule string `json:"rule"`

	// Values are the window's values, one per attribute the rule goes by
	// (its By list; for a domain, the descriptor's entries), in order:
	// each the value itself, or a prefix followed by '*' ("premium_*");
	// "*" alone matches any value. A rule that goes by nothing takes none.
	Values []string `json:"values"`

	// Limit replaces the rule's limit (required unless Blocked); Blocked
	// sets it to 0, which admits nothing.
	Limit   *int64 `json:"limit,omitempty"`
	Blocked bool   `json:"blocked,omitempty"`

	// Window, Burst (gcra) and MinGap (log) replace the rule's when set.
	Window Duration `json:"window,omitempty"`
	Burst  int64    `json:"burst,omitempty"`
	MinGap Duration `json:"min_gap,omitempty"`

	// Until, when set, is when the override ends. For, in a request
	// only, sets Until that long after the server receives it.
	Until *time.Time `json:"until,omitempty"`
	For   Duration   `json:"for,omitempty"`

	// Reason says why, for the next operator.
	Reason string `json:"reason,omitempty"`

	// SetBy names the admin token that set it, and SetAt when. Set by the
	// server.
	SetBy string    `json:"set_by,omitempty"`
	SetAt time.Time `json:"set_at"`
}

// Duration is a duration written as the configuration file writes one
// ("30m", "1h", "1d") in JSON.
type Duration time.Duration

// MarshalText writes d as Go does ("1m0s").
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText reads a duration as the configuration file does.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := yamlfile.ParseDuration(string(b))
	*d = Duration(v)
	return err
}

// Limits of what an override may say.
const (
	maxValueBytes  = 256 // one value or pattern
	maxReasonBytes = 512 // the reason
	maxLimit       = sluice.MaxCost
)

// PolicyOf returns the name the Limiter knows o's target by: its policy,
// or "envoy/<domain>" for a domain (envoy.PolicyName).
func (o *Override) PolicyOf() string {
	if o.Domain != "" {
		return "envoy/" + o.Domain
	}
	return o.Policy
}

// target describes o's target for messages: `policy "notify"` or
// `domain "rl"`.
func (o *Override) target() string {
	if o.Domain != "" {
		return fmt.Sprintf("domain %q", o.Domain)
	}
	return fmt.Sprintf("policy %q", o.Policy)
}

// normalize checks what o says on its own, without the rules in use, and
// sets its ID, Limit when Blocked, and Until from For at now.
func (o *Override) normalize(now time.Time) error {
	switch {
	case (o.Policy == "") == (o.Domain == ""):
		return errors.New(`name a policy ("policy": "notify") or an Envoy domain ("domain": "rl"), one of the two`)
	case o.Rule == "":
		return fmt.Errorf(`%s: name the rule ("rule": "per-user")`, o.target())
	case o.Blocked && o.Limit != nil && *o.Limit != 0:
		return fmt.Errorf("blocked with limit %d: a blocked window has limit 0; send one of the two", *o.Limit)
	case !o.Blocked && o.Limit == nil:
		return errors.New(`give the new limit ("limit": 1000), or block the window ("blocked": true)`)
	case o.Limit != nil && (*o.Limit < 0 || *o.Limit > maxLimit):
		return fmt.Errorf("limit %d: a limit is from 0 (blocks) to 2^53", *o.Limit)
	case o.Window < 0 || o.MinGap < 0 || o.Burst < 0 || o.For < 0:
		return errors.New("window, min_gap, burst and for must not be negative")
	case o.Until != nil && o.For != 0:
		return errors.New(`give "until" (a time) or "for" (a duration), not both`)
	case len(o.Reason) > maxReasonBytes:
		return fmt.Errorf("the reason has %d bytes; keep it to %d", len(o.Reason), maxReasonBytes)
	}
	for i, v := range o.Values {
		if err := checkPattern(v); err != nil {
			return fmt.Errorf("values[%d]: %w", i, err)
		}
	}
	if o.Blocked {
		zero := int64(0)
		o.Limit = &zero
	}
	if o.For > 0 {
		u := now.Add(time.Duration(o.For)).UTC()
		o.Until, o.For = &u, 0
	}
	if o.Until != nil && !o.Until.After(now) {
		return fmt.Errorf("until %s has passed", o.Until.Format(time.RFC3339))
	}
	if o.Values == nil {
		o.Values = []string{}
	}
	o.ID = ID(o.PolicyOf(), o.Rule, o.Values)
	return nil
}

// checkPattern reports a value that cannot be matched: empty, too long,
// or with a '*' before its end.
func checkPattern(v string) error {
	switch i := strings.IndexByte(v, '*'); {
	case v == "":
		return errors.New("an empty value; give the value, a prefix followed by '*', or '*' for any value")
	case len(v) > maxValueBytes:
		return fmt.Errorf("a value of %d bytes; at most %d", len(v), maxValueBytes)
	case i >= 0 && i != len(v)-1:
		return fmt.Errorf("%q has a '*' before its end; a value is exact, or a prefix followed by '*'", v)
	}
	return nil
}

// ID returns the ID of the override of rule of policy (the Limiter's name:
// "envoy/<domain>" for a domain) for values: the three joined by ':', the
// values by ',', each written with every byte outside letters, digits and
// "-._~*" as %XX, so that it can be read and put in a URL as it is:
// "notify:category:errors", "envoy%2Frl:user:premium_*".
func ID(policy, rule string, values []string) string {
	var b strings.Builder
	escape(&b, policy)
	b.WriteByte(':')
	escape(&b, rule)
	b.WriteByte(':')
	for i, v := range values {
		if i > 0 {
			b.WriteByte(',')
		}
		escape(&b, v)
	}
	return b.String()
}

func escape(b *strings.Builder, s string) {
	const digits = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~*", c) >= 0 {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(digits[c>>4])
		b.WriteByte(digits[c&15])
	}
}
