package admin

import (
	"bytes"
	"errors"
	"html/template"
	"net/http"
	"strconv"
	"time"

	"github.com/sluicerate/sluice/internal/quota"
)

// The usage chart: one key's periods of a calendar quota as bars, oldest
// on the left, with the limit as a line, drawn on the server as SVG (the
// page runs no script), and the same figures as a table. The inspector
// links to it for a calendar quota's window: GET /usage with the query of
// GET /v1/usage (policy, rule, the key's attributes, and at).

// chart is what usageTemplate draws.
type chart struct {
	Title, Error string
	Usage        quota.Usage
	Bars         []bar
	Width        int
	LimitY       int // the limit line's y
	Top          int64
}

// bar is one period's bar.
type bar struct {
	X, Y, W, H  int
	LabelX      int
	Label, Tip  string
	Start, End  string // RFC 3339
	Used, Limit int64
	Over        bool // past the limit (credits paid for the overage)
}

// The chart's geometry, in SVG units.
const (
	chartHeight = 220 // of the bars' area
	chartTop    = 16  // room above it
	barWidth    = 28
	barGap      = 20
	chartLeft   = 56 // room for the axis's figures
)

func (a *admin) handleUsageChart(w http.ResponseWriter, r *http.Request) {
	c := chart{Title: "usage"}
	status := http.StatusOK
	u, err := a.usage(r)
	if err != nil {
		p := quota.Problem(err)
		status, c.Error = p.Status, p.Detail
	} else {
		c = newChart(u)
	}
	var b bytes.Buffer
	if err := usageTemplate.Execute(&b, &c); err != nil {
		a.f.Log.Error("drawing the usage chart", "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// usage reads the usage r's query names.
func (a *admin) usage(r *http.Request) (quota.Usage, error) {
	t, err := quota.ParseUsageQuery(r.URL.Query())
	if err != nil {
		return quota.Usage{}, err
	}
	st := a.f.State()
	p, err := st.Config.FindPolicy(t.Policy)
	if err != nil {
		return quota.Usage{}, err
	}
	if a.f.Store == nil {
		return quota.Usage{}, errors.New("the server has no store")
	}
	return quota.Source{Limiter: st.Limiter, Store: a.f.Store}.Usage(r.Context(), p, t.Rule, t.Attributes, t.At)
}

// newChart lays out u's periods as bars, oldest first.
func newChart(u quota.Usage) chart {
	c := chart{Title: u.Policy + " / " + u.Rule, Usage: u, Top: u.Limit}
	for _, p := range u.Periods {
		c.Top = max(c.Top, p.Used)
	}
	c.Top = max(c.Top+c.Top/10, 1)
	y := func(v int64) int { return chartTop + chartHeight - int(float64(v)/float64(c.Top)*chartHeight+0.5) }
	n := len(u.Periods)
	for i := range n {
		p := u.Periods[n-1-i]
		x := chartLeft + barGap + i*(barWidth+barGap)
		b := bar{X: x, Y: y(p.Used), W: barWidth, LabelX: x + barWidth/2, Label: periodLabel(u.Period, p.Start),
			Start: p.Start.Format(time.RFC3339), End: p.End.Format(time.RFC3339), Used: p.Used, Limit: p.Limit, Over: p.Used > p.Limit}
		b.H = chartTop + chartHeight - b.Y
		b.Tip = b.Start + " to " + b.End + ": " + strconv.FormatInt(p.Used, 10) + " of " + strconv.FormatInt(p.Limit, 10)
		c.Bars = append(c.Bars, b)
	}
	c.Width = chartLeft + barGap + n*(barWidth+barGap) + 20
	c.LimitY = y(u.Limit)
	return c
}

// periodLabel is the label under a period's bar.
func periodLabel(period string, start time.Time) string {
	switch period {
	case "day", "week":
		return start.Format("Jan 2")
	case "year":
		return start.Format("2006")
	}
	return start.Format("Jan 06")
}

var usageTemplate = template.Must(template.New("usage").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>sluice: {{.Title}}</title>
<link rel="stylesheet" href="app.css">
<style>
svg.usage text { font: 11px system-ui, sans-serif; fill: #66707c; }
svg.usage rect.used { fill: #1c7ed6; }
svg.usage rect.used.over { fill: #f08c00; }
svg.usage line.limit { stroke: #e03131; stroke-dasharray: 4 3; }
svg.usage line.axis { stroke: #dde1e6; }
</style>
</head>
<body>
<header><h1>sluice</h1><div class="meta"><a href="./" style="color:#c4cad2">back to the admin view</a></div></header>
<main>
{{if .Error}}<p class="error" id="usage-error">{{.Error}}</p>{{else}}{{with .Usage}}
<section id="usage" data-policy="{{.Policy}}" data-rule="{{.Rule}}" data-periods="{{len .Periods}}">
<h2>{{.Policy}} / {{.Rule}}: at most {{.Limit}} per {{.Period}} ({{.TimeZone}})</h2>
<p class="note">One bar per period, oldest first; the dashed line is the limit now. A bar past it counts what credits paid for.</p>
{{end}}
<svg class="usage" xmlns="http://www.w3.org/2000/svg" width="{{.Width}}" height="270" viewBox="0 0 {{.Width}} 270" role="img" aria-label="usage by period">
<line class="axis" x1="56" y1="236" x2="{{.Width}}" y2="236"/>
<text x="50" y="240" text-anchor="end">0</text>
<text x="50" y="{{.LimitY}}" text-anchor="end" dy="4">{{.Usage.Limit}}</text>
{{range .Bars}}<g data-period="{{.Start}}" data-used="{{.Used}}">
<rect class="used{{if .Over}} over{{end}}" x="{{.X}}" y="{{.Y}}" width="{{.W}}" height="{{.H}}"><title>{{.Tip}}</title></rect>
<text x="{{.LabelX}}" y="252" text-anchor="middle">{{.Label}}</text>
<text x="{{.LabelX}}" y="{{.Y}}" dy="-3" text-anchor="middle">{{.Used}}</text>
</g>
{{end}}<line class="limit" x1="56" y1="{{.LimitY}}" x2="{{.Width}}" y2="{{.LimitY}}"/>
</svg>
<table id="usage-table">
<thead><tr><th>start</th><th>end</th><th class="num">used</th><th class="num">limit</th></tr></thead>
<tbody>{{range .Usage.Periods}}
<tr data-start="{{.Start.Format "2006-01-02T15:04:05Z07:00"}}" data-used="{{.Used}}"><td>{{.Start.Format "2006-01-02 15:04 MST"}}</td><td>{{.End.Format "2006-01-02 15:04 MST"}}</td><td class="num">{{.Used}}</td><td class="num">{{.Limit}}</td></tr>{{end}}
</tbody>
</table>
</section>{{end}}
</main>
</body>
</html>
`))
