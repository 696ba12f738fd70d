package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/redistest"
	"github.com/sluicerate/sluice/redisstore"
)

// Three instances sharing one Redis send 400 notifications over 20
// categories: exactly 100 go out, and no category gets more than 10.
func TestInstancesShareLimits(t *testing.T) {
	srv := redistest.Start(t)
	policy := notifyPolicy(100, 10, 30*time.Minute)
	var (
		mu         sync.Mutex
		perCat     = map[string]int{}
		total      int
		wg         sync.WaitGroup
		ctx        = context.Background()
		categories = 20
	)
	for inst := range 3 {
		store, err := redisstore.New(redisstore.Config{Addrs: []string{srv.Addr()}, Prefix: "notify-test"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { store.Close() })
		// The test counts admissions, not latency: a deadline a loaded
		// machine cannot miss, so that no attempt is decided by the
		// failure policy.
		lim := sluice.NewLimiter(store, sluice.Config{Timeout: 10 * time.Second})
		s := &sender{lim: lim, policy: policy, name: fmt.Sprint(inst), out: io.Discard}
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 34 { // 3 x 4 x 34 = 408 attempts
					c := fmt.Sprintf("category-%02d", (inst*7+g*3+i)%categories)
					ok, err := s.send(ctx, c, "event")
					if err != nil {
						t.Error(err)
						return
					}
					if ok {
						mu.Lock()
						perCat[c]++
						total++
						mu.Unlock()
					}
				}
			}()
		}
	}
	wg.Wait()
	if total != 100 {
		t.Errorf("sent %d notifications, want exactly 100", total)
	}
	for c, n := range perCat {
		if n > 10 {
			t.Errorf("%s sent %d, limit 10", c, n)
		}
	}
}

// TestOpenStore: -redis takes a URL, as every other command does.
func TestOpenStore(t *testing.T) {
	srv := redistest.Start(t)
	s, err := openStore("redis://" + srv.Addr() + "/0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, ok := s.(*redisstore.Store); !ok {
		t.Errorf("openStore of a redis:// URL = %T", s)
	}
	if _, err := openStore(srv.Addr()); err == nil || !strings.Contains(err.Error(), "redis://"+srv.Addr()+"/0") {
		t.Errorf("openStore(%q) = %v, want an error that shows the URL", srv.Addr(), err)
	}
}
