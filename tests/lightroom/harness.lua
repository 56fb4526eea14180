--[[ Lightroom Classic stands in here for the plug-in's own code: `import` gives stand-ins for the
SDK modules it uses (LrHttp through curl, LrTasks.sleep, LrPathUtils, LrFileUtils, LrDialogs, the
catalog, LrProgressScope, LrView), and the export's renditions are files already rendered. The
plug-in's files run unchanged: Info.lua is read, GpenWatchFilter.lua's postProcessRenderedPhotos
is called as Lightroom calls it. What the catalog and the dialogs were asked is printed, one
tab-separated line each, for the test to read.

  lua5.1 harness.lua PLUGIN_DIR URL TOKEN STRENGTH ORIGINAL RENDERED [ORIGINAL RENDERED ...]
]]

local plugin, url, token, strength = arg[1], arg[2], arg[3], arg[4]
package.path = plugin .. "/?.lua;" .. package.path

local function quote(s)
	return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end

local function slurp(path)
	local f = io.open(path, "rb")
	if f == nil then
		return nil
	end
	local data = f:read("*a")
	f:close()
	return data
end

local tmp = os.tmpname()

-- LrHttp: the answer's body and a table with its status, or nil and an error table, as Lightroom's.
local function curl(method, target, body, headers, timeout)
	local args = { "curl", "-sS", "-X", method, "-D", quote(tmp .. ".head"), "-o", quote(tmp .. ".body"),
		"--max-time", tostring(timeout or 60) }
	for _, h in ipairs(headers or {}) do
		args[#args + 1] = "-H " .. quote(h.field .. ": " .. h.value)
	end
	if body ~= nil then
		local f = assert(io.open(tmp .. ".send", "wb"))
		f:write(body)
		f:close()
		args[#args + 1] = "--data-binary @" .. quote(tmp .. ".send")
	end
	args[#args + 1] = quote(target)
	local ok = os.execute(table.concat(args, " ") .. " 2>/dev/null")
	if ok ~= 0 then
		return nil, { error = { errorCode = "cannotConnectToHost", name = "curl exit " .. tostring(ok) } }
	end
	local head = slurp(tmp .. ".head") or ""
	local status = tonumber(head:match("^HTTP/%S+ (%d+)")) or 0
	return slurp(tmp .. ".body") or "", { status = status }
end

local LrHttp = {
	get = function(target, headers, timeout) return curl("GET", target, nil, headers, timeout) end,
	post = function(target, body, headers, method, timeout) return curl(method or "POST", target, body, headers, timeout) end,
}

local LrPathUtils = {
	child = function(folder, name) return folder .. "/" .. name end,
	parent = function(path) return path:match("^(.*)/[^/]*$") end,
	leafName = function(path) return path:match("([^/]*)$") end,
	extension = function(path) return path:match("([^/]*)$"):match("%.([^.]*)$") or "" end,
	removeExtension = function(path) return (path:gsub("%.[^./]*$", "")) end,
}

local LrFileUtils = {
	exists = function(path)
		local f = io.open(path, "rb")
		if f == nil then
			return false
		end
		f:close()
		return "file"
	end,
}

local catalog = {
	withWriteAccessDo = function(self, name, fn) fn() end,
	addPhoto = function(self, path, stackWith, position)
		print(table.concat({ "ADDED", path, stackWith:getRawMetadata("path"), position }, "\t"))
	end,
}

local modules = {
	LrHttp = LrHttp,
	LrPathUtils = LrPathUtils,
	LrFileUtils = LrFileUtils,
	LrTasks = { sleep = function(s) os.execute("sleep " .. tostring(s)) end },
	LrDialogs = { message = function(title, text, kind) print(table.concat({ "DIALOG", title, (text:gsub("\n", " | ")) }, "\t")) end },
	LrApplication = { activeCatalog = function() return catalog end },
	LrProgressScope = function(t)
		return {
			setPortionComplete = function() end,
			setCaption = function() end,
			isCanceled = function() return false end,
			done = function() end,
		}
	end,
	LrView = { bind = function(key) return key end, share = function(key) return key end },
}

function import(name) -- luacheck: ignore (Lightroom's own global)
	return assert(modules[name], "the harness has no " .. name)
end

local info = dofile(plugin .. "/Info.lua")
print(table.concat({ "INFO", info.LrToolkitIdentifier, info.LrExportFilterProvider.title, info.LrExportFilterProvider.file }, "\t"))
local provider = dofile(plugin .. "/" .. info.LrExportFilterProvider.file)

local pairs_given = {}
for i = 5, #arg, 2 do
	pairs_given[#pairs_given + 1] = { original = arg[i], rendered = arg[i + 1] }
end

local function renditions()
	local i = 0
	return function()
		i = i + 1
		local item = pairs_given[i]
		if item == nil then
			return nil
		end
		local source = {
			photo = { getRawMetadata = function(self, key) assert(key == "path") return item.original end },
			waitForRender = function(self) return true, item.rendered end,
		}
		local toSatisfy = { renditionIsDone = function(self, ok, message) print("DONE\t" .. tostring(ok)) end }
		return source, toSatisfy
	end
end

local props = { gpenwatch_url = url, gpenwatch_token = token, gpenwatch_strength = strength, gpenwatch_import = true }
provider.postProcessRenderedPhotos({}, { propertyTable = props, renditions = renditions })
for _, suffix in ipairs({ "", ".head", ".body", ".send" }) do
	os.remove(tmp .. suffix)
end
print("END")
