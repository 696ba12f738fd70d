package storetest

import (
	"time"

	"github.com/sluicerate/sluice"
)

// Conditional cases: rules that apply to some requests only, per-value
// limits, blocked values and rules in shadow mode. The Limiter resolves them
// before a store sees the request, so every store must give the same
// figures for the windows that apply.

// apiPolicy limits each user when the request names one, and each IP
// otherwise; paid plans get ten times the free limit, acme is exempt, and
// bots are blocked.
func apiPolicy() *sluice.Policy {
	return &sluice.Policy{Name: "api", Rules: []sluice.Rule{
		{Name: "per-user", Limit: 2, Window: time.Minute, By: []string{"user"}, Optional: true,
			Overrides: []sluice.Override{
				{Match: map[string]string{"plan": "paid"}, Limit: 20},
				{Match: map[string]string{"tenant": "acme"}, Unlimited: true},
				{Match: map[string]string{"user": "bot-*"}, Limit: 0},
			}},
		{Name: "per-ip", Limit: 3, Window: time.Minute, By: []string{"ip"}, Unless: []string{"user"}},
	}}
}

var conditionalCases = []testCase{
	{"PerUserElsePerIP", func(e *env) {
		// Requests with a user count per user, whatever their IP; requests
		// without one count per IP.
		p := apiPolicy()
		ada := map[string]string{"user": "ada", "ip": "10.0.0.1"}
		anon := map[string]string{"ip": "10.0.0.1"}
		e.expect("ada #1", e.allow(p, ada, 1), allowed(1))
		e.expect("ada #2", e.allow(p, ada, 1), allowed(0))
		d := e.allow(p, ada, 1)
		e.expect("ada #3", d, denied("per-user", 0, time.Minute))
		if len(d.Limits()) != 1 || d.Limits()[0].Rule != "per-user" {
			e.t.Errorf("ada #3 statuses %+v, want per-user's alone", d.Limits())
		}
		// The same IP without a user: its own window, untouched by ada's.
		for i := range 3 {
			e.expect("anonymous", e.allow(p, anon, 1), allowed(int64(2-i)))
		}
		d = e.allow(p, anon, 1)
		e.expect("anonymous #4", d, denied("per-ip", 0, time.Minute))
		// Ada's other IP shares her window.
		e.expect("ada elsewhere", e.allow(p, map[string]string{"user": "ada", "ip": "10.9.9.9"}, 1), denied("per-user", 0, time.Minute))
	}},

	{"PerValueLimits", func(e *env) {
		p := apiPolicy()
		paid := map[string]string{"user": "bob", "plan": "paid"}
		for i := range 20 {
			if d := e.allow(p, paid, 1); !d.Allowed || d.Limits()[0].Limit != 20 {
				e.t.Fatalf("paid #%d: %+v, want allowed under a limit of 20", i+1, d)
			}
		}
		e.expect("paid #21", e.allow(p, paid, 1), denied("per-user", 0, time.Minute))
		// The same user on the free plan: the free limit over the same
		// window, which holds 20 already.
		e.expect("bob, free", e.allow(p, map[string]string{"user": "bob", "plan": "free"}, 1), denied("per-user", 0, time.Minute))
		// An exempt tenant: no limit, nothing recorded.
		for range 5 {
			d := e.allow(p, map[string]string{"user": "carol", "tenant": "acme"}, 1)
			if !d.Allowed || !d.Unlimited || len(d.Limits()) != 0 || d.Remaining != sluice.UnlimitedRemaining {
				e.t.Fatalf("acme: %+v, want allowed with no limit, Remaining 2^53-1", d)
			}
		}
		e.expect("carol outside acme", e.allow(p, map[string]string{"user": "carol"}, 1), allowed(1))
	}},

	{"BlockedValue", func(e *env) {
		// A limit of 0 denies every request it applies to, and records
		// none; the next request of an ordinary user is unaffected.
		p := apiPolicy()
		bot := map[string]string{"user": "bot-7"}
		for i := range 3 {
			d := e.allow(p, bot, 1)
			if d.Allowed || d.DeniedBy != "per-user" || d.Cause != sluice.CauseLimit || d.Limits()[0].Used != 0 {
				e.t.Fatalf("bot #%d: %+v, want denied by per-user for its limit, nothing used", i+1, d)
			}
		}
		e.expect("a human", e.allow(p, map[string]string{"user": "bot"}, 1), allowed(1))
		// Recorded unconditionally, a blocked window counts the event.
		if d := e.record(p, bot, 1); d.Allowed || d.Limits()[0].Used != 1 {
			e.t.Errorf("record for a bot: %+v, want reported over the limit with 1 used", d)
		}
	}},

	{"ShadowRule", func(e *env) {
		// A rule in shadow mode reports what it would deny and never
		// denies; the request is recorded in its window too.
		p := &sluice.Policy{Name: "rollout", Rules: []sluice.Rule{
			{Name: "live", Limit: 10, Window: time.Minute},
			{Name: "new", Limit: 2, Window: time.Minute, By: []string{"user"}, Shadow: true},
		}}
		u := map[string]string{"user": "ada"}
		e.allow(p, u, 1)
		e.allow(p, u, 1)
		d := e.allow(p, u, 1)
		if !d.Allowed || !d.Shadowed || d.DeniedBy != "new" || d.Cause != sluice.CauseLimit || d.RetryAfter != time.Minute {
			e.t.Errorf("third: %+v, want allowed, shadowed by new, its wait 1m", d)
		}
		e.expectUsed("third", d, 3, 3)
		if s := d.Limits()[1]; s.Fits || !s.Shadow {
			e.t.Errorf("the shadow rule's status %+v, want not fitting, in shadow mode", s)
		}
		// The live rule still denies.
		for range 7 {
			e.allow(p, u, 1)
		}
		d = e.allow(p, u, 1)
		if d.Allowed || d.DeniedBy != "live" || d.Shadowed {
			e.t.Errorf("eleventh: %+v, want denied by live", d)
		}
	}},
}
