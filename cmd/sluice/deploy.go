package main

import (
	"crypto/tls"
	"net"
	"net/http"
)

// h2 is the protocols an HTTP listener with TLS offers: HTTP/2 first.
var h2 = []string{"h2", "http/1.1"}

// serveHTTP serves hs on l, with TLS when cfg is set.
func serveHTTP(hs *http.Server, l net.Listener, cfg *tls.Config) error {
	if cfg == nil {
		return hs.Serve(l)
	}
	c := cfg.Clone()
	c.NextProtos = h2
	hs.TLSConfig = c
	return hs.ServeTLS(l, "", "")
}
