package admin_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sluicerate/sluice/internal/config"
	"github.com/sluicerate/sluice/internal/server"
	"github.com/sluicerate/sluice/memstore"
)

const usageBrowserConfig = `
policies:
  - name: plan
    limits:
      - {name: monthly, by: [user], period: month, limit: 5, history: 5}
`

// TestUsageChartInBrowser decides a key's requests over three months on
// Redis on the server's clock, inspects the key on the admin page in
// headless Chromium, follows the calendar quota's link to its usage chart
// and checks what it draws: one bar per period, oldest first, each with
// the month's count, on a page that runs no script.
func TestUsageChartInBrowser(t *testing.T) {
	chrome := browserPath(t)
	bs := newBrowserServer(t, usageBrowserConfig, 0)
	decide := func(n int) {
		t.Helper()
		for range n {
			res, err := http.Post(bs.public.URL+"/v1/decide", "application/json", strings.NewReader(`{"policy":"plan","attributes":{"user":"ann"}}`))
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != 200 {
				t.Fatalf("decide = %d", res.StatusCode)
			}
		}
	}
	// This month 3, the next 6 (5 admitted), the one after 2.
	now := bs.clock.Now().UTC()
	month := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	decide(3)
	bs.clock.Set(month.AddDate(0, 1, 3))
	decide(6)
	bs.clock.Set(month.AddDate(0, 2, 10))
	decide(2)

	b := openPage(t, chrome, bs.admin.URL+"/?token="+browserToken, `[data-policy="plan"]`)
	b.text(`document.getElementById("inspect-target").value = "policy:plan";
		document.getElementById("inspect-target").dispatchEvent(new Event("change")); "ok"`)
	if err := chromedp.Do(b.ctx,
		chromedp.SendKeys(chromedp.CSS(`#inspect-attrs input[data-attr="user"]`), "ann"),
		chromedp.Click(chromedp.CSS(`#inspect-go`)),
	); err != nil {
		t.Fatalf("inspecting: %v", err)
	}
	b.eventually("the usage link", `document.querySelector('[data-usage-link="monthly"]') ? "shown" : "missing"`, "shown")
	if err := chromedp.Do(b.ctx, chromedp.Click(chromedp.CSS(`[data-usage-link="monthly"]`)), chromedp.WaitVisible(chromedp.CSS(`#usage`))); err != nil {
		t.Fatalf("opening the usage chart: %v", err)
	}
	if got := b.text(`[...document.querySelectorAll('#usage svg g[data-used]')].map(g => g.dataset.used).join(",")`); got != "0,0,0,3,5,2" {
		t.Errorf("the bars' counts, oldest first: %q, want 0,0,0,3,5,2", got)
	}
	if got := b.text(`document.querySelector('#usage svg g[data-used]:last-of-type').dataset.period`); !strings.HasPrefix(got, month.AddDate(0, 2, 0).Format("2006-01-02")) {
		t.Errorf("the last bar is the period of %q, want %s", got, month.AddDate(0, 2, 0).Format("2006-01"))
	}
	// The bars' heights are their counts on one scale: the chart's 220
	// units are the limit, 5, the highest count.
	if got := b.text(`[...document.querySelectorAll('#usage svg rect.used')].map(r => r.getAttribute("height")).join(",")`); got != "0,0,0,132,220,88" {
		t.Errorf("the bars' heights: %q, want 0,0,0,132,220,88", got)
	}
	if got := b.text(`String(document.scripts.length)`); got != "0" {
		t.Errorf("the chart page runs %s scripts, want none", got)
	}
	if got := b.text(`document.querySelector("#usage h2").textContent`); got != "plan / monthly: at most 5 per month (UTC)" {
		t.Errorf("the chart's title: %q", got)
	}
	b.screenshot("SLUICE_USAGE_SCREENSHOT")
}

// TestUsageChartProblems: a chart that cannot be drawn is a page that
// says why, with the status GET /v1/usage would answer.
func TestUsageChartProblems(t *testing.T) {
	cfg, err := config.Parse("sluice.yaml", []byte(usageBrowserConfig))
	if err != nil {
		t.Fatal(err)
	}
	st := memstore.New(memstore.Config{})
	t.Cleanup(func() { st.Close() })
	srv, err := server.New(st, cfg, server.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := srv.AdminHandler(server.AdminOptions{})
	for _, tc := range []struct{ query, want string }{
		{"policy=nope&user=ann", `unknown policy: &#34;nope&#34;`},
		{"policy=plan", `missing attribute`},
		{"user=ann", `policy is missing`},
		{"policy=plan&user=ann&at=soon", `at &#34;soon&#34;`},
	} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/usage?"+tc.query, nil))
		if w.Code != 400 || !strings.Contains(w.Body.String(), `<p class="error" id="usage-error">`) || !strings.Contains(w.Body.String(), tc.want) {
			t.Errorf("GET /usage?%s = %d, want 400 and a page that says %s:\n%s", tc.query, w.Code, tc.want, w.Body)
		}
	}
}
