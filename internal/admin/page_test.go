package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicerate/sluice/internal/admin/redisinspect"
	"github.com/sluicerate/sluice/internal/config"
	"github.com/sluicerate/sluice/internal/redistest"
	"github.com/sluicerate/sluice/internal/server"
	"github.com/sluicerate/sluice/redisstore"
	"github.com/sluicerate/sluice/storetest"
)

// browserPath returns the Chromium to drive, skipping the test when there
// is none, unless CI is set: make deps installs it, so there it must be.
func browserPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no Chromium found (chromium, chromium-browser, google-chrome or headless-shell on PATH) and CI is set; " +
			"install it with make deps (Debian package chromium)")
	}
	t.Skip("skipping the browser test: no Chromium on PATH; install it with make deps (Debian package chromium)")
	return ""
}

const browserConfig = `
policies:
  - name: notify
    limits:
      - {name: global, limit: 20, window: 30m}
      - {name: category, by: [category], limit: 2, window: 1m}
  - name: push
    limits:
      - {name: per-user, by: [user], limit: 3, window: 1m, min_gap: 100ms}
  - name: trial
    shadow: true
    limits:
      - {name: one, limit: 1, window: 1m}
schedules:
  - {name: carrier, by: [carrier], rate: 4/s, max_delay: 2s}
`

// TestAdminPageInBrowser runs a server on Redis with traffic, opens the
// admin page in headless Chromium and checks what a person would see: the
// policies, rates that are the server's counters, a denied key whose wait
// goes down as the server's clock moves, and an inspected key's entries.
// It saves a screenshot in its temporary directory (and at
// $SLUICE_ADMIN_SCREENSHOT when set).
func TestAdminPageInBrowser(t *testing.T) {
	chrome := browserPath(t)
	bs := newBrowserServer(t, browserConfig, 0)
	clock, reg, public := bs.clock, bs.reg, bs.public
	envoyDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(envoyDir, "rl.yaml"), []byte("domain: rl\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := bs.srv.LoadEnvoyConfig(envoyDir, server.EnvoyOptions{}); err != nil {
		t.Fatal(err)
	}

	decide := func(body string) {
		t.Helper()
		res, err := http.Post(public.URL+"/v1/decide", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Fatalf("decide %s = %d", body, res.StatusCode)
		}
	}
	// Traffic: alerts is denied after two, the others fit; ann is denied by
	// the minimum gap; the shadow policy would deny its second request.
	for range 4 {
		decide(`{"policy":"notify","attributes":{"category":"alerts"}}`)
		clock.Advance(200 * time.Millisecond)
	}
	decide(`{"policy":"notify","attributes":{"category":"billing"}}`)
	clock.Advance(time.Second)
	decide(`{"policy":"notify","attributes":{"category":"billing"}}`)
	decide(`{"policy":"push","attributes":{"user":"ann"}}`)
	decide(`{"policy":"push","attributes":{"user":"ann"}}`)
	decide(`{"policy":"trial"}`)
	decide(`{"policy":"trial"}`)

	b := openPage(t, chrome, bs.admin.URL+"/?token="+browserToken, `[data-policy="notify"]`)
	bctx, eventually, text := b.ctx, b.eventually, b.text

	// The policies, from the loaded file.
	if got := text(`[...document.querySelectorAll("[data-policy]")].map(e => e.dataset.policy).join(",")`); got != "notify,push,trial" {
		t.Errorf("policies shown: %q, want notify,push,trial", got)
	}
	if got := text(`[...document.querySelectorAll("[data-rule]")].map(e => e.dataset.rule).join(",")`); got != "notify|global,notify|category,push|per-user,trial|one" {
		t.Errorf("rules shown: %q", got)
	}
	if got := text(`document.querySelector('[data-schedule="carrier"]')?.textContent ?? ""`); !strings.Contains(got, "4/1s") {
		t.Errorf("schedule row %q, want carrier at 4/1s", got)
	}

	// Where Envoy's configuration comes from (GET api/v1/envoy/config).
	eventually("the Envoy configuration's source", `document.getElementById("envoy-source").hidden ? "hidden" : document.getElementById("envoy").textContent`,
		"files "+envoyDir)

	// Rates: the totals the page shows are the server's counters.
	counters := counterValues(t, reg, "sluice_decisions_total", "policy", "rule", "outcome")
	for _, key := range []string{"notify||allowed", "notify|category|denied", "push||allowed", "push|per-user|denied", "trial|one|shadowed"} {
		n := counters[key] // the page's keys are policy|rule|outcome, as the counter's labels
		if n == 0 {
			t.Fatalf("the server counted no %s decisions: %v", key, counters)
		}
		eventually("total of "+key, fmt.Sprintf(`document.querySelector('[data-stat=%q]')?.dataset.total ?? "missing"`, key),
			strconv.FormatFloat(n, 'f', -1, 64))
	}

	// The denied key and its wait, which goes down as the server's clock
	// moves (and by exactly as much).
	row := `document.querySelector('tr[data-denied="notify|category|alerts"]')`
	eventually("the denied key's row", `(`+row+` ? "shown" : "missing")`, "shown")
	first, err := strconv.ParseInt(text(row+`.dataset.waitMs`), 10, 64)
	if err != nil || first <= 0 || first > 60000 {
		t.Fatalf("the wait shown for alerts is %d ms (%v), want within the 1 min window", first, err)
	}
	clock.Advance(7 * time.Second)
	eventually("the wait 7 s later", row+`?.dataset.waitMs`, strconv.FormatInt(first-7000, 10))
	if got := text(row + `.querySelector("td.wait").textContent`); got != fmtSeconds(first-7000) {
		t.Errorf("the wait reads %q, want %q", got, fmtSeconds(first-7000))
	}

	// The key inspector: the entries of alerts' window on Redis.
	text(`document.getElementById("inspect-target").value = "policy:notify";
		document.getElementById("inspect-target").dispatchEvent(new Event("change")); "ok"`)
	if err := chromedp.Do(bctx,
		chromedp.SendKeys(chromedp.CSS(`#inspect-attrs input[data-attr="category"]`), "alerts"),
		chromedp.Click(chromedp.CSS(`#inspect-go`)),
	); err != nil {
		t.Fatalf("inspecting: %v", err)
	}
	eventually("the inspected window's entries",
		`String(document.querySelectorAll('#inspect-result [data-window="category"] tr[data-entry]').length)`, "2")
	// The entries were recorded 200 ms apart on the store's clock; Redis's
	// own clock (which inspect reads) says when they leave the window.
	var entries []struct {
		Cost   int64 `json:"cost"`
		Leaves int64 `json:"leaves"`
	}
	js := `JSON.stringify([...document.querySelectorAll('#inspect-result [data-window="category"] tr[data-entry]')].map(e => ({cost: +e.dataset.cost, leaves: +e.dataset.leavesMs})))`
	if err := json.Unmarshal([]byte(text(js)), &entries); err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 || entries[0].Cost != 1 || entries[1].Cost != 1 || entries[1].Leaves-entries[0].Leaves != 200 ||
		entries[0].Leaves <= 0 || entries[1].Leaves > 60000 {
		t.Errorf("entries %+v, want two of cost 1 leaving the 1 min window 200 ms apart", entries)
	}
	eventually("the inspected verdict", `document.querySelector('#inspect-result [data-verdict]')?.dataset.verdict ?? ""`, "denied")
	if got := text(`document.querySelectorAll('#inspect-result [data-window="category"] svg circle').length + ""`); got != "2" {
		t.Errorf("the timeline draws %s entries, want 2", got)
	}

	// Store health.
	eventually("the breaker", `document.getElementById("breaker").textContent`, "closed")
	if got := text(`document.getElementById("store-kind").textContent`); got != "redis" {
		t.Errorf("store shown as %q, want redis", got)
	}

	b.screenshot("SLUICE_ADMIN_SCREENSHOT")
}

// browserToken is the admin token of a browserServer.
const browserToken = "browser-test-token"

// browserServer is a server of a browser test on Redis, on a clock that
// moves only when told, with its public listener and its admin listener
// (behind browserToken).
type browserServer struct {
	srv           *server.Server
	clock         *storetest.Clock
	reg           *prometheus.Registry
	public, admin *httptest.Server
}

// newBrowserServer starts a browserServer for the configuration file
// text, with a deny cache of denyCache entries (0: none).
func newBrowserServer(t *testing.T, text string, denyCache int) *browserServer {
	t.Helper()
	rs := redistest.Start(t)
	bs := &browserServer{clock: storetest.NewClock(time.Now().Truncate(time.Second)), reg: prometheus.NewRegistry()}
	st, err := redisstore.New(redisstore.Config{Addrs: []string{rs.Addr()}, Prefix: "admin-browser", Clock: bs.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cfg, err := config.Parse("sluice.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	// A store timeout well past the default 50 ms: under the race detector
	// on a busy machine a fresh Redis's first call (it loads the scripts)
	// can take longer, and the decision would fail closed.
	srv, err := server.New(st, cfg, server.Options{Clock: bs.clock, Registry: bs.reg, DenyCache: denyCache,
		Inspector: redisinspect.Inspector{Store: st}, StoreTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	bs.srv = srv
	bs.public = httptest.NewServer(srv.Handler())
	t.Cleanup(bs.public.Close)
	bs.admin = httptest.NewServer(srv.AdminHandler(server.AdminOptions{Token: browserToken}))
	t.Cleanup(bs.admin.Close)
	return bs
}

// page is the admin page open in headless Chromium.
type page struct {
	t   *testing.T
	ctx context.Context
}

// openPage opens url in a headless Chromium that lives until the test
// ends, and waits until the element visible is shown. Opening the page
// with ?token= sets the cookie the API calls carry.
func openPage(t *testing.T, chrome, url, visible string) *page {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	actx, acancel := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1400, 2200),
		chromedp.Flag("disable-dev-shm-usage", true))...)
	t.Cleanup(acancel)
	bctx, bcancel := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(bcancel)
	if err := chromedp.Do(bctx, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS(visible))); err != nil {
		t.Fatalf("opening the admin page: %v", err)
	}
	return &page{t: t, ctx: bctx}
}

// eventually evaluates js until it returns want, or fails at the deadline.
func (p *page) eventually(what, js, want string) {
	p.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](js))
		if err != nil {
			p.t.Fatalf("%s: %v", what, err)
		}
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%s: the page shows %q, want %q", what, got, want)
		}
		time.Sleep(100 * time.Millisecond) // the page polls every 1.5 s
	}
}

// text evaluates js, which returns a string.
func (p *page) text(js string) string {
	p.t.Helper()
	got, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](js))
	if err != nil {
		p.t.Fatalf("%s: %v", js, err)
	}
	return got
}

// screenshot saves the page in the test's temporary directory, and at the
// path in the environment variable env when it is set.
func (p *page) screenshot(env string) {
	p.t.Helper()
	png, err := chromedp.Run(p.ctx, chromedp.FullScreenshot(100)) // 100: PNG
	if err != nil {
		p.t.Fatal(err)
	}
	shot := filepath.Join(p.t.TempDir(), "admin.png")
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		p.t.Fatal(err)
	}
	p.t.Logf("screenshot: %s (%d bytes)", shot, len(png))
	if dst := os.Getenv(env); dst != "" {
		if err := os.WriteFile(dst, png, 0o644); err != nil {
			p.t.Fatal(err)
		}
	}
}

// fmtSeconds is the page's fmtMS for a wait of a few seconds to a minute.
func fmtSeconds(ms int64) string {
	s := float64(ms) / 1000
	if s < 10 {
		return strconv.FormatFloat(s, 'f', 1, 64) + " s"
	}
	return strconv.FormatFloat(float64(int64(s+0.5)), 'f', -1, 64) + " s"
}
