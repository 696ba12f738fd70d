package main

import (
	"fmt"
	"strings"
	"time"
	_ "time/tzdata" // the calendar rule's time zone, on a machine without a zone database

	"github.com/sluicerate/sluice"
)

// The rows of a calendar quota and a credits balance, beside the sliding
// counter's in the redis and instructions sections: the one key each keeps
// per window must cost Redis no more per decision than the sliding
// counter's one string key, and quotaVerdict says whether it does.

// quotaLocation is the calendar rule's time zone: one with daylight saving,
// as a plan's customers have.
var quotaLocation = func() *time.Location {
	l, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		panic(err) // time/tzdata holds it
	}
	return l
}()

// Names of the contenders quotaVerdict compares.
const (
	slidingCounterRow = "sluice sliding-counter"
	calendarRow       = "sluice calendar (month, history 12)"
	creditsRow        = "sluice credits (refilled monthly)"
)

// calendarPolicy is onePolicy as a calendar quota: a count per key and
// month in Europe/Berlin, keeping 12 months of history, at a limit no run
// reaches, so that every decision is admitted and writes, as the sliding
// counter's do.
func calendarPolicy() *sluice.Policy {
	return &sluice.Policy{Name: "bench-calendar", Rules: []sluice.Rule{
		{Name: "per-key", Limit: 100_000_000, By: []string{"key"}, Period: sluice.Month, Location: quotaLocation, History: 12},
	}}
}

// creditsPolicy is a credits balance per key that every decision draws by
// its cost, starting at and refilled monthly to an amount no run spends.
func creditsPolicy() *sluice.Policy {
	const balance = 100_000_000
	return &sluice.Policy{Name: "bench-credits", Rules: []sluice.Rule{
		{Name: "per-key", Algorithm: sluice.Credits, Limit: balance, By: []string{"key"},
			Location: quotaLocation, Refill: sluice.Refill{To: balance, Every: sluice.Month}},
	}}
}

// quotaVerdict prints how the calendar and credits rows compare with the
// sliding counter's in figures (by contender name: what per decision, shown
// with prec decimals), and whether each costs no more. It prints nothing
// when the sliding counter or both quota rows were not run.
func quotaVerdict(what string, prec int, figures map[string]float64) {
	base, ok := figures[slidingCounterRow]
	if !ok || base <= 0 {
		return
	}
	var parts []string
	verdict := "yes"
	for _, name := range []string{calendarRow, creditsRow} {
		f, ok := figures[name]
		if !ok {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %.*f (%.2f×)", name, prec, f, f/base))
		if f > base {
			verdict = "NO"
		}
	}
	if len(parts) == 0 {
		return
	}
	fmt.Printf("Calendar and credits rules, %s per decision against the sliding counter's %.*f: %s. At most the sliding counter's: %s.\n\n",
		what, prec, base, strings.Join(parts, "; "), verdict)
}
