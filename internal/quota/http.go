package quota

import (
	"errors"
	"net/http"
	"net/url"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/httplimit"
	"github.com/sluicerate/sluice/internal/front"
)

// UsageExample is a valid query of GET /v1/usage, quoted in messages.
const UsageExample = "/v1/usage?policy=api&rule=monthly&user=acme"

// UsageTarget is what a query of GET /v1/usage names: a policy, a rule
// (""; the policy's only calendar quota), the attributes of the key, and
// the time whose period is the current one (zero: now).
type UsageTarget struct {
	Policy, Rule string
	Attributes   map[string]string
	At           time.Time
}

// ParseUsageQuery reads q, a query of GET /v1/usage: policy, rule and at
// (RFC 3339) are its own parameters, every other one an attribute of the
// key. Each parameter is given once. The errors wrap ErrInvalid and name
// the parameter.
func ParseUsageQuery(q url.Values) (UsageTarget, error) {
	t := UsageTarget{Attributes: map[string]string{}}
	for k, vs := range q {
		if len(vs) != 1 {
			return UsageTarget{}, invalid("parameter %q is given %d times; give it once, as in %s", k, len(vs), UsageExample)
		}
		switch v := vs[0]; k {
		case "policy":
			t.Policy = v
		case "rule":
			t.Rule = v
		case "at":
			at, err := parseAt(v)
			if err != nil {
				return UsageTarget{}, invalid("at %q: %v", v, err)
			}
			t.At = at
		default:
			t.Attributes[k] = v
		}
	}
	if t.Policy == "" {
		return UsageTarget{}, invalid("policy is missing; name the policy of the calendar quota, as in %s", UsageExample)
	}
	return t, nil
}

// Problem is the answer to a call that failed with err: 400 for bad
// input (ErrInvalid, and the Limiter's errors for it), 501 for a store
// that keeps no credits or usage, else 503, the store not answering.
func Problem(err error) *httplimit.Problem {
	switch {
	case errors.Is(err, ErrInvalid) || errors.Is(err, sluice.ErrInvalidCredit):
		return front.BadRequest("bad_request", "%v", err)
	case errors.Is(err, errors.ErrUnsupported):
		return &httplimit.Problem{Status: http.StatusNotImplemented, Code: "no_quotas", Detail: err.Error()}
	}
	if p := front.InputProblem(err); p != nil {
		return p
	}
	return &httplimit.Problem{Status: http.StatusServiceUnavailable, Code: "store_unavailable",
		Detail: "the store did not answer: " + err.Error() + "; try again when it answers"}
}
