-- The health logic shared by Reprise's three kinds: each kind's script in argocd-cm.yaml is this file with
-- its KIND line in front (deploy/argocd/build.py writes it; tests/unit/argocd checks it is in step). Argo CD
-- runs it with the resource as the global `obj` (gopher-lua, Lua 5.1).
local hs = {}

local function condition(status, ctype)
  if status.conditions == nil then
    return nil
  end
  for _, c in ipairs(status.conditions) do
    if c.type == ctype then
      return c
    end
  end
  return nil
end

local function is_true(status, ctype)
  local c = condition(status, ctype)
  return c ~= nil and c.status == "True"
end

local function detail(c, fallback)
  if c == nil then
    return fallback
  end
  local text = c.reason or fallback
  if c.message ~= nil and c.message ~= "" then
    text = text .. ": " .. c.message
  end
  return text
end

local function progress(status)
  local p = status.progress
  if p == nil or p.percent == nil then
    return ""
  end
  local text = string.format(" (%d%% processed", math.floor(p.percent))
  if p.lag ~= nil then
    text = text .. string.format(", lag %d", math.floor(p.lag))
  end
  if status.eta ~= nil then
    text = text .. ", ETA " .. status.eta
  elseif p.etaSeconds ~= nil then
    text = text .. string.format(", ETA %ds", math.floor(p.etaSeconds))
  end
  return text .. ")"
end

local status = obj.status
if obj.metadata ~= nil and obj.metadata.deletionTimestamp ~= nil then
  hs.status = "Progressing"
  hs.message = KIND .. " is being deleted: Reprise is removing what it made"
  return hs
end
if status == nil or status.phase == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the Reprise operator to pick up this " .. KIND
  return hs
end
-- A status written for an older spec says nothing about the current one yet.
if status.observedGeneration ~= nil and obj.metadata ~= nil and obj.metadata.generation ~= nil
    and status.observedGeneration < obj.metadata.generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to observe generation " .. tostring(obj.metadata.generation)
  return hs
end

local phase = status.phase
if phase == "Complete" then
  hs.status = "Healthy"
  hs.message = detail(condition(status, "Complete"), "Complete")
elseif phase == "Failed" then
  hs.status = "Degraded"
  hs.message = detail(condition(status, "Failed"), "Failed")
elseif phase == "Suspended" or is_true(status, "Suspended") then
  hs.status = "Suspended"
  hs.message = detail(condition(status, "Suspended"), "Suspended") .. progress(status)
elseif phase == "PlanReady" and obj.spec ~= nil and obj.spec.approval == "Manual" and not is_true(status, "Approved") then
  hs.status = "Suspended"
  hs.message = "Plan ready, waiting for approval: " .. detail(condition(status, "Approved"), "annotate reprise.io/approve=true")
elseif phase == "Running" and condition(status, "CutoverApproved") ~= nil
    and condition(status, "CutoverApproved").status == "False" then
  -- A shadow hold (completion.hold): verified and following the live topic until someone approves the cutover.
  hs.status = "Suspended"
  hs.message = "Verified, holding for the cutover: " .. detail(condition(status, "CutoverApproved"), "annotate reprise.io/approve-cutover=true")
elseif phase == "Running" and condition(status, "Verified") ~= nil and condition(status, "Verified").status == "Unknown"
    and condition(status, "Verified").reason == "VerifyRunning" then
  hs.status = "Progressing"
  hs.message = "Verifying: " .. detail(condition(status, "Verified"), "the check runs") .. progress(status)
elseif is_true(status, "Waiting") then
  hs.status = "Progressing"
  hs.message = "Waiting: " .. detail(condition(status, "Waiting"), "blocked")
else
  hs.status = "Progressing"
  hs.message = phase .. progress(status)
end
return hs
