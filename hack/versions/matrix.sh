#!/usr/bin/env bash
# hack/versions/matrix.sh [VERSION...] runs the real-node suite
# (e2e/realnode) against each Kubernetes version: its control plane,
# kubelet and kube-proxy built from a module hack/versions/module.sh writes
# (the default version's from hack/tools), with the same containerd, runc
# and CNI plugins. It writes each version's `go test -json` output to
# hack/versions/results/<version>.json and the table of docs/compatibility.md
# (between its matrix markers). `make test-versions` runs it. Needs root.
set -euo pipefail
cd "$(dirname "$0")/../.."
GO=${GO:-go}
cache=${XDG_CACHE_HOME:-$HOME/.cache}/podslo/testbin
default=$(sed -n 's|^[[:space:]]*k8s.io/kubernetes \(v[^ ]*\).*|\1|p' hack/tools/go.mod | head -n 1)
versions=("$@")
((${#versions[@]})) || versions=(v1.33.13 v1.34.4 v1.35.4 v1.36.3 "$default")
# kube-proxy --cleanup of 1.33 removes the IPVS mode's ipsets and the
# nftables mode's tables too, and fails without the ipset and nft commands
# (the real-node harness runs it after each test); 1.37's needs neither.
for cmd in ipset nft; do
  command -v $cmd >/dev/null || { echo "make test-versions needs ipset and nft (apt-get install ipset nftables)" >&2; exit 1; }
done
mkdir -p hack/versions/results
make -s runtimebin image
for v in "${versions[@]}"; do
  tools=hack/tools
  if [[ $v != "$default" ]]; then
    tools=$cache/$v/tools
    [[ -f $tools/go.mod ]] || hack/versions/module.sh "$v" "$tools"
  fi
  echo "== $v: build (TOOLS_DIR=$tools)"
  make -s nodebin TOOLS_DIR="$tools"
  echo "== $v: e2e/realnode"
  # Each version's result is kept, passing or not: the table shows both.
  PODSLO_TESTBIN=$cache/$v PODSLO_K8S_VERSION=$v $GO test -count=1 -timeout 60m -json ./e2e/realnode/ \
    >"hack/versions/results/$v.json" || true
done
$GO run ./hack/versions/table -results hack/versions/results -doc docs/compatibility.md "${versions[@]}"
