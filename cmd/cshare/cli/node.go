package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cshare/cshare/internal/text"
	"github.com/cshare/cshare/node/api"
)

// defaultAPI is where `node run` listens when --api is not given.
const defaultAPI = "127.0.0.1:7480"

// runOptions mirror node.Options: what `node run` hands to the daemon.
type runOptions struct {
	DataDir           string
	API               string
	Listen            []string
	ConfigPath        string
	HeartbeatInterval time.Duration
	Name              string
	Logger            *slog.Logger
	// APITLSCert and APITLSKey serve the API over TLS; APIInsecureRemote
	// allows plain HTTP on a non-loopback --api.
	APITLSCert, APITLSKey string
	APIInsecureRemote     bool
	Now                   func() time.Time // nil = time.Now; see EnvFakeTime
	Bootstrap             []string         // --bootstrap
}

func (a *app) nodeCmd() *cobra.Command {
	return group("node", "Run, join, inspect and stop this machine's node",
		a.nodeRunCmd(), a.nodeJoinCmd(), a.nodeStatusCmd(), a.nodeStopCmd(), a.nodeDashboardCmd(), a.nodeTokenCmd())
}

func (a *app) nodeRunCmd() *cobra.Command {
	var (
		listen    []string
		config    string
		heartbeat time.Duration
		name      string
		logLevel  string
		tlsCert   string
		tlsKey    string
		insecure  bool
		bootstrap []string
	)
	c := &cobra.Command{
		Use:   "run",
		Short: "Run a node in the foreground (until SIGINT, SIGTERM or cshare node stop)",
		Long: `Run a node in the foreground. It keeps its identity, ledger and API token in
the data dir and serves its API on --api (default 127.0.0.1:7480; port 0
picks a free port, written to <data-dir>/api.addr). Logs go to stderr.`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, args []string) error {
			var lvl slog.Level
			if err := lvl.UnmarshalText([]byte(logLevel)); err != nil {
				return usagef(cmd, "--log-level: %q is not a level; use debug, info, warn or error", logLevel)
			}
			if cmd.Flags().Changed("heartbeat-interval") && heartbeat <= 0 {
				return usagef(cmd, "--heartbeat-interval: %s is not allowed; give a positive duration such as 30s", heartbeat)
			}
			name = strings.TrimSpace(name)
			if name != "" {
				if err := text.CheckName("--name", name); err != nil {
					return usagef(cmd, "%v", err)
				}
			}
			for _, l := range listen {
				if !strings.HasPrefix(l, "/") {
					return usagef(cmd, "--listen: %q is not a multiaddr; use e.g. /ip4/0.0.0.0/tcp/4001", l)
				}
			}
			if err := api.CheckBootstrap("--bootstrap", bootstrap); err != nil {
				return usagef(cmd, "%v", err)
			}
			if (tlsCert == "") != (tlsKey == "") {
				return usagef(cmd, "--api-tls-cert and --api-tls-key: give both (PEM files) or neither")
			}
			now, err := fakeClock(os.Getenv(EnvFakeTime))
			if err != nil {
				return err
			}
			o := runOptions{
				APITLSCert: tlsCert, APITLSKey: tlsKey, APIInsecureRemote: insecure,
				Now:        now,
				DataDir:    a.dataDir,
				API:        a.apiAddr,
				Listen:     listen,
				ConfigPath: config,
				Name:       name,
				Bootstrap:  bootstrap,
				Logger:     slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: lvl})),
			}
			if o.API == "" {
				o.API = defaultAPI
			}
			if cmd.Flags().Changed("heartbeat-interval") {
				o.HeartbeatInterval = heartbeat
			}
			err = a.runNode(cmd.Context(), o)
			if err != nil && errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		},
	}
	f := c.Flags()
	f.StringArrayVar(&listen, "listen", nil, "libp2p listen multiaddr, repeatable (default TCP and QUIC on port 4001, all interfaces)")
	f.StringVar(&config, "config", "", "node.yaml with this machine's resource limits")
	f.DurationVar(&heartbeat, "heartbeat-interval", 30*time.Second, "how often this machine sends a heartbeat (node.yaml's heartbeat_interval applies when not given)")
	f.StringVar(&name, "name", "", "this machine's name (default node.yaml's name, else the host name)")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&tlsCert, "api-tls-cert", "", "serve the API over TLS with this certificate (PEM; with --api-tls-key)")
	f.StringVar(&tlsKey, "api-tls-key", "", "the private key (PEM) of --api-tls-cert")
	f.BoolVar(&insecure, "api-insecure-remote", false, "allow a non-loopback --api without TLS (the token then crosses the network in clear)")
	addBootstrap(c, &bootstrap)
	return c
}

// joinCmd completes c, node join or member join: key is the org key or
// invite code its PreRunE has read; the machine's name and the person's
// name are checked before the node is asked.
func (a *app) joinCmd(c *cobra.Command, key func(cmd *cobra.Command) (string, error)) *cobra.Command {
	var name, user string
	var bootstrap []string
	var req api.JoinRequest
	c.Args = exactArgs()
	c.PreRunE = func(cmd *cobra.Command, args []string) error {
		k, err := key(cmd)
		if err != nil {
			return err
		}
		name = strings.TrimSpace(name)
		if name != "" {
			if err := text.CheckName("--name", name); err != nil {
				return usagef(cmd, "%v", err)
			}
		}
		if err := api.CheckBootstrap("--bootstrap", bootstrap); err != nil {
			return usagef(cmd, "%v", err)
		}
		userName, err := a.userName(cmd, user)
		req = api.JoinRequest{OrgKey: k, Name: name, UserName: userName, Bootstrap: bootstrap}
		return err
	}
	c.Flags().StringVar(&name, "name", "", "this machine's name in the org")
	addBootstrap(c, &bootstrap)
	addUserName(c, &user)
	return viewCmd(a, c, "print the result as JSON",
		func(ctx context.Context, cl *api.Client, _ []string) (api.JoinResult, error) {
			return cl.Join(ctx, req)
		},
		a.printJoined)
}

// addBootstrap adds --bootstrap to c.
func addBootstrap(c *cobra.Command, to *[]string) {
	c.Flags().StringArrayVar(to, "bootstrap", nil, "a machine of the org to reach it through, as /ip4, /ip6, /dns4 or /dns6 .../p2p/<machine ID>; repeatable")
}

// printJoined is what node join and member join print.
func (a *app) printJoined(res api.JoinResult) error {
	var err error
	org := res.Org
	if res.OrgName != "" {
		org = text.Escape(res.OrgName) + " (" + res.Org + ")"
	}
	switch res.Status {
	case "pending":
		_, err = fmt.Fprintf(a.stdout, "joined org %s as %s: pending approval by an admin (cshare machine approve %s)\n", org, res.Machine, short(res.Machine))
	case "approved", "available", "busy":
		role := res.Role
		if role == "" {
			role = "member"
		}
		_, err = fmt.Fprintf(a.stdout, "joined org %s as %s: approved, role %s\n", org, res.Machine, role)
	default:
		_, err = fmt.Fprintf(a.stdout, "joined org %s as %s: %s\n", org, res.Machine, orDash(res.Status))
	}
	return err
}

func (a *app) nodeJoinCmd() *cobra.Command {
	var key string
	c := &cobra.Command{Use: "join --org-key KEY", Short: "Join this node to an org with its org key or an invite code"}
	c.Flags().StringVar(&key, "org-key", "", "the org key or an invite code (required)")
	return a.joinCmd(c, func(cmd *cobra.Command) (string, error) {
		key = strings.TrimSpace(key)
		if key == "" {
			return "", usagef(cmd, "--org-key is required: the key that cshare org create or cshare org key printed, or an invite code")
		}
		return key, nil
	})
}

func (a *app) nodeStatusCmd() *cobra.Command {
	c := &cobra.Command{Use: "status", Short: "Show this node: identity, org, peers, ledger, plan", Args: exactArgs()}
	return viewCmd(a, c, "print the status as JSON",
		func(ctx context.Context, cl *api.Client, _ []string) (api.NodeStatus, error) { return cl.Status(ctx) },
		func(st api.NodeStatus) error {
			org := "none (create one with: cshare org create --name NAME, or join one with: cshare node join --org-key KEY)"
			if st.Org != "" {
				org = st.Org
				if st.OrgName != "" {
					org = st.OrgName + " (" + st.Org + ")"
				}
			}
			plan := orDash(st.PlanHash)
			if st.PlanHash != "" {
				plan = fmt.Sprintf("%s (%d of %d peers agree)", st.PlanHash, st.PlanAgree, st.PlanPeers)
			}
			peers := fmt.Sprint(st.Peers)
			if st.Reconnecting {
				peers += ", reconnecting"
			}
			rows := [][2]string{
				{"id", st.ID},
				{"name", orDash(st.Name)},
				{"org", org}}
			if st.Org == "" && st.Left != nil {
				rows = append(rows, [2]string{"left", fmt.Sprintf("%s at %s: %s (its data: %s)", st.Left.Org, st.Left.At, st.Left.Why, st.Left.OldData)})
			}
			rows = append(rows, [2]string{"status", orDash(st.Status)})
			if st.JupyterAddr != "" {
				rows = append(rows, [2]string{"jupyter proxy", st.JupyterAddr + " (certificate " + st.JupyterCert + ")"})
			}
			return kv(a.stdout, append(rows,
				[2]string{"person", personRef(st.Person, st.PersonName)},
				[2]string{"role", orDash(st.Role)},
				[2]string{"peers", peers},
				[2]string{"heads", orDash(strings.Join(st.Heads, ", "))},
				[2]string{"entries", fmt.Sprint(st.Entries)},
				[2]string{"state hash", orDash(st.StateHash)},
				[2]string{"plan", plan},
				[2]string{"dispatch", dispatchText(st)},
				[2]string{"uptime", orDash(st.Uptime)},
				[2]string{"version", orDash(st.Version)},
				[2]string{"api", orDash(st.API)},
				[2]string{"addrs", orDash(strings.Join(st.Addrs, ", "))},
				[2]string{"reachability", reachText(st)},
				[2]string{"public addrs", orDash(strings.Join(st.PublicAddrs, ", "))},
				[2]string{"connections", connectionsText(st.Connections)},
				[2]string{"data dir", orDash(st.DataDir)},
			)...)
		})
}

func (a *app) nodeStopCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "stop",
		Short: "Stop the local node gracefully and wait until it is gone",
		Args:  exactArgs(),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			cl, err := a.client()
			if err != nil {
				return err
			}
			st, err := status(ctx, cl)
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "stopping node %s\n", st.ID)
			if err := cl.Stop(ctx); err != nil {
				// A node that goes away while answering is what we want;
				// only an answer that refuses is an error.
				var se *api.StatusError
				if errors.As(err, &se) {
					return err
				}
			}
			deadline := time.Now().Add(a.stopTimeout)
			for {
				if _, err := status(ctx, cl); errors.Is(err, api.ErrNodeNotRunning) {
					fmt.Fprintf(a.stdout, "node %s stopped\n", st.ID)
					return nil
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("node %s still answers at %s after %s; look at its log, or send it SIGTERM", st.ID, cl.Addr(), a.stopTimeout)
				}
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(a.stopInterval):
				}
			}
		},
	}
}

// status asks for the node status with a short timeout.
func status(ctx context.Context, cl *api.Client) (api.NodeStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return cl.Status(ctx)
}

// reachText is node status's reachability line.
func reachText(st api.NodeStatus) string {
	r := orDash(st.Reachability)
	switch st.Reachability {
	case "private":
		r += " (behind a NAT or a firewall: the org reaches this machine through its relays)"
	case "unknown":
		r += " (not found out yet)"
	}
	if st.RelayServing {
		r += "; serving as a relay for the org's machines"
	}
	return r
}

// connectionsText is "machine path addr" per connected peer.
func connectionsText(cs []api.Connection) string {
	if len(cs) == 0 {
		return "-"
	}
	lines := make([]string, 0, len(cs))
	for _, c := range cs {
		lines = append(lines, fmt.Sprintf("%s %s %s", short(c.Machine), c.Path, text.Escape(c.Addr)))
	}
	return strings.Join(lines, "; ")
}

// dispatchText says whether the node takes new items.
func dispatchText(st api.NodeStatus) string {
	if st.CatchingUp {
		return "catching up with a peer before taking new items (since " + orDash(st.CatchingUpSince) + ")"
	}
	return "taking items"
}
