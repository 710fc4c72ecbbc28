#!/usr/bin/env bash
# Builds the real control-plane binaries that envtest runs (KUBEBUILDER_ASSETS=bin):
#   bin/kube-apiserver, bin/kube-controller-manager  from k8s.io/kubernetes (hack/tools/kubernetes)
#   bin/kube-proxy                                   from k8s.io/kubernetes (the local plane's Services)
#   bin/kube-scheduler                               from k8s.io/kubernetes (the local plane's scheduler)
#   bin/kubectl                                      from k8s.io/kubernetes (hack/tools/kubectl; demo, dev-up)
#   bin/etcd                                         from go.etcd.io/etcd/server/v3 (hack/tools/etcd)
#   bin/weed                                         from github.com/seaweedfs/seaweedfs (hack/tools/seaweedfs)
#   bin/kustomize                                    from sigs.k8s.io/kustomize/kustomize/v5 (hack/tools/kustomize)
#   bin/argocd                                       from github.com/argoproj/argo-cd/v3 (hack/tools/argocd)
#   bin/vaultserver                                  from test/vaultserver (Vault's own KV v2 and Kubernetes auth backends)
#   bin/kubelet                                      from k8s.io/kubernetes (the local plane's real nodes)
#   bin/registry                                     from github.com/distribution/distribution/v3 (hack/tools/registry;
#                                                    the OCI registry the real nodes pull from, `make images`)
# Versions are pinned by each tool module's go.mod and go.sum; nothing is downloaded
# except through the Go module proxy. Every binary is identified by its stamp (module
# version plus a hash of the module's go.mod, go.sum and build flags) and kept in a
# per-user cache outside the clone, as setup-envtest does:
#   ${REDIS_OPERATOR_CACHE:-${XDG_CACHE_HOME:-~/.cache}/redis-operator}/tools/NAME-HASH
# bin/NAME is a hard link to it (a copy across file systems), with its stamp in
# bin/.versions/. So a fresh clone on the same machine (what CI is) links the tools it
# needs in a second, a second run is a no-op, and only a changed stamp rebuilds. A cold
# cache builds two tools at a time (the Kubernetes binaries one after another in one lane,
# the others heaviest first in the other; see the lanes below), each printing a line every 30 s.
# Caller's GOFLAGS (for example -buildvcs=false) are kept.
#
# Usage: build-tools.sh [NAME...]: with names (kube-apiserver, kubectl, weed,
# ...) only those are built; without, all of them (make tools).
set -euo pipefail

wanted=("$@")
known=" etcd kube-apiserver kube-controller-manager kube-proxy kube-scheduler kubelet kubectl weed kustomize argocd vaultserver registry "
for w in "${wanted[@]}"; do
  [[ "${known}" == *" ${w} "* ]] || { echo "build-tools: no tool named ${w} (known:${known})" >&2; exit 2; }
done
# want NAME succeeds when NAME is to be built: named, or no names given.
want() {
  ((${#wanted[@]} == 0)) && return 0
  local w
  for w in "${wanted[@]}"; do [[ "$w" == "$1" ]] && return 0; done
  return 1
}

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${root}/bin"
tools="${root}/hack/tools"
stamps="${bin}/.versions"

# The tool modules are separate from the repository's module and any go.work.
export GOWORK=off CGO_ENABLED=0

cache="${REDIS_OPERATOR_CACHE:-${XDG_CACHE_HOME:-${HOME}/.cache}/redis-operator}/tools"
mkdir -p "${stamps}" "${cache}"
# Several clones share the cache: one build-tools run at a time.
exec 9>"${cache}/.lock"
if ! flock -n 9; then
  echo "build-tools: waiting for another build-tools run to finish"
  flock 9
fi

work="$(mktemp -d "${cache}/.build.XXXXXX")"
trap 'rm -rf "${work}"' EXIT

# The builds to run, as "DIR|STAMP|LDFLAGS|NAME|PACKAGE" (run at the end, TOOLS_JOBS at a time).
queue=()

# module_version DIR MODULE prints MODULE's version as pinned in DIR/go.mod.
module_version() {
  go -C "$1" list -m -f '{{.Version}}' "$2"
}

# stamp DIR MODULE VERSION FLAGS... prints the line recorded for a binary built from DIR.
stamp() {
  local dir="$1" module="$2" version="$3"
  shift 3
  local inputs
  inputs="$( { cat "${dir}/go.mod" "${dir}/go.sum"; printf '%s\n' "$@"; } | sha256sum | cut -c1-16)"
  printf '%s %s inputs=%s\n' "${module}" "${version}" "${inputs}"
}

# cached NAME STAMP prints the cache path of NAME built with STAMP.
cached() {
  printf '%s/%s-%s' "${cache}" "$1" "$(printf '%s' "$2" | sha256sum | cut -c1-16)"
}

# link NAME STAMP puts the cached binary at bin/NAME (hard link, else copy) with its stamp.
link() {
  local from
  from="$(cached "$1" "$2")"
  rm -f "${bin}/$1"
  ln "${from}" "${bin}/$1" 2>/dev/null || cp "${from}" "${bin}/$1"
  printf '%s\n' "$2" >"${stamps}/$1"
}

# want_built DIR STAMP LDFLAGS NAME PACKAGE: bin/NAME is left alone when built with
# STAMP, linked from the cache when the cache has it, queued for a build otherwise.
want_built() {
  local dir="$1" line="$2" ldflags="$3" name="$4" pkg="$5"
  if [[ -x "${bin}/${name}" && -f "${stamps}/${name}" && "$(cat "${stamps}/${name}")" == "${line}" ]]; then
    echo "build-tools: bin/${name} is up to date (${line% inputs=*})"
  elif [[ -x "$(cached "${name}" "${line}")" ]]; then
    link "${name}" "${line}"
    echo "build-tools: bin/${name} linked from the cache (${line% inputs=*})"
  else
    queue+=("${dir}|${line}|${ldflags}|${name}|${pkg}")
  fi
}

# build DIR STAMP LDFLAGS NAME PACKAGE builds PACKAGE of DIR's module into the cache,
# then links it as bin/NAME; the binary is moved into the cache only once complete.
build() {
  local dir="$1" line="$2" ldflags="$3" name="$4" pkg="$5"
  echo "build-tools: building bin/${name} from ${pkg} (${line% inputs=*})"
  local start=${SECONDS}
  bash "${root}/hack/heartbeat.sh" "building bin/${name}" \
    go -C "${dir}" build -trimpath -ldflags "${ldflags}" -o "${work}/${name}" "${pkg}" || return 1
  mv -f "${work}/${name}" "$(cached "${name}" "${line}")"
  link "${name}" "${line}"
  echo "build-tools: built bin/${name} in $((SECONDS - start))s ($(du -h "${bin}/${name}" | cut -f1))"
}

# kube-apiserver, kube-controller-manager, kube-proxy and kube-scheduler, with the version variables that
# Kubernetes' own release build sets (hack/lib/version.sh), so --version and
# /version report the release rather than v0.0.0-master.
kube_dir="${tools}/kubernetes"
kube_version="$(module_version "${kube_dir}" k8s.io/kubernetes)"
kube_date="$(go -C "${kube_dir}" list -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' k8s.io/kubernetes)"
kube_major="${kube_version#v}"
kube_major="${kube_major%%.*}"
kube_minor="${kube_version#v*.}"
kube_minor="${kube_minor%%.*}"
kube_ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  kube_ldflags+=" -X ${pkg}.gitVersion=${kube_version} -X ${pkg}.gitMajor=${kube_major}"
  kube_ldflags+=" -X ${pkg}.gitMinor=${kube_minor} -X ${pkg}.gitTreeState=clean -X ${pkg}.buildDate=${kube_date}"
done
kube_stamp="$(stamp "${kube_dir}" k8s.io/kubernetes "${kube_version}" "${kube_ldflags}")"
for name in kube-apiserver kube-controller-manager kube-proxy kube-scheduler kubelet; do
  want "${name}" || continue
  want_built "${kube_dir}" "${kube_stamp}" "${kube_ldflags}" "${name}" "k8s.io/kubernetes/cmd/${name}"
done

# kubectl, at the API server's release and with the same version variables, from its own
# module (hack/tools/kubectl) so that its dependencies do not change the servers' stamp.
kubectl_dir="${tools}/kubectl"
kubectl_stamp="$(stamp "${kubectl_dir}" k8s.io/kubernetes "$(module_version "${kubectl_dir}" k8s.io/kubernetes)" "${kube_ldflags}")"
if want kubectl; then
  want_built "${kubectl_dir}" "${kubectl_stamp}" "${kube_ldflags}" kubectl k8s.io/kubernetes/cmd/kubectl
fi

# module_tool NAME DIR MODULE PACKAGE [INPUT...] builds PACKAGE of DIR's tool module as
# bin/NAME, stripped, unless bin/NAME was built from the same go.mod, go.sum, version
# of MODULE and INPUTs (extra text whose change must rebuild it).
module_tool() {
  local name="$1" dir="$2" module="$3" pkg="$4"
  shift 4
  want "${name}" || return 0
  local version line
  version="$(module_version "${dir}" "${module}")"
  line="$(stamp "${dir}" "${module}" "${version}" "-s -w" "$@")"
  want_built "${dir}" "${line}" "-s -w" "${name}" "${pkg}"
}

# etcd: go.etcd.io/etcd/server/v3 is etcd's main package; its version is a constant
# in go.etcd.io/etcd/api/v3/version, so no -X flags are needed.
module_tool etcd "${tools}/etcd" go.etcd.io/etcd/server/v3 go.etcd.io/etcd/server/v3

# weed: SeaweedFS (weed mini, the S3-compatible store of the backup tests,
# test/s3test); its version is the pseudo-version pinned in its tool module.
module_tool weed "${tools}/seaweedfs" github.com/seaweedfs/seaweedfs github.com/seaweedfs/seaweedfs/weed

# kustomize: what Argo CD's repo-server runs to render our kustomizations
# (the local plane's Argo CD image puts it beside bin/argocd).
module_tool kustomize "${tools}/kustomize" sigs.k8s.io/kustomize/kustomize/v5 sigs.k8s.io/kustomize/kustomize/v5

# argocd: Argo CD's application controller, repo-server and ApplicationSet
# controller in one binary (hack/tools/argocd/main.go), for the GitOps
# scenario; the heaviest tool here (about 10 minutes on 2 cores from a cold
# cache, 160 MB). Its own Go files are inputs too.
module_tool argocd "${tools}/argocd" github.com/argoproj/argo-cd/v3 . "$(cat "${tools}/argocd"/*.go | sha256sum)"

# registry: the OCI distribution registry (CNCF Distribution) that `make images` pushes
# the images built here into and the local plane's real nodes pull from.
module_tool registry "${tools}/registry" github.com/distribution/distribution/v3 github.com/distribution/distribution/v3/cmd/registry

# vaultserver: the test Vault (Vault's own KV v2 and Kubernetes auth
# backends behind Vault's HTTP API; test/vaultserver), which the backup
# tests run from bin/. Its own Go files are inputs too.
module_tool vaultserver "${root}/test/vaultserver" github.com/hashicorp/vault/sdk ./cmd/vaultserver \
  "$(cat "${root}/test/vaultserver"/*.go "${root}/test/vaultserver"/cmd/vaultserver/*.go | sha256sum)"

if ((${#queue[@]} == 0)); then
  echo "build-tools: nothing to build, all tools up to date in bin/"
  exit 0
fi
echo "build-tools: ${#queue[@]} to build into ${cache}, two at a time"
# Two lanes run side by side. The Kubernetes binaries share most of their packages and
# so build best one after another, in the first lane. The other tools go heaviest first
# (their seconds in a cold run of 2026-12-07, each beside another build: weed 1254,
# argocd 520, registry 225, etcd 214, vaultserver 111, kustomize 47): the second lane
# takes them from the front of that order, and the first, once its Kubernetes binaries
# are built, from the back, so that both lanes end at about the same time. A tool is
# claimed by making its directory in ${work}, which only one lane can do.
heaviest_first=(weed argocd registry etcd vaultserver kustomize)
is_kube() { [[ "$1" == "${kube_dir}" || "$1" == "${kubectl_dir}" ]]; }
# queued NAME prints NAME's queue entry, or nothing when it is not queued.
queued() {
  local job dir line ldflags name pkg
  for job in "${queue[@]}"; do
    IFS='|' read -r dir line ldflags name pkg <<<"${job}"
    [[ "${name}" == "$1" ]] && printf '%s\n' "${job}"
  done
  return 0
}
# build_job ENTRY builds one queue entry, unless the other lane claimed it.
build_job() {
  local dir line ldflags name pkg
  IFS='|' read -r dir line ldflags name pkg <<<"$1"
  mkdir "${work}/claim-${name}" 2>/dev/null || return 0
  build "${dir}" "${line}" "${ldflags}" "${name}" "${pkg}"
}
lane() {
  local first="$1" job dir line ldflags name pkg i
  local order=("${heaviest_first[@]}")
  if [[ "${first}" == yes ]]; then
    for job in "${queue[@]}"; do
      IFS='|' read -r dir line ldflags name pkg <<<"${job}"
      if is_kube "${dir}"; then build_job "${job}" || return 1; fi
    done
    order=()
    for ((i = ${#heaviest_first[@]} - 1; i >= 0; i--)); do order+=("${heaviest_first[i]}"); done
  fi
  for name in "${order[@]}"; do
    job="$(queued "${name}")"
    if [[ -n "${job}" ]]; then build_job "${job}" || return 1; fi
  done
  # A tool not in that order yet: the second lane builds it last.
  [[ "${first}" == no ]] || return 0
  for job in "${queue[@]}"; do
    IFS='|' read -r dir line ldflags name pkg <<<"${job}"
    if ! is_kube "${dir}"; then build_job "${job}" || return 1; fi
  done
}
lane yes &
kube_lane=$!
lane no &
other_lane=$!
failed=0
wait "${kube_lane}" || failed=1
wait "${other_lane}" || failed=1
if ((failed)); then
  echo "build-tools: a build failed (see above)" >&2
  exit 1
fi
