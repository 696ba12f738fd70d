// Package deploy resolves how sluice serve runs where it is deployed: its
// listeners' TLS, the Envoy configuration's control plane, metrics,
// tracing and the server's bounds, from the command line, the environment
// envoyproxy/ratelimit reads and the configuration file.
package deploy

import (
	"crypto/tls"
	"time"

	"google.golang.org/grpc"

	"github.com/sluicerate/sluice/internal/envoy/xds"
	"github.com/sluicerate/sluice/internal/tlsfiles"
	"github.com/sluicerate/sluice/internal/tracing"
)

// Settings are the deploy settings resolved: the command line, then the
// environment, then the configuration file's envoy and tls sections.
type Settings struct {
	XDS      *xds.Options // nil: the Envoy configuration is not from a control plane
	XDSForce bool         // serve before the control plane's first version

	HTTPTLS, GRPCTLS, AdminTLS *tls.Config // nil: plain text
	RedisTLS                   *tlsfiles.ClientFiles

	MetricsAddr, MetricsPath string
	Tracing                  *tracing.Config // nil: off

	GRPCOpts       []grpc.ServerOption
	MaxInFlight    int
	RequestTimeout time.Duration
	StoreTimeout   time.Duration
}
