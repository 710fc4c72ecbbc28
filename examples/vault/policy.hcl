# redis-prod-read: what the operator needs to read the Redis password from
# the KV v2 secret "redis/prod" in the mount "secret". KV v2 serves data
# under <mount>/data/<path> and version metadata under <mount>/metadata/<path>.
path "secret/data/redis/prod" {
  capabilities = ["read"]
}
