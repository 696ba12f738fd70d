package xds

import (
	"context"
	"crypto/tls"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// Status is what a client knows of its control plane.
type Status struct {
	// Server is the control plane's address.
	Server string

	// Connected reports whether a stream is open.
	Connected bool

	// Version is the version applied, Resources how many resources it
	// had, Applied when; "" before the first.
	Version   string
	Resources int
	Applied   time.Time

	// Rejected is the version last refused, RejectedError why; "" when the
	// last version sent was applied.
	Rejected, RejectedError string

	// LastError is why the last stream ended, while none is open.
	LastError string
}

// Backoff spaces the attempts to open a stream after one ended: the first
// at once, after a stream that brought a response; then Initial, doubled at
// each attempt up to Max; each randomized by RandomFactor (a factor of 0.5
// waits from half to one and a half times as long) unless NoJitter. The
// zero value is envoyproxy/ratelimit's default.
type Backoff struct {
	Initial      time.Duration // XDS_CLIENT_BACKOFF_INITIAL_INTERVAL, default 10s
	Max          time.Duration // XDS_CLIENT_BACKOFF_MAX_INTERVAL, default 60s
	RandomFactor float64       // XDS_CLIENT_BACKOFF_RANDOM_FACTOR, default 0.5
	NoJitter     bool          // XDS_CLIENT_BACKOFF_JITTER=false
}

func (b Backoff) withDefaults() Backoff {
	if b.Initial <= 0 {
		b.Initial = 10 * time.Second
	}
	if b.Max <= 0 {
		b.Max = 60 * time.Second
	}
	if b.Max < b.Initial {
		b.Max = b.Initial
	}
	if b.RandomFactor <= 0 || b.RandomFactor > 1 {
		b.RandomFactor = 0.5
	}
	return b
}

// delay is the wait before attempt failures+1 (0 for the first after a
// stream that brought a response), rand a number in [0, 1).
func (b Backoff) delay(failures int, rand func() float64) time.Duration {
	if failures == 0 {
		return 0
	}
	d := b.Initial
	for i := 1; i < failures && d < b.Max; i++ {
		d *= 2
	}
	d = min(d, b.Max)
	if !b.NoJitter {
		d = time.Duration(float64(d) * (1 + b.RandomFactor*(2*rand()-1)))
	}
	return max(d, 0)
}

// dialOptions are the connection's: TLS or plain text, the connection
// backoff from ConnectRetry, the largest message.
func (c *Client) dialOptions() []grpc.DialOption {
	creds := insecure.NewCredentials()
	if c.opts.TLS != nil {
		creds = &reloading{TransportCredentials: credentials.NewTLS(c.opts.TLS.Config()), files: c.opts.TLS}
	}
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: c.opts.ConnectRetry, Multiplier: 1.6, Jitter: 0.2, MaxDelay: c.opts.Backoff.Max},
			MinConnectTimeout: 20 * time.Second,
		}),
	}
	if c.opts.MaxMessageSize > 0 {
		opts = append(opts, grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(c.opts.MaxMessageSize)))
	}
	return opts
}

// reloading is TLS credentials whose configuration is the files' as they
// are at each handshake (tlsfiles.ClientFiles.Config).
type reloading struct {
	credentials.TransportCredentials
	files interface{ Config() *tls.Config }
}

// ClientHandshake implements credentials.TransportCredentials.
func (r *reloading) ClientHandshake(ctx context.Context, authority string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return credentials.NewTLS(r.files.Config()).ClientHandshake(ctx, authority, conn)
}

// Clone implements credentials.TransportCredentials.
func (r *reloading) Clone() credentials.TransportCredentials {
	return &reloading{TransportCredentials: r.TransportCredentials.Clone(), files: r.files}
}

// metrics are the client's.
type metrics struct {
	connected prometheus.Gauge
	responses *prometheus.CounterVec // result: accepted, rejected
	info      *prometheus.GaugeVec   // server, version: 1
}

func newMetrics(reg prometheus.Registerer) metrics {
	m := metrics{
		connected: prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_envoy_xds_connected",
			Help: "1 while a stream to the xDS control plane is open, else 0."}),
		responses: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_envoy_xds_responses_total",
			Help: "Versions of the Envoy configuration the xDS control plane sent, by result: accepted (ACK) or rejected (NACK)."}, []string{"result"}),
		info: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_envoy_xds_version_info",
			Help: "1 for the control plane and version of the Envoy configuration in use."}, []string{"server", "version"}),
	}
	if reg != nil {
		reg.MustRegister(m.connected, m.responses, m.info)
	}
	return m
}
