#!/bin/sh
# Vault side of examples/vault/rediscluster.yaml. Run with VAULT_ADDR and a
# VAULT_TOKEN allowed to manage mounts, policies and auth methods, and with
# kubectl pointing at the cluster the operator runs in.
set -eu

NAMESPACE=${NAMESPACE:-default}
SERVICE_ACCOUNT=${SERVICE_ACCOUNT:-redis-prod-vault}

# 1. The KV v2 secret holding the password (a new `vault kv put` is a new
#    version: the operator rotates to it within spec.auth.vault.refreshInterval,
#    or at once when the cache.redis.io/refresh-credentials annotation changes).
vault secrets list | grep -q '^secret/' || vault secrets enable -path=secret kv-v2
vault kv put secret/redis/prod password="$(head -c 24 /dev/urandom | base64)"

# 2. A policy that can read only that secret.
vault policy write redis-prod-read "$(dirname "$0")/policy.hcl"

# 3. The Kubernetes auth method: Vault checks the operator's service-account
#    tokens with the TokenReview API. Inside the cluster Vault can use its own
#    service account for that; from outside give it a reviewer JWT and the CA.
vault auth list | grep -q '^kubernetes/' || vault auth enable kubernetes
vault write auth/kubernetes/config \
  kubernetes_host="$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')"

# 4. The role the RedisCluster names: only tokens of this service account,
#    with the audience the operator requests (spec.auth.vault.audience).
vault write auth/kubernetes/role/redis-prod \
  bound_service_account_names="$SERVICE_ACCOUNT" \
  bound_service_account_namespaces="$NAMESPACE" \
  audience=vault \
  token_policies=redis-prod-read \
  token_ttl=20m

kubectl -n "$NAMESPACE" apply -f "$(dirname "$0")/serviceaccount.yaml"
