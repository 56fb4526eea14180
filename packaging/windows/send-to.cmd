@echo off
rem Explorer's "Send to > gpen-watch": the photos and folders chosen come as arguments. They go to
rem the running gpen-watch, and each result comes back beside its photo as NAME.restored.EXT.
rem The window stays open only when something was not restored, to show why.
"%~dp0gpen-watch.exe" submit %*
if errorlevel 1 (
    echo.
    pause
)
