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

	"github.com/sluicerate/sluice"
)

// ErrInvalid is wrapped by the errors for bad input: an unknown rule, a
// rule of the wrong kind, an amount or id out of range. The fronts answer
// them 400.
var ErrInvalid = errors.New("quota: invalid request")

// invalid returns an error that is ErrInvalid, whose text is only what
// is wrong.
func invalid(format string, a ...any) error {
	return &inputError{fmt.Sprintf(format, a...)}
}

// inputError is an error for bad input: errors.Is(err, ErrInvalid).
type inputError struct{ msg string }

func (e *inputError) Error() string        { return e.msg }
func (e *inputError) Is(target error) bool { return target == ErrInvalid }

// Source answers the calls on a Limiter, which resolves a policy's rules
// to their windows (with its runtime overrides) and reads and changes
// them in its store.
type Source struct {
	Limiter *sluice.Limiter
}
