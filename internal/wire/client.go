package wire

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Client calls a JSON API of a running sluice serve: the overrides API
// that sluice override drives, POST /v1/credits and GET /v1/usage that
// sluice credits and usage drive. Its errors name the flag that fixes
// them. A Client is safe for concurrent use.
type Client struct {
	// URL is the listener's, such as http://127.0.0.1:9464; without a
	// scheme, http.
	URL string

	// Token is sent as a bearer token when set: an admin token.
	Token string

	// Flag names the flag that sets URL (--admin, --server) and Listener
	// what should answer there (sluice serve's admin listener), for the
	// errors.
	Flag, Listener string
}

// clientTimeout bounds a call of a Client, its answer read.
const clientTimeout = 10 * time.Second

// maxAnswer caps an answer a Client reads.
const maxAnswer = 16 << 20

// APIError is an answer of the API other than 200 OK.
type APIError struct {
	// StatusCode and Status are the answer's: 404, "404 Not Found".
	StatusCode int
	Status     string

	// Detail is the server's problem, or what to do about a 401.
	Detail string
}

func (e *APIError) Error() string { return e.Status + ": " + e.Detail }

// Do sends method to path with body (nil for none) and returns the 200
// answer as the server wrote it. Any other answer is an *APIError.
func (c *Client) Do(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	base := c.URL
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(base, "/")+path, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%s %q: %v", c.Flag, c.URL, err)
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := (&http.Client{Timeout: clientTimeout}).Do(req)
	if err != nil {
		return nil, fmt.Errorf("%v; is %s at %s? (%s URL)", err, c.Listener, c.URL, c.Flag)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, maxAnswer))
	if err != nil {
		return nil, fmt.Errorf("reading the answer of %s: %v", c.URL, err)
	}
	if res.StatusCode == http.StatusOK {
		return b, nil
	}
	var p struct{ Detail string }
	if json.Unmarshal(b, &p) != nil || p.Detail == "" {
		p.Detail = strings.TrimSpace(string(b))
	}
	if res.StatusCode == http.StatusUnauthorized {
		// The server's detail is for a browser too; a command's user
		// gives the token by a variable or a flag.
		p.Detail = c.Listener + " requires a token: set SLUICE_ADMIN_TOKEN (or --token) to one of its admin tokens"
	}
	return nil, &APIError{StatusCode: res.StatusCode, Status: res.Status, Detail: p.Detail}
}

// DoJSON is Do, the 200 answer decoded into v.
func (c *Client) DoJSON(ctx context.Context, method, path string, body []byte, v any) error {
	b, err := c.Do(ctx, method, path, body)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("the answer of %s: %v", c.URL, err)
	}
	return nil
}
