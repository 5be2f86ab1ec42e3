#!/usr/bin/env bash
# The README's first screen: the landing page of a demo cluster (kata slow,
# PVC-backed pods slower) as headless Chromium renders it, and
# `podslo report` of the same exporter. `make screenshot` runs it after
# `make build`; the demo's first run builds the control plane and kwok.
set -euo pipefail
cd "$(dirname "$0")/.."
addr=127.0.0.1:28180
minutes=${SCREENSHOT_MINUTES:-4}
log=$(mktemp)
bin/podslo demo --source-dir . --nodes 4 --duration "$((minutes + 1))m" \
  --listen-address "$addr" --agent-listen-address 127.0.0.1:28181 >"$log" 2>&1 &
demo=$!
trap 'kill $demo 2>/dev/null || true; wait $demo 2>/dev/null || true; rm -f "$log"' EXIT
for _ in $(seq 600); do
  curl -fsS "http://$addr/readyz" >/dev/null 2>&1 && break
  kill -0 $demo 2>/dev/null || { cat "$log"; exit 1; }
  sleep 1
done
echo "The demo is up; its SLOs fill for ${minutes} minutes" >&2
sleep "$((minutes * 60))"
chromium --headless --no-sandbox --disable-gpu --no-first-run --disable-background-networking \
  --hide-scrollbars --user-data-dir="$(mktemp -d)" --window-size=1700,900 \
  --screenshot="$PWD/docs/img/landing.png" "http://$addr/"
status=0
bin/podslo report --url "http://$addr" >docs/img/report.txt || status=$?
echo "podslo report exited with $status" >&2
