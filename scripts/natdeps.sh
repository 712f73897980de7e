#!/usr/bin/env bash
# make nat (chaos/nat_test.go) builds NAT routers in network namespaces with
# ip and iptables (and the chaos helpers it shares check for nft). As root,
# this installs what is missing with apt-get, once: when the tools are
# there it does nothing. Elsewhere it does nothing, and TestNAT skips and
# says why.
set -u
[ "$(id -u)" = 0 ] || exit 0
missing=""
command -v ip >/dev/null 2>&1 || missing="$missing iproute2"
command -v iptables >/dev/null 2>&1 || missing="$missing iptables"
command -v nft >/dev/null 2>&1 || missing="$missing nftables"
[ -n "$missing" ] || exit 0
if ! command -v apt-get >/dev/null 2>&1; then
	echo "make nat: missing:$missing and no apt-get to install them; TestNAT will skip"
	exit 0
fi
echo "make nat: installing$missing with apt-get"
if ! { apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null; }; then
	echo "make nat: could not install$missing; TestNAT will skip"
fi
exit 0
