// Command notify is a notification sender that gates every send through a
// hierarchical policy: at most -global notifications per -window across all
// categories, and at most -category per category. Several instances sharing
// one Redis (-redis) share the limits exactly; without -redis it runs on the
// in-memory store.
//
//	go run ./examples/notify -events 400 -categories 20
//	go run ./examples/notify -redis redis://127.0.0.1:6380/0 -instance a &
//	go run ./examples/notify -redis redis://127.0.0.1:6380/0 -instance b
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/memstore"
	"github.com/sluicerate/sluice/redisstore"
	"github.com/sluicerate/sluice/store"
)

// sender sends notifications that its limiter admits.
type sender struct {
	lim    *sluice.Limiter
	policy *sluice.Policy
	name   string
	out    io.Writer
}

// notifyPolicy is the notifier's policy: a global cap over a per-category cap.
func notifyPolicy(global, category int64, window time.Duration) *sluice.Policy {
	return &sluice.Policy{Name: "notify", Rules: []sluice.Rule{
		{Name: "global", Limit: global, Window: window},
		{Name: "category", Limit: category, Window: window, By: []string{"category"}},
	}}
}

// send gates one notification and reports whether it went out.
func (s *sender) send(ctx context.Context, category, text string) (bool, error) {
	d, err := s.lim.Allow(ctx, s.policy, map[string]string{"category": category})
	if err != nil {
		return false, err
	}
	if !d.Allowed {
		fmt.Fprintf(s.out, "%s drop  %-12s denied by %s, retry in %v\n", s.name, category, d.DeniedBy, d.RetryAfter.Round(time.Millisecond))
		return false, nil
	}
	// A real sender would post text to a chat channel here.
	fmt.Fprintf(s.out, "%s send  %-12s %s (%d left)\n", s.name, category, text, d.Remaining)
	return true, nil
}

// openStore opens the in-memory store, or Redis at redisURL when it is set.
func openStore(redisURL string) (store.Store, error) {
	if redisURL == "" {
		return memstore.New(memstore.Config{}), nil
	}
	if !strings.Contains(redisURL, "://") {
		return nil, fmt.Errorf("-redis %q is not a URL: write redis://%s/0", redisURL, redisURL)
	}
	return redisstore.New(redisstore.Config{URL: redisURL, Prefix: "sluice-notify"})
}

func main() {
	redisURL := flag.String("redis", "", "share the limits through Redis at this `URL`, redis[s]://[user:password@]host:port[/db]; default: in memory")
	instance := flag.String("instance", "notify", "this instance's name, printed on each line")
	events := flag.Int("events", 50, "notifications to send")
	categories := flag.Int("categories", 5, "event categories, picked at random")
	global := flag.Int64("global", 100, "notifications per window, all categories")
	perCategory := flag.Int64("category", 10, "notifications per window and category")
	window := flag.Duration("window", 30*time.Minute, "the sliding window")
	flag.Parse()

	store, err := openStore(*redisURL)
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	s := &sender{
		lim:    sluice.NewLimiter(store, sluice.Config{}),
		policy: notifyPolicy(*global, *perCategory, *window),
		name:   *instance,
		out:    os.Stdout,
	}
	ctx := context.Background()
	sent := 0
	for i := range *events {
		c := fmt.Sprintf("category-%02d", rand.IntN(*categories))
		ok, err := s.send(ctx, c, fmt.Sprintf("event %d", i))
		if err != nil {
			log.Fatal(err)
		}
		if ok {
			sent++
		}
	}
	fmt.Printf("%s sent %d of %d\n", *instance, sent, *events)
}
