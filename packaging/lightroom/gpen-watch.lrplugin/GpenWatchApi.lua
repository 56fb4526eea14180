--[[ What the plug-in does with the exported photos, through gpen-watch's HTTP API (docs/api.md):
send each one as it is rendered (with an Idempotency-Key, so a send repeated after a lost answer
is the same photo), wait for them all, fetch each result beside its original photo as
NAME.restored.EXT (never over a file), and add it to the catalog stacked above the original.

Lightroom's modules come in ``deps`` (http = LrHttp, sleep = LrTasks.sleep, path = LrPathUtils,
exists = LrFileUtils.exists, ...), so the same code runs under the test harness that stands in
for them. ]]

local Json = require "GpenWatchJson"

local Api = {}
Api.__index = Api

local WAIT_S = 1
local TRIES = 4
-- Network errors worth another try: the key makes a repeated send the same photo.
local RETRY = { timedOut = true, networkConnectionLost = true, cannotConnectToHost = true }

local function urlencode(text)
	return (text:gsub("[^%w%-%._~]", function(c)
		return string.format("%%%02X", string.byte(c))
	end))
end

local function read_file(path)
	local f, why = io.open(path, "rb")
	if f == nil then
		return nil, why
	end
	local data = f:read("*a")
	f:close()
	return data
end

-- A client of the service at ``settings.url`` with ``settings.token``.
function Api.new(settings, deps)
	local url = settings.url or ""
	if url:sub(-1) ~= "/" then
		url = url .. "/"
	end
	local self = setmetatable({ url = url, token = settings.token or "", settings = settings, deps = deps }, Api)
	self.batch = "lightroom-" .. tostring(os.time()) .. "-" .. tostring(math.random(100000, 999999))
	return self
end

-- One request: the decoded JSON answer, or nil and a sentence (the service's own where it gave one).
function Api:request(method, path, body, headers)
	local sent = { { field = "Authorization", value = "Bearer " .. self.token } }
	for _, h in ipairs(headers or {}) do
		sent[#sent + 1] = h
	end
	local answer, info
	for try = 1, TRIES do
		if method == "GET" then
			answer, info = self.deps.http.get(self.url .. path, sent, 60)
		else
			answer, info = self.deps.http.post(self.url .. path, body or "", sent, method, 600)
		end
		local err = info and info.error
		if answer ~= nil or err == nil or not RETRY[err.errorCode] or try == TRIES then
			break
		end
		self.deps.sleep(2 * try)
	end
	if answer == nil then
		local err = info and info.error or {}
		return nil, string.format("gpen-watch at %s cannot be reached (%s)", self.url, err.name or err.errorCode or "no answer")
	end
	local status = info and info.status or 0
	if status >= 400 then
		local said = Json.decode(answer)
		local why = type(said) == "table" and said.error or answer
		return nil, string.format("gpen-watch refused (%d): %s", status, tostring(why))
	end
	return answer, status
end

function Api:json(method, path, body, headers)
	local answer, status = self:request(method, path, body, headers)
	if answer == nil then
		return nil, status
	end
	local value, why = Json.decode(answer)
	if value == nil then
		return nil, "gpen-watch's answer was not JSON: " .. tostring(why)
	end
	return value
end

-- Send the photo at ``path``; the photo as the service took it, or nil and why.
function Api:submit(path, key)
	local data, why = read_file(path)
	if data == nil then
		return nil, string.format("%s cannot be read: %s", path, tostring(why))
	end
	local query = "name=" .. urlencode(self.deps.path.leafName(path)) .. "&batch=" .. urlencode(self.batch)
	local strength = self.settings.strength
	if strength ~= nil and tostring(strength) ~= "" then
		query = query .. "&restore.strength=" .. urlencode(tostring(strength))
	end
	return self:json("POST", "api/v1/photos?" .. query, data, {
		{ field = "Content-Type", value = "application/octet-stream" },
		{ field = "Idempotency-Key", value = key },
	})
end

-- The photo once it has ended (its "final"); nil and why when it cannot be followed.
function Api:wait(id, canceled)
	while true do
		local photo, why = self:json("GET", "api/v1/photos/" .. tostring(id))
		if photo == nil then
			return nil, why
		end
		if photo.final then
			return photo
		end
		if canceled ~= nil and canceled() then
			return nil, "canceled"
		end
		self.deps.sleep(WAIT_S)
	end
end

-- ``dest``, or ``stem (1).ext``... where a file is there already: never over one.
function Api:free_name(dest)
	if not self.deps.exists(dest) then
		return dest
	end
	local folder = self.deps.path.parent(dest)
	local ext = self.deps.path.extension(dest)
	local stem = self.deps.path.removeExtension(self.deps.path.leafName(dest))
	for i = 1, 9999 do
		local candidate = self.deps.path.child(folder, string.format("%s (%d).%s", stem, i, ext))
		if not self.deps.exists(candidate) then
			return candidate
		end
	end
	return nil
end

-- The photo's result written to a free name at ``dest``; the path written, or nil and why.
function Api:download(id, dest)
	local data, why = self:request("GET", "api/v1/photos/" .. tostring(id) .. "/result")
	if data == nil then
		return nil, why
	end
	local target = self:free_name(dest)
	if target == nil then
		return nil, dest .. ": no free name beside it"
	end
	local tmp = target .. ".gpen-part"
	local f, err = io.open(tmp, "wb")
	if f == nil then
		return nil, string.format("%s cannot be written: %s", tmp, tostring(err))
	end
	f:write(data)
	f:close()
	local ok, moved = os.rename(tmp, target)
	if not ok then
		os.remove(tmp)
		return nil, string.format("%s cannot be written: %s", target, tostring(moved))
	end
	return target
end

-- Where the result of ``original`` (a photo in the catalog) goes: beside it, NAME.restored.EXT,
-- EXT the result's own (a raw photo's result is the format it was exported in).
function Api:result_path(original, result_name)
	local p = self.deps.path
	local stem = p.removeExtension(p.leafName(original))
	return p.child(p.parent(original), stem .. ".restored." .. p.extension(result_name))
end

--[[ The post-process action: ``renditions`` is filterContext:renditions(); ``ui`` has progress (an
LrProgressScope), catalog (the active catalog, or nil: add nothing) and message (LrDialogs.message).
Each rendition is marked done as soon as it is sent: the export itself goes on unchanged. ]]
function Api:run(renditions, ui)
	local sent, problems = {}, {}
	local index = 0
	for source, toSatisfy in renditions do
		index = index + 1
		local ok, pathOrMessage = source:waitForRender()
		if ok then
			local photo, why = self:submit(pathOrMessage, self.batch .. "-" .. index)
			if photo ~= nil then
				sent[#sent + 1] = { photo = photo, original = source.photo }
			else
				problems[#problems + 1] = self.deps.path.leafName(pathOrMessage) .. ": " .. why
			end
		end
		toSatisfy:renditionIsDone(true)
	end
	local added = 0
	for i, item in ipairs(sent) do
		if ui.progress ~= nil then
			ui.progress:setPortionComplete(i - 1, #sent)
			ui.progress:setCaption("Restoring faces: " .. i .. " of " .. #sent)
		end
		local canceled = ui.progress ~= nil and function() return ui.progress:isCanceled() end or nil
		local done, why = self:wait(item.photo.id, canceled)
		local original = item.original:getRawMetadata("path")
		if done == nil then
			problems[#problems + 1] = item.photo.name .. ": " .. why
		elseif done.result == nil or done.result == Json.null then
			problems[#problems + 1] = item.photo.name .. ": " .. tostring(done.error ~= Json.null and done.error or done.state)
		else
			local written, err = self:download(done.id, self:result_path(original, done.result.name))
			if written == nil then
				problems[#problems + 1] = item.photo.name .. ": " .. err
			elseif ui.catalog ~= nil then
				ui.catalog:withWriteAccessDo("Add the photos gpen-watch restored", function()
					ui.catalog:addPhoto(written, item.original, "above")
				end)
				added = added + 1
			end
		end
	end
	if ui.progress ~= nil then
		ui.progress:done()
	end
	if #problems > 0 then
		ui.message("gpen-watch: not every photo was restored", table.concat(problems, "\n"), "warning")
	end
	return added, problems
end

return Api
