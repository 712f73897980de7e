#!/usr/bin/env bash
# make test (node's TestMetricsPassPromtool) checks /metrics with promtool
# check metrics. As root, this installs promtool (Debian's prometheus
# package) with apt-get when it is missing, once: when it is there it does
# nothing. Elsewhere it does nothing, and the test skips and says why.
set -u
command -v promtool >/dev/null 2>&1 && exit 0
[ "$(id -u)" = 0 ] || { echo "make test: no promtool and not root: TestMetricsPassPromtool will skip (apt-get install prometheus)"; exit 0; }
if ! command -v apt-get >/dev/null 2>&1; then
	echo "make test: no promtool and no apt-get to install it; TestMetricsPassPromtool will skip"
	exit 0
fi
echo "make test: installing promtool (prometheus) with apt-get"
if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null 2>&1; then
	if ! { apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null; }; then
		echo "make test: could not install prometheus; TestMetricsPassPromtool will skip"
	fi
fi
exit 0
