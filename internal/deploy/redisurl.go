package deploy

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// redisURL turns envoyproxy/ratelimit's REDIS_URL ("host:port", a
// comma-separated list for a cluster, "master,host:port,..." for Sentinel,
// or a redis:// URL) with REDIS_SOCKET_TYPE, REDIS_TYPE, REDIS_AUTH and
// REDIS_TLS, given by get as url, socket, type, auth and tls, into
// sluice's --redis URL.
func redisURL(get func(key string) string) (string, error) {
	raw := get("url")
	if strings.HasPrefix(raw, "redis://") || strings.HasPrefix(raw, "rediss://") {
		return raw, nil
	}
	if st := strings.ToLower(get("socket")); st != "" && st != "tcp" {
		return "", fmt.Errorf("REDIS_SOCKET_TYPE=%q: sluice connects to Redis over TCP; set REDIS_SOCKET_TYPE=tcp and REDIS_URL=host:port", st)
	}
	u := &url.URL{Scheme: "redis"}
	if tlsOn, _ := strconv.ParseBool(get("tls")); tlsOn {
		u.Scheme = "rediss"
	}
	if a := get("auth"); a != "" {
		// REDIS_AUTH is "password" or "user:password".
		user, pass, ok := strings.Cut(a, ":")
		if !ok {
			user, pass = "", a
		}
		u.User = url.UserPassword(user, pass)
	}
	parts := strings.Split(raw, ",")
	switch t := strings.ToLower(get("type")); t {
	case "", "single":
		if len(parts) > 1 {
			return "", fmt.Errorf("REDIS_URL=%q names several servers; set REDIS_TYPE=cluster or sentinel", raw)
		}
		u.Host = raw
	case "cluster":
		u.Host, u.RawQuery = parts[0], "mode=cluster"+addrs(parts[1:])
	case "sentinel":
		if len(parts) < 2 {
			return "", fmt.Errorf("REDIS_URL=%q: with REDIS_TYPE=sentinel write master_name,host:port[,host:port...]", raw)
		}
		u.Host, u.RawQuery = parts[1], "mode=sentinel&master="+url.QueryEscape(parts[0])+addrs(parts[2:])
	default:
		return "", fmt.Errorf("REDIS_TYPE=%q: use single, cluster or sentinel", t)
	}
	return u.String(), nil
}

// addrs is the query's "&addr=host:port" of each of hosts.
func addrs(hosts []string) string {
	var b strings.Builder
	for _, h := range hosts {
		b.WriteString("&addr=" + h)
	}
	return b.String()
}
