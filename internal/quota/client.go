package quota

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Client calls POST /v1/credits and GET /v1/usage on a running sluice
// serve, on its public listener or its admin listener (both serve them):
// what sluice credits and sluice usage drive with --server. Its errors
// name the flag that fixes them. A Client is safe for concurrent use.
type Client struct {
	// Server is the listener's URL, such as http://127.0.0.1:8080;
	// without a scheme, http.
	Server string

	// Token is sent as a bearer token when set: an admin token.
	Token string
}

// clientTimeout bounds a call of the Client, its answer read.
const clientTimeout = 10 * time.Second

// maxAnswer caps an answer the Client reads.
const maxAnswer = 16 << 20

// APIError is an answer of the server other than 200 OK.
type APIError struct {
	StatusCode int    // 400
	Status     string // "400 Bad Request"
	Detail     string // the problem's detail, or what to do about a 401
}

func (e *APIError) Error() string { return e.Status + ": " + e.Detail }

// Credit sends req to POST /v1/credits.
func (c *Client) Credit(ctx context.Context, req *CreditRequest) (Balance, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return Balance{}, err
	}
	var b Balance
	return b, c.do(ctx, http.MethodPost, "/v1/credits", body, &b)
}

// Usage asks GET /v1/usage for the usage of the calendar quota named rule
// (""; the policy's only one) of policy for attrs, with at's period as the
// current one (the zero time: the server's now).
func (c *Client) Usage(ctx context.Context, policy, rule string, attrs map[string]string, at time.Time) (Usage, error) {
	q := UsageQuery(policy, rule, attrs, at)
	var u Usage
	return u, c.do(ctx, http.MethodGet, "/v1/usage?"+q.Encode(), nil, &u)
}

// UsageQuery is the query of GET /v1/usage (and of the admin view's usage
// chart) for a policy, a rule, attributes and a time.
func UsageQuery(policy, rule string, attrs map[string]string, at time.Time) url.Values {
	q := url.Values{}
	for k, v := range attrs {
		q.Set(k, v)
	}
	q.Set("policy", policy)
	if rule != "" {
		q.Set("rule", rule)
	}
	if !at.IsZero() {
		q.Set("at", at.Format(time.RFC3339Nano))
	}
	return q
}

// do sends method to path with body (nil for none) and decodes a 200
// answer into v. Any other answer is an *APIError.
func (c *Client) do(ctx context.Context, method, path string, body []byte, v any) error {
	base := c.Server
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(base, "/")+path, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("--server %q: %v", c.Server, err)
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := (&http.Client{Timeout: clientTimeout}).Do(req)
	if err != nil {
		return fmt.Errorf("%v; is sluice serve at %s? (--server URL)", err, c.Server)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, maxAnswer))
	if err != nil {
		return fmt.Errorf("reading the answer of %s: %v", c.Server, err)
	}
	if res.StatusCode != http.StatusOK {
		var p struct{ Detail string }
		if json.Unmarshal(b, &p) != nil || p.Detail == "" {
			p.Detail = strings.TrimSpace(string(b))
		}
		if res.StatusCode == http.StatusUnauthorized {
			p.Detail += "; set SLUICE_ADMIN_TOKEN (or --token) to an admin token of the server"
		}
		return &APIError{StatusCode: res.StatusCode, Status: res.Status, Detail: p.Detail}
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("the answer of %s: %v", c.Server, err)
	}
	return nil
}
