--[[ The JSON gpen-watch's API answers with, read into Lua tables (Lightroom has no JSON module).
Objects become tables with string keys, arrays tables from 1, null the value Json.null. Strings'
\uXXXX escapes are written as UTF-8 (a pair of surrogates as one character). ]]

local Json = {}
Json.null = setmetatable({}, { __tostring = function() return "null" end })

local escapes = { ['"'] = '"', ["\\"] = "\\", ["/"] = "/", b = "\b", f = "\f", n = "\n", r = "\r", t = "\t" }

local function utf8(code)
	if code < 0x80 then
		return string.char(code)
	elseif code < 0x800 then
		return string.char(0xC0 + math.floor(code / 0x40), 0x80 + code % 0x40)
	elseif code < 0x10000 then
		return string.char(0xE0 + math.floor(code / 0x1000), 0x80 + math.floor(code / 0x40) % 0x40, 0x80 + code % 0x40)
	end
	return string.char(0xF0 + math.floor(code / 0x40000), 0x80 + math.floor(code / 0x1000) % 0x40,
		0x80 + math.floor(code / 0x40) % 0x40, 0x80 + code % 0x40)
end

local Reader = {}
Reader.__index = Reader

function Reader:fail(what)
	error(string.format("not JSON at character %d: %s", self.pos, what), 0)
end

function Reader:space()
	self.pos = self.text:find("[^ \t\r\n]", self.pos) or (#self.text + 1)
end

function Reader:value()
	self:space()
	local c = self.text:sub(self.pos, self.pos)
	if c == "{" then
		return self:object()
	elseif c == "[" then
		return self:array()
	elseif c == '"' then
		return self:string()
	elseif c == "-" or c:match("%d") then
		return self:number()
	end
	for word, value in pairs({ ["true"] = true, ["false"] = false, null = Json.null }) do
		if self.text:sub(self.pos, self.pos + #word - 1) == word then
			self.pos = self.pos + #word
			return value
		end
	end
	self:fail("unexpected " .. (c == "" and "end" or c))
end

function Reader:number()
	local s, e = self.text:find("^-?%d+%.?%d*[eE]?[-+]?%d*", self.pos)
	local value = tonumber(self.text:sub(s, e))
	if value == nil then
		self:fail("a number")
	end
	self.pos = e + 1
	return value
end

function Reader:hex4()
	local digits = self.text:sub(self.pos, self.pos + 3)
	if not digits:match("^%x%x%x%x$") then
		self:fail("a \\u escape")
	end
	self.pos = self.pos + 4
	return tonumber(digits, 16)
end

function Reader:string()
	local parts = {}
	self.pos = self.pos + 1
	while true do
		local s, e = self.text:find('[%z\1-\31"\\]', self.pos)
		if s == nil then
			self:fail("an unended string")
		end
		parts[#parts + 1] = self.text:sub(self.pos, s - 1)
		local c = self.text:sub(s, s)
		self.pos = s + 1
		if c == '"' then
			return table.concat(parts)
		elseif c ~= "\\" then
			self:fail("a control character in a string")
		end
		local kind = self.text:sub(self.pos, self.pos)
		self.pos = self.pos + 1
		if kind == "u" then
			local code = self:hex4()
			if code >= 0xD800 and code < 0xDC00 and self.text:sub(self.pos, self.pos + 1) == "\\u" then
				self.pos = self.pos + 2
				code = 0x10000 + (code - 0xD800) * 0x400 + (self:hex4() - 0xDC00)
			end
			parts[#parts + 1] = utf8(code)
		elseif escapes[kind] then
			parts[#parts + 1] = escapes[kind]
		else
			self:fail("an unknown escape")
		end
	end
end

function Reader:array()
	local out = {}
	self.pos = self.pos + 1
	self:space()
	if self.text:sub(self.pos, self.pos) == "]" then
		self.pos = self.pos + 1
		return out
	end
	while true do
		out[#out + 1] = self:value()
		self:space()
		local c = self.text:sub(self.pos, self.pos)
		self.pos = self.pos + 1
		if c == "]" then
			return out
		elseif c ~= "," then
			self:fail("',' or ']'")
		end
	end
end

function Reader:object()
	local out = {}
	self.pos = self.pos + 1
	self:space()
	if self.text:sub(self.pos, self.pos) == "}" then
		self.pos = self.pos + 1
		return out
	end
	while true do
		self:space()
		if self.text:sub(self.pos, self.pos) ~= '"' then
			self:fail("a key")
		end
		local key = self:string()
		self:space()
		if self.text:sub(self.pos, self.pos) ~= ":" then
			self:fail("':'")
		end
		self.pos = self.pos + 1
		out[key] = self:value()
		self:space()
		local c = self.text:sub(self.pos, self.pos)
		self.pos = self.pos + 1
		if c == "}" then
			return out
		elseif c ~= "," then
			self:fail("',' or '}'")
		end
	end
end

-- The value ``text`` holds; nil and the reason when it is not JSON.
function Json.decode(text)
	local reader = setmetatable({ text = text or "", pos = 1 }, Reader)
	local ok, value = pcall(function()
		local v = reader:value()
		reader:space()
		if reader.pos <= #reader.text then
			reader:fail("text after the value")
		end
		return v
	end)
	if ok then
		return value
	end
	return nil, value
end

return Json
