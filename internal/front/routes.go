package front

import "net/http"

// Mux is what a front adds its routes to: an *http.ServeMux, or Routes.
type Mux interface {
	Handle(pattern string, handler http.Handler)
	HandleFunc(pattern string, handler func(http.ResponseWriter, *http.Request))
}

// Routes is a ServeMux that remembers the pattern of every route added to
// it, so that a listener can say what it serves (every route of the admin
// listener is checked for its token). Create one with NewRoutes.
type Routes struct {
	*http.ServeMux
	patterns []string
}

var _ Mux = (*Routes)(nil)

// NewRoutes returns Routes with none added.
func NewRoutes() *Routes { return &Routes{ServeMux: http.NewServeMux()} }

// Handle adds a route, as http.ServeMux.Handle does.
func (r *Routes) Handle(pattern string, handler http.Handler) {
	r.ServeMux.Handle(pattern, handler)
	r.patterns = append(r.patterns, pattern)
}

// HandleFunc adds a route, as http.ServeMux.HandleFunc does.
func (r *Routes) HandleFunc(pattern string, handler func(http.ResponseWriter, *http.Request)) {
	r.Handle(pattern, http.HandlerFunc(handler))
}

// Patterns returns the patterns added, in order ("GET /api/v1/config").
func (r *Routes) Patterns() []string { return append([]string(nil), r.patterns...) }
