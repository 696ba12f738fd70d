package load

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Draw writes p as a progress bar that overwrites the line it is on.
func (p Progress) Draw(w io.Writer) {
	const width = 30
	n := int(p.Done * width)
	fmt.Fprintf(w, "\r[%s%s] %3.0f%%  %d decisions  %.0f/s  %d errors",
		strings.Repeat("#", n), strings.Repeat(".", width-n), p.Done*100, p.Decisions, p.Rate, p.Errors)
}

// ClearProgress erases the line a progress bar was drawn on.
func ClearProgress(w io.Writer) { fmt.Fprint(w, "\r\033[K") }

// Print writes the run's figures to w: decisions per second, the share
// allowed and the errors; with local, the decisions answered from leased
// slices; the first error; the latency quantiles (rounded to the
// microsecond) and a histogram.
func (r *Result) Print(w io.Writer, local bool) {
	fmt.Fprintf(w, "%d decisions in %v: %.0f decisions/s, %.1f%% allowed, %d errors (not counted as decisions)\n",
		r.Decisions, r.Elapsed.Round(time.Millisecond), r.PerSecond(), 100*float64(r.Allowed)/float64(max(r.Decisions, 1)), r.Errors)
	if local {
		fmt.Fprintf(w, "%d decisions local (%.1f%%): answered from leased slices of budgeted rules\n",
			r.Local, 100*float64(r.Local)/float64(max(r.Decisions, 1)))
	}
	if r.FirstErr != nil {
		fmt.Fprintf(w, "first error: %v\n", r.FirstErr)
	}
	if r.Latency.N() == 0 {
		return
	}
	q := func(q float64) time.Duration { return r.Latency.Quantile(q).Round(time.Microsecond) }
	fmt.Fprintf(w, "latency: p50 %v  p90 %v  p99 %v  p99.9 %v  max %v\n", q(0.5), q(0.9), q(0.99), q(0.999), r.Latency.Max())
	fmt.Fprintln(w, "\nlatency histogram:")
	r.Latency.Draw(w)
}
