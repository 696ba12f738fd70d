package httplimit

import (
	"errors"
	"fmt"
	"net/http"
	"net/textproto"

	"github.com/sluicerate/sluice/internal/edge"
)

// KeyFunc reads the value of one request attribute, such as the client's
// address or the user. An error that wraps ErrMissingKey reports that the
// request does not carry the attribute: the middleware leaves it out and
// the Limiter decides whether a rule needs it (one that does fails the
// request with a *KeyError through Config.ErrorHandler, and nothing is
// recorded). Any other error reports that the attribute cannot be read: the
// middleware answers through Config.ErrorHandler at once and decides
// nothing. A value must be valid UTF-8 (ErrInvalidKey otherwise).
//
// Any function of this type is a key function: a user function that looks
// up a session, a tenant derived from the host name. (*IPResolver).Key,
// Header, PathValue, Route and ContextValue are the common ones.
type KeyFunc func(r *http.Request) (string, error)

// ErrMissingKey reports a request that lacks an attribute a rule is keyed
// on. Key functions wrap it to report their attribute absent.
var ErrMissingKey = errors.New("httplimit: request lacks a rate-limit key")

// ErrInvalidKey reports an attribute value that is not valid UTF-8: bytes
// that some protocols would read as U+FFFD, making different clients one.
// The *KeyError passed to Config.ErrorHandler wraps it.
var ErrInvalidKey = edge.ErrInvalidAttribute

// KeyError reports that an attribute fails a request: its key function
// failed, or reported it absent while a rule needs it, or its value is not
// valid UTF-8. The middleware passes it to Config.ErrorHandler.
type KeyError struct {
	// Attribute is the attribute at fault.
	Attribute string
	// Err is the key function's error, or one wrapping ErrInvalidKey.
	Err error
}

// Error returns the attribute and the key function's error.
func (e *KeyError) Error() string {
	return fmt.Sprintf("httplimit: attribute %q: %v", e.Attribute, e.Err)
}

// Unwrap returns Err.
func (e *KeyError) Unwrap() error { return e.Err }

// Header returns a KeyFunc that reads the first value of the header name,
// for an API key, say. A missing or empty header is an error wrapping
// ErrMissingKey. Stores encode and length-cap attribute values, so a client
// cannot shape store keys through the header.
func Header(name string) KeyFunc {
	key := textproto.CanonicalMIMEHeaderKey(name)
	return func(r *http.Request) (string, error) {
		if v := r.Header[key]; len(v) > 0 && v[0] != "" {
			return v[0], nil
		}
		return "", fmt.Errorf("%w: no %s header", ErrMissingKey, key)
	}
}

// PathValue returns a KeyFunc that reads the wildcard name of the route
// the request matched (http.Request.PathValue), for a route such as
// "POST /users/{user}/messages". The middleware must wrap the handler
// registered on the http.ServeMux, not the mux, for the value to be set.
func PathValue(name string) KeyFunc {
	return func(r *http.Request) (string, error) {
		if v := r.PathValue(name); v != "" {
			return v, nil
		}
		return "", fmt.Errorf("%w: no path value %q", ErrMissingKey, name)
	}
}

// Route is a KeyFunc that returns the pattern of the route the request
// matched (http.Request.Pattern), such as "GET /items/{id}", so each route
// has its own window whatever the path values. The middleware must wrap the
// handler registered on the http.ServeMux, not the mux, for the pattern to
// be set; a request without one is an error.
func Route(r *http.Request) (string, error) {
	if r.Pattern != "" {
		return r.Pattern, nil
	}
	return "", fmt.Errorf("%w: no route pattern; wrap the handler registered on the ServeMux, not the mux", ErrMissingKey)
}

// ContextValue returns a KeyFunc that reads the value stored under key in
// the request's context, typically the user an authentication middleware
// put there. The value must be a non-empty string or a fmt.Stringer; a
// missing value is an error wrapping ErrMissingKey.
func ContextValue(key any) KeyFunc {
	return func(r *http.Request) (string, error) {
		switch v := r.Context().Value(key).(type) {
		case string:
			if v != "" {
				return v, nil
			}
		case fmt.Stringer:
			if s := v.String(); s != "" {
				return s, nil
			}
		}
		return "", fmt.Errorf("%w: no value for %v in the request context", ErrMissingKey, key)
	}
}
