package main

import (
	"testing"
	"time"

	"github.com/sluicerate/sluice/internal/redistest"
)

// penalizeConfig is a penalized limit of 3 per 3 seconds.
const penalizeConfig = `
policies:
  - name: login
    penalize: true
    limits:
      - {name: per-user, by: [user], limit: 3, window: 3s}
`

// TestServePenalizeRetryAfter runs, on sluice serve's real clock, the
// scenario of a client that waits exactly what it is told: requests at 0,
// 1.2s and 1.5s are admitted; the fourth, at 2.4s, is denied and recorded,
// so the window holds it with the second and third. Its retry_after_ms is
// therefore the time until the second entry leaves (1.8s), not until the
// first does (0.6s), and a request sent retry_after_ms after the answer is
// admitted.
func TestServePenalizeRetryAfter(t *testing.T) {
	t.Parallel()
	stores := map[string]func(t *testing.T) string{
		"memory": func(t *testing.T) string { return penalizeConfig },
		"redis": func(t *testing.T) string {
			return redisSection(redistest.Start(t).Addr(), "penalize") + penalizeConfig
		},
	}
	for name, config := range stores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := startServe(t, writeFile(t, t.TempDir(), "sluice.yaml", config(t)))
			type decision struct {
				Allowed      bool
				RetryAfterMS int64  `json:"retry_after_ms"`
				DeniedBy     string `json:"denied_by"`
				Cause        string
			}
			const body = `{"policy":"login","attributes":{"user":"ada"}}`
			decide := func() (d decision, sent, answered time.Time) {
				sent = time.Now()
				p.post("/v1/decide", body, &d)
				return d, sent, time.Now()
			}
			start := time.Now()
			var sent [4]time.Time
			var d decision
			var answered time.Time
			for i, at := range []time.Duration{0, 1200 * time.Millisecond, 1500 * time.Millisecond, 2400 * time.Millisecond} {
				time.Sleep(time.Until(start.Add(at)))
				d, sent[i], answered = decide()
				if want := i < 3; d.Allowed != want {
					t.Fatalf("request %d at %v: %+v, want allowed %v", i+1, at, d, want)
				}
			}
			if d.DeniedBy != "per-user" || d.Cause != "limit" {
				t.Errorf("fourth: %+v, want denied by per-user for its limit", d)
			}
			// The second entry was recorded no earlier than its request was
			// sent, and the fourth decided no later than its answer came:
			// the wait is at least that far apart, about 1.8s, where the
			// first entry alone would leave in about 0.6s.
			if least := sent[1].Add(3 * time.Second).Sub(answered); time.Duration(d.RetryAfterMS)*time.Millisecond < least {
				t.Fatalf("fourth: retry_after_ms %d, want at least %v: the penalized attempt counts", d.RetryAfterMS, least)
			}
			time.Sleep(time.Until(answered.Add(time.Duration(d.RetryAfterMS) * time.Millisecond)))
			if d, _, _ := decide(); !d.Allowed {
				t.Errorf("after waiting retry_after_ms %d: %+v, want admitted", d.RetryAfterMS, d)
			}
		})
	}
}
