package main

// The time zone database, built in: a calendar quota's timezone (and a
// credits refill's) loads on a machine or an image without
// /usr/share/zoneinfo, such as a scratch container.
import _ "time/tzdata"
