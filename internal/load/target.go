package load

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/memstore"
	"github.com/sluicerate/sluice/redisstore"
	"github.com/sluicerate/sluice/store"
)

// Options are sluice bench's workload and what it drives: the in-memory
// store, Redis at RedisURL, or a sluice server at ServerURL. Each field is
// a flag of the command's.
type Options struct {
	RedisURL   string
	ServerURL  string
	Policy     string // with ServerURL: the configured policy to decide
	Attr       string // with ServerURL: the attribute whose value is the key
	Goroutines int
	Keys       int
	Limit      int64
	Window     time.Duration
	Rules      int
	Duration   time.Duration
	Timeout    time.Duration // deadline of each store call; 0: none
	Budget     time.Duration // each rule's Budget: answered from leased slices
}

// Check returns what is wrong with o's flags, or nil.
func (o *Options) Check() error {
	switch {
	case o.RedisURL != "" && o.ServerURL != "":
		return errors.New("--redis and --server exclude each other")
	case o.Goroutines < 1 || o.Keys < 1 || o.Rules < 1 || o.Limit < 1:
		return errors.New("--goroutines, --keys, --rules and --limit must be at least 1")
	case o.Duration <= 0 || o.Window < time.Microsecond:
		return errors.New("--duration must be positive and --window at least 1µs")
	case o.Budget != 0 && o.ServerURL != "":
		return errors.New("--budget and --server exclude each other: budget the policy in the server's configuration (budget: D), and the run counts its local answers")
	}
	return nil
}

// CountsLocal reports whether a run of o counts the decisions answered
// from leased slices: a budgeted one, or one through a server, which
// marks them.
func (o *Options) CountsLocal() bool { return o.Budget > 0 || o.ServerURL != "" }

// Workload returns o's workload, reporting its progress to progress.
func (o *Options) Workload(progress func(Progress)) Workload {
	return Workload{Goroutines: o.Goroutines, Keys: o.Keys, Duration: o.Duration, Progress: progress}
}

// Target is what a run drives, open.
type Target struct {
	NewDecide func() Decide // a decider per goroutine
	Where     string        // what it is, as the run's header names it
	close     func()
}

// Close releases the target's store or connections.
func (t *Target) Close() { t.close() }

// Header returns the line that starts a run of o on t.
func (o *Options) Header(t *Target) string {
	budget := ""
	if o.Budget > 0 {
		budget = fmt.Sprintf(", budget %v", o.Budget)
	}
	return fmt.Sprintf("%s: %d goroutines, %d keys, %d rule(s) of %d per %v%s, %v",
		t.Where, o.Goroutines, o.Keys, o.Rules, o.Limit, o.Window, budget, o.Duration)
}

// Open checks o and opens what it drives: for the in-memory store or Redis,
// a Limiter deciding a policy of o.Rules rules by the key, as the bench
// module drives sluice; for a server, its /v1/decide.
func (o *Options) Open() (*Target, error) {
	if err := o.Check(); err != nil {
		return nil, err
	}
	names := make([]string, o.Keys)
	for i := range names {
		names[i] = "k" + strconv.Itoa(i)
	}
	if o.ServerURL != "" {
		return o.openServer(names)
	}
	p := &sluice.Policy{Name: "bench"}
	for i := range o.Rules {
		p.Rules = append(p.Rules, sluice.Rule{Name: "r" + strconv.Itoa(i), Limit: o.Limit, Window: o.Window, By: []string{"key"}, Budget: o.Budget})
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var (
		st    store.Store
		where = "the in-memory store"
	)
	if o.RedisURL != "" {
		rs, err := redisstore.New(redisstore.Config{URL: o.RedisURL, Prefix: "sluice-bench"})
		if err != nil {
			return nil, err
		}
		st, where = rs, "Redis at "+redactURL(o.RedisURL)
	} else {
		st = memstore.New(memstore.Config{})
	}
	// The Limiter the bench module drives: no per-call deadline unless
	// Timeout asks for one, and no circuit breaker, which would turn a
	// failing store's calls into instant errors.
	cfg := sluice.Config{Timeout: -1, Breaker: sluice.Breaker{Failures: -1}}
	if o.Timeout > 0 {
		cfg.Timeout = o.Timeout
	}
	lim := sluice.NewLimiter(st, cfg)
	newDecide := func() Decide {
		attrs := map[string]string{"key": ""}
		return func(ctx context.Context, i int) (Answer, error) {
			attrs["key"] = names[i]
			d, err := lim.Allow(ctx, p, attrs)
			return Answer{Allowed: d.Allowed, Local: d.Local}, err
		}
	}
	return &Target{NewDecide: newDecide, Where: where, close: func() { _ = lim.Close(); st.Close() }}, nil
}

// openServer posts to the server's /v1/decide.
func (o *Options) openServer(names []string) (*Target, error) {
	base := strings.TrimRight(o.ServerURL, "/")
	if !strings.HasPrefix(base, "http://") && !strings.HasPrefix(base, "https://") {
		return nil, fmt.Errorf("--server %q: write it as http://host:port", o.ServerURL)
	}
	tr := &http.Transport{MaxIdleConns: o.Goroutines, MaxIdleConnsPerHost: o.Goroutines, IdleConnTimeout: time.Minute}
	client := &http.Client{Transport: tr}
	url := base + "/v1/decide"
	policyJSON, err := json.Marshal(o.Policy)
	if err != nil {
		return nil, err
	}
	attr, err := json.Marshal(o.Attr)
	if err != nil {
		return nil, err
	}
	newDecide := func() Decide {
		var body []byte
		var reply struct {
			Allowed bool `json:"allowed"`
			Local   bool `json:"local"`
		}
		return func(ctx context.Context, i int) (Answer, error) {
			body = append(body[:0], `{"policy":`...)
			body = append(body, policyJSON...)
			body = append(body, `,"attributes":{`...)
			body = append(body, attr...)
			body = append(body, `:"`...)
			body = append(body, names[i]...)
			body = append(body, `"},"cost":1}`...)
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
			if err != nil {
				return Answer{}, err
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if err != nil {
				return Answer{}, err
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
				return Answer{}, fmt.Errorf("%s: %s: %s", url, resp.Status, bytes.TrimSpace(msg))
			}
			reply.Allowed, reply.Local = false, false
			if err := json.NewDecoder(resp.Body).Decode(&reply); err != nil {
				return Answer{}, fmt.Errorf("%s: %w", url, err)
			}
			return Answer{Allowed: reply.Allowed, Local: reply.Local}, nil
		}
	}
	return &Target{NewDecide: newDecide, Where: "the server at " + base, close: tr.CloseIdleConnections}, nil
}

// redactURL hides a password in a Redis URL.
func redactURL(u string) string {
	scheme, rest, ok := strings.Cut(u, "://")
	if !ok {
		return u
	}
	at := strings.LastIndexByte(rest, '@')
	if at < 0 {
		return u
	}
	return scheme + "://***@" + rest[at+1:]
}
