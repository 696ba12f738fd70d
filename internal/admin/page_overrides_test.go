package admin_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

const overridesPageConfig = `
policies:
  - name: api
    limits:
      - {name: per-user, by: [user], limit: 5, window: 1h}
`

// TestAdminOverridesInBrowser runs a server on Redis behind the deny
// cache and drives the admin page in headless Chromium as an operator
// would: the overrides panel sets a customer's limit, which the page lists
// and the server applies, and removes it, which gives the file's limit
// back; then a client floods 1,000 requests and "Denied now" shows it with
// every denial counted, the deny cache's answers included.
func TestAdminOverridesInBrowser(t *testing.T) {
	chrome := browserPath(t)
	bs := newBrowserServer(t, overridesPageConfig, 100)
	clock, reg, public, admin, token := bs.clock, bs.reg, bs.public, bs.admin, browserToken
	// limitOf is the per-user limit the server applies to user now.
	limitOf := func(user string) int64 {
		t.Helper()
		var d struct {
			Allowed bool
			Limits  []struct{ Limit int64 }
		}
		decode(t, post(t, public.URL+"/v1/peek", `{"policy":"api","attributes":{"user":"`+user+`"}}`), &d)
		if len(d.Limits) != 1 {
			t.Fatalf("peek for %s: %+v, want one limit", user, d)
		}
		return d.Limits[0].Limit
	}

	b := openPage(t, chrome, admin.URL+"/?token="+token, `#override-form`)
	b.eventually("the rules an override may name", `[...document.querySelectorAll("#override-target option")].map(o => o.textContent).join(",")`,
		"policy api / per-user (5 per 1h0m0s)")
	b.eventually("the empty list", `document.querySelector("#override-list .empty") ? "empty" : "listed"`, "empty")

	// set fills the form and sends it.
	set := func(user, limit, forText, reason string) {
		t.Helper()
		b.text(`for (const id of ["override-limit", "override-for", "override-reason"]) document.getElementById(id).value = "";
			document.getElementById("override-target").dispatchEvent(new Event("change")); "ok"`)
		if err := chromedp.Do(b.ctx,
			chromedp.SendKeys(chromedp.CSS(`#override-values input[data-attr="user"]`), user),
			chromedp.SendKeys(chromedp.CSS(`#override-limit`), limit),
			chromedp.SendKeys(chromedp.CSS(`#override-for`), forText),
			chromedp.SendKeys(chromedp.CSS(`#override-reason`), reason),
			chromedp.Click(chromedp.CSS(`#override-set`)),
		); err != nil {
			t.Fatalf("setting an override: %v", err)
		}
	}

	// Set: acme gets 50, for a launch.
	set("acme", "50", "1d", "launch day")
	row := `document.querySelector('tr[data-override="api:per-user:acme"]')`
	b.eventually("the override's row", row+`?.dataset.limit ?? "missing"`, "50")
	b.eventually("its state", row+`.dataset.state`, "active")
	if got := b.text(row + `.textContent`); !strings.Contains(got, "launch day") || !strings.Contains(got, "admin at") {
		t.Errorf("the row reads %q, want its reason and who set it", got)
	}
	if got := limitOf("acme"); got != 50 {
		t.Errorf("after setting it on the page, the server gives acme a limit of %d, want 50", got)
	}
	if got := limitOf("other"); got != 5 {
		t.Errorf("other's limit %d, want the file's 5", got)
	}
	// Remove it.
	if err := chromedp.Do(b.ctx, chromedp.Click(chromedp.CSS(`button[data-remove="api:per-user:acme"]`))); err != nil {
		t.Fatalf("removing the override: %v", err)
	}
	b.eventually("the row after removing it", `(`+row+` ? "shown" : "gone")`, "gone")
	b.eventually("the status after removing it", `document.getElementById("override-status").textContent`,
		"Removed api:per-user:acme; the rule's own limits apply to its keys again.")
	var l struct{ Overrides []any }
	decode(t, get(t, admin.URL+"/api/v1/overrides", token), &l)
	if len(l.Overrides) != 0 {
		t.Errorf("the server still holds %v", l.Overrides)
	}
	if got := limitOf("acme"); got != 5 {
		t.Errorf("after removing it on the page, acme's limit is %d, want the file's 5", got)
	}

	// One for an hour: an hour later on the server's clock, it has ended.
	set("bob", "0", "1h", "abuse")
	bob := `document.querySelector('tr[data-override="api:per-user:bob"]')`
	b.eventually("bob's row", bob+`?.dataset.state ?? "missing"`, "active")
	if got := limitOf("bob"); got != 0 {
		t.Errorf("bob's limit %d, want 0", got)
	}
	clock.Advance(time.Hour)
	b.eventually("bob's row an hour later", bob+`?.dataset.state ?? "gone"`, "inactive")
	if got := limitOf("bob"); got != 5 {
		t.Errorf("an hour later bob's limit is %d, want the file's 5", got)
	}
	if got := b.text(`(document.querySelector('button[data-remove="api:per-user:bob"]') ? "shown" : "none")`); got != "none" {
		t.Errorf("an ended override has a remove button: %s", got)
	}

	// A flood: 1,000 requests from one key, 5 allowed, the rest denied, all
	// but the first denial by the deny cache.
	allowed := 0
	for range 1000 {
		var d struct{ Allowed bool }
		decode(t, post(t, public.URL+"/v1/decide", `{"policy":"api","attributes":{"user":"flood"}}`), &d)
		if d.Allowed {
			allowed++
		}
	}
	denied := counterValues(t, reg, "sluice_decisions_total", "policy", "rule", "outcome")["api|per-user|denied"]
	hits := counterValues(t, reg, "sluice_deny_cache_hits_total")[""]
	if allowed != 5 || denied != 995 || hits != 994 {
		t.Fatalf("the flood: %d allowed, %v denied, %v by the deny cache; want 5, 995, 994", allowed, denied, hits)
	}
	flood := `document.querySelector('tr[data-denied="api|per-user|flood"]')`
	b.eventually("the flood's denials in Denied now", flood+`?.dataset.count ?? "missing"`, "995")
	if got := b.text(flood + `.dataset.cached`); got != strconv.FormatFloat(hits, 'f', -1, 64) {
		t.Errorf("Denied now says %s of the flood's denials came from the deny cache; the counter says %v", got, hits)
	}
	if got := b.text(`document.querySelector('[data-denied-rule="api|per-user"] .note').textContent`); !strings.HasPrefix(got, "995 denials seen, 994 of them answered by the deny cache") {
		t.Errorf("the rule's note reads %q", got)
	}
	b.screenshot("SLUICE_ADMIN_OVERRIDES_SCREENSHOT")
}

func post(t *testing.T, url, body string) []byte {
	t.Helper()
	res, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 {
		t.Fatalf("POST %s %s = %d %s", url, body, res.StatusCode, b)
	}
	return b
}

func get(t *testing.T, url, token string) []byte {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 {
		t.Fatalf("GET %s = %d %s", url, res.StatusCode, b)
	}
	return b
}

func decode(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
}
