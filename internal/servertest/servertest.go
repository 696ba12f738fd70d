// Package servertest holds what the tests of sluice serve's packages
// share: the configuration file most of them serve.
package servertest

// Config is the configuration file most of the server's and the admin
// view's tests serve: the notifier's global and per-category caps, an
// edge policy of per-address and per-user limits, a shadowed policy, a
// carrier's schedule and forward auth from a trusted proxy.
const Config = `
policies:
  - name: notify
    limits:
      - {name: global, limit: 5, window: 30m}
      - {name: category, by: [category], limit: 2, window: 30m}
  - name: edge
    limits:
      - {name: per-ip, by: [ip], limit: 2, window: 1m}
      - {name: per-user, by: [user], limit: 100, window: 1m}
  - name: shadowed
    shadow: true
    limits:
      - {name: one, limit: 1, window: 1m}
schedules:
  - {name: carrier, by: [carrier], rate: 4/s, max_delay: 500ms}
forward_auth:
  trusted_proxies: ["127.0.0.1"]
  headers: {user: X-User-Id}
`
