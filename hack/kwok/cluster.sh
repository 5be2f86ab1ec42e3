#!/usr/bin/env bash
# cluster.sh up|down: a kwok cluster from the locally built binaries
# (make clusterbin kwokbin), with podslo's stages (deploy/kwok), without
# any download and listening on 127.0.0.1 only.
#
#   KWOK_WORKDIR  where kwokctl keeps the cluster (default /tmp/podslo-kwok);
#                 the kubeconfig is $KWOK_WORKDIR/clusters/$NAME/kubeconfig.yaml
#   NAME          cluster name (default podslo)
#   PODSLO_TESTBIN, PODSLO_KWOKBIN  set by make; defaults as in the Makefile
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
k8s=$(sed -n 's|^[[:space:]]*k8s.io/kubernetes \(v[^ ]*\).*|\1|p' "$root/hack/tools/go.mod" | head -n 1)
kwok=$(sed -n 's|^[[:space:]]*sigs.k8s.io/kwok \(v[^ ]*\).*|\1|p' "$root/hack/kwok/go.mod" | head -n 1)
testbin=${PODSLO_TESTBIN:-${XDG_CACHE_HOME:-$HOME/.cache}/podslo/testbin/$k8s}
kwokbin=${PODSLO_KWOKBIN:-$testbin/kwok-$kwok}
export KWOK_WORKDIR=${KWOK_WORKDIR:-/tmp/podslo-kwok}
name=${NAME:-podslo}
kwokctl=$kwokbin/kwokctl

case ${1:-} in
up)
	# kwokctl waits for the API server with `kubectl get --raw /version`
	# and downloads kubectl when none is on PATH: offline that costs two
	# minutes of retries. Any kubectl on PATH is used as is; without one,
	# /bin/true stands in and this script waits for /readyz itself.
	if ! command -v kubectl >/dev/null; then
		export KWOK_KUBECTL_BINARY=/bin/true
	fi
	# --kubeconfig '': leave ~/.kube/config alone.
	"$kwokctl" --name "$name" \
		--config "$root/deploy/kwok/kwokctl.yaml" \
		--config "$root/deploy/kwok/node-stages.yaml" \
		--config "$root/deploy/kwok/pod-stages.yaml" \
		create cluster --kubeconfig '' \
		--etcd-binary "$testbin/etcd" \
		--kube-apiserver-binary "$testbin/kube-apiserver" \
		--kube-controller-manager-binary "$testbin/kube-controller-manager" \
		--kube-scheduler-binary "$testbin/kube-scheduler" \
		--kwok-controller-binary "$kwokbin/kwok"
	dir=$KWOK_WORKDIR/clusters/$name
	server=$(sed -n 's|^[[:space:]]*server: \(.*\)|\1|p' "$dir/kubeconfig.yaml")
	for _ in $(seq 300); do
		if [ "$(curl -s --cacert "$dir/pki/ca.crt" --cert "$dir/pki/admin.crt" --key "$dir/pki/admin.key" "$server/readyz")" = ok ]; then
			echo "$dir/kubeconfig.yaml"
			exit 0
		fi
		sleep 0.2
	done
	echo "cluster.sh: $server/readyz not ok after 60s; logs in $dir/logs" >&2
	exit 1
	;;
down)
	# --kubeconfig must name a file; a missing one is only logged.
	"$kwokctl" --name "$name" delete cluster --kubeconfig "$KWOK_WORKDIR/no-kubeconfig"
	;;
*)
	echo "usage: $0 up|down" >&2
	exit 2
	;;
esac
