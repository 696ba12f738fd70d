// Package adminauth is who may use sluice serve's admin listener: named
// bearer tokens, each allowed to read (the page, its API, the key
// inspector, /metrics, pprof) or also to change (runtime overrides,
// Envoy's window reset), compared in constant time. A request's token name
// is who made a change, for the logs.
package adminauth

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/sluicerate/sluice/httplimit"
)

// Access is what a token allows.
type Access uint8

const (
	// Read allows what changes nothing.
	Read Access = iota + 1

	// Write allows everything: reading and changing.
	Write
)

// String returns "read" or "write".
func (a Access) String() string {
	if a == Write {
		return "write"
	}
	return "read"
}

// Token is one admin token.
type Token struct {
	// Name says whose it is; the logs name it as who made a change.
	Name string

	// Secret is what a request carries.
	Secret string

	// Access is what it allows.
	Access Access
}

// Tokens are the tokens of an admin listener. None: every request is
// allowed, as "anonymous" (a listener on loopback, or on a network the
// operator trusts).
type Tokens []Token

// Anonymous is who a request is when the listener takes no token.
const Anonymous = "anonymous"

// ReadFile reads a token file: one token per line, "NAME ACCESS SECRET"
// (access read or write), blank lines and lines starting with '#' left
// out. Problems are reported with the file and line.
func ReadFile(path string) (Tokens, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("admin token file: %w", err)
	}
	var ts Tokens
	sc := bufio.NewScanner(bytes.NewReader(b))
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		f := strings.Fields(text)
		bad := func(format string, a ...any) error {
			return fmt.Errorf("%s:%d: %s; write each token as NAME ACCESS SECRET, such as: ci read 8f1c0e5a", path, line, fmt.Sprintf(format, a...))
		}
		switch {
		case len(f) != 3:
			return nil, bad("%d fields", len(f))
		case f[1] != "read" && f[1] != "write":
			return nil, bad("access %q is neither read nor write", f[1])
		}
		t := Token{Name: f[0], Secret: f[2], Access: Read}
		if f[1] == "write" {
			t.Access = Write
		}
		if err := ts.add(t); err != nil {
			return nil, bad("%v", err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("admin token file %s: %w", path, err)
	}
	if len(ts) == 0 {
		return nil, fmt.Errorf("admin token file %s holds no token; write one per line as NAME ACCESS SECRET", path)
	}
	return ts, nil
}

// Add adds t, refusing an empty secret, or a name or secret taken.
func (ts *Tokens) Add(t Token) error { return ts.add(t) }

func (ts *Tokens) add(t Token) error {
	for _, o := range *ts {
		switch {
		case o.Name == t.Name:
			return fmt.Errorf("two tokens are named %q", t.Name)
		case o.Secret == t.Secret:
			return fmt.Errorf("tokens %q and %q have the same secret", o.Name, t.Name)
		}
	}
	if t.Secret == "" || t.Name == "" {
		return fmt.Errorf("a token without a name or a secret")
	}
	*ts = append(*ts, t)
	return nil
}

// match returns the token whose secret is got, comparing got with every
// token's in constant time, or nil.
func (ts Tokens) match(got string) *Token {
	if got == "" {
		return nil
	}
	sum := sha256.Sum256([]byte(got))
	found := -1
	for i := range ts {
		want := sha256.Sum256([]byte(ts[i].Secret))
		if subtle.ConstantTimeCompare(sum[:], want[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return nil
	}
	return &ts[found]
}

// tokenKey is the context key of a request's token.
type tokenKey struct{}

// Who returns the name of the token r was allowed with, or Anonymous.
func Who(r *http.Request) string {
	if t, ok := r.Context().Value(tokenKey{}).(*Token); ok {
		return t.Name
	}
	return Anonymous
}

// AccessOf returns what r's token allows: Write when the listener takes
// no token.
func AccessOf(r *http.Request) Access {
	if t, ok := r.Context().Value(tokenKey{}).(*Token); ok {
		return t.Access
	}
	return Write
}

// Changes reports whether r may change something: every method but GET
// and HEAD, except the key inspector's POST, which reads, and POST
// /v1/credits, whose body says whether it reads a balance or changes it
// (its handler asks MayChange of a change).
func Changes(r *http.Request) bool {
	switch {
	case r.Method == http.MethodGet || r.Method == http.MethodHead:
		return false
	case r.Method == http.MethodPost && (r.URL.Path == "/api/v1/inspect" || r.URL.Path == "/v1/credits"):
		return false
	}
	return true
}

// MayChange reports whether r's token may change something; when it may
// not, it answers r with Require's 403. A handler whose route Changes
// leaves to it asks it before a change.
func MayChange(w http.ResponseWriter, r *http.Request) bool {
	t, ok := r.Context().Value(tokenKey{}).(*Token)
	if !ok || t.Access >= Write {
		return true
	}
	forbidden(w, t)
	return false
}

func forbidden(w http.ResponseWriter, t *Token) {
	httplimit.Problem{Status: http.StatusForbidden, Code: "forbidden",
		Detail: fmt.Sprintf("the admin token %q may read, not change; use a token with write access", t.Name)}.Write(w)
}

// Require answers 401 to a request of next that carries no token of ts,
// as "Authorization: Bearer SECRET" or in the cookie named cookie, and 403
// to one whose token may read when the request Changes. A page opened with
// ?token=SECRET sets the cookie and is sent to the same address without
// it, so that the secret leaves no trace in the address bar or history.
// With no tokens, every request is let through as Anonymous.
func (ts Tokens) Require(cookie string, next http.Handler) http.Handler {
	if len(ts) == 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if q := r.URL.Query(); q.Has("token") && r.Method == http.MethodGet {
			t := ts.match(q.Get("token"))
			if t == nil {
				unauthorized(w, "the token in ?token= is not an admin token")
				return
			}
			http.SetCookie(w, &http.Cookie{Name: cookie, Value: t.Secret, Path: "/", HttpOnly: true,
				SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
			q.Del("token")
			u := *r.URL
			u.RawQuery = q.Encode()
			http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
			return
		}
		var t *Token
		if auth := r.Header.Get("Authorization"); auth != "" {
			scheme, got, _ := strings.Cut(auth, " ")
			if t = ts.match(strings.TrimSpace(got)); !strings.EqualFold(scheme, "Bearer") || t == nil {
				unauthorized(w, "the Authorization header does not carry an admin token; send Authorization: Bearer TOKEN")
				return
			}
		} else if c, err := r.Cookie(cookie); err == nil {
			t = ts.match(c.Value)
		}
		switch {
		case t == nil:
			unauthorized(w, "the admin listener requires a token: send Authorization: Bearer TOKEN, or open /?token=TOKEN in a browser")
		case t.Access < Write && Changes(r):
			forbidden(w, t)
		default:
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tokenKey{}, t)))
		}
	})
}

func unauthorized(w http.ResponseWriter, detail string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="sluice admin"`)
	httplimit.Problem{Status: http.StatusUnauthorized, Code: "unauthorized", Detail: detail}.Write(w)
}
