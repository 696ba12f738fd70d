package redisstore

import "github.com/redis/rueidis"

// NewRueidisEvaler exposes the rueidis Evaler to the external tests.
func NewRueidisEvaler(c rueidis.Client) Evaler { return rueidisEvaler{client: c} }
