package launch

import (
	"testing"

	"github.com/sluicerate/sluice/internal/adminauth"
)

func TestAdminAddr(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{":9464": "127.0.0.1:9464", "0.0.0.0:9464": "0.0.0.0:9464", "[::1]:1": "[::1]:1"} {
		if got := adminAddr(in); got != want {
			t.Errorf("adminAddr(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestAdminExposure: an admin listener that other machines reach needs a
// token, or an explicit word that the network is trusted.
func TestAdminExposure(t *testing.T) {
	t.Parallel()
	some := adminauth.Tokens{{Name: "admin", Secret: "s", Access: adminauth.Write}}
	for _, tc := range []struct {
		addr    string
		tokens  adminauth.Tokens
		trusted bool
		refused bool
	}{
		{"0.0.0.0:9464", nil, false, true},
		{"[::]:9464", nil, false, true},
		{"10.1.2.3:9464", nil, false, true},
		{"admin.internal:9464", nil, false, true},
		{"0.0.0.0:9464", some, false, false},
		{"0.0.0.0:9464", nil, true, false},
		{":9464", nil, false, false}, // a bare port is loopback
		{"127.0.0.1:9464", nil, false, false},
		{"[::1]:9464", nil, false, false},
		{"localhost:9464", nil, false, false},
		{"", nil, false, false}, // no admin listener
	} {
		err := CheckAdminExposure(tc.addr, tc.tokens, tc.trusted)
		if got := err != nil; got != tc.refused {
			t.Errorf("CheckAdminExposure(%q, %d tokens, trusted %v) = %v, want refused %v", tc.addr, len(tc.tokens), tc.trusted, err, tc.refused)
		}
	}
}
