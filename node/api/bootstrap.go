package api

import (
	"fmt"

	ma "github.com/multiformats/go-multiaddr"
)

// MaxBootstrap is the most bootstrap addresses a node or a join takes.
const MaxBootstrap = 32

// CheckBootstrap checks bootstrap addresses (`--bootstrap`, a join's
// bootstrap): each a multiaddr that starts with /ip4, /ip6, /dns4, /dns6
// or /dns and ends in /p2p/<machine ID>, at most MaxBootstrap of them. The
// error is one line naming field.
func CheckBootstrap(field string, addrs []string) error {
	if len(addrs) > MaxBootstrap {
		return fmt.Errorf("%s: %d addresses; allowed: at most %d", field, len(addrs), MaxBootstrap)
	}
	for _, s := range addrs {
		a, err := ma.NewMultiaddr(s)
		if err == nil && len(a) == 0 {
			err = fmt.Errorf("empty")
		}
		if err != nil {
			return fmt.Errorf("%s: %q is not a multiaddr; use e.g. /dns4/relay.example.com/tcp/4001/p2p/<machine ID>", field, Ellipsize(s))
		}
		switch a[0].Protocol().Code {
		case ma.P_IP4, ma.P_IP6, ma.P_DNS4, ma.P_DNS6, ma.P_DNS:
		default:
			return fmt.Errorf("%s: %q starts with /%s; allowed: /ip4, /ip6, /dns4, /dns6, /dns", field, Ellipsize(s), a[0].Protocol().Name)
		}
		if last := a[len(a)-1]; last.Protocol().Code != ma.P_P2P {
			return fmt.Errorf("%s: %q does not end in /p2p/<machine ID>; add the machine's ID (cshare node status on it)", field, Ellipsize(s))
		}
	}
	return nil
}
