package quota

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"time"

	"github.com/sluicerate/sluice/internal/wire"
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

// APIError is an answer of the server other than 200 OK.
type APIError = wire.APIError

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
	w := wire.Client{URL: c.Server, Token: c.Token, Flag: "--server", Listener: "sluice serve"}
	return w.DoJSON(ctx, method, path, body, v)
}
