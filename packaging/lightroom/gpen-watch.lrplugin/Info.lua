--[[ gpen-watch's Lightroom Classic plug-in: a post-process action of the Export dialog that sends
the exported photos to a running gpen-watch, waits for them, and adds each result to the catalog
beside its original (NAME.restored.jpg, stacked above it). See README.md. ]]

return {
	LrSdkVersion = 6.0,
	LrSdkMinimumVersion = 6.0,
	LrToolkitIdentifier = "io.github.gpen-watch.lightroom",
	LrPluginName = "gpen-watch",
	LrExportFilterProvider = {
		title = "Restore faces with gpen-watch",
		file = "GpenWatchFilter.lua",
		id = "gpenwatch",
	},
}
