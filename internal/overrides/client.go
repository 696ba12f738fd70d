package overrides

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"
)

// Client calls the admin API of the overrides (see Routes) on a running
// sluice serve: what `sluice override` drives. Its errors name the flag
// that fixes them, --admin or --token. The zero value calls
// http://127.0.0.1 without a token; a Client is safe for concurrent use.
type Client struct {
	// Admin is the admin listener's URL, such as http://127.0.0.1:9464;
	// without a scheme, http.
	Admin string

	// Token is sent as a bearer token when set.
	Token string
}

// clientTimeout bounds a call of the Client, its answer read.
const clientTimeout = 10 * time.Second

// maxAnswer caps an answer the Client reads.
const maxAnswer = 16 << 20

// APIError is an answer of the admin API other than 200 OK.
type APIError struct {
	// StatusCode and Status are the answer's: 404, "404 Not Found".
	StatusCode int
	Status     string

	// Detail is the server's problem, or what to do about a 401.
	Detail string
}

func (e *APIError) Error() string { return e.Status + ": " + e.Detail }

// Do sends method to /api/v1/overrides+path with body (nil for none) and
// returns the 200 answer as the server wrote it. Any other answer is an
// *APIError.
func (c *Client) Do(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	base := c.Admin
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(base, "/")+"/api/v1/overrides"+path, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("--admin %q: %v", c.Admin, err)
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := (&http.Client{Timeout: clientTimeout}).Do(req)
	if err != nil {
		return nil, fmt.Errorf("%v; is sluice serve's admin listener at %s? (--admin URL)", err, c.Admin)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, maxAnswer))
	if res.StatusCode == http.StatusOK {
		return b, nil
	}
	var p struct{ Detail string }
	if json.Unmarshal(b, &p) != nil || p.Detail == "" {
		p.Detail = strings.TrimSpace(string(b))
	}
	if res.StatusCode == http.StatusUnauthorized {
		p.Detail = "the admin listener requires a token: set SLUICE_ADMIN_TOKEN (or --token) to one of its tokens"
	}
	return nil, &APIError{StatusCode: res.StatusCode, Status: res.Status, Detail: p.Detail}
}

// Summary is one line of what o does.
func (o *Override) Summary() string {
	var b strings.Builder
	if o.Limit != nil && *o.Limit == 0 {
		b.WriteString("blocked")
	} else if o.Limit != nil {
		fmt.Fprintf(&b, "limit %d", *o.Limit)
	}
	if o.Window > 0 {
		fmt.Fprintf(&b, " per %v", time.Duration(o.Window))
	}
	if o.Burst > 0 {
		fmt.Fprintf(&b, ", burst %d", o.Burst)
	}
	if o.MinGap > 0 {
		fmt.Fprintf(&b, ", min gap %v", time.Duration(o.MinGap))
	}
	if o.Until != nil {
		fmt.Fprintf(&b, ", until %s", o.Until.UTC().Format(time.RFC3339))
	}
	if o.SetBy != "" {
		fmt.Fprintf(&b, "; set by %s at %s", o.SetBy, o.SetAt.UTC().Format(time.RFC3339))
	}
	if o.Reason != "" {
		fmt.Fprintf(&b, " (%s)", o.Reason)
	}
	return b.String()
}

// WriteText writes l as a table, an override a line with its state, and
// a line on the store when l is Stale.
func (l *Listing) WriteText(w io.Writer) {
	if l.Stale {
		fmt.Fprintf(w, "the store does not answer (%s); the server applies the set it read last\n", l.Error)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tOVERRIDE")
	for _, o := range l.Overrides {
		state := "active"
		switch {
		case o.Problem != "":
			state = "not applied: " + o.Problem
		case o.Expired:
			state = "ended"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", o.ID, state, o.Summary())
	}
	tw.Flush()
	fmt.Fprintf(w, "%d overrides (this server holds up to %d)\n", len(l.Overrides), l.Max)
}
