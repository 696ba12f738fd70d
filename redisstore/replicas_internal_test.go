package redisstore

import (
	"testing"
	"time"
)

// TestReplicaGrace walks the count of replicas a call waits for through
// the polls' observations, on explicit times.
func TestReplicaGrace(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	a := &masterAcks{grace: 30 * time.Second}
	steps := []struct {
		when   int
		replid string
		online int64
		want   int64
		why    string
	}{
		{0, "m1", 2, 2, "two replicas online"},
		{1, "m1", 1, 2, "one missing: still waited for"},
		{20, "m1", 2, 2, "back within the grace"},
		{21, "m1", 1, 2, "missing again: the grace starts anew"},
		{50, "m1", 1, 2, "29 s missing"},
		{51, "m1", 1, 1, "30 s missing: no longer waited for"},
		{52, "m1", 2, 2, "back: waited for again"},
		{53, "m2", 0, 0, "a new master (replication ID) with no replica yet"},
		{54, "m2", 1, 1, "its first replica"},
	}
	for _, s := range steps {
		a.observe(s.replid, s.online, at(s.when))
		if got := a.want.Load(); got != s.want {
			t.Fatalf("at %d s, %s: waits for %d replicas, want %d", s.when, s.why, got, s.want)
		}
	}

	// Without a grace a missing replica is waited for however long.
	a = &masterAcks{}
	a.observe("m1", 1, at(0))
	a.observe("m1", 0, at(1))
	a.observe("m1", 0, at(100_000))
	if got := a.want.Load(); got != 1 {
		t.Errorf("no grace, a replica missing for a day: waits for %d, want 1", got)
	}

	// A grace is for WaitForReplicas, and above 0.
	for _, cfg := range []Config{{ReplicaGrace: time.Second}, {WaitForReplicas: true, ReplicaGrace: -time.Second}} {
		if _, err := newStore(nil, cfg); err == nil {
			t.Errorf("newStore(%+v): no error", cfg)
		}
	}
}
