package admin_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sluicerate/sluice/internal/admin"
)

// postJSON sends a JSON body to url, with browserToken, and decodes the
// 200 answer into v.
func postJSON(t *testing.T, url, body string, v any) {
	t.Helper()
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+browserToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("POST %s %s = %d", url, body, res.StatusCode)
	}
	if err := json.NewDecoder(res.Body).Decode(v); err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
}

// leaseToken is the token that names the lease id in a concurrency rule's
// window on Redis (docs/leases.md).
func leaseToken(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:16])
}

// acquireOn takes a lease through the public API at url and returns its id.
func acquireOn(t *testing.T, url, body string) string {
	t.Helper()
	var a struct {
		Allowed bool   `json:"allowed"`
		Lease   string `json:"lease"`
	}
	postJSON(t, url+"/v1/acquire", body, &a)
	if !a.Allowed || a.Lease == "" {
		t.Fatalf("acquire %s: %+v, want a lease", body, a)
	}
	return a.Lease
}

// TestAdminInspectLeasesRedis checks the key inspector of a concurrency
// rule on Redis: its figures, and each lease alive with its token, expiry
// and time left on the store's clock; a released lease leaves the list and
// an expired one is not shown. GET /api/v1/leases counts this server's.
func TestAdminInspectLeasesRedis(t *testing.T) {
	bs := newBrowserServer(t, leaseConfig, 0)
	t0 := bs.clock.Now()
	ids := []string{acquireOn(t, bs.public.URL, `{"policy":"llm","attributes":{"user":"ann"},"cost":50}`)}
	bs.clock.Advance(2 * time.Second)
	ids = append(ids, acquireOn(t, bs.public.URL, `{"policy":"llm","attributes":{"user":"ann"},"cost":70}`))
	acquireOn(t, bs.public.URL, `{"policy":"llm","attributes":{"user":"bob"}}`)
	bs.clock.Advance(time.Second) // t0 + 3s

	inspect := func(what string, alive int64, taken ...int) admin.InspectJSON {
		t.Helper()
		var in admin.InspectJSON
		postJSON(t, bs.admin.URL+"/api/v1/inspect", `{"policy":"llm","attributes":{"user":"ann"}}`, &in)
		if !in.EntriesShown || in.Error != "" || len(in.Windows) != 2 || !in.Now.Equal(bs.clock.Now()) {
			t.Fatalf("%s: inspect = %+v", what, in)
		}
		if w := in.Windows[0]; w.Algorithm != "log" || w.Leases != nil || len(w.Entries) != 2 || w.Entries[1].Cost != 70 {
			t.Errorf("%s: the tokens window = %+v, want its two entries as before", what, w)
		}
		w := in.Windows[1]
		if w.Algorithm != "concurrency" || w.Alive == nil || *w.Alive != alive || w.Used != alive+1 || w.Limit != 3 || w.WindowMS != 30000 ||
			len(w.Entries) != 0 || alive > 0 && w.TTLMS <= 0 || !strings.Contains(w.Key, "2n:in-flight") {
			t.Errorf("%s: the in-flight window = %+v, want %d of 3 leases alive (and the peek's one more)", what, w, alive)
		}
		if len(w.Leases) != len(taken) {
			t.Fatalf("%s: leases %+v, want %d", what, w.Leases, len(taken))
		}
		for j, i := range taken {
			exp := t0.Add(time.Duration(2*i)*time.Second + 30*time.Second) // lease i taken at t0 + 2i s
			l := w.Leases[j]
			if l.Token != leaseToken(ids[i]) || !l.Expires.Equal(exp) || l.ExpiresInMS != exp.Sub(bs.clock.Now()).Milliseconds() {
				t.Errorf("%s: lease %d = %+v, want token %s expiring at %v", what, j, l, leaseToken(ids[i]), exp)
			}
		}
		return in
	}
	inspect("two taken", 2, 0, 1)

	var l admin.LeasesJSON
	getAdmin(t, bs.admin.URL+"/api/v1/leases", &l)
	if len(l.Rules) != 1 || l.Rules[0].InFlight != 3 || l.Rules[0].Expired != 0 {
		t.Errorf("leases = %+v, want 3 in flight", l)
	}

	var rel struct {
		Held bool `json:"held"`
	}
	postJSON(t, bs.public.URL+"/v1/release", `{"lease":"`+ids[1]+`"}`, &rel)
	if !rel.Held {
		t.Fatal("release: not held")
	}
	inspect("the second released", 1, 0)
	// At t0 + 30s the first lease expires: the window lists none, though
	// its token stays in the key until the rule is next decided.
	bs.clock.Advance(27 * time.Second)
	inspect("the first expired", 0)
	getAdmin(t, bs.admin.URL+"/api/v1/leases", &l)
	if len(l.Rules) != 1 || l.Rules[0].InFlight != 1 || l.Rules[0].Expired != 1 { // bob's is alive until t0 + 32s
		t.Errorf("leases = %+v, want 1 in flight and 1 expired", l)
	}
}

// getAdmin GETs url from an admin listener with browserToken and decodes
// the 200 answer into v.
func getAdmin(t *testing.T, url string, v any) {
	t.Helper()
	if err := json.Unmarshal(get(t, url, browserToken), v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// TestAdminPageLeases opens the admin page in headless Chromium over a
// server on Redis holding leases, and checks what it shows of them: the
// leases this server has in flight and expired per concurrency rule, and
// the inspected key's live leases.
func TestAdminPageLeases(t *testing.T) {
	chrome := browserPath(t)
	bs := newBrowserServer(t, leaseConfig, 0)
	a := acquireOn(t, bs.public.URL, `{"policy":"llm","attributes":{"user":"ann"}}`)
	bs.clock.Advance(time.Second)
	b := acquireOn(t, bs.public.URL, `{"policy":"llm","attributes":{"user":"ann"}}`)
	acquireOn(t, bs.public.URL, `{"policy":"llm","attributes":{"user":"bob"}}`)

	p := openPage(t, chrome, bs.admin.URL+"/?token="+browserToken, `[data-policy="llm"]`)
	p.eventually("leases in flight", `document.querySelector('[data-in-flight="llm|in-flight"]')?.dataset.n ?? "missing"`, "3")
	p.eventually("leases expired", `document.querySelector('[data-expired="llm|in-flight"]')?.dataset.n ?? "missing"`, "0")
	if got := p.text(`document.querySelector('[data-rule="llm|in-flight"]').textContent`); !strings.Contains(got, "3 at once, lease 30 s") || !strings.Contains(got, "concurrency") {
		t.Errorf("the in-flight rule's row reads %q, want its concurrency and lease", got)
	}

	p.text(`document.getElementById("inspect-target").value = "policy:llm";
		document.getElementById("inspect-target").dispatchEvent(new Event("change")); "ok"`)
	if err := chromedp.Do(p.ctx,
		chromedp.SendKeys(chromedp.CSS(`#inspect-attrs input[data-attr="user"]`), "ann"),
		chromedp.Click(chromedp.CSS(`#inspect-go`)),
	); err != nil {
		t.Fatalf("inspecting: %v", err)
	}
	rows := `[...document.querySelectorAll('#inspect-result [data-window="in-flight"] tr[data-lease]')]`
	p.eventually("ann's leases", rows+`.map(e => e.dataset.lease + "/" + e.dataset.expiresMs).join(",")`,
		leaseToken(a)+"/29000,"+leaseToken(b)+"/30000")

	// Released: the lease leaves the list and the count; expired: the
	// other goes too, and counts as expired unreleased.
	var rel struct {
		Held bool `json:"held"`
	}
	postJSON(t, bs.public.URL+"/v1/release", `{"lease":"`+b+`"}`, &rel)
	p.eventually("ann's leases after a release", rows+`.map(e => e.dataset.lease).join(",")`, leaseToken(a))
	p.eventually("leases in flight after a release", `document.querySelector('[data-in-flight="llm|in-flight"]').dataset.n`, "2")
	bs.clock.Advance(29 * time.Second)
	p.eventually("ann's leases once expired", `document.querySelector('#inspect-result [data-window="in-flight"]')?.dataset.alive + "/" + `+rows+`.length`, "0/0")
	p.eventually("leases expired", `document.querySelector('[data-expired="llm|in-flight"]').dataset.n`, "1")
	p.screenshot("SLUICE_ADMIN_LEASES_SCREENSHOT")
}
