package overrides

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluicerate/sluice/internal/wire"
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

// APIError is an answer of the admin API other than 200 OK.
type APIError = wire.APIError

// Do sends method to /api/v1/overrides+path with body (nil for none) and
// returns the 200 answer as the server wrote it. Any other answer is an
// *APIError.
func (c *Client) Do(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	w := wire.Client{URL: c.Admin, Token: c.Token, Flag: "--admin", Listener: "sluice serve's admin listener"}
	return w.Do(ctx, method, "/api/v1/overrides"+path, body)
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
