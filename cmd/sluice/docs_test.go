package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"

	"github.com/sluicerate/sluice/internal/redistest"
)

// The documentation's commands are run as written, so that they cannot
// drift from what the code does. TestDocs reads README.md and docs/*.md and
// runs their shell blocks, each document in a copy of the repository (what
// a fresh clone holds), README.md first: its install step puts the sluice
// command that the other pages use on PATH.
//
// How a page marks its blocks (an HTML comment on the line before a
// fence, which renderers do not show):
//
//	<!-- docs-test: run -->          the block's commands run, in order
//	<!-- docs-test: skip REASON -->  the block is not run, for REASON
//	<!-- docs-test: file NAME -->    the block is written to NAME in the
//	                                 copy, for the commands after it
//
// Every sh, bash, shell or console block must carry run or skip, so that a
// new command block is run or says why it is not. A block's lines run in one
// bash, one command per line (a trailing \ continues it; a heredoc is not
// supported), and each must exit 0, or N when its line ends in a comment
// that says "exits N". curl is told to fail on an HTTP error status
// (--fail-with-body, from a .curlrc), so an answer of 4xx or 5xx fails.
// A `sluice serve` line runs in the background until the page's commands
// have run (a later `sluice serve` stops it first) and the next command
// starts once its /readyz answers. Any other line that ends in & (a proxy,
// an upstream) runs in the background until the page's commands have run,
// and the next command starts once every address that the line, and the
// files of the page's file blocks it names, write accepts connections.
//
// A skipped block is still checked where that is cheap: the benchmark or
// fuzz target of a `go test -bench X ./pkg` or `go test -fuzz X ./pkg` line
// must exist in that package (go test -list), so that a renamed or moved
// benchmark fails the test rather than the reader.
//
// Only addresses change (docAddresses): a Redis address becomes a throwaway
// redis-server the test starts, the HTTP, gRPC and admin ports, and the
// ports 8000, 8001 and 9000 that a page's proxies and upstream use, free
// loopback ports, `sluice serve` without --http or --admin gets those
// ports for its defaults (:8080 and 127.0.0.1:9464), and the module proxy
// is a directory holding this copy of the module, so that
// `go install github.com/sluicerate/sluice/cmd/sluice@latest` and
// `go get github.com/sluicerate/sluice@latest` install what is being tested.

// docMarker is a block's marker comment.
var docMarker = regexp.MustCompile(`^<!--\s*docs-test:\s*(run|skip|file)\b\s*(.*?)\s*-->$`)

// shellLangs are the fence languages of command blocks.
var shellLangs = map[string]bool{"sh": true, "bash": true, "shell": true, "console": true}

// docBlock is one fenced block of a page.
type docBlock struct {
	file   string // the page, relative to the repository
	line   int    // the fence's line
	lang   string
	action string // run, skip, file; "" for a block without a marker
	arg    string // skip's reason, file's name
	text   string
}

// parseDoc returns the fenced blocks of a page, and the problems of its
// markers: a shell block without one, a skip without a reason, a file
// without a name, a marker that no block follows.
func parseDoc(name string, data []byte) ([]docBlock, []string) {
	var (
		blocks  []docBlock
		errs    []string
		pending *docBlock // the last marker, waiting for its fence
		in      *docBlock
		fence   string
		body    strings.Builder
	)
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if in != nil {
			if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]) == "" {
				in.text = body.String()
				blocks = append(blocks, *in)
				in = nil
				continue
			}
			body.WriteString(line)
			body.WriteByte('\n')
			continue
		}
		if m := docMarker.FindStringSubmatch(trimmed); m != nil {
			if pending != nil {
				errs = append(errs, fmt.Sprintf("%s:%d: a docs-test marker with no block after it", name, pending.line))
			}
			pending = &docBlock{file: name, line: n, action: m[1], arg: m[2]}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			for len(fence) < len(trimmed) && trimmed[len(fence)] == fence[0] {
				fence += fence[:1]
			}
			b := docBlock{file: name, line: n, lang: strings.Fields(trimmed[len(fence):] + " x")[0]}
			if b.lang == "x" {
				b.lang = ""
			}
			if pending != nil {
				b.action, b.arg = pending.action, pending.arg
				pending = nil
			}
			switch {
			case shellLangs[b.lang] && b.action == "":
				errs = append(errs, fmt.Sprintf("%s:%d: a %s block without a marker: put <!-- docs-test: run --> (or skip REASON) on the line before it", name, n, b.lang))
			case b.action == "skip" && b.arg == "":
				errs = append(errs, fmt.Sprintf("%s:%d: docs-test: skip needs a reason", name, n))
			case b.action == "file" && (b.arg == "" || strings.ContainsAny(b.arg, `/\ `)):
				errs = append(errs, fmt.Sprintf("%s:%d: docs-test: file needs a file name (no directories): %q", name, n, b.arg))
			case b.action == "run" && !shellLangs[b.lang]:
				errs = append(errs, fmt.Sprintf("%s:%d: docs-test: run marks a %q block; only sh, bash, shell or console blocks run", name, n, b.lang))
			}
			in = &b
			body.Reset()
			continue
		}
		if pending != nil && trimmed != "" {
			errs = append(errs, fmt.Sprintf("%s:%d: a docs-test marker with no block after it", name, pending.line))
			pending = nil
		}
	}
	if in != nil {
		errs = append(errs, fmt.Sprintf("%s:%d: a block that is never closed", name, in.line))
	}
	if pending != nil {
		errs = append(errs, fmt.Sprintf("%s:%d: a docs-test marker with no block after it", name, pending.line))
	}
	return blocks, errs
}

// docCommand is one command of a run block: a line, with its
// continuations.
type docCommand struct {
	line int    // in the page
	text string // as written
	exit int    // the exit status the page says it has
}

// exitsComment is a line's comment that gives its exit status.
var exitsComment = regexp.MustCompile(`#.*\bexits? (?:status )?(\d+)\b`)

// commands splits a run block into its commands.
func (b docBlock) commands() []docCommand {
	var out []docCommand
	var cur *docCommand
	for i, line := range strings.Split(strings.TrimRight(b.text, "\n"), "\n") {
		if cur == nil {
			if t := strings.TrimSpace(line); t == "" || strings.HasPrefix(t, "#") {
				continue
			}
			cur = &docCommand{line: b.line + 1 + i}
		}
		if strings.HasSuffix(line, `\`) {
			cur.text += line + "\n"
			continue
		}
		cur.text += line
		if m := exitsComment.FindStringSubmatch(line); m != nil {
			cur.exit, _ = strconv.Atoi(m[1])
		}
		out = append(out, *cur)
		cur = nil
	}
	if cur != nil {
		out = append(out, *cur)
	}
	return out
}

// docAddresses are the addresses the pages write, by what stands in for
// them in a test: the only changes made to a command.
var docAddresses = []struct {
	re   *regexp.Regexp
	kind string
}{
	{regexp.MustCompile(`(?:10\.0\.0\.1|127\.0\.0\.1|localhost):6379\b`), "redis"},
	{regexp.MustCompile(`(?:localhost|127\.0\.0\.1)?:8080\b`), "http"},
	{regexp.MustCompile(`(?:localhost|127\.0\.0\.1)?:8081\b`), "grpc"},
	{regexp.MustCompile(`(?:localhost|127\.0\.0\.1)?:9464\b`), "admin"},
	{regexp.MustCompile(`(?:localhost|127\.0\.0\.1)?:8000\b`), "8000"},
	{regexp.MustCompile(`(?:localhost|127\.0\.0\.1)?:8001\b`), "8001"},
	{regexp.MustCompile(`(?:localhost|127\.0\.0\.1)?:9000\b`), "9000"},
}

// docSession runs one page's blocks in a copy of the repository.
type docSession struct {
	t       *testing.T
	dir     string
	env     []string
	ports   map[string]string // kind: loopback address
	redis   *redistest.Server
	servers []*docServer
	others  []*docServer        // background lines other than sluice serve
	files   map[string][]string // a file block's name: the kinds of address it writes
	logs    []*lockedBuffer
	fail    func(format string, args ...any)
}

// docServer is a `sluice serve` a page started.
type docServer struct {
	cmd    *exec.Cmd
	exited chan struct{}
}

// address returns the loopback address that stands for addresses of kind.
func (s *docSession) address(kind string) string {
	if a, ok := s.ports[kind]; ok {
		return a
	}
	var a string
	if kind == "redis" {
		if s.redis == nil {
			s.redis = redistest.Start(s.t)
		}
		a = s.redis.Addr()
	} else {
		a = freeAddr(s.t)
	}
	s.ports[kind] = a
	return a
}

// kinds returns the kinds of the addresses text writes.
func kinds(text string) []string {
	var out []string
	for _, a := range docAddresses {
		if a.re.MatchString(text) {
			out = append(out, a.kind)
		}
	}
	return out
}

// substitute changes the addresses in text to the session's.
func (s *docSession) substitute(text string) string {
	for _, a := range docAddresses {
		text = a.re.ReplaceAllStringFunc(text, func(string) string { return s.address(a.kind) })
	}
	return text
}

var (
	serveLine      = regexp.MustCompile(`^\s*sluice\s+serve\b`)
	backgroundLine = regexp.MustCompile(`^(.*\S)\s+&\s*(?:#.*)?$`)
	httpFlag       = regexp.MustCompile(`--http[= ](\S+)`)
)

// run runs a page's blocks in order.
func (s *docSession) run(blocks []docBlock) {
	defer s.stopOthers()
	defer s.stopServers()
	for _, b := range blocks {
		switch b.action {
		case "file":
			if s.files == nil {
				s.files = map[string][]string{}
			}
			s.files[b.arg] = kinds(b.text)
			if err := os.WriteFile(filepath.Join(s.dir, b.arg), []byte(s.substitute(b.text)), 0o644); err != nil {
				s.t.Fatal(err)
			}
		case "run":
			var script []docCommand
			for _, c := range b.commands() {
				serve, bg := serveLine.MatchString(c.text), backgroundLine.FindStringSubmatch(c.text)
				if !serve && bg == nil {
					script = append(script, c)
					continue
				}
				if !s.script(b, script) {
					return
				}
				script = nil
				if serve && !s.serve(b, c) {
					return
				}
				if !serve && !s.background(b, c, bg[1]) {
					return
				}
			}
			if !s.script(b, script) {
				return
			}
		}
	}
}

// script runs cmds in one bash, checking each one's exit status, and
// reports whether they all had the status the page gives.
func (s *docSession) script(b docBlock, cmds []docCommand) bool {
	if len(cmds) == 0 {
		return true
	}
	var sh strings.Builder
	sh.WriteString("set -o pipefail\n")
	for _, c := range cmds {
		fmt.Fprintf(&sh, "%s\n__rc=$?; if [ $__rc -ne %d ]; then echo \"docs-test: %s:%d exited $__rc, want %d\" >&2; exit 97; fi\n",
			s.substitute(c.text), c.exit, b.file, c.line, c.exit)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", sh.String())
	cmd.Dir, cmd.Env = s.dir, s.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	out, err := cmd.CombinedOutput()
	if err != nil {
		s.fail("%s:%d: the block's commands failed (%v):\n%s\n--- output:\n%s%s", b.file, b.line, err,
			b.text, out, s.serverLogs())
		return false
	}
	s.t.Logf("%s:%d:\n%s--- output:\n%s", b.file, b.line, b.text, out)
	return true
}

// serve starts a `sluice serve` line in the background, the session's
// ports standing for its default addresses, and waits until it is ready.
func (s *docSession) serve(b docBlock, c docCommand) bool {
	s.stopServers()
	line := s.substitute(c.text)
	if !strings.Contains(line, "--http") {
		line += " --http " + s.address("http")
	}
	if !strings.Contains(line, "--admin") {
		line += " --admin " + s.address("admin")
	}
	addr := httpFlag.FindStringSubmatch(line)[1]
	if strings.HasPrefix(addr, ":") {
		addr = "127.0.0.1" + addr
	}
	cmd := exec.Command("bash", "-c", "exec "+line)
	cmd.Dir, cmd.Env = s.dir, s.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	log := new(lockedBuffer)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	s.servers = append(s.servers, &docServer{cmd: cmd, exited: exited})
	s.logs = append(s.logs, log)
	deadline := time.Now().Add(time.Minute)
	for {
		select {
		case <-exited:
			s.fail("%s:%d: %s exited before it served:\n%s", b.file, c.line, c.text, log)
			return false
		case <-time.After(50 * time.Millisecond):
		}
		if res, err := httpClient.Get("http://" + addr + "/readyz"); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return true
			}
		}
		if time.Now().After(deadline) {
			s.fail("%s:%d: %s was not ready in a minute at %s:\n%s", b.file, c.line, c.text, addr, log)
			return false
		}
	}
}

// background starts line, a page's command without its &, in the
// background, and waits until every address it and the files it names
// write accepts connections.
func (s *docSession) background(b docBlock, c docCommand, line string) bool {
	want := kinds(line)
	for _, word := range strings.Fields(line) {
		want = append(want, s.files[strings.Trim(word, `"'`)]...)
	}
	cmd := exec.Command("bash", "-c", "exec "+s.substitute(line))
	cmd.Dir, cmd.Env = s.dir, s.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	log := new(lockedBuffer)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	s.others = append(s.others, &docServer{cmd: cmd, exited: exited})
	s.logs = append(s.logs, log)
	deadline := time.Now().Add(time.Minute)
	for _, kind := range want {
		if kind == "redis" {
			continue
		}
		addr := s.address(kind)
		for {
			if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
				conn.Close()
				break
			}
			select {
			case <-exited:
				s.fail("%s:%d: %s exited before %s accepted connections:\n%s", b.file, c.line, c.text, addr, log)
				return false
			case <-time.After(50 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				s.fail("%s:%d: %s: nothing accepted connections at %s in a minute:\n%s", b.file, c.line, c.text, addr, log)
				return false
			}
		}
	}
	s.t.Logf("%s:%d: %s is running in the background", b.file, c.line, c.text)
	return true
}

// stopOthers stops the background commands that are not sluice serve, as
// stopServers does.
func (s *docSession) stopOthers() {
	stopAll(s.others)
	s.others = nil
}

// stopServers stops the servers the session started: SIGTERM, as a user's
// Ctrl-C, then SIGKILL after 15 s.
func (s *docSession) stopServers() {
	stopAll(s.servers)
	s.servers = nil
}

// stopAll stops each of procs: SIGTERM to its process group, then SIGKILL
// after 15 s.
func stopAll(procs []*docServer) {
	for _, srv := range procs {
		_ = syscall.Kill(-srv.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-srv.exited:
		case <-time.After(15 * time.Second):
			_ = syscall.Kill(-srv.cmd.Process.Pid, syscall.SIGKILL)
			<-srv.exited
		}
	}
}

// lockedBuffer is a bytes.Buffer that a process writes while the test
// reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// serverLogs returns what the session's servers printed.
func (s *docSession) serverLogs() string {
	var b strings.Builder
	for _, l := range s.logs {
		fmt.Fprintf(&b, "--- a background command's output (sluice serve, a proxy):\n%s", l)
	}
	return b.String()
}

// docPages returns README.md and docs/*.md, relative to the repository.
func docPages(t *testing.T, root string) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := []string{"README.md"}
	for _, p := range pages {
		rel, _ := filepath.Rel(root, p)
		out = append(out, rel)
	}
	return out
}

// TestDocs runs the documentation's shell blocks as written (see the top of
// this file); a command that stops working fails it.
func TestDocs(t *testing.T) {
	t.Parallel()
	for _, tool := range []struct{ name, pkg string }{{"bash", "bash"}, {"git", "git"}, {"curl", "curl"}} {
		requireTool(t, tool.name, tool.pkg)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	pages := docPages(t, root)
	parsed := map[string][]docBlock{}
	for _, page := range pages {
		data, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		blocks, errs := parseDoc(page, data)
		for _, e := range errs {
			t.Error(e)
		}
		parsed[page] = blocks
	}
	if t.Failed() {
		return
	}

	for _, page := range pages {
		for _, b := range parsed[page] {
			if b.action == "skip" {
				for _, e := range checkGoTestTargets(root, b) {
					t.Error(e)
				}
			}
		}
	}

	bin := t.TempDir()
	env := docEnv(bin, writeCurlrc(t), docModuleProxy(t, root))
	for _, page := range pages {
		if !slices.ContainsFunc(parsed[page], func(b docBlock) bool { return b.action == "run" }) {
			continue
		}
		t.Run(page, func(t *testing.T) {
			if page != "README.md" {
				// README.md's install step put sluice on PATH; when it did
				// not run (go test -run), build it.
				if _, err := os.Stat(filepath.Join(bin, "sluice")); err != nil {
					if out, err := exec.Command("go", "build", "-o", filepath.Join(bin, "sluice"), ".").CombinedOutput(); err != nil {
						t.Fatalf("go build: %v\n%s", err, out)
					}
				}
			}
			s := &docSession{t: t, dir: copyRepo(t, root), env: env, ports: map[string]string{}, fail: t.Errorf}
			s.run(parsed[page])
		})
	}
}

// docEnv is the commands' environment: the test's, with bin as GOBIN and
// first on PATH, curl's configuration from curlHome, and the module proxy
// proxy ahead of the usual one.
func docEnv(bin, curlHome, proxy string) []string {
	goProxy, _ := exec.Command("go", "env", "GOPROXY").Output()
	noSum, _ := exec.Command("go", "env", "GONOSUMDB").Output()
	var env []string
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "GOBIN", "GOPROXY", "GONOSUMDB", "CURL_HOME", "PATH", "PWD":
		default:
			env = append(env, kv)
		}
	}
	nosum := strings.TrimSpace(string(noSum))
	if nosum != "" {
		nosum += ","
	}
	env = append(env,
		"GOBIN="+bin,
		"PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"CURL_HOME="+curlHome,
	)
	if proxy == "" {
		return append(env, "GOPROXY="+strings.TrimSpace(string(goProxy)), "GONOSUMDB="+strings.TrimSpace(string(noSum)))
	}
	return append(env,
		"GOPROXY=file://"+proxy+","+strings.TrimSpace(string(goProxy)),
		"GONOSUMDB="+nosum+docModule,
	)
}

// writeCurlrc writes the curl configuration of the pages' commands in a new
// directory, for CURL_HOME: an HTTP error status fails the command.
func writeCurlrc(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, ".curlrc"), []byte("fail-with-body\nmax-time = 30\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// docModule is the module the pages install, and docVersionPrefix the
// start of the versions the test gives it.
const (
	docModule        = "github.com/sluicerate/sluice"
	docVersionPrefix = "v0.0.0-20000101000000-"
)

// copyRepo copies the repository's files as a fresh clone has them (those
// git tracks, and new ones it does not ignore, with their modes) into a
// temporary directory, and returns it.
func copyRepo(t *testing.T, root string) string {
	t.Helper()
	out, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	dir := t.TempDir()
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		src := filepath.Join(root, name)
		st, err := os.Lstat(src)
		if err != nil || !st.Mode().IsRegular() {
			continue // deleted, or not a file
		}
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, st.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// docModuleProxy writes a module proxy (GOPROXY=file://DIR) that serves a
// copy of this module as its latest version, and returns DIR. The version is
// a pseudo-version named by the contents, so that the module cache never
// holds other contents under it; it is removed from the module cache when
// the test ends.
func docModuleProxy(t *testing.T, root string) string {
	t.Helper()
	src := copyRepo(t, root)
	var zip bytes.Buffer
	if err := modzip.CreateFromDir(&zip, module.Version{Path: docModule, Version: docVersionPrefix + "000000000000"}, src); err != nil {
		t.Fatalf("zipping the module: %v", err)
	}
	sum := sha256.Sum256(zip.Bytes())
	version := docVersionPrefix + hex.EncodeToString(sum[:6])
	zip.Reset()
	if err := modzip.CreateFromDir(&zip, module.Version{Path: docModule, Version: version}, src); err != nil {
		t.Fatalf("zipping the module: %v", err)
	}
	gomod, err := os.ReadFile(filepath.Join(src, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	info, _ := json.Marshal(map[string]string{"Version": version, "Time": "2000-01-01T00:00:00Z"})
	proxy := t.TempDir()
	dir := filepath.Join(proxy, docModule, "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{
		filepath.Join(dir, "list"):                 nil,
		filepath.Join(dir, version+".info"):        info,
		filepath.Join(dir, version+".mod"):         gomod,
		filepath.Join(dir, version+".zip"):         zip.Bytes(),
		filepath.Join(proxy, docModule, "@latest"): info,
	} {
		if err := os.WriteFile(name, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { removeFromModCache(t, version) })
	return proxy
}

// removeFromModCache removes what installing the module's version left in
// the module cache.
func removeFromModCache(t *testing.T, version string) {
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	cache := strings.TrimSpace(string(out))
	if err != nil || cache == "" {
		return
	}
	escaped, err := module.EscapePath(docModule)
	if err != nil {
		return
	}
	paths := []string{filepath.Join(cache, escaped+"@"+version)}
	downloads, _ := filepath.Glob(filepath.Join(cache, "cache", "download", escaped, "@v", version+".*"))
	paths = append(paths, downloads...)
	// The versions go listed: drop this test's.
	list := filepath.Join(cache, "cache", "download", escaped, "@v", "list")
	if data, err := os.ReadFile(list); err == nil {
		var keep []string
		for _, v := range strings.Fields(string(data)) {
			if !strings.HasPrefix(v, docVersionPrefix) {
				keep = append(keep, v)
			}
		}
		if len(keep) == 0 {
			paths = append(paths, list)
		} else {
			_ = os.WriteFile(list, []byte(strings.Join(keep, "\n")+"\n"), 0o644)
		}
	}
	for _, p := range paths {
		// The module cache makes its directories read-only.
		_ = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				_ = os.Chmod(path, 0o755)
			}
			return nil
		})
		if err := os.RemoveAll(p); err != nil {
			t.Logf("removing %s from the module cache: %v", p, err)
		}
	}
}

// TestDocsFailures: the runner fails a page whose command stops working: a
// command's exit status other than the page's, an HTTP error from curl, a
// server that does not start; and a page whose blocks are not marked.
func TestDocsFailures(t *testing.T) {
	t.Parallel()
	for _, tool := range []struct{ name, pkg string }{{"bash", "bash"}, {"curl", "curl"}} {
		requireTool(t, tool.name, tool.pkg)
	}
	bin := t.TempDir()
	if err := os.Symlink(sluiceBinary(t), filepath.Join(bin, "sluice")); err != nil {
		t.Fatal(err)
	}
	env := docEnv(bin, writeCurlrc(t), "")
	const config = "policies:\n  - name: notify\n    limits:\n      - {name: global, limit: 1, window: 1m}\n"
	block := func(marker, lang, text string) string {
		return "<!-- docs-test: " + marker + " -->\n```" + lang + "\n" + text + "\n```\n"
	}
	serve := block("file sluice.yaml", "yaml", config) + block("run", "sh", "sluice serve --config sluice.yaml")
	for _, tc := range []struct {
		name, page, want string
	}{
		{"exit status", block("run", "sh", "echo one\nsluice check --config nope.yaml --policy p --attr a=b\necho three"),
			"page.md:4 exited 2, want 0"},
		{"exits comment", block("run", "sh", "true    # exits 1 when it is denied"), "page.md:3 exited 0, want 1"},
		{"continued line", block("run", "sh", "sluice check \\\n  --config nope.yaml"), "page.md:3 exited 2, want 0"},
		{"curl error status", serve + block("run", "sh", "curl -s localhost:8080/v1/nope"), "page.md:15 exited 22, want 0"},
		{"curl denied is an answer", serve + block("run", "sh",
			`curl -s localhost:8080/v1/decide -d '{"policy":"notify"}'`+"\n"+
				`curl -s localhost:8080/v1/decide -d '{"policy":"notify"}'`+"\n"+
				`curl -s localhost:8080/v1/decide -d '{"policy":"nope"}'`), "page.md:17 exited 22, want 0"},
		{"server fails", block("run", "sh", "sluice serve --config nope.yaml"), "exited before it served"},
		{"background command fails", block("run", "sh", "true localhost:8000 &\ntouch ran"), "exited before 127.0.0.1:"},
		{"a later block after a failure", block("run", "sh", "false") + block("run", "sh", "touch ran"), "page.md:3 exited 1, want 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			blocks, errs := parseDoc("page.md", []byte(tc.page))
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			var failures []string
			dir := t.TempDir()
			s := &docSession{t: t, dir: dir, env: env, ports: map[string]string{},
				fail: func(format string, args ...any) { failures = append(failures, fmt.Sprintf(format, args...)) }}
			s.run(blocks)
			if len(failures) != 1 || !strings.Contains(failures[0], tc.want) {
				t.Errorf("failures %q, want one saying %q", failures, tc.want)
			}
			if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil {
				t.Error("a block ran after one that failed")
			}
		})
	}

	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	blocks, _ := parseDoc("page.md", []byte("<!-- docs-test: skip a measurement -->\n```sh\n"+
		"go test -run '^$' -bench BenchmarkMiddleware -count 10 ./httplimit/\n"+
		"go test -run '^$' -bench 'BenchmarkGone/one' -count 10 ./httplimit/\n```\n"))
	if problems := checkGoTestTargets(root, blocks[0]); len(problems) != 1 || !strings.Contains(problems[0], `page.md:4: `) ||
		!strings.Contains(problems[0], `no benchmark or fuzz target "BenchmarkGone/one" in ./httplimit/`) {
		t.Errorf("a skipped block's missing benchmark: %q", problems)
	}

	for _, tc := range []struct{ page, want string }{
		{"```sh\nsluice demo\n```\n", "page.md:1: a sh block without a marker"},
		{"<!-- docs-test: skip -->\n```sh\nsluice demo\n```\n", "page.md:2: docs-test: skip needs a reason"},
		{"<!-- docs-test: run -->\n\nsome text\n```sh\nsluice demo\n```\n", "page.md:1: a docs-test marker with no block after it"},
		{"<!-- docs-test: run -->\n```yaml\na: b\n```\n", "only sh, bash, shell or console blocks run"},
		{"<!-- docs-test: file ../x.yaml -->\n```yaml\na: b\n```\n", "needs a file name"},
		{"<!-- docs-test: run -->\n```sh\nsluice demo\n", "a block that is never closed"},
	} {
		_, errs := parseDoc("page.md", []byte(tc.page))
		if len(errs) == 0 || !strings.Contains(errs[0], tc.want) {
			t.Errorf("parseDoc(%q) = %q, want a first problem saying %q", tc.page, errs, tc.want)
		}
	}
}

// TestReadmeListsDeps: the README names every Debian package that make
// deps installs (scripts/deps.sh's table), so that a reader knows what
// make test puts on the machine.
func TestReadmeListsDeps(t *testing.T) {
	t.Parallel()
	script, err := os.ReadFile("../../scripts/deps.sh")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	entry := regexp.MustCompile(`(?m)^\s*"([^"|]+)\|([^"|]+)\|`)
	found := entry.FindAllStringSubmatch(string(script), -1)
	if len(found) < 5 {
		t.Fatalf("scripts/deps.sh has %d packages in its table; the test no longer reads it", len(found))
	}
	for _, m := range found {
		if pkg := m[2]; !bytes.Contains(readme, []byte("`"+pkg+"`")) {
			t.Errorf("README.md does not name `%s`, which make deps installs (scripts/deps.sh) for %s", pkg, m[1])
		}
	}
}

// goTestTarget is a `go test` command line's benchmark or fuzz pattern and
// package.
var goTestTarget = regexp.MustCompile(`^go test\b.*\s-(?:bench|fuzz)\s+'?([^'\s]+)'?.*\s(\./\S*)\s*(?:#.*)?$`)

// checkGoTestTargets returns the benchmarks and fuzz targets that b's go
// test lines name and their packages lack.
func checkGoTestTargets(root string, b docBlock) []string {
	var problems []string
	for _, c := range b.commands() {
		m := goTestTarget.FindStringSubmatch(c.text)
		if m == nil {
			continue
		}
		pattern, _, _ := strings.Cut(m[1], "/") // -list matches top-level names
		cmd := exec.Command("go", "test", "-list", pattern, m[2])
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		found := false
		for _, line := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(line, "Benchmark") || strings.HasPrefix(line, "Fuzz") {
				found = true
			}
		}
		if err != nil || !found {
			problems = append(problems, fmt.Sprintf("%s:%d: %s: no benchmark or fuzz target %q in %s (go test -list: %v)\n%s",
				b.file, c.line, c.text, m[1], m[2], err, out))
		}
	}
	return problems
}
