// Package xds is sluice serve's client of a control plane that serves
// envoyproxy/ratelimit's configuration over xDS, as Envoy Gateway's does:
// an aggregated (ADS), state-of-the-world stream of
// ratelimit.config.ratelimit.v3.RateLimitConfig resources, each a domain
// and its descriptors. Every version the control plane pushes goes through
// the loader of configuration files (envoy.Parse, by Options.Apply) and,
// when valid, replaces the configuration at once; the client acknowledges
// it (ACK). An invalid version is refused (NACK) with the loader's
// messages, once, and the configuration in use stays.
//
// The protocol is the xDS protocol's (version_info and response_nonce in
// every request, error_detail in a refusal), with two choices a snapshot
// cache (go-control-plane's, which Envoy Gateway uses) needs to work with
// a client that refuses a version:
//
//   - a refusal carries the refused version in version_info, with the
//     error in error_detail: a snapshot cache compares the request's
//     version with its own and, given the last accepted one, would send the
//     refused version again at once, in a loop, until the next version;
//   - the first request of every stream carries no version, so that a
//     control plane that restarted, and counts its versions from 1 again
//     (Envoy Gateway's does), always sends its state.
//
// A response that repeats, on the same stream, a version the client
// already refused is not answered again.
package xds

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/prometheus/client_golang/prometheus"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/sluicerate/sluice/internal/envoy"
	"github.com/sluicerate/sluice/internal/tlsfiles"
)

// Options configures a Client. Server and Apply are required; the zero
// value of every other field is envoyproxy/ratelimit's default.
type Options struct {
	// Server is the control plane's address, host:port
	// (CONFIG_GRPC_XDS_SERVER_URL).
	Server string

	// NodeID is the node the client says it is, which the control plane
	// keys its configuration by (CONFIG_GRPC_XDS_NODE_ID). Default
	// "default".
	NodeID string

	// NodeMetadata is the node's metadata (CONFIG_GRPC_XDS_NODE_METADATA).
	NodeMetadata map[string]string

	// Headers are sent with the stream
	// (CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS).
	Headers map[string]string

	// TLS, when set, connects with TLS (CONFIG_GRPC_XDS_SERVER_USE_TLS and
	// the files beside it); nil connects in plain text.
	TLS *tlsfiles.ClientFiles

	// Backoff spaces the attempts to open a stream after one ended.
	Backoff Backoff

	// ConnectRetry is the least time between two attempts to connect
	// (CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL): gRPC's connection
	// backoff starts there. Default 3s.
	ConnectRetry time.Duration

	// MaxMessageSize is the largest response taken, in bytes
	// (XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES). Default gRPC's, 4 MiB.
	MaxMessageSize int

	// Apply loads one version's documents (envoy.Parse) and makes them the
	// configuration in use, or returns why not: the client then refuses
	// the version with that error.
	Apply func(version string, docs []envoy.Source) error

	// Logger receives the client's logs. Default: discard.
	Logger *slog.Logger

	// Registry, when set, registers the client's metrics.
	Registry prometheus.Registerer
}

// Client follows a control plane's configuration. It is safe for
// concurrent use; create one with New and run it with Run.
type Client struct {
	opts    Options
	log     *slog.Logger
	node    *corev3.Node
	status  atomic.Pointer[Status]
	metrics metrics
	rand    func() float64
}

// New returns a client; it connects when Run runs.
func New(opts Options) (*Client, error) {
	if opts.Server == "" {
		return nil, errors.New("xds: no control plane address; give host:port (CONFIG_GRPC_XDS_SERVER_URL)")
	}
	if opts.Apply == nil {
		return nil, errors.New("xds: Options.Apply is nil")
	}
	if opts.NodeID == "" {
		opts.NodeID = "default"
	}
	if opts.ConnectRetry <= 0 {
		opts.ConnectRetry = 3 * time.Second
	}
	opts.Backoff = opts.Backoff.withDefaults()
	c := &Client{opts: opts, log: opts.Logger, rand: rand.Float64}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	c.log = c.log.With(slog.String("xds_server", opts.Server))
	fields := map[string]*structpb.Value{}
	for k, v := range opts.NodeMetadata {
		fields[k] = structpb.NewStringValue(v)
	}
	c.node = &corev3.Node{Id: opts.NodeID, Metadata: &structpb.Struct{Fields: fields}, UserAgentName: "sluice"}
	c.metrics = newMetrics(opts.Registry)
	c.status.Store(&Status{Server: opts.Server})
	return c, nil
}

// Run follows the control plane until ctx ends: it opens a stream, applies
// and acknowledges each version, and opens another when one ends: at once
// after a stream that brought a response, and once more at once when the
// next fails because the connection was lost (gRPC then paces the
// attempts to connect again from ConnectRetry on, and the stream waits for
// one); otherwise after Options.Backoff.
func (c *Client) Run(ctx context.Context) error {
	conn, err := grpc.NewClient(c.opts.Server, c.dialOptions()...)
	if err != nil {
		return fmt.Errorf("xds: control plane %q: %w", c.opts.Server, err)
	}
	defer conn.Close()
	failures, lost := 0, false
	for {
		received, err := c.stream(ctx, conn)
		if ctx.Err() != nil {
			return nil
		}
		switch {
		case received:
			failures, lost = 0, false
		case status.Code(err) == codes.Unavailable && !lost:
			lost = true // opened on a connection that was going away
		default:
			failures++
		}
		delay := c.opts.Backoff.delay(failures, c.rand)
		c.setStatus(func(s *Status) { s.Connected, s.LastError = false, err.Error() })
		c.metrics.connected.Set(0)
		c.log.Warn("xDS stream to the control plane ended; opening another", slog.Any("err", err), slog.Duration("in", delay))
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// stream runs one stream until it fails, and reports whether it brought
// any response.
func (c *Client) stream(ctx context.Context, conn *grpc.ClientConn) (received bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if len(c.opts.Headers) > 0 {
		ctx = metadata.NewOutgoingContext(ctx, metadata.New(c.opts.Headers))
	}
	opened := make(chan struct{})
	go c.warnWhileConnecting(ctx, conn, opened)
	s, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx, grpc.WaitForReady(true))
	close(opened)
	if err != nil {
		return false, err
	}
	if err := s.Send(&discoveryv3.DiscoveryRequest{Node: c.node, TypeUrl: TypeURL}); err != nil {
		return false, err
	}
	c.metrics.connected.Set(1)
	c.setStatus(func(s *Status) { s.Connected, s.LastError = true, "" })
	c.log.Info("xDS stream to the control plane open; waiting for the configuration", slog.String("node", c.opts.NodeID))
	st := streamState{}
	for {
		resp, err := s.Recv()
		if err != nil {
			return received, err
		}
		received = true
		if resp.GetTypeUrl() != TypeURL {
			c.log.Warn("xDS response of a type not asked for; ignored", slog.String("type", resp.GetTypeUrl()))
			continue
		}
		if req := c.answer(&st, resp); req != nil {
			if err := s.Send(req); err != nil {
				return received, err
			}
		}
	}
}

// streamState is what a stream remembers of the versions it was sent.
type streamState struct {
	applied  string // version and digest of the configuration applied
	rejected string // of the last version refused, since one was applied
}

// answer applies a response and returns the request that answers it: an
// ACK, a NACK, or nil for a version refused before on this stream.
func (c *Client) answer(st *streamState, resp *discoveryv3.DiscoveryResponse) *discoveryv3.DiscoveryRequest {
	version, nonce := resp.GetVersionInfo(), resp.GetNonce()
	h := sha256.New()
	for _, r := range resp.GetResources() {
		h.Write([]byte(r.GetTypeUrl()))
		h.Write(r.GetValue())
	}
	id := version + "\x00" + string(h.Sum(nil))
	if id == st.rejected {
		c.log.Debug("xDS version refused before sent again; not answered", slog.String("version", version))
		return nil
	}
	ack := &discoveryv3.DiscoveryRequest{TypeUrl: TypeURL, VersionInfo: version, ResponseNonce: nonce}
	if id == st.applied {
		return ack // the state in use, sent again (a new stream, say)
	}
	docs, err := Sources(resp.GetResources())
	if err == nil {
		err = c.opts.Apply(version, docs)
	}
	if err != nil {
		st.rejected = id
		c.metrics.responses.WithLabelValues("rejected").Inc()
		c.setStatus(func(s *Status) {
			s.Connected, s.Rejected, s.RejectedError, s.LastError = true, version, err.Error(), ""
		})
		c.log.Error("xDS version refused (NACK); the configuration in use stays", slog.String("version", version),
			slog.Int("resources", len(resp.GetResources())), slog.Any("err", err))
		ack.ErrorDetail = &statuspb.Status{Code: int32(codes.InvalidArgument), Message: err.Error()}
		return ack
	}
	st.applied, st.rejected = id, ""
	c.metrics.responses.WithLabelValues("accepted").Inc()
	c.metrics.info.Reset()
	c.metrics.info.WithLabelValues(c.opts.Server, version).Set(1)
	c.setStatus(func(s *Status) {
		s.Connected, s.Version, s.Resources, s.Applied, s.LastError = true, version, len(docs), time.Now(), ""
		s.Rejected, s.RejectedError = "", ""
	})
	c.log.Info("xDS version applied (ACK)", slog.String("version", version), slog.Int("resources", len(docs)))
	return ack
}

// warnWhileConnecting logs, every ConnectRetry until opened is closed, that
// the control plane is not reachable yet, with the connection's state.
func (c *Client) warnWhileConnecting(ctx context.Context, conn *grpc.ClientConn, opened <-chan struct{}) {
	every := max(c.opts.ConnectRetry, time.Second) * 3
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-opened:
			return
		case <-t.C:
			c.log.Warn("waiting for the xDS control plane to answer", slog.String("state", conn.GetState().String()))
		}
	}
}

// Status returns what the client knows now.
func (c *Client) Status() Status { return *c.status.Load() }

// setStatus changes a copy of the status and publishes it; only the
// client's goroutine calls it.
func (c *Client) setStatus(f func(*Status)) {
	s := *c.status.Load()
	f(&s)
	c.status.Store(&s)
}
