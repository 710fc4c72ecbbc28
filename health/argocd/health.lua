-- Argo CD health check for cache.redis.io RedisCluster (v1beta1 and v1alpha1).
-- Install as resource.customizations.health.cache.redis.io_RedisCluster in argocd-cm.
--
-- Lua 5.1 using only the base library: Argo CD runs argocd-cm health checks
-- without the standard libraries unless useOpenLibs is set for the kind, so
-- there is no string, math or os here. The rules and every message are the
-- same as the Go assessment in github.com/redis-operator/redis-operator/health;
-- its tests run this script with gopher-lua over testdata/*.yaml and require
-- both to agree.
--
-- The order of the rules:
--   1. no status                                  -> Unknown
--   2. Degraded=True for this generation          -> Degraded
--   3. Ready=False for this generation with a failure reason -> Degraded
--   4. spec.paused, or Paused=True for this generation -> Suspended
--   5. status.observedGeneration (v1alpha1: the Ready condition's) differs
--      from metadata.generation                   -> Progressing
--   6. Progressing=True for this generation, a phase of Pending,
--      Bootstrapping, Scaling or Upgrading, or a credential rotation step
--                                                 -> Progressing
--   7. no Ready condition                         -> Unknown
--   8. Ready=True for this generation             -> Healthy
--   9. anything else                              -> Progressing

-- Ready reasons that mean failure rather than work in progress
-- (apis/cache/v1beta1/conditions.go). Not ReplicaMissing: the controller
-- also reports it while attaching a replica; when replicas stay missing it
-- sets Degraded=True.
local failureReasons = {
  ShardLost = true,
  SlotsUncovered = true,
  ClusterStateFail = true,
  RedisUnreachable = true,
  ReconcileError = true,
  InvalidSpec = true,
  SecretNotFound = true,
  VaultUnreachable = true,
  VaultPermissionDenied = true,
}

-- Phases in which the operator is still changing the cluster.
local progressPhases = {
  Pending = true,
  Bootstrapping = true,
  Scaling = true,
  Upgrading = true,
}

-- Values of the wrong type count as absent.
local function num(v)
  if type(v) == "number" then
    return v
  end
  return nil
end

local function str(v)
  if type(v) == "string" then
    return v
  end
  return ""
end

local function tbl(v)
  if type(v) == "table" then
    return v
  end
  return {}
end

-- The first condition of the given type, or nil.
local function findCondition(conditions, condType)
  for _, c in ipairs(tbl(conditions)) do
    if type(c) == "table" and c.type == condType then
      return c
    end
  end
  return nil
end

-- "Reason: message", or just the message when the reason is empty;
-- fallback stands in for an empty message.
local function describe(c, fallback)
  local message = str(c.message)
  if message == "" then
    message = fallback
  end
  local reason = str(c.reason)
  if reason == "" then
    return message
  end
  return reason .. ": " .. message
end

local function assess(obj)
  local status = obj.status
  if type(status) ~= "table" or next(status) == nil then
    return "Unknown", "Waiting for the operator to report the status of this RedisCluster."
  end
  local generation = num(tbl(obj.metadata).generation)
  local conditions = status.conditions

  local function current(c)
    return num(c.observedGeneration) == generation
  end

  local degraded = findCondition(conditions, "Degraded")
  if degraded ~= nil and degraded.status == "True" and current(degraded) then
    return "Degraded", describe(degraded, "The cluster serves with reduced redundancy or not at all.")
  end

  local ready = findCondition(conditions, "Ready")
  if ready ~= nil and ready.status == "False" and current(ready) and failureReasons[str(ready.reason)] then
    return "Degraded", describe(ready, "The cluster is not ready.")
  end

  local paused = findCondition(conditions, "Paused")
  if tbl(obj.spec).paused == true or (paused ~= nil and paused.status == "True" and current(paused)) then
    return "Suspended", "Reconciliation is paused by spec.paused: the operator observes the cluster and changes nothing."
  end

  local observed = num(status.observedGeneration)
  if observed == nil and ready ~= nil then
    observed = num(ready.observedGeneration)
  end
  if observed ~= generation then
    if generation == nil then
      return "Progressing", "Waiting for the operator to observe this RedisCluster's generation."
    end
    if observed == nil then
      return "Progressing", "Waiting for the operator to observe generation " .. generation .. "."
    end
    return "Progressing", "Waiting for the operator to observe generation " .. generation .. " (it last observed " .. observed .. ")."
  end

  local progressing = findCondition(conditions, "Progressing")
  if progressing ~= nil and progressing.status == "True" and current(progressing) then
    return "Progressing", describe(progressing, "The operator is changing the cluster.")
  end
  local phase = str(status.phase)
  if progressPhases[phase] then
    return "Progressing", "The cluster is in phase " .. phase .. "."
  end
  local step = str(tbl(status.credentials).rotationStep)
  if step ~= "" then
    return "Progressing", "Rotating credentials (step " .. step .. ")."
  end

  if ready == nil then
    return "Unknown", "The status has no Ready condition yet."
  end
  if ready.status == "True" then
    if current(ready) then
      return "Healthy", describe(ready, "The cluster is ready.")
    end
    return "Progressing", "Waiting for the Ready condition of the current generation."
  end
  return "Progressing", describe(ready, "The cluster is not ready yet.")
end

local hs = {}
hs.status, hs.message = assess(obj)
return hs
