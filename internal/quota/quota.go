// Package quota reads and changes what calendar quotas and credits rules
// keep per key: a Credits rule's balance (get, add, set, each change
// idempotent under an id) and a calendar quota's usage by period. It is
// the one road of POST /v1/credits, GET /v1/usage, the admin view's usage
// chart and the sluice credits and usage commands, whether they run in
// the server, against a store directly, or as a client of a server
// (Client).
package quota

import (
	"errors"
	"fmt"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/store"
)

// ErrInvalid is wrapped by the errors for bad input: an unknown rule, a
// rule of the wrong kind, an amount or id out of range. The fronts answer
// them 400.
var ErrInvalid = errors.New("quota: invalid request")

// ErrNoStore is wrapped by the error of a call on a store that keeps no
// balances or usage (neither store.Crediter nor store.Historian).
var ErrNoStore = errors.New("quota: the store keeps no credits or usage")

// invalid returns an error that is ErrInvalid, whose text is only what
// is wrong.
func invalid(format string, a ...any) error {
	return &inputError{fmt.Sprintf(format, a...)}
}

// inputError is an error for bad input: errors.Is(err, ErrInvalid).
type inputError struct{ msg string }

func (e *inputError) Error() string        { return e.msg }
func (e *inputError) Is(target error) bool { return target == ErrInvalid }

// Source answers the calls on a Limiter and the store it decides on. Its
// zero value is not usable; it is safe for concurrent use.
type Source struct {
	// Limiter decides on Store: it resolves a policy's rules to their
	// windows (with its runtime overrides) and changes balances.
	Limiter *sluice.Limiter

	// Store is the Limiter's store, read for usage (store.Historian).
	Store store.Store

	// Timeout bounds a read of usage, which goes to Store without the
	// Limiter's deadline. Default DefaultTimeout.
	Timeout time.Duration
}

// DefaultTimeout is Source.Timeout's default.
const DefaultTimeout = 5 * time.Second

// IsCalendar reports whether r is a calendar quota.
func IsCalendar(r *sluice.Rule) bool { return r.Period != store.NoPeriod }

// IsCredits reports whether r is a Credits rule.
func IsCredits(r *sluice.Rule) bool { return r.Algorithm == sluice.Credits }

// findRule returns the rule of p named name, or, for an empty name, p's
// only rule that is, what names the kind. The errors wrap ErrInvalid and
// say which rules would do.
func findRule(p *sluice.Policy, name, what string, is func(*sluice.Rule) bool) (*sluice.Rule, error) {
	var fit []string
	var only *sluice.Rule
	for i := range p.Rules {
		r := &p.Rules[i]
		if name != "" && r.Name == name {
			if !is(r) {
				return nil, invalid("rule %q of policy %q is not a %s", name, p.Name, what)
			}
			return r, nil
		}
		if is(r) {
			fit, only = append(fit, r.Name), r
		}
	}
	switch {
	case name != "" && len(fit) == 0:
		return nil, invalid("policy %q has no rule %q, and no %s", p.Name, name, what)
	case name != "":
		return nil, invalid("policy %q has no rule %q; its %ss are %q", p.Name, name, what, fit)
	case len(fit) == 0:
		return nil, invalid("policy %q has no %s", p.Name, what)
	case len(fit) > 1:
		return nil, invalid("policy %q has several %ss, %q; name one with rule", p.Name, what, fit)
	}
	return only, nil
}

// location returns r's time zone: UTC when it names none.
func location(r *sluice.Rule) *time.Location {
	if r.Location == nil {
		return time.UTC
	}
	return r.Location
}
