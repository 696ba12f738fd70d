// Package demo is the notifier scenario of `sluice demo`: a global cap of
// 10 notifications over a cap of 3 per category, both per minute, and a
// stream of notifications that bursts "errors" first.
package demo

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/sluicerate/sluice"
)

// policy is the notifier's: a global cap of 10 over a cap of 3 per
// category, both per 60 seconds.
var policy = sluice.Policy{Name: "notify", Rules: []sluice.Rule{
	{Name: "global", Limit: 10, Window: time.Minute},
	{Name: "category", Limit: 3, Window: time.Minute, By: []string{"category"}},
}}

// Events is the stream of notifications the demo sends, by category:
// errors burst first, then the other categories share what the global cap
// leaves.
var Events = []string{
	"errors", "errors", "errors", "errors", "warnings", "info", "warnings", "debug",
	"info", "warnings", "warnings", "debug", "info", "debug", "info", "audit",
}

// Line is one attempt of the demo, as `sluice demo --json` prints it.
type Line struct {
	Attempt      int              `json:"attempt"`
	Category     string           `json:"category"`
	Allowed      bool             `json:"allowed"`
	DeniedBy     string           `json:"denied_by"`
	Remaining    int64            `json:"remaining"`
	RetryAfterMS int64            `json:"retry_after_ms"`
	Limits       map[string]int64 `json:"used"` // by rule
}

// Run sends Events through lim, in order, and calls each with every
// attempt's Line. It stops at the first error of lim or of each.
func Run(ctx context.Context, lim *sluice.Limiter, each func(Line) error) error {
	for i, c := range Events {
		d, err := lim.Allow(ctx, &policy, map[string]string{"category": c})
		if err != nil {
			return err
		}
		line := Line{Attempt: i + 1, Category: c, Allowed: d.Allowed, DeniedBy: d.DeniedBy,
			Remaining: d.Remaining, RetryAfterMS: d.RetryAfter.Milliseconds(), Limits: map[string]int64{}}
		for _, s := range d.Limits() {
			line.Limits[s.Rule] = s.Used
		}
		if err := each(line); err != nil {
			return err
		}
	}
	return nil
}

// Header is the line the text output starts with: the policy on the
// store at where.
func Header(where string) string {
	return fmt.Sprintf("policy %q on %s: global %d, category %d, per %v\n",
		policy.Name, where, policy.Rules[0].Limit, policy.Rules[1].Limit, policy.Rules[0].Window)
}

// String is l as one line of text: the attempt, whether it was sent or
// which rule denied it, what each cap has used, and when to retry.
func (l Line) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%-2d %-9s ", l.Attempt, l.Category)
	if l.Allowed {
		b.WriteString("allowed  ")
	} else {
		fmt.Fprintf(&b, "denied by %-8s ", l.DeniedBy)
	}
	fmt.Fprintf(&b, " global %2d/%d  category %d/%d", l.Limits["global"], policy.Rules[0].Limit,
		l.Limits["category"], policy.Rules[1].Limit)
	if !l.Allowed {
		fmt.Fprintf(&b, "  retry in %v", (time.Duration(l.RetryAfterMS) * time.Millisecond).Round(time.Second))
	}
	return b.String()
}
