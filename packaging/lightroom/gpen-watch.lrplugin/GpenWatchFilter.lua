--[[ The Export dialog's post-process action "Restore faces with gpen-watch": its settings in the
dialog (the service's address and a token of `gpen-watch api token create --name lightroom
--scope submit,read`), and the action itself, GpenWatchApi:run over the exported renditions. ]]

local LrApplication = import "LrApplication"
local LrDialogs = import "LrDialogs"
local LrFileUtils = import "LrFileUtils"
local LrHttp = import "LrHttp"
local LrPathUtils = import "LrPathUtils"
local LrProgressScope = import "LrProgressScope"
local LrTasks = import "LrTasks"
local LrView = import "LrView"

local Api = require "GpenWatchApi"

local provider = {}

provider.exportPresetFields = {
	{ key = "gpenwatch_url", default = "http://127.0.0.1:4736/" },
	{ key = "gpenwatch_token", default = "" },
	{ key = "gpenwatch_strength", default = "" },
	{ key = "gpenwatch_import", default = true },
}

function provider.sectionForFilterInDialog(f, propertyTable)
	local bind = LrView.bind
	local label = LrView.share "gpenwatch_label"
	return {
		title = "Restore faces with gpen-watch",
		f:row {
			f:static_text { title = "Service:", alignment = "right", width = label },
			f:edit_field { value = bind "gpenwatch_url", width_in_chars = 32 },
		},
		f:row {
			f:static_text { title = "Token:", alignment = "right", width = label },
			f:password_field { value = bind "gpenwatch_token", width_in_chars = 32 },
		},
		f:row {
			f:static_text { title = "Strength:", alignment = "right", width = label },
			f:edit_field { value = bind "gpenwatch_strength", width_in_chars = 5 },
			f:static_text { title = "0 to 1; empty: the service's setting" },
		},
		f:row {
			f:checkbox {
				title = "Add each result to the catalog beside its original, stacked above it",
				value = bind "gpenwatch_import",
			},
		},
	}
end

function provider.postProcessRenderedPhotos(functionContext, filterContext)
	local props = filterContext.propertyTable
	local api = Api.new({
		url = props.gpenwatch_url,
		token = props.gpenwatch_token,
		strength = props.gpenwatch_strength,
	}, {
		http = LrHttp,
		sleep = LrTasks.sleep,
		path = LrPathUtils,
		exists = LrFileUtils.exists,
	})
	local progress = LrProgressScope { title = "Restoring faces with gpen-watch", functionContext = functionContext }
	api:run(filterContext:renditions(), {
		progress = progress,
		catalog = props.gpenwatch_import and LrApplication.activeCatalog() or nil,
		message = LrDialogs.message,
	})
end

return provider
