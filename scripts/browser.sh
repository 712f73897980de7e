#!/usr/bin/env bash
# make test drives the dashboard in Debian's Chromium (node/
# dashboard_browser_test.go, chromedp). As root, this installs it with
# apt-get when it is missing, once: when chromium is there it does nothing.
# Elsewhere, or when it cannot be installed, it says so and the browser
# tests skip with the reason.
set -u
command -v chromium >/dev/null 2>&1 && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
	echo "make test: no chromium, and no apt-get as root to install it; the dashboard's browser tests will skip"
	exit 0
fi
echo "make test: installing chromium with apt-get (the dashboard's browser tests)"
if ! { apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }; then
	echo "make test: could not install chromium; the dashboard's browser tests will skip"
fi
exit 0
